"""The ten goals: each loads, is listed, has a reference that agrees with its CPU baselines, and ships a
Triton solution that passes under the interpreter at its smoke shapes."""

from __future__ import annotations

import ast
import re

import pytest
import torch

from jg_mcp import validate
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
    dims = goal.goal.smoke_shapes[0].dims
    a, b, c = (goal.make_inputs(dims, seed, "cpu") for seed in (1, 1, 2))
    floats = [i for i in a if i.is_floating_point()]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert any(not torch.equal(x, y) for x, y in zip(floats, [i for i in c if i.is_floating_point()], strict=True))
    for t in floats:
        assert t.float().std() > 0 and bool(torch.isfinite(t.float()).all())


def test_reference_agrees_with_every_cpu_baseline_at_smoke_shapes(goal):
    cpu = {f"baseline:{n}": goal.baseline(n) for n, b in goal.goal.baselines.items() if "cpu" in b.devices}
    for shape in goal.goal.smoke_shapes:
        checks, _ = validate.check_shape(goal, shape, "cpu", cpu, set())
        assert [c.status for c in checks] == ["ok"] * (1 + len(cpu)), [c.error for c in checks]


def test_shipped_solution_passes_under_the_interpreter(goal):
    checks = validate.solution_checks(goal, SOLUTIONS / goal.name, "cpu", full=False)
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
