"""The ten goals: each loads, is listed, has a reference that agrees with its CPU baselines, and ships a
Triton solution that passes under the interpreter at its smoke shapes."""

from __future__ import annotations

import ast
import re

import pytest
import torch

from jg_mcp import validate_harness, validate_solution
from jg_mcp.cli import main
from jg_mcp.goals import list_goal_files, load_goal
from tests.support import REPO

TEN = [
    "attention_decode",
    "attention_prefill",
    "cross_entropy",
    "fused_add_rmsnorm",
    "gemm_bf16",
    "gemm_fp8",
    "grouped_gemm_bf16",
    "rope",
    "softmax",
    "swiglu",
]
SOLUTIONS = REPO / "eval" / "solutions"


@pytest.fixture(scope="module", params=TEN)
def goal(request):
    return load_goal(REPO / "goals" / f"{request.param}.yaml")


def test_the_goals_directory_holds_exactly_the_ten():
    assert sorted(p.stem for p in list_goal_files(REPO / "goals")) == TEN


def test_goals_list_shows_all_ten_with_their_baselines(capsys):
    assert main(["goals", "list"]) == 0
    out = capsys.readouterr().out
    for name in TEN:
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        for baseline in load_goal(REPO / "goals" / f"{name}.yaml").goal.baselines:
            assert baseline in line


def test_goal_declares_realistic_timed_shapes_and_roofline_formulas(goal):
    g = goal.goal
    assert 3 <= len(g.shapes) <= 6
    assert g.smoke_shapes and g.forbidden
    for shape in g.shapes + g.smoke_shapes:
        assert goal.flops(shape.dims) > 0 and goal.bytes(shape.dims) > 0
    for dim, r in g.shape_domain.items():
        assert r.min <= r.max and all(r.min <= s.dims[dim] <= r.max for s in g.shapes), dim


def test_tolerance_is_justified_in_a_comment(goal):
    text = goal.yaml_path.read_text()
    before = text[: text.index("\ntolerance:")].splitlines()
    assert before[-1].startswith("#") and before[-2].startswith("#")


def test_inputs_are_seeded_and_realistic(goal):
    """The same seed makes the same inputs; another seed changes every one of them (an input that never changes is
    one a kernel can ignore)."""
    dims = goal.goal.smoke_shapes[0].dims
    a, b, c = (goal.make_inputs(dims, seed, "cpu") for seed in (1, 1, 2))
    floats = [i for i in a if i.is_floating_point()]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert all(not torch.equal(x, y) for x, y in zip(a, c, strict=True))
    for t in floats:
        assert t.float().std() > 0 and bool(torch.isfinite(t.float()).all())


def test_grouped_gemm_times_the_same_group_sizes_under_every_seed():
    """A grouped GEMM's time depends on its group sizes, so every eval of a shape must time the same sizes (drawn
    from the seed, two evals of one solution timed different work: torch._grouped_mm 0.759 against 0.812 ms on the
    H200). The seed decides which expert gets which size; small batches leave the coldest expert idle."""
    goal = load_goal(REPO / "goals" / "grouped_gemm_bf16.yaml")
    for shape in goal.goal.shapes + goal.goal.smoke_shapes:
        t, e = shape.dims["T"], shape.dims["E"]
        dims = {"T": t, "E": e, "N": 1, "K": 1}
        offsets = [goal.make_inputs(dims, seed, "cpu")[2] for seed in range(5)]
        sizes = [torch.diff(o.long(), prepend=torch.zeros(1, dtype=torch.long)) for o in offsets]
        assert all(int(o[-1]) == t and o.dtype == torch.int32 for o in offsets), shape.name
        assert all(torch.equal(s.sort().values, sizes[0].sort().values) for s in sizes), shape.name
        assert len({tuple(s.tolist()) for s in sizes}) > 1, f"{shape.name}: the expert order ignores the seed"
        assert (int(sizes[0].min()) == 0) == (t < 64 * e), shape.name
        assert int(sizes[0].max()) > 2 * t / e, f"{shape.name}: not skewed"


def test_the_matmul_loop_baseline_launches_the_largest_groups_first(monkeypatch):
    """Launched in expert order, a small group first left the GPU waiting on the host's launches, and the loop's time
    followed the host (0.740-0.850 ms at the Mixtral shape on the H200); its output is still every group's."""
    goal = load_goal(REPO / "goals" / "grouped_gemm_bf16.yaml")
    dims = {"T": 40, "E": 6, "N": 8, "K": 16}
    x, w, offsets = goal.make_inputs(dims, 3, "cpu")
    launched: list[int] = []
    real = torch.matmul
    monkeypatch.setattr(torch, "matmul", lambda a, b, out: launched.append(a.shape[0]) or real(a, b, out=out))
    out = goal.baseline("matmul_loop")(x, w, offsets)
    sizes = torch.diff(offsets.long(), prepend=torch.zeros(1, dtype=torch.long)).tolist()
    assert launched == sorted((s for s in sizes if s), reverse=True) and launched != [s for s in sizes if s]
    assert torch.allclose(out.float(), goal.reference(x, w, offsets), atol=0.02, rtol=0.01)


def rope_frequencies(table: torch.Tensor) -> torch.Tensor:
    """The rotary frequencies a rope table was built with: the angles of its row 1 (each below pi)."""
    half = table.shape[1] // 2
    return torch.atan2(table[1, half:].double(), table[1, :half].double())


def test_rope_tables_have_a_realistic_base_and_position_scaling_drawn_from_the_seed():
    goal = load_goal(REPO / "goals" / "rope.yaml")
    dims = {"T": 4, "SEQS": 1, "HQ": 1, "HKV": 1, "D": 128, "P": 4096}
    bases, scales = set(), set()
    for seed in range(8):
        table = goal.make_inputs(dims, seed, "cpu")[3]
        assert table.shape == (4096, 128) and table.dtype == torch.float32 and table.is_contiguous()
        assert torch.allclose(table[:, :64].double() ** 2 + table[:, 64:].double() ** 2, torch.ones(4096, 64).double())
        f = rope_frequencies(table)
        scale, base = 1 / float(f[0]), float(f[0] / f[1]) ** 64
        assert 1 - 1e-4 <= scale <= 8 + 1e-3 and 1e4 * 0.99 <= base <= 1e6 * 1.01, (scale, base)
        assert torch.allclose(f, f[0] * base ** (-torch.arange(64, dtype=torch.float64) / 64), rtol=1e-4)
        bases.add(round(base))
        scales.add(round(scale, 3))
    assert len(bases) == 8 and len(scales) == 8


TABLE_FREE_ROPE = '''
import torch


def kernel(q, k, positions, cos_sin_cache):
    """Never reads its table: rebuilds the rows from the positions with Llama-3's base."""
    d = q.shape[-1]
    inv_freq = 500000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64, device=q.device) / d)
    angles = positions.double()[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().float()[:, None, :], angles.sin().float()[:, None, :]

    def rotate(x):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(torch.bfloat16)

    return rotate(q), rotate(k)
'''


@pytest.mark.slow
def test_a_rope_kernel_that_ignores_its_table_is_rejected(tmp_path):
    (tmp_path / "rope").mkdir()
    (tmp_path / "rope" / "solution.py").write_text(TABLE_FREE_ROPE)
    goal = load_goal(REPO / "goals" / "rope.yaml")
    checks = validate_solution.solution_checks(goal, tmp_path / "rope", "cpu", full=False)
    assert [(c.shape, c.status) for c in checks] == [("tiny", "failed"), ("ragged", "failed")], checks
    assert all("incorrect" in c.error for c in checks)


EDGE = {"attention_decode", "attention_prefill", "cross_entropy", "fused_add_rmsnorm", "grouped_gemm_bf16"}
EDGE |= {"softmax", "swiglu"}
"""The goals with edge-case inputs: those whose kernels can be numerically careless (the GEMMs and rope have none)."""


def test_edge_case_inputs_are_the_usual_tensors_with_other_values_and_every_baseline_meets_them(goal):
    """A goal's edge-case inputs (checked in one more trial at the cheap shapes) have the shapes and dtypes of its
    usual inputs, values the usual ones never take, and are met by the reference and every baseline: they test the
    kernel, not the harness."""
    assert (goal.make_edge_inputs is not None) == (goal.name in EDGE)
    if goal.make_edge_inputs is None:
        return
    cpu = {n: goal.baseline(n) for n, b in goal.goal.baselines.items() if "cpu" in b.devices}
    for shape in goal.goal.smoke_shapes:
        usual, edge = goal.make_inputs(shape.dims, 5, "cpu"), goal.make_edge_inputs(shape.dims, 5, "cpu")
        assert [(t.shape, t.dtype) for t in usual] == [(t.shape, t.dtype) for t in edge]
        assert not all(torch.equal(a, b) for a, b in zip(usual, edge, strict=True))
        ref = goal.reference(*edge)
        for name, fn in cpu.items():
            _, _, problem = validate_harness.check_outputs(goal.goal, fn(*edge), ref)
            assert problem == "", f"{goal.name} {shape.name} {name}: {problem}"


def test_validate_checks_a_goals_edge_case_inputs_like_its_usual_ones(tmp_path):
    """A goal author's edge-case maker is checked by `jg-mcp validate`: the usual inputs' layout, a reference that
    holds, and every baseline within the tolerance on them (else the edge trial would reject honest kernels)."""
    import shutil

    for name in ("axpy.yaml", "axpy.py"):
        shutil.copyfile(REPO / "jg_mcp" / "demo_goal" / name, tmp_path / name)
    yaml_path = tmp_path / "axpy.yaml"
    yaml_path.write_text(
        yaml_path.read_text().replace("inputs: make_inputs\n", "inputs: make_inputs\nedge_inputs: edge\n")
    )
    module = (tmp_path / "axpy.py").read_text()
    for body, failed in [
        ("x, y, a = make_inputs(dims, seed, device)\n    return x.double(), y, a", "edge"),
        ("x, y, a = make_inputs(dims, seed, device)\n    return x, y, a", None),
    ]:
        (tmp_path / "axpy.py").write_text(module + f"\n\ndef edge(dims, seed, device):\n    {body}\n")
        loaded = load_goal(yaml_path)
        shape = loaded.goal.smoke_shapes[0]
        cpu = {f"baseline:{n}": loaded.baseline(n) for n in loaded.goal.baselines}
        checks, _ = validate_harness.check_shape(loaded, shape, "cpu", cpu, set())
        failures = [c.check for c in checks if c.status == "failed"]
        if failed:
            assert failures == [failed], checks
        else:
            assert failures == [] and {f"edge:{label}" for label in cpu} <= {c.check for c in checks}, checks


def test_reference_agrees_with_every_cpu_baseline_at_smoke_shapes(goal):
    cpu = {f"baseline:{n}": goal.baseline(n) for n, b in goal.goal.baselines.items() if "cpu" in b.devices}
    for shape in goal.goal.smoke_shapes:
        checks, _ = validate_harness.check_shape(goal, shape, "cpu", cpu, set())
        edge = 1 + len(cpu) if goal.make_edge_inputs else 0  # the edge-case inputs, and every baseline on them
        assert [c.status for c in checks] == ["ok"] * (1 + len(cpu) + edge), [c.error for c in checks]


@pytest.mark.slow
def test_shipped_solution_passes_under_the_interpreter(goal):
    checks = validate_solution.solution_checks(goal, SOLUTIONS / goal.name, "cpu", full=False)
    assert [c.shape for c in checks] == [s.name for s in goal.goal.smoke_shapes]
    assert all(c.status == "ok" for c in checks), [c.error for c in checks]


def test_shipped_solution_calls_nothing_forbidden_and_stands_alone(goal):
    source = (SOLUTIONS / goal.name / "solution.py").read_text()
    assert "jg_mcp" not in source
    assert re.search(r"^def kernel\(", source, re.M)
    for name in goal.goal.forbidden:
        assert name not in source, name
    tree = ast.parse(source)
    assert not any(isinstance(n, ast.MatMult) for n in ast.walk(tree)), "the @ operator"


def test_gemm_fp8_makes_the_inputs_of_its_first_published_formula_bit_for_bit():
    """Seeds published in earlier reports name the same inputs: the in-place quantisation gives the bytes of the
    out-of-place formula it replaced, rows of outliers, of zeros and of tiny values included."""
    module = load_goal(REPO / "goals" / "gemm_fp8.yaml").module
    fp8, most = torch.float8_e4m3fn, 448.0

    def first(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = x.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / most
        return (x / scale).clamp(-most, most).to(fp8), scale.float()

    for m, n, k in [(16, 64, 128), (48, 192, 256), (64, 1024, 8192)]:
        for seed in (0, 7, 2**40 + 3):
            g = torch.Generator().manual_seed(seed)
            a = torch.randn(m, k, generator=g) * k**-0.25
            a[:, torch.randint(0, k, (max(1, k // 64),), generator=g)] *= 8.0
            b = torch.randn(n, k, generator=g) * k**-0.25
            (a8, sa), (b8, sb) = first(a), first(b)
            made = module.make_inputs({"M": m, "N": n, "K": k}, seed, "cpu")
            for got, want in zip(made, (a8, b8, sa, sb.t().contiguous()), strict=True):
                assert got.dtype == want.dtype and got.shape == want.shape
                assert torch.equal(
                    got.view(torch.uint8) if got.dtype == fp8 else got,
                    want.view(torch.uint8) if want.dtype == fp8 else want,
                )
    rows = torch.tensor([[448.0, 447.99997, -448.0, 1e-30], [0.0, 0.0, 0.0, 0.0], [1e-14, -3e-13, 2e-13, 0.0]])
    want, got = first(rows.clone()), module._quantize_rows(rows.clone())
    assert torch.equal(got[0].view(torch.uint8), want[0].view(torch.uint8)) and torch.equal(got[1], want[1])
