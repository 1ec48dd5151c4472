"""The harness's side of the timing phase, driven on the CPU by a scripted candidate process: what it asks
for, how it records the answer, that the outputs of timed calls are judged, and that any other message
where an answer belongs is a forgery."""

from __future__ import annotations

from collections.abc import Callable

import torch
from eval_suite import GOALS, environment

from jg_mcp.eval.checks import sha256_tensors
from jg_mcp.eval.harness import Evaluation
from jg_mcp.eval.options import EvalOptions
from jg_mcp.eval.process import CandidateGone
from jg_mcp.eval.report import EvalReport, Finding, Reason, ShapeResult
from jg_mcp.eval.shapes import Case
from jg_mcp.eval.timing import DEFAULTS

CASE = Case(name="tiny", kind="timed", dims={"M": 32, "N": 64, "K": 64})
Script = Callable[[Evaluation, dict], list[tuple[dict, list[bytes]]]]


class ScriptedProcess:
    """Answers the harness's command with what `script` makes of it, then ends as a process that exits."""

    def __init__(self, evaluation: Evaluation, script: Script):
        self.evaluation, self.script = evaluation, script
        self.messages: list[tuple[dict, list[bytes]]] = []
        self.sent, self.closed = [], False

    def send(self, cmd: dict) -> None:
        self.sent.append(cmd)
        self.messages = self.script(self.evaluation, cmd)

    def recv(self) -> tuple[dict, list[bytes]]:
        if not self.messages:
            raise CandidateGone(Finding(reason=Reason.EARLY_EXIT, detail="the candidate process exited"))
        return self.messages.pop(0)

    def close(self) -> str:
        self.closed = True
        return ""


def _timing(ms: float) -> dict:
    return {"median_ms": ms, "iqr_ms": 0.01, "q10_ms": ms, "q90_ms": ms, "reps": 40, "rel_se_median": 0.004,
            "host_median_ms": ms, "block": 8, "fresh_median_ms": ms}


def output(evaluation: Evaluation, cmd: dict, label: str, i: int, wrong: bool = False) -> tuple[dict, list[bytes]]:
    """What the candidate process sends for one checked call on input set i: a correct output, or zeros."""
    inputs, refs = evaluation.reference(cmd["dims"], cmd["seeds"][i])
    out = refs[0].to(torch.bfloat16)
    out = torch.zeros_like(out) if wrong else out
    desc = {"plain": True, "type": "torch.Tensor", "layout": "torch.strided", "device": "cpu", "dtype": "bfloat16",
            "shape": list(out.shape), "aliases_input": False, "shares_earlier": False, "blob": 0}
    header = {"event": "call", "label": label, "findings": [], "error": None, "launches": None, "set": i,
              "outputs": [desc], "input_sha": sha256_tensors(inputs)}
    return header, [out.contiguous().view(-1).view(torch.uint8).numpy().tobytes()]


def honest(evaluation: Evaluation, cmd: dict, findings: list | None = None, wrong_spot: int | None = None) -> list:
    timing = {"event": "timing", "findings": findings or [],
              "results": {"candidate": _timing(0.5), "cublaslt_rowwise": _timing(0.4)}}
    spots = [output(evaluation, cmd, f"spot_{n}", n + 1, wrong=n == wrong_spot) for n in range(DEFAULTS["spot_checks"])]
    return [(timing, []), *spots, output(evaluation, cmd, "verify", 0), ({"event": "end"}, [])]


def _run(script: Script, tmp_path) -> tuple[EvalReport, ScriptedProcess]:
    evaluation = Evaluation(EvalOptions(goal=GOALS / "gemm_fp8.yaml", workspace=tmp_path, device="cpu"))
    env = environment("cpu")
    report = EvalReport(goal="gemm_fp8", goal_sha256="0" * 64, solution_sha256="1" * 64, solution_file="s.py",
                        accepted=False, seed=evaluation.seed, environment=env,
                        shapes=[ShapeResult(name=CASE.name, kind="timed", dims=CASE.dims, trials=3, correct=True)])
    evaluation.numel[CASE.name] = [CASE.dims["M"] * CASE.dims["N"]]
    proc = ScriptedProcess(evaluation, script)
    evaluation.timing(report, [CASE], proc)
    return report, proc


def test_the_timing_request_carries_fresh_seeds_and_the_answer_is_recorded(tmp_path):
    report, proc = _run(honest, tmp_path)
    (cmd,) = proc.sent
    assert cmd["op"] == "time" and cmd["dims"] == CASE.dims and cmd["baselines"] == ["cublaslt_rowwise"]
    assert len(cmd["seeds"]) == DEFAULTS["input_sets"] and len(cmd["fresh_seeds"]) == DEFAULTS["fresh"]
    assert not set(cmd["seeds"]) & set(cmd["fresh_seeds"])
    shape = report.shapes[0]
    assert shape.candidate.median_ms == 0.5 and shape.candidate.block == 8
    assert shape.baselines["cublaslt_rowwise"].fresh_median_ms == 0.4
    assert shape.clocks is None, "no GPU here, so nothing to sample"
    assert report.findings == [] and shape.correct and proc.closed
    assert report.timing.block_ms == DEFAULTS["block_ms"] and report.timing.spot_checks == DEFAULTS["spot_checks"]


def test_findings_the_candidate_process_reports_with_its_timings_are_kept(tmp_path):
    seen = {"reason": Reason.THREADS_LEFT, "detail": "thread 'x' still running"}
    report, _ = _run(lambda e, cmd: honest(e, cmd, findings=[seen]), tmp_path)
    assert [(f.reason, f.shape) for f in report.findings] == [(Reason.THREADS_LEFT, CASE.name)]


def test_a_wrong_output_of_a_timed_call_is_incorrect(tmp_path):
    report, _ = _run(lambda e, cmd: honest(e, cmd, wrong_spot=1), tmp_path)
    assert report.reasons == [Reason.INCORRECT] and not report.shapes[0].correct


def test_leaving_out_a_spot_check_is_a_forgery(tmp_path):
    report, _ = _run(lambda e, cmd: honest(e, cmd)[:1] + honest(e, cmd)[2:], tmp_path)
    assert report.reasons == [Reason.TAMPERED] and "spot_0 was due" in report.findings[0].detail


def test_a_spot_check_naming_an_input_set_that_does_not_exist_is_a_forgery(tmp_path):
    def script(e, cmd):
        messages = honest(e, cmd)
        messages[1][0]["set"] = 7
        return messages

    report, _ = _run(script, tmp_path)
    assert report.reasons == [Reason.TAMPERED] and "input set 7" in report.findings[0].detail


def test_any_other_message_where_the_timings_belong_is_a_forgery(tmp_path):
    report, proc = _run(lambda e, cmd: honest(e, cmd)[1:], tmp_path)
    assert report.reasons == [Reason.TAMPERED] and report.shapes[0].candidate is None and proc.closed


def test_malformed_timings_are_a_forgery(tmp_path):
    def script(e, cmd):
        return [({"event": "timing", "results": {"candidate": {"median_ms": "fast"}}, "findings": []}, [])]

    report, _ = _run(script, tmp_path)
    assert report.reasons == [Reason.TAMPERED] and "malformed timing results" in report.findings[0].detail


def test_a_process_that_ends_while_timing_is_reported_as_such(tmp_path):
    report, proc = _run(lambda e, cmd: [], tmp_path)
    assert report.reasons == [Reason.EARLY_EXIT] and proc.closed
