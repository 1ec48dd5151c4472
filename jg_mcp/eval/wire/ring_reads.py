"""What the harness reads of an output ring (jg_mcp/eval/wire/buffers.py `add_ring`) when a block ends: a few
random elements of every slot, kept with where they were read, so that a slot still holding poison (a call not
finished) shows, and each call's elements can later be set beside the baselines' outputs of the same inputs at
the same places (jg_mcp/eval/timing_checks.py `sampled_check`). The places are drawn by a generator the harness
seeds from the OS's secrets."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch

from jg_mcp.eval.wire.buffers import SharedBinding

_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_PICKERS: dict[str, torch.Generator] = {}


def _all_ones(dtype: torch.dtype) -> int:
    """An element of all one bits (poison) as `dtype` reads it."""
    return 255 if dtype == torch.uint8 else -1


def _picker(device: torch.device) -> torch.Generator:
    """The generator of the elements the harness reads, per device, seeded from the OS's secrets: torch's default
    generators are the process's own and, on some versions and devices, start from a fixed seed a candidate could
    replay to learn which elements are read."""
    key = str(device)
    if key not in _PICKERS:
        _PICKERS[key] = torch.Generator(device=device).manual_seed(secrets.randbits(63))
    return _PICKERS[key]


def _bits(view: torch.Tensor) -> torch.Tensor:
    """`view`'s elements as integers of their size: poison reads as all ones whatever the dtype."""
    return view.view(_INTS[view.element_size()]) if view.dtype.is_floating_point or view.dtype == torch.bool else view


@dataclass
class RingSample:
    """What the harness read of a ring's first slots when a block ended: per output, the elements it picked in
    each slot (row-major indices into the slot's tensor, `picks`) and their bits as they were then (`bits`), both
    shaped (slots, per slot)."""

    picks: list[torch.Tensor]
    bits: list[torch.Tensor]

    def unwritten(self) -> torch.Tensor:
        """Whether each slot still held poison at any of its picked elements (a bool per slot)."""
        flags = torch.zeros(self.bits[0].shape[0] if self.bits else 0, dtype=torch.bool)
        for bits in self.bits:
            flags = flags.to(bits.device) | (bits == _all_ones(bits.dtype)).any(dim=1)
        return flags


def sample(ring: SharedBinding, slots: int, per_slot: int) -> RingSample:
    """`per_slot` random elements of each tensor of each of the first `slots` groups, read now (queued on the
    current stream, so it reads what is there when the stream gets to it). A ring of `add_ring` is read with one
    gather per output."""
    device = ring.raws[0].device if ring.raws else torch.device("cpu")
    picks, bits = [], []
    for i in range(len(ring.groups[0]) if ring.groups else 0):
        count = max(1, ring.groups[0][i].numel())
        pick = torch.randint(0, count, (slots, per_slot), device=device, generator=_picker(device))
        picks.append(pick)
        bits.append(gather(ring, i, pick))
    return RingSample(picks, bits)


def gather(ring: SharedBinding, i: int, picks: torch.Tensor) -> torch.Tensor:
    """The bits of output `i` of the first `len(picks)` groups at `picks` (row-major indices, a row per group)."""
    slots = picks.shape[0]
    views = [ring.groups[g][i] for g in range(slots)]
    if not views or views[0].numel() == 0:
        ints = _INTS[views[0].element_size()] if views else torch.uint8
        return torch.zeros(picks.shape, dtype=ints, device=picks.device)
    shared = len({ring.spans[g][i][0] for g in range(slots)}) == 1
    if not (shared and all(v.is_contiguous() for v in views)):
        return torch.stack([_bits(v).flatten()[picks[g].to(v.device)] for g, v in enumerate(views)])
    size = views[0].element_size()
    raw = ring.raws[ring.spans[0][i][0]]
    flat = raw[: raw.numel() - raw.numel() % size].view(_INTS[size])
    starts = torch.tensor([ring.spans[g][i][1] // size for g in range(slots)], device=raw.device)
    return flat[picks.to(raw.device) + starts[:, None]]
