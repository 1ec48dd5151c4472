"""What an audit reports (audit.json): its findings (AuditFinding), what the session did (Summary, with its
CommandRun and FileWrite rows) and the report itself (AuditReport).

jg_mcp.record.audit makes them; jg_mcp.record.audit_policy checks the session's rules into findings.
"""

from __future__ import annotations

from typing import Literal

from jg_mcp.models import Strict


class AuditFinding(Strict):
    area: Literal["integrity", "policy", "eval"]
    kind: str
    """What was found. Integrity: invalid line, edited, deleted, reordered, duplicated, truncated, cut short,
    header, blob, manifest, authenticity, request id (a request reused the id of a call still unanswered, so
    what followed under it cannot be credited for sure). Policy: refused, cancelled, no response, notice,
    network, outside workspace, protected file, goal, budget, forbidden api, condition (a request outside what
    the session's condition serves), protection (the server ran commands without one the operator did not waive).
    Eval: eval."""
    severity: Literal["error", "warning"]
    """Errors make the audit fail (exit 1); warnings are for the reader."""
    line: int | None = None
    """Transcript line (from 1) the finding is about, when there is one."""
    message: str


class CommandRun(Strict):
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


class FileWrite(Strict):
    step: int
    """The tools/call that made it (0: session start, -1: session end)."""
    line: int
    path: str
    op: str
    cause: str
    sha256: str | None
    size: int | None
    stored: bool


class Summary(Strict):
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


class AuditReport(Strict):
    transcript: str
    lines: int
    head_sha256: str
    """sha256 of the last complete line: keep it elsewhere to detect a later edit of that line."""
    closed: bool
    findings: list[AuditFinding]
    summary: Summary | None = None
    """None when the hash chain is broken (nothing after the break can be trusted)."""
    eval_report: str | None = None
    eval_solution_sha256: str | None = None

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)
