"""`jg-mcp goals validate` catches a wrong reference, baseline or solution and names goal, shape and error; the
solution is judged by the eval itself (jg_mcp.eval.evaluate), findings and all."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from jg_mcp import validate, validate_harness, validate_report, validate_solution
from jg_mcp.cli import main
from jg_mcp.eval import evaluate
from jg_mcp.goals import DEMO_GOALS, list_goal_files, load_goal
from tests.support import REPO


def goal_copy(tmp_path, name, old="", new=""):
    """A copy of goals/NAME.{yaml,py} in tmp_path, with `old` replaced by `new` in the module."""
    for ext in ("yaml", "py"):
        shutil.copy(REPO / "goals" / f"{name}.{ext}", tmp_path / f"{name}.{ext}")
    module = tmp_path / f"{name}.py"
    text = module.read_text()
    assert old in text
    module.write_text(text.replace(old, new))
    return tmp_path / f"{name}.yaml"


def validate_cli(capsys, *args):
    rc = main(["goals", "validate", *map(str, args)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_a_wrong_baseline_fails_naming_goal_shape_and_error(tmp_path, capsys):
    path = goal_copy(tmp_path, "softmax", "return torch.softmax(x, dim=-1)", "return torch.softmax(x * 1.05, dim=-1)")
    rc, out, err = validate_cli(capsys, path, "--solutions", tmp_path)
    assert rc == 1
    assert "FAILED  softmax at shape tiny, baseline:torch_softmax: probs:" in err
    assert "FAILED  softmax at shape ragged_long, baseline:torch_softmax" in err
    tol = load_goal(path).goal.tolerance
    assert f"elements outside atol {tol.atol} + rtol {tol.rtol}" in err and "1 goals" in out


@pytest.mark.slow
def test_a_wrong_reference_fails_against_baselines_and_solution(tmp_path, capsys):
    path = goal_copy(tmp_path, "swiglu", "(1.0 + torch.exp(-gd))", "(1.0 + torch.exp(-1.1 * gd))")
    rc, _, err = validate_cli(capsys, path)
    assert rc == 1
    assert "FAILED  swiglu at shape tiny, baseline:eager: out:" in err
    assert "FAILED  swiglu at shape ragged, solution:interpreted: incorrect: " in err


def test_a_reference_that_is_not_float32_is_rejected(tmp_path, capsys):
    path = goal_copy(
        tmp_path,
        "softmax",
        "return (e / e.sum(dim=-1, keepdim=True)).float()",
        "return e / e.sum(dim=-1, keepdim=True)",
    )
    rc, _, err = validate_cli(capsys, path, "--solutions", tmp_path)
    assert rc == 1 and "softmax at shape tiny, reference: reference output probs is not a float32 tensor" in err


def test_an_input_the_seed_does_not_change_fails_naming_it(tmp_path, capsys):
    """An input every eval makes the same is one a kernel can ignore and still pass (rope's table once was): each
    input is made at the smoke shapes with two seeds, and one byte-identical at all of them is a goal defect."""
    path = goal_copy(tmp_path, "swiglu", "up = torch.randn(t, i, generator=g) * 2.0", "up = torch.ones(t, i) * 2.0")
    rc, out, err = validate_cli(capsys, path, "--solutions", tmp_path)
    assert rc == 1
    assert "FAILED  swiglu at shape *, inputs: input up (2 of 2) is byte-identical for two seeds at every" in err
    assert "does not depend on the seed" in err and "gate" not in err


@pytest.mark.parametrize("path", [*list_goal_files(REPO / "goals"), DEMO_GOALS / "axpy.yaml"], ids=lambda p: p.stem)
def test_every_input_of_a_shipped_goal_depends_on_the_seed(path):
    checks = validate_harness.input_checks(load_goal(path), "cpu")
    assert [(c.shape, c.check, c.status) for c in checks] == [("*", "inputs", "ok")], [c.error for c in checks]


def solution(tmp_path, goal, source):
    """A folder of GOAL/solution.py holding `source`, for --solutions."""
    (tmp_path / goal).mkdir()
    (tmp_path / goal / "solution.py").write_text(source)
    return tmp_path


@pytest.mark.slow
def test_a_wrong_solution_fails_with_its_dtype_named(tmp_path, capsys):
    folder = solution(tmp_path, "softmax", "def kernel(x):\n    return x.float().exp()\n")
    rc, _, err = validate_cli(capsys, "softmax", "--solutions", folder)
    assert rc == 1
    assert "softmax at shape tiny, solution:interpreted: wrong_dtype: dtype float32, expected bfloat16" in err


@pytest.mark.slow
def test_a_crashing_solution_is_a_failure_at_every_shape(tmp_path, capsys):
    """A call that raised is an exception, and its outputs are still read (what the candidate's process says about
    how a call ended never skips a measurement): every shape fails, none is skipped."""
    folder = solution(tmp_path, "swiglu", "def kernel(gate, up):\n    raise RuntimeError('boom')\n")
    rc, out, err = validate_cli(capsys, "swiglu", "--solutions", folder)
    assert rc == 1 and "swiglu at shape tiny, solution:interpreted: exception: " in err
    assert "RuntimeError: boom" in err and "swiglu at shape ragged, solution:interpreted: unwritten: " in err
    assert "skipped swiglu" not in out


@pytest.mark.slow
def test_a_solution_that_does_not_import_is_a_failure_naming_the_error(tmp_path, capsys):
    rc, _, err = validate_cli(capsys, "softmax", "--solutions", solution(tmp_path, "softmax", "def kernel(x:\n"))
    assert rc == 1 and "softmax at shape *, solution:interpreted: syntax_error: line 1: " in err
    assert "softmax at shape *, solution:interpreted: import_error: " in err and "SyntaxError" in err


@pytest.mark.slow
def test_a_correct_solution_calling_a_forbidden_api_is_rejected_by_the_eval_policies(tmp_path, capsys):
    source = "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x.float(), dim=-1).to(x.dtype)\n"
    rc, out, err = validate_cli(capsys, "softmax", "--solutions", solution(tmp_path, "softmax", source))
    assert rc == 1 and "softmax at shape *, solution:interpreted: static_forbidden: " in err
    assert "torch.softmax" in err and "at shape tiny, solution:interpreted: forbidden_call: ran forbidden" in err


@pytest.mark.slow
def test_the_shipped_solution_is_evaluated_by_the_eval_at_the_smoke_shapes(monkeypatch, capsys):
    seen = []

    def spy(options):
        seen.append(options)
        return evaluate(options)

    monkeypatch.setattr(validate_solution, "evaluate", spy)
    rc, out, _ = validate_cli(capsys, "swiglu")
    assert rc == 0 and "0 failed" in out
    [options] = seen
    assert options.workspace == validate.SOLUTIONS / "swiglu" and options.goal.name == "swiglu.yaml"
    assert (options.shapes, options.device, options.domain_shapes, options.trials) == ("smoke", "cpu", 0, 1)
    assert [line.split()[2] for line in out.splitlines() if "solution:interpreted" in line] == ["tiny", "ragged"]


@pytest.mark.slow
def test_json_report_records_checks_and_versions(tmp_path, capsys):
    rc, out, _ = validate_cli(capsys, "rope", "--json", tmp_path / "r.json", "--markdown", tmp_path / "r.md")
    assert rc == 0 and "0 failed" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["environment"]["torch"] == torch.__version__ and "triton" in report["environment"]
    checks = {(c["shape"], c["check"]): c["status"] for c in report["checks"]}
    assert checks == {("*", "inputs"): "ok"} | {
        (s, c): "ok" for s in ("tiny", "ragged") for c in ("reference", "baseline:eager", "solution:interpreted")
    }
    solution = [c for c in report["checks"] if c["check"] == "solution:interpreted"]
    assert all(0 < c["worst_ratio"] <= 1 and c["max_abs_err"] > 0 for c in solution), solution
    assert "torch " + torch.__version__ in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize(
    "out, problem",
    [
        (
            torch.full((2, 3), float("nan"), dtype=torch.bfloat16),
            "out: 6 of 6 elements NaN/inf where the reference is finite",
        ),
        (torch.zeros(2, 3), "is torch.float32, expected bfloat16"),
        (torch.zeros(3, 2, dtype=torch.bfloat16), "is (3, 2) on cpu, expected (2, 3)"),
        ((torch.zeros(2, 3, dtype=torch.bfloat16),) * 2, "returned 2 outputs, expected 1"),
        ([[0.0] * 3] * 2, "is a list, not a torch.Tensor"),
    ],
)
def test_check_outputs_rejects_nan_wrong_dtype_shape_and_count(out, problem):
    goal = load_goal(REPO / "goals" / "swiglu.yaml").goal
    _, _, found = validate_harness.check_outputs(goal, out if not isinstance(out, list) else (out,), torch.zeros(2, 3))
    assert problem in found


def test_check_outputs_measures_error_against_the_tolerance():
    goal = load_goal(REPO / "goals" / "swiglu.yaml").goal
    ref = torch.tensor([1.0, 2.0])
    max_abs, worst, problem = validate_harness.check_outputs(
        goal, torch.tensor([1.0, 2.0625], dtype=torch.bfloat16), ref
    )
    assert problem.startswith(
        "out: 1 of 2 elements outside atol 0.001 + rtol 0.015; worst at [1]: 2.0625 vs reference 2"
    )
    assert max_abs == pytest.approx(0.0625) and worst == pytest.approx(0.0625 / (0.001 + 0.015 * 2.0))


def test_check_outputs_passes_within_tolerance_and_reports_the_margin():
    goal = load_goal(REPO / "goals" / "swiglu.yaml").goal
    out, ref = torch.tensor([1.0, 2.0], dtype=torch.bfloat16), torch.tensor([1.0, 2.0078125])
    max_abs, worst, problem = validate_harness.check_outputs(goal, out, ref)
    assert problem == "" and max_abs == 0.0078125 and worst == pytest.approx(0.0078125 / (0.001 + 0.015 * 2.0078125))


def test_check_outputs_judges_every_output_and_names_the_wrong_one():
    goal = load_goal(REPO / "goals" / "rope.yaml").goal
    ref = (torch.ones(2, 3), torch.ones(2, 3))
    out = (torch.ones(2, 3, dtype=torch.bfloat16), torch.full((2, 3), 1.5, dtype=torch.bfloat16))
    max_abs, worst, problem = validate_harness.check_outputs(goal, out, ref)
    assert problem.startswith("k_out: 6 of 6 elements outside") and "q_out" not in problem
    assert max_abs == 0.5 and worst == pytest.approx(0.5 / 0.012)


def test_markdown_lists_each_timing():
    timing = validate_report.BaselineTiming(
        goal="g",
        shape="s",
        baseline="b",
        median_ms=1.0,
        p20_ms=0.9,
        p80_ms=1.1,
        tflops=2.0,
        tbps=3.0,
        pct_peak_flops=4.0,
        pct_peak_bandwidth=5.0,
        pct_roofline=6.0,
    )
    env = {"torch": "t", "triton": "tr", "cuda_runtime": "c", "python": "p", "jg_mcp": "j", "gpu": "H"}
    report = validate_report.Report(
        device="cuda",
        full=True,
        environment=env,
        method={"timer": "x", "warmup_ms": 1, "rep_ms": 2},
        wall_seconds=3,
        checks=[],
        timings=[timing],
    )
    assert "| g | s | b | 1.0000 | 0.9000-1.1000 | 2.0 | 3.00 | 4.0 | 5.0 | 6.0 |" in validate.markdown(report)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_a_gpu_is_a_usage_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    rc, _, err = validate_cli(capsys, "softmax", "--device", "cuda")
    assert rc == 2 and "torch sees no CUDA device" in err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_full_validation_on_a_gpu_times_every_baseline(tmp_path, capsys):
    rc, _, _ = validate_cli(capsys, "swiglu", "--device", "cuda", "--full", "--json", tmp_path / "r.json")
    report = json.loads((tmp_path / "r.json").read_text())
    assert rc == 0 and len(report["timings"]) == 4 * 2 and report["environment"]["driver"]
