"""The harness's side of the timing phase, driven on the CPU by a scripted candidate process: what it asks
for, how it records the answer, and that any other message where timings belong is a forgery."""

from __future__ import annotations

from eval_suite import GOALS

from jg_mcp.eval.harness import Evaluation
from jg_mcp.eval.options import EvalOptions
from jg_mcp.eval.process import CandidateGone
from jg_mcp.eval.report import Environment, EvalReport, Finding, Reason, ShapeResult
from jg_mcp.eval.shapes import Case
from jg_mcp.eval.timing import DEFAULTS

CASE = Case(name="tiny", kind="timed", dims={"M": 32, "N": 64, "K": 64})


class ScriptedProcess:
    """Answers with the given messages, then ends the way a process that exits early does."""

    def __init__(self, messages: list[dict]):
        self.messages, self.sent, self.closed = list(messages), [], False

    def send(self, cmd: dict) -> None:
        self.sent.append(cmd)

    def recv(self) -> tuple[dict, list[bytes]]:
        if not self.messages:
            raise CandidateGone(Finding(reason=Reason.EARLY_EXIT, detail="the candidate process exited"))
        return self.messages.pop(0), []

    def close(self) -> str:
        self.closed = True
        return ""


def _timing(ms: float) -> dict:
    return {"median_ms": ms, "iqr_ms": 0.01, "q10_ms": ms, "q90_ms": ms, "reps": 40, "rel_se_median": 0.004,
            "host_median_ms": ms, "block": 8, "fresh_median_ms": ms}


def _run(messages: list[dict], tmp_path) -> tuple[EvalReport, ScriptedProcess]:
    evaluation = Evaluation(EvalOptions(goal=GOALS / "gemm_fp8.yaml", workspace=tmp_path, device="cpu"))
    env = Environment(device="cpu", gpu=None, driver=None, torch="x", triton="x", python="x", jg_mcp="x", host="x",
                      interpreter=True)
    report = EvalReport(goal="gemm_fp8", goal_sha256="0" * 64, solution_sha256="1" * 64, solution_file="s.py",
                        accepted=False, seed=evaluation.seed, environment=env,
                        shapes=[ShapeResult(name=CASE.name, kind="timed", dims=CASE.dims, trials=3, correct=True)])
    evaluation.numel[CASE.name] = [CASE.dims["M"] * CASE.dims["N"]]
    proc = ScriptedProcess(messages)
    evaluation.timing(report, [CASE], proc)
    return report, proc


def test_the_timing_request_carries_fresh_seeds_and_the_answer_is_recorded(tmp_path):
    results = {"candidate": _timing(0.5), "cublaslt_rowwise": _timing(0.4)}
    report, proc = _run([{"event": "timing", "results": results, "findings": []}, {"event": "end"}], tmp_path)
    (cmd,) = proc.sent
    assert cmd["op"] == "time" and cmd["dims"] == CASE.dims and cmd["baselines"] == ["cublaslt_rowwise"]
    assert len(cmd["seeds"]) == DEFAULTS["input_sets"] and len(cmd["fresh_seeds"]) == DEFAULTS["fresh"]
    assert not set(cmd["seeds"]) & set(cmd["fresh_seeds"])
    shape = report.shapes[0]
    assert shape.candidate.median_ms == 0.5 and shape.candidate.block == 8
    assert shape.baselines["cublaslt_rowwise"].fresh_median_ms == 0.4
    assert shape.clocks is None, "no GPU here, so nothing to sample"
    assert report.findings == [] and proc.closed
    assert report.timing.block_ms == DEFAULTS["block_ms"] and report.timing.fresh_sets == DEFAULTS["fresh"]


def test_findings_the_candidate_process_reports_with_its_timings_are_kept(tmp_path):
    seen = {"reason": Reason.THREADS_LEFT, "detail": "thread 'x' still running"}
    results = {"candidate": _timing(0.5), "cublaslt_rowwise": _timing(0.4)}
    report, _ = _run([{"event": "timing", "results": results, "findings": [seen]}, {"event": "end"}], tmp_path)
    assert [(f.reason, f.shape) for f in report.findings] == [(Reason.THREADS_LEFT, CASE.name)]


def test_any_other_message_where_the_timings_belong_is_a_forgery(tmp_path):
    report, proc = _run([{"event": "call", "label": "verify"}], tmp_path)
    assert report.reasons == [Reason.TAMPERED] and report.shapes[0].candidate is None and proc.closed


def test_malformed_timings_are_a_forgery(tmp_path):
    report, _ = _run([{"event": "timing", "results": {"candidate": {"median_ms": "fast"}}, "findings": []}], tmp_path)
    assert report.reasons == [Reason.TAMPERED] and "malformed timing results" in report.findings[0].detail


def test_a_process_that_ends_while_timing_is_reported_as_such(tmp_path):
    report, proc = _run([], tmp_path)
    assert report.reasons == [Reason.EARLY_EXIT] and proc.closed
