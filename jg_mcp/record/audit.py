"""Audit: is a transcript intact, what did the session do, did it keep the rules, and was the judged
solution the one it wrote?

Integrity (jg_mcp.record.integrity) is checked line by line without trusting the file: each problem (an
edited, deleted, reordered or duplicated line, a cut, an altered or missing blob) becomes a finding naming its
line.
Summary and policy need an intact hash chain and are skipped when it is broken.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

import jg_mcp
from jg_mcp.campaign.conditions import check_transcript
from jg_mcp.errors import EvalReportError, GoalError
from jg_mcp.eval import EvalReport
from jg_mcp.eval.policy import static_check
from jg_mcp.eval.report import Reason
from jg_mcp.goals import REFERENCE_FILE, LoadedGoal, find_goal, load_goal
from jg_mcp.record.events import Notice
from jg_mcp.record.integrity import authenticity_problems, blob_problems, diagnose
from jg_mcp.record.steps import END, BlobError, Record, load_record, read_blob, state_at

NETWORK = re.compile(
    r"\b(curl|wget|ssh|scp|sftp|rsync|telnet|ftp|nc|ncat|netcat)\b|\bpip3?\s+(install|download)\b"
    r"|\buv\s+(pip|add|sync|run\s+--with)\b|\bconda\s+install\b|\bapt(-get)?\s+install\b|\bnpm\s+(install|i|ci)\b"
    r"|\bgit\s+(clone|fetch|pull|push|ls-remote|submodule)\b|\b(https?|ftp)://"
)
ABSOLUTE_PATH = re.compile(r"(?<![\w.\-/:])(/[\w.~-][^\s'\";|&<>()]*)")
ESCAPE = re.compile(r"(^|[\s=:'\"])(\.\.(/|\s|$)|~/|\$HOME\b|\$\{HOME\})")
ALLOWED_OUTSIDE = (
    "/dev/null",
    "/dev/zero",
    "/dev/std",
    "/dev/urandom",
    "/dev/random",
    "/dev/fd/",
    "/proc/self/",
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/usr/local/cuda",
)


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    area: Literal["integrity", "policy", "eval"]
    kind: str
    """What was found. Integrity: invalid line, edited, deleted, reordered, duplicated, truncated, cut short,
    header, blob, manifest, authenticity, request id (a request reused the id of a call still unanswered, so
    what followed under it cannot be credited for sure). Policy: refused, cancelled, no response, notice,
    network, outside workspace, protected file, goal, budget, forbidden api, condition (a request outside what
    the session's condition serves). Eval: eval."""
    severity: Literal["error", "warning"]
    """Errors make the audit fail (exit 1); warnings are for the reader."""
    line: int | None = None
    """Transcript line (from 1) the finding is about, when there is one."""
    message: str


class CommandRun(BaseModel):
    step: int
    line: int
    command: str
    exit_code: int | None
    """None when the command has no result: refused, cancelled, or cut short."""
    duration_s: float | None
    timed_out: bool = False
    cancelled: bool = False
    """The client cancelled the call or disconnected before the command finished; it was killed."""
    refused: bool = False
    """The server answered with an error instead of the command's result."""


class FileWrite(BaseModel):
    step: int
    """The tools/call that made it (0: session start, -1: session end)."""
    line: int
    path: str
    op: str
    cause: str
    sha256: str | None
    size: int | None
    stored: bool


class Summary(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    run_id: str
    goal: str
    goal_sha256: str
    condition: str
    sandbox: str
    started_at: str
    ended_at: str | None
    end_reason: str
    """The close event's reason, or `cut short`."""
    wall_time_s: float
    command_time_s: float
    """Sum of run_command durations."""
    calls_per_tool: dict[str, int]
    gpu_queries: int
    commands: list[CommandRun]
    files_written: list[FileWrite]
    solution_file: str
    solution_sha256: str | None
    solution_source: str
    """Where the hash came from: the close manifest or the FileChange on a named line."""


class AuditReport(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    transcript: str
    lines: int
    head_sha256: str
    """sha256 of the last complete line: keep it elsewhere to detect a later edit of that line."""
    closed: bool
    findings: list[Finding]
    summary: Summary | None = None
    """None when the hash chain is broken (nothing after the break can be trusted)."""
    eval_report: str | None = None
    eval_solution_sha256: str | None = None

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


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
            return load_goal(path)
    return None


def forbidden_uses(source: str, forbidden: list[str]) -> list[tuple[int, str]]:
    """(line, what) for each use of a forbidden API, by the eval's own static check (aliases, getattr,
    strings, Tensor methods). Raises SyntaxError when the source does not parse."""
    ast.parse(source)
    uses = set()
    for finding in static_check(source, forbidden):
        if finding.reason == Reason.STATIC_FORBIDDEN:
            line, _, what = finding.detail.partition(": ")
            uses.add((int(line.removeprefix("line ")), what))
    return sorted(uses)


def _workspace_rel(path: str, workspace: str) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.relative_to(workspace)
        except ValueError:
            return str(p)
    return Path(*[part for part in p.parts if part not in (".",)]).as_posix() if p.parts else ""


def command_findings(command: str, workspace: str) -> list[str]:
    """What in a command line looks like a network use or a step outside the workspace (by its text)."""
    found = [f"tries the network ({m.group(0).strip()!r})" for m in NETWORK.finditer(command)]
    for m in ABSOLUTE_PATH.finditer(command):
        p = m.group(1)
        if not (p == workspace or p.startswith(workspace.rstrip("/") + "/") or p.startswith(ALLOWED_OUTSIDE)):
            found.append(f"names a path outside the workspace ({p!r})")
    found += [f"leaves the workspace ({m.group(2).strip()!r})" for m in ESCAPE.finditer(command)]
    return found


def check_manifest(record: Record) -> list[Finding]:
    """The close manifest agrees with the file changes (catches an edit of the last line, which no chain covers)."""
    if record.close is None:
        return []
    manifest = record.close.manifest
    final = {p: {"sha256": c.sha256, "size": c.size} for p, c in state_at(record, END).items()}
    bad = sorted(p for p in set(manifest) | set(final) if manifest.get(p) != final.get(p))
    if not bad:
        return []
    return [
        Finding(
            area="integrity",
            kind="manifest",
            severity="error",
            line=record.close.seq + 1,
            message=f"the close manifest disagrees with the recorded file changes on: {', '.join(bad)}",
        )
    ]


def check_changes(record: Record) -> list[Finding]:
    """Changes to the protected goal copy, and changes a scan saw while other commands ran (any of them may have
    made them, not only the call they are recorded under)."""
    out: list[Finding] = []

    def add(kind: str, severity: str, line: int | None, message: str) -> None:
        out.append(Finding(area="policy", kind=kind, severity=severity, line=line, message=message))

    step_of = {json.dumps(c.request_id): c.step for c in record.calls}
    for ch in record.changes:
        if ch.event.path == REFERENCE_FILE and ch.step != 0:
            add(
                "protected file",
                "error",
                ch.line,
                f"the protected {REFERENCE_FILE} was changed ({ch.event.op} by {ch.event.cause})",
            )
        if ch.event.running:
            steps = ", ".join(str(step_of.get(json.dumps(rid), f"id {rid!r}")) for rid in ch.event.running)
            seen = f"step {ch.step}'s scan" if ch.step not in (0, END) else "the session's last scan"
            add(
                "uncertain author",
                "warning",
                ch.line,
                f"{ch.event.path} ({ch.event.op}) was seen by {seen} while the commands of steps {steps} also ran: "
                "any of them may have made the change",
            )
    return out


def check_policy(record: Record, summary: Summary, goal: LoadedGoal | None) -> list[Finding]:
    out: list[Finding] = []

    def add(kind: str, severity: str, line: int | None, message: str) -> None:
        out.append(Finding(area="policy", kind=kind, severity=severity, line=line, message=message))

    workspace = record.header.workspace
    for c in record.calls:
        if c.cancelled:
            add("cancelled", "warning", c.line, f"step {c.step}: {c.tool} was {c.text}")
        elif c.is_error:
            add("refused", "warning", c.line, f"step {c.step}: {c.tool} was refused: {c.text[:300]}")
        if c.duration_ms is None:
            add("no response", "warning", c.line, f"step {c.step}: {c.tool} has no recorded response")
        for what in command_findings(str(c.arguments.get("command", "")), workspace) if c.tool == "run_command" else []:
            add(
                "network" if what.startswith("tries") else "outside workspace",
                "error",
                c.line,
                f"step {c.step}: the command {what}",
            )
        if c.tool == "write_file" and _workspace_rel(str(c.arguments.get("path", "")), workspace) == REFERENCE_FILE:
            add(
                "protected file",
                "warning" if c.is_error else "error",
                c.line,
                f"step {c.step}: write_file to the protected {REFERENCE_FILE}" + (" (refused)" if c.is_error else ""),
            )
    for event in record.events:
        if isinstance(event, Notice) and event.level != "info":
            add(
                "notice",
                "error" if event.level == "error" else "warning",
                event.seq + 1,
                f"the server noted: {event.message}",
            )
    out += check_changes(record)
    if goal is None:
        add(
            "goal",
            "error",
            1,
            f"goal '{record.header.goal}' not found: pass --goal; budget and forbidden-API checks skipped",
        )
        return out
    if goal.sha256() != record.header.goal_sha256:
        add(
            "goal",
            "error",
            1,
            f"goal {goal.yaml_path} has sha256 {goal.sha256()}, the session was served "
            f"{record.header.goal_sha256}: the goal changed since",
        )
    budget_s = goal.goal.budget.wall_clock_minutes * 60
    if summary.wall_time_s > budget_s:
        add(
            "budget",
            "error",
            None,
            f"budget overrun: the session took {summary.wall_time_s:.0f}s, the goal allows {budget_s}s",
        )
    return out + check_solution(record, summary, goal)


def check_solution(record: Record, summary: Summary, goal: LoadedGoal) -> list[Finding]:
    """Scan the final solution's text for the goal's forbidden APIs."""

    def note(severity: str, message: str) -> list[Finding]:
        return [Finding(area="policy", kind="forbidden api", severity=severity, message=message)]

    change = state_at(record, END).get(summary.solution_file)
    if change is None:
        return note("warning", f"no {summary.solution_file} in the final workspace")
    try:
        source = read_blob(record, change)
    except BlobError as exc:
        return note("error", str(exc))
    if source is None:
        return note("error", f"the final {summary.solution_file} was not stored: its text cannot be checked")
    try:
        uses = forbidden_uses(source.decode(errors="replace"), goal.goal.forbidden)
    except SyntaxError as exc:
        return note("warning", f"the final {summary.solution_file} does not parse ({exc.msg}, line {exc.lineno})")
    return [
        f
        for lineno, what in uses
        for f in note("error", f"forbidden API in the final {summary.solution_file}, its line {lineno}: {what}")
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


def check_eval(report_path: Path, summary: Summary | None) -> tuple[list[Finding], str | None]:
    def error(message: str) -> list[Finding]:
        return [Finding(area="eval", kind="eval", severity="error", message=message)]

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
        Finding(area="integrity", kind=p.kind, severity=p.severity, line=p.line, message=p.message)
        for p in lines.problems + blob_problems(path) + authenticity_problems(path, key)
    ]
    summary = None
    if not any(f.kind not in ("cut short", "truncated", "blob", "authenticity") for f in findings):
        record = load_record(path)
        findings += [
            Finding(area="integrity", kind="request id", severity="error", line=p.line, message=p.message)
            for p in record.problems
        ]
        findings += check_manifest(record)
        try:
            goal = find_loaded_goal(record.header.goal, goal_path)
        except GoalError as exc:
            goal = None
            findings.append(Finding(area="policy", kind="goal", severity="error", message=f"goal does not load: {exc}"))
        summary = summarize(record, goal.goal.solution.file if goal else "solution.py")
        findings += check_policy(record, summary, goal)
        findings += [
            Finding(area="policy", kind="condition", severity="error", message=m) for m in check_transcript(path)
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
