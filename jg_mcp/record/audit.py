"""Audit: is a transcript intact, what did the session do, did it keep the rules, and was the judged
solution the one it wrote?

Integrity (jg_mcp.record.integrity) is checked line by line without trusting the file: each problem (an
edited, deleted, reordered or duplicated line, a cut, an altered or missing blob) becomes a finding naming its
line.
Summary and policy (jg_mcp.record.audit_policy) need an intact hash chain and are skipped when it is broken.
The report's models (AuditFinding, Summary, AuditReport) are in jg_mcp.record.audit_report.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

import jg_mcp
from jg_mcp.errors import EvalReportError, GoalError
from jg_mcp.eval import EvalReport
from jg_mcp.goals import LoadedGoal, find_goal, load_goal
from jg_mcp.record.audit_policy import check_policy
from jg_mcp.record.audit_report import AuditFinding, AuditReport, CommandRun, FileWrite, Summary
from jg_mcp.record.conditions import check_transcript
from jg_mcp.record.events import SUMMARISED, Notice
from jg_mcp.record.integrity import authenticity_problems, blob_problems, diagnose
from jg_mcp.record.steps import END, Record, load_record, state_at

SHOWN_PATHS = 10
"""Most paths a finding about the close manifest names (then a count)."""


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def summarize(record: Record, solution_file: str) -> Summary:
    h = record.header
    commands = [
        CommandRun(
            step=c.step,
            line=c.line,
            command=str(c.arguments.get("command", "")),
            exit_code=c.structured.get("exit_code"),
            timed_out=bool(c.structured.get("timed_out")),
            cancelled=c.cancelled,
            refused=c.is_error and not c.cancelled,
            duration_s=c.structured.get("duration_s", None if c.duration_ms is None else c.duration_ms / 1000),
        )
        for c in record.calls
        if c.tool == "run_command"
    ]
    if record.close is not None:
        wall = _seconds(h.started_at, record.close.ended_at)
    else:
        wall = record.events[-1].ts - h.ts
    writes = [
        FileWrite(
            step=c.step,
            line=c.line,
            path=c.event.path,
            op=c.event.op,
            cause=c.event.cause,
            sha256=c.event.sha256,
            size=c.event.size,
            stored=c.event.stored,
        )
        for c in record.changes
    ]
    if record.close is not None:
        entry = record.close.manifest.get(solution_file)
        sha, source = (entry or {}).get("sha256"), f"close manifest (line {record.close.seq + 1})"
    else:
        last = state_at(record, END).get(solution_file)
        line = next((c.line for c in reversed(record.changes) if c.event is last), None)
        sha, source = (last.sha256 if last else None), f"last file change (line {line})"
    tools = Counter(c.tool for c in record.calls)
    return Summary(
        run_id=h.run_id,
        goal=h.goal,
        goal_sha256=h.goal_sha256,
        condition=h.condition,
        sandbox=h.sandbox,
        started_at=h.started_at,
        ended_at=record.close.ended_at if record.close else None,
        end_reason=record.close.reason if record.close else "cut short",
        wall_time_s=round(wall, 3),
        command_time_s=round(sum(c.duration_s or 0.0 for c in commands), 3),
        calls_per_tool=dict(tools),
        gpu_queries=tools.get("query_gpu", 0),
        commands=commands,
        files_written=writes,
        solution_file=solution_file,
        solution_sha256=sha,
        solution_source=source,
    )


def find_loaded_goal(name: str, explicit: Path | None = None) -> LoadedGoal | None:
    """The goal named in a header: an explicit path, else ./goals or the repository's, else the packaged demo."""
    packaged = Path(jg_mcp.__file__).parent / "demo_goal" / f"{name}.yaml"
    candidates = [explicit] if explicit else [find_goal(name), packaged]
    for path in candidates:
        if path.is_file():
            return load_goal(path, import_module=False)
    return None


def check_manifest(record: Record) -> list[AuditFinding]:
    """The close manifest agrees with the file changes (catches an edit of the last line, which no chain covers)."""
    if record.close is None:
        return []
    manifest = record.close.manifest
    final = {p: {"sha256": c.sha256, "size": c.size} for p, c in state_at(record, END).items()}
    bad = sorted(p for p in set(manifest) | set(final) if manifest.get(p) != final.get(p))
    if not bad:
        return []
    named = ", ".join(bad[:SHOWN_PATHS]) + (f", ... ({len(bad)} paths in all)" if len(bad) > SHOWN_PATHS else "")
    summarised = [e.seq + 1 for e in record.events if isinstance(e, Notice) and e.message.startswith(SUMMARISED)]
    why = (
        f" (file changes were summarised past the transcript's budget at lines {', '.join(map(str, summarised[:5]))}"
        f"{', ...' if len(summarised) > 5 else ''}: the manifest cannot be checked against them)"
        if summarised
        else ""
    )
    return [
        AuditFinding(
            area="integrity",
            kind="manifest",
            severity="error",
            line=record.close.seq + 1,
            message=f"the close manifest disagrees with the recorded file changes on: {named}{why}",
        )
    ]


def read_eval_report(path: Path) -> EvalReport:
    """A `jg-mcp eval` report; EvalReportError (one line naming the file) when it cannot be read or is not one."""
    try:
        return EvalReport.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise EvalReportError(path, f"cannot read the eval report: {exc.strerror or exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        problem = f"{where + ': ' if where else ''}{first['msg']}{more}"
        raise EvalReportError(path, f"not a jg-mcp eval report: {problem}") from None


def check_eval(report_path: Path, summary: Summary | None) -> tuple[list[AuditFinding], str | None]:
    def error(message: str) -> list[AuditFinding]:
        return [AuditFinding(area="eval", kind="eval", severity="error", message=message)]

    try:
        report = read_eval_report(report_path)
    except EvalReportError as exc:
        return error(str(exc)), None
    judged = report.solution_sha256
    if summary is None:
        return error("the transcript's final solution is unknown (integrity failed): no match possible"), judged
    if summary.solution_sha256 is None:
        return error(
            f"the eval judged a solution with sha256 {judged}, but the transcript has no "
            f"{summary.solution_file} at the end of the session"
        ), judged
    if judged != summary.solution_sha256:
        return error(
            f"the eval judged a solution with sha256 {judged}, but the transcript's final "
            f"{summary.solution_file} has {summary.solution_sha256}"
        ), judged
    if report.goal_sha256 != summary.goal_sha256:
        return error(
            f"the eval judged against goal sha256 {report.goal_sha256}, the session was served {summary.goal_sha256}"
        ), judged
    return [], judged


def audit(
    path: Path, eval_report: Path | None = None, goal_path: Path | None = None, key: bytes | None = None
) -> AuditReport:
    """Integrity (with the transcript key, authenticity too), then (when the chain holds) summary and policy,
    then the eval report's solution hash. A server notice of level error (a workspace scan that could not
    record everything) is an error."""
    lines = diagnose(path)
    findings = [
        AuditFinding(area="integrity", kind=p.kind, severity=p.severity, line=p.line, message=p.message)
        for p in lines.problems + blob_problems(path) + authenticity_problems(path, key)
    ]
    summary = None
    if not any(f.kind not in ("cut short", "truncated", "blob", "authenticity") for f in findings):
        record = load_record(path)
        findings += [
            AuditFinding(area="integrity", kind="request id", severity="error", line=p.line, message=p.message)
            for p in record.problems
        ]
        findings += check_manifest(record)
        try:
            goal = find_loaded_goal(record.header.goal, goal_path)
        except GoalError as exc:
            goal = None
            findings.append(
                AuditFinding(area="policy", kind="goal", severity="error", message=f"goal does not load: {exc}")
            )
        summary = summarize(record, goal.goal.solution.file if goal else "solution.py")
        findings += check_policy(record, summary, goal)
        findings += [
            AuditFinding(area="policy", kind="condition", severity="error", message=m) for m in check_transcript(path)
        ]
    judged = None
    if eval_report is not None:
        eval_findings, judged = check_eval(eval_report, summary)
        findings += eval_findings
    return AuditReport(
        transcript=str(path),
        lines=lines.lines,
        head_sha256=lines.head_sha256,
        closed=lines.closed,
        findings=findings,
        summary=summary,
        eval_report=str(eval_report) if eval_report else None,
        eval_solution_sha256=judged,
    )
