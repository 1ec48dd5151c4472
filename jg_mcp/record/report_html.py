"""One self-contained HTML page of a session: audit verdict, timeline, file diffs, eval chart.

Everything in a transcript is agent-controlled: the page is the Jinja2 template `report_html.j2`
rendered with autoescaping, from plain values this module prepares (no markup is built here). The
page fetches nothing (a Content-Security-Policy allows only its own inline style and script, by
hash) and works without its script: rows expand through <details>.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jg_mcp.eval import EvalReport
from jg_mcp.eval.report import ShapeResult
from jg_mcp.live.places import write_output
from jg_mcp.record.audit import AuditReport
from jg_mcp.record.steps import END, BlobError, Change, Record, ToolCall, load_record, read_blob
from jg_mcp.record.textdiff import CAPS, PairBudget, unified

if TYPE_CHECKING:
    import jinja2

EXCERPT_CHARS = 160
DIFF_CONTEXT = 3
CHART = {"label_w": 260, "plot_w": 420, "row_h": 24}


def csp_hash(text: object) -> str:
    """The CSP source that allows exactly this inline style or script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(str(text).encode()).digest()).decode() + "'"


@cache
def _template() -> jinja2.Template:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["csp_hash"] = csp_hash
    return env.get_template("report_html.j2")


def _text(data: bytes | None) -> str | None:
    """Printable text of a blob, or None for binary or unstored content."""
    if data is None or b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def diff_lines(old: str, new: str, path: str, budget: PairBudget) -> tuple[list[tuple[str, str]], list[str]]:
    """A unified diff as (css class, line) pairs (the class is empty for context lines), bounded
    (jg_mcp.record.textdiff), and what of it was summarised."""
    diff = unified(old, new, f"a/{path}", f"b/{path}", DIFF_CONTEXT, budget)
    return [({"@": "hunk", "+": "add", "-": "del"}.get(line[:1], ""), line) for line in diff.lines], diff.summary


def change_items(
    record: Record, changes: list[Change], before: dict[str, str | None], budget: PairBudget
) -> list[dict[str, Any]]:
    """Each change with its diff against the file's previous content; `before` is updated as they apply."""
    items = []
    for ch in changes:
        ev = ch.event
        item: dict[str, Any] = {
            "label": f"{ev.path}: {ev.op} by {ev.cause}",
            "problem": "",
            "note": "",
            "diff": None,
            "summary": [],
        }
        items.append(item)
        if ev.op == "delete":
            before.pop(ev.path, None)
            continue
        try:
            new = _text(read_blob(record, ev))
        except BlobError as exc:
            item["problem"] = str(exc)
            continue
        if new is None:
            why = "not stored (over the blob cap)" if not ev.stored else "binary"
            item["note"] = f"{why}: {ev.size} bytes, sha256 {ev.sha256 or 'not recorded'}"
        else:
            item["diff"], item["summary"] = diff_lines(before.get(ev.path) or "", new, ev.path, budget)
        before[ev.path] = new
    return items


def _excerpt(call: ToolCall) -> str:
    s = call.structured
    if "exit_code" in s:
        text = f"exit {s['exit_code']}, {s.get('duration_s', 0):.2f}s: " + (s.get("stdout") or s.get("stderr") or "")
    elif call.tool == "write_file" and "sha256" in s:
        text = f"{s.get('size')} bytes, sha256 {str(s['sha256'])[:12]}"
    else:
        text = call.text
    text = " ".join(text.split())
    return text[:EXCERPT_CHARS] + ("..." if len(text) > EXCERPT_CHARS else "")


def _args_line(call: ToolCall) -> str:
    shown = {k: (v if not isinstance(v, str) or len(v) < 80 else v[:77] + "...") for k, v in call.arguments.items()}
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in shown.items())


def _sections(call: ToolCall) -> list[tuple[str, str]]:
    s = call.structured
    if "exit_code" in s:
        return [(stream, str(s.get(stream) or "")) for stream in ("stdout", "stderr")]
    if call.tool == "read_file" and "content" in s:
        return [("content", str(s["content"]))]
    return [("result", call.text)]


def _status(call: ToolCall) -> str:
    if call.cancelled:
        return "cancelled"
    if call.is_error:
        return "refused"
    return "no reply" if call.duration_ms is None else "ok"


def call_item(
    record: Record, call: ToolCall, changes: list[Change], before: dict[str, str | None], budget: PairBudget
) -> dict[str, Any]:
    return {
        "step": call.step,
        "start": record.events[call.line - 1].ts - record.header.ts,
        "tool": call.tool,
        "args": _args_line(call),
        "duration": "-" if call.duration_ms is None else f"{call.duration_ms / 1000:.2f}s",
        "status": _status(call),
        "error": call.is_error,
        "excerpt": _excerpt(call),
        "arguments": json.dumps(call.arguments, indent=2, ensure_ascii=False),
        "sections": _sections(call),
        "changes": change_items(record, changes, before, budget) if changes else [],
    }


def timeline(record: Record) -> dict[str, Any]:
    """Session start, one row per tool call (numbered as replay numbers steps), changes recorded at the end; the
    changes grouped by step in one pass, the diffs paid for by one PairBudget."""
    before: dict[str, str | None] = {}
    budget = PairBudget()
    by_step: dict[int, list[Change]] = {}
    for change in record.changes:
        by_step.setdefault(change.step, []).append(change)
    start = change_items(record, by_step.get(0, []), before, budget)
    calls = [call_item(record, call, by_step.get(call.step, []), before, budget) for call in record.calls]
    end = change_items(record, by_step.get(END, []), before, budget)
    return {"start": start, "calls": calls, "end": end, "caps": CAPS}


def chart(shapes: list[ShapeResult]) -> dict[str, Any]:
    """Horizontal bars: speedup per shape and baseline, with the 1.0x line."""
    values = [(f"{s.name} vs {b}", v) for s in shapes for b, v in s.speedup.items()]
    label_w, plot_w, row_h = CHART["label_w"], CHART["plot_w"], CHART["row_h"]
    top = max([1.0, *(v for _, v in values)]) * 1.1
    rows = [
        {
            "label": label,
            "value": v,
            "y": 10 + i * row_h,
            "width": plot_w * v / top,
            "color": "#1a7f37" if v >= 1 else "#cf222e",
        }
        for i, (label, v) in enumerate(values)
    ]
    return {
        **CHART,
        "rows": rows,
        "width": label_w + plot_w + 70,
        "height": row_h * len(rows) + 30,
        "one": label_w + plot_w / top,
    }


def eval_view(report: EvalReport) -> dict[str, Any]:
    """What the page shows of an eval report."""
    geo = report.geomean_speedup
    return {
        "accepted": report.accepted,
        "verdict": "ACCEPTED" if report.accepted else "REJECTED: " + ", ".join(str(r) for r in report.reasons),
        "sha256": report.solution_sha256,
        "geomean": "n/a" if geo is None else f"{geo:.3f}x",
        "skipped": report.timing.skipped,
        "shapes": [
            {
                "name": s.name,
                "kind": s.kind,
                "correct": s.correct,
                "speedup": ", ".join(f"{b} {v:.2f}x" for b, v in s.speedup.items()) or "-",
            }
            for s in report.shapes
        ],
        "findings": [{"reason": str(f.reason), "detail": f.detail} for f in report.findings],
        "bars": chart(report.shapes),
    }


def _facts(report: AuditReport) -> list[tuple[str, str]]:
    facts = [
        ("transcript", report.transcript),
        ("lines", str(report.lines)),
        ("head sha256", report.head_sha256 or "-"),
    ]
    s = report.summary
    if s:
        facts += [
            ("goal", f"{s.goal} (sha256 {s.goal_sha256 or 'not recorded'})"),
            ("condition", s.condition),
            ("sandbox", s.sandbox),
            ("started", s.started_at),
            ("ended", f"{s.ended_at or '-'} ({s.end_reason})"),
            ("wall time", f"{s.wall_time_s:.1f}s, {s.command_time_s:.1f}s inside commands"),
            ("calls", ", ".join(f"{k} {v}" for k, v in sorted(s.calls_per_tool.items())) or "none"),
            (
                f"final {s.solution_file}",
                f"sha256 {s.solution_sha256} (from the {s.solution_source})" if s.solution_sha256 else "none left",
            ),
        ]
    return facts


def render(report: AuditReport, record: Record | None, evaluation: EvalReport | None = None) -> str:
    s = report.summary
    findings = [
        {
            "cls": "bad" if f.severity == "error" else "warn",
            "text": f"{f.severity} {f.area}/{f.kind}{f' (line {f.line})' if f.line else ''}: {f.message}",
        }
        for f in report.findings
    ]
    return _template().render(
        title=f"jg-mcp session {s.run_id}" if s else f"jg-mcp transcript {Path(report.transcript).name}",
        ok=report.ok,
        facts=_facts(report),
        findings=findings,
        eval=eval_view(evaluation) if evaluation is not None else None,
        timeline=timeline(record) if record is not None else None,
    )


def write_html(
    out: Path, transcript: Path, report: AuditReport, evaluation: EvalReport | None = None, what: str = "page"
) -> None:
    """Write the page (jg_mcp.live.places.write_output: into a directory no other user can redirect, never through
    a link), with the eval's verdict and chart when given its report; the timeline needs an intact transcript and
    is left out otherwise."""
    record = load_record(transcript) if report.summary is not None else None
    write_output(out, render(report, record, evaluation), what)
