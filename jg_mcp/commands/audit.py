"""`jg-mcp audit`: check a transcript's integrity, summarise the session, check its policy and the eval's hash.

jg_mcp.record.audit (which reaches torch through the eval's static check) is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from jg_mcp import log
from jg_mcp.commands.arguments import input_file, output_file
from jg_mcp.live.places import write_output
from jg_mcp.record import textdiff
from jg_mcp.terminal import SHOWN_COMMAND_CHARS, lines

if TYPE_CHECKING:
    from jg_mcp.record import audit
logger = log.get("jg_mcp.record.audit")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="check a transcript's integrity and policy; match it against an eval report",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Audit a recorded session.\n\n"
        + "\n".join(
            textwrap.fill(p, 100, subsequent_indent="           ", break_on_hyphens=False)
            for p in (
                "integrity: sequence numbers, hash chain, header, close event (else 'cut short'); every edited, "
                "deleted, reordered, duplicated or truncated line is named; every stored blob is checked against "
                "its hash; the close manifest against the file changes.",
                "summary:   goal, condition, wall time, time in commands, calls per tool, GPU queries, commands "
                "with exit codes and durations, files written, the final solution's sha256.",
                "policy:    refused or cancelled tool calls and server notices (warnings), commands that look like "
                "network use or name paths outside the workspace (by their text), changes to the protected "
                "reference.py, budget overrun, the goal's forbidden APIs in the final solution (AST scan), the "
                "goal's hash against the one served.",
                "eval:      with --eval-report, the solution_sha256 (and goal_sha256) the eval judged must be the "
                "transcript's final ones.",
            )
        )
        + "\n\nExit status: 0 when clean (warnings allowed), 1 on any integrity, policy or eval error, 2 on a usage "
        "error (no such transcript, eval report, goal or key file).",
    )
    p.add_argument("transcript", type=Path, metavar="TRANSCRIPT", help="the RUN.jsonl file")
    p.add_argument("--eval-report", type=Path, metavar="R", help="a `jg-mcp eval` report JSON")
    p.add_argument("--goal", type=Path, help="the goal YAML, when its name is not found in ./goals")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the audit report as JSON")
    p.add_argument(
        "--html",
        type=Path,
        metavar="PATH",
        help="write a self-contained HTML page of the session, each file change with its diff, made in time linear "
        f"in the transcript and its blobs: {textdiff.CAPS}",
    )
    p.add_argument(
        "--key-file",
        type=Path,
        metavar="F",
        help="the transcript key the server was given "
        "(--transcript-key-file): every line's HMAC is checked; without it, authenticity is not checked",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from jg_mcp.record import audit

    input_file(args.transcript, "transcript")
    input_file(args.eval_report, "--eval-report")
    input_file(args.goal, "--goal")
    output_file(args.json, "--json")
    output_file(args.html, "--html")
    from jg_mcp.record.keys import read_key

    key = read_key(args.key_file) if args.key_file else None
    # after every usage error (exit 2): a file that is no transcript is a failure of the audit (exit 1)
    from jg_mcp.errors import TranscriptError
    from jg_mcp.record.reading import not_a_transcript

    if (why := not_a_transcript(args.transcript)) is not None:
        raise TranscriptError(args.transcript, 1, why)
    report = audit.audit(args.transcript, args.eval_report, args.goal, key)
    print(render_text(report))
    if args.json:
        write_output(args.json, report.model_dump_json(indent=2) + "\n", "--json")
        logger.info("wrote audit JSON", path=str(args.json))
    if args.html:
        from jg_mcp.record.report_html import write_html

        judged = audit.read_eval_report(args.eval_report) if report.eval_solution_sha256 else None
        write_html(args.html, args.transcript, report, judged, what="--html")
        logger.info("wrote HTML report", path=str(args.html))
    return 0 if report.ok else 1


def outcome(c: audit.CommandRun) -> str:
    """How a command ended, in words: its exit code and duration, or why it has none."""
    took = "" if c.duration_s is None else f" after {c.duration_s:.2f}s"
    if c.cancelled:
        return "CANCELLED" + took + " (the client cancelled the call or disconnected)"
    if c.refused:
        return "REFUSED"
    if c.duration_s is None:
        return "NO RESPONSE (the session was cut short)"
    if c.timed_out:
        return "TIMED OUT" + took
    if c.exit_code is None:
        return "KILLED" + took
    return f"exit {c.exit_code} {c.duration_s:.2f}s"


def render_text(report: audit.AuditReport) -> str:
    out = [f"transcript {report.transcript}: {report.lines} lines, head sha256 {report.head_sha256}"]
    s = report.summary
    if s is not None:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(s.calls_per_tool.items())) or "none"
        out += [
            f"goal {s.goal} (sha256 {s.goal_sha256[:16]}), condition {s.condition}, sandbox {s.sandbox}",
            f"wall time {s.wall_time_s:.1f}s, inside commands {s.command_time_s:.1f}s, ended: {s.end_reason}",
            f"calls: {tools}; GPU queries {s.gpu_queries}",
        ]
        out += [f"  step {c.step:3d} {outcome(c)}  $ {c.command[:SHOWN_COMMAND_CHARS]}" for c in s.commands]
        written = sorted({w.path for w in s.files_written if w.step != 0})
        out.append(f"files written: {', '.join(written) or 'none'}")
        if s.solution_sha256 is None:
            out.append(f"no {s.solution_file} at the end of the session")
        else:
            out.append(f"final {s.solution_file}: sha256 {s.solution_sha256} (from the {s.solution_source})")
    if report.eval_solution_sha256:
        out.append(f"eval report {report.eval_report}: judged sha256 {report.eval_solution_sha256}")
    for f in report.findings:
        where = f"line {f.line}: " if f.line else ""
        out.append(f"{f.severity.upper():7s} {f.area}/{f.kind}: {where}{f.message}")
    out.append("audit " + ("clean" if report.ok else "FAILED"))
    return lines(out)
