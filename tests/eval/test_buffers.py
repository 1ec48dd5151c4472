"""The harness's shared buffers (jg_mcp/eval/wire/buffers.py) on the CPU stand-in."""

from __future__ import annotations

import torch

from jg_mcp.eval.wire.buffers import POISON, SharedBinding
from jg_mcp.eval.wire.ring_reads import gather, sample


def test_add_copy_lays_each_tensor_in_a_buffer_of_its_own_holding_its_values():
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # strided, not contiguous
    b = torch.tensor([1, 2, 3], dtype=torch.int64)
    binding = SharedBinding("t", "cpu")
    try:
        views = binding.add_copy([a, b])
        assert [v.dtype for v in views] == [a.dtype, b.dtype] and views[0].stride() == a.stride()
        assert torch.equal(views[0], a) and torch.equal(views[1], b)
        assert len(binding.raws) == 2 and views[0].data_ptr() != a.data_ptr()
        binding.poison()
        assert bool((binding.raws[1] == POISON).all()) and torch.equal(b, torch.tensor([1, 2, 3]))
    finally:
        binding.free()


def test_a_ring_lays_its_slots_in_one_buffer_per_output_and_reads_which_slots_still_hold_poison():
    like = [torch.zeros(3, 5, dtype=torch.bfloat16), torch.zeros(7, dtype=torch.float32)]
    ring = SharedBinding("ring", "cpu")
    try:
        ring.add_ring(like, 4)
        assert len(ring.raws) == 2 and len(ring.groups) == 4
        starts = [v.data_ptr() - ring.raws[0].data_ptr() for v in (g[0] for g in ring.groups)]
        assert starts == [0, 256, 512, 768], "each slot starts aligned, as a buffer of its own would"
        assert sample(ring, 4, 8).unwritten().tolist() == [True] * 4
        for g in (0, 2, 3):
            for view in ring.groups[g]:
                view.fill_(-1.0)
        ring.groups[3][1][6] = float("nan")  # a value the call wrote, however odd, is no poison
        assert sample(ring, 4, 64).unwritten().tolist() == [False, True, False, False]
        ring.groups[2][1].view(torch.int32)[4] = -1  # one element of one output left unwritten
        assert sample(ring, 4, 4096).unwritten().tolist() == [False, True, True, False]
        ring.poison(0)
        assert sample(ring, 1, 8).unwritten().tolist() == [True]
        assert bool((ring.groups[3][0] == -1).all()), "poisoning a slot leaves the others"
    finally:
        ring.free()


def test_input_sets_read_back_intact_until_one_element_of_one_set_changes_and_renewal_moves_what_is_kept():
    from jg_mcp.eval.input_sets import InputSets

    made = [[torch.randn(4, 6), torch.arange(5)] for _ in range(3)]
    binding = SharedBinding("tin", "cpu")
    try:
        sets = InputSets(lambda ins: [ins[0] * 2], binding, made)
        assert sets.intact() and torch.equal(sets[1][0], made[1][0] * 2)
        binding.groups[2][1][4] = 7  # the candidate's process wrote one element of one input
        assert not sets.intact()
        binding.groups[2][1][4] = 4
        assert sets.intact()
        new = [[torch.randn(4, 6), torch.arange(5) + 1]]
        sets.renewal([1], new)()
        assert sets.intact() and torch.equal(binding.groups[1][0], new[0][0])
        assert torch.equal(sets[1][0], new[0][0] * 2), "the renewed set's reference is the new inputs'"
        binding.groups[1][0][0, 0] += 1
        assert not sets.intact()
    finally:
        binding.free()


def test_a_rings_sample_keeps_where_it_read_and_what_was_there_and_another_ring_reads_the_same_elements():
    like = [torch.zeros(3, 5, dtype=torch.bfloat16), torch.zeros(2, 4, dtype=torch.float32).t()]  # one strided
    rings = {side: SharedBinding(side, "cpu") for side in ("candidate", "baseline")}
    try:
        for ring in rings.values():
            ring.add_ring(like, 3)
        for g in range(3):
            for i, ref in enumerate(like):
                values = torch.arange(ref.numel(), dtype=torch.float32).reshape(ref.shape) + 100 * g
                rings["candidate"].groups[g][i].copy_(values)
                rings["baseline"].groups[g][i].copy_(values + (1 if g == 1 else 0))
        read = sample(rings["candidate"], 3, 16)
        assert read.unwritten().tolist() == [False] * 3
        for i, (picks, bits) in enumerate(zip(read.picks, read.bits, strict=True)):
            assert picks.shape == bits.shape == (3, 16)
            read = bits.view(like[i].dtype).float()
            for g in range(3):
                assert torch.equal(read[g], rings["candidate"].groups[g][i].flatten().float()[picks[g]])
            rings["candidate"].groups[0][i].zero_()  # what a candidate writes after the read changes nothing kept
            assert torch.equal(bits.view(like[i].dtype).float(), read)
            theirs = gather(rings["baseline"], i, picks).view(like[i].dtype).float()
            assert torch.equal(theirs - read, torch.tensor([[0.0], [1.0], [0.0]]).expand(3, 16))
    finally:
        for ring in rings.values():
            ring.free()


def test_which_elements_the_harness_reads_does_not_follow_torchs_own_seed():
    """A candidate that could replay the harness's draws would write right values only where they are read."""
    ring = SharedBinding("ring", "cpu")
    try:
        ring.add_ring([torch.zeros(4096, dtype=torch.float32)], 2)
        drawn = []
        for _ in range(2):
            torch.manual_seed(0)
            drawn.append(sample(ring, 2, 8).picks[0])
        assert not torch.equal(drawn[0], drawn[1])
    finally:
        ring.free()
