"""One self-contained HTML page of a session: audit verdict, timeline, file diffs, eval chart.

Everything in a transcript is agent-controlled, so every string goes through `html.escape`;
the page fetches nothing (a Content-Security-Policy allows only its own inline style and
script, by hash) and works without its script: rows expand through <details>.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
from html import escape
from pathlib import Path
from typing import Any

from jg_mcp.audit import AuditReport
from jg_mcp.replay import END, BlobError, Change, Record, ToolCall, load_record, read_blob

EXCERPT_CHARS = 160
DIFF_CONTEXT = 3

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #d0d7de}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}.warn{color:#9a6700}
table.kv td{padding:2px 12px 2px 0;vertical-align:top}
ul.findings li{margin:2px 0}
details.call{border:1px solid #d0d7de;border-radius:6px;margin:4px 0}
details.call>summary{display:grid;grid-template-columns:3em 5em 9em 1fr 7.5em 2fr;gap:8px;padding:6px 8px;
cursor:pointer;list-style:none}
details.call>summary::-webkit-details-marker{display:none}
details.call[open]>summary{background:#f6f8fa;border-bottom:1px solid #d0d7de}
details.call.error>summary{background:#fff0f0}
.body{padding:8px}.head{font-weight:600;display:grid;grid-template-columns:3em 5em 9em 1fr 7.5em 2fr;gap:8px;
padding:0 9px}
.cell{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:480px;white-space:pre-wrap;word-break:break-all}
pre.diff .add{color:#1a7f37}pre.diff .del{color:#cf222e}pre.diff .hunk{color:#8250df}
button{margin-right:8px}
"""

SCRIPT = """
document.getElementById('expand').addEventListener('click', function () {
  document.querySelectorAll('details.call').forEach(function (d) { d.open = true; });
});
document.getElementById('collapse').addEventListener('click', function () {
  document.querySelectorAll('details.call').forEach(function (d) { d.open = false; });
});
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _text(data: bytes | None) -> str | None:
    """Printable text of a blob, or None for binary or unstored content."""
    if data is None or b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def diff_html(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}", n=DIFF_CONTEXT)
    out = []
    for line in lines:
        cls = {"@": "hunk", "+": "add", "-": "del"}.get(line[:1], "")
        text = escape(line if line.endswith("\n") else line + "\n")
        out.append(f'<span class="{cls}">{text}</span>' if cls else text)
    return f'<pre class="diff">{"".join(out) or "(no textual difference)"}</pre>'


def changes_html(record: Record, changes: list[Change], before: dict[str, str | None]) -> str:
    """Diffs of each change against the file's previous content; `before` is updated as they apply."""
    parts = []
    for ch in changes:
        ev = ch.event
        label = f"{escape(ev.path)}: {escape(ev.op)} by {escape(ev.cause)}"
        if ev.op == "delete":
            parts.append(f"<h4>{label}</h4>")
            before.pop(ev.path, None)
            continue
        try:
            new = _text(read_blob(record, ev))
        except BlobError as exc:
            parts.append(f'<h4>{label}</h4><p class="bad">{escape(str(exc))}</p>')
            continue
        old = before.get(ev.path, "")
        if new is None:
            why = "not stored (over the blob cap)" if not ev.stored else "binary"
            parts.append(f"<h4>{label}</h4><p>{why}: {ev.size} bytes, sha256 {escape(str(ev.sha256))}</p>")
        else:
            parts.append(f"<h4>{label}</h4>" + diff_html(old or "", new, ev.path))
        before[ev.path] = new
    return "".join(parts)


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


def call_html(record: Record, call: ToolCall, changes: list[Change], before: dict[str, str | None]) -> str:
    start = record.events[call.line - 1].ts - record.header.ts
    duration = "-" if call.duration_ms is None else f"{call.duration_ms / 1000:.2f}s"
    status = "refused" if call.is_error else "no reply" if call.duration_ms is None else "ok"
    cls = "call error" if call.is_error else "call"
    body = ["<h4>arguments</h4><pre>" + escape(json.dumps(call.arguments, indent=2, ensure_ascii=False)) + "</pre>"]
    s = call.structured
    if "exit_code" in s:
        for stream in ("stdout", "stderr"):
            body.append(f"<h4>{stream}</h4><pre>{escape(str(s.get(stream) or ''))}</pre>")
    elif call.tool == "read_file" and "content" in s:
        body.append(f"<h4>content</h4><pre>{escape(str(s['content']))}</pre>")
    else:
        body.append("<h4>result</h4><pre>" + escape(call.text) + "</pre>")
    if changes:
        body.append("<h3>files changed</h3>" + changes_html(record, changes, before))
    return (
        f'<details class="{cls}" id="step-{call.step}"><summary>'
        f'<span class="cell">{call.step}</span><span class="cell">+{start:.2f}s</span>'
        f'<span class="cell">{escape(call.tool)}</span><span class="cell">{escape(_args_line(call))}</span>'
        f'<span class="cell">{duration} {status}</span><span class="cell">{escape(_excerpt(call))}</span>'
        f'</summary><div class="body">{"".join(body)}</div></details>'
    )


def timeline_html(record: Record) -> str:
    before: dict[str, str | None] = {}
    start = [c for c in record.changes if c.step == 0]
    rows = [f"<details class=\"call\" id=\"step-0\"><summary><span class=\"cell\">0</span><span class=\"cell\">"
            f"+0.00s</span><span class=\"cell\">session start</span><span class=\"cell\">{len(start)} files</span>"
            f"<span class=\"cell\"></span><span class=\"cell\"></span></summary><div class=\"body\">"
            f"{changes_html(record, start, before)}</div></details>"]
    for call in record.calls:
        rows.append(call_html(record, call, [c for c in record.changes if c.step == call.step], before))
    end = [c for c in record.changes if c.step == END]
    if end:
        rows.append("<h3>changes recorded at session end</h3>" + changes_html(record, end, before))
    head = ('<div class="head"><span>step</span><span>at</span><span>tool</span><span>arguments</span>'
            "<span>duration</span><span>result</span></div>")
    return head + "".join(rows)


def chart_svg(shapes: list[dict[str, Any]]) -> str:
    """Horizontal bars: speedup per shape and baseline, with the 1.0x line."""
    bars = [(f"{s.get('name', '?')} vs {b}", float(v)) for s in shapes
            for b, v in (s.get("speedup") or {}).items() if isinstance(v, (int, float))]
    if not bars:
        return "<p>No timed speedups in the eval report.</p>"
    label_w, plot_w, row_h = 260, 420, 24
    top = max(1.0, *(v for _, v in bars)) * 1.1

    def x(v: float) -> float:
        return label_w + plot_w * v / top

    height = row_h * len(bars) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 70}" height="{height}" '
           f'role="img" aria-label="speedup per shape">']
    for i, (label, v) in enumerate(bars):
        y = 10 + i * row_h
        color = "#1a7f37" if v >= 1 else "#cf222e"
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12">{escape(label)}</text>'
                   f'<rect x="{label_w}" y="{y + 3}" width="{x(v) - label_w:.1f}" height="{row_h - 8}" fill="{color}"/>'
                   f'<text x="{x(v) + 4:.1f}" y="{y + 15}" font-size="12">{v:.2f}x</text>')
    out.append(f'<line x1="{x(1.0):.1f}" y1="5" x2="{x(1.0):.1f}" y2="{height - 15}" stroke="#57606a" '
               f'stroke-dasharray="4 3"/><text x="{x(1.0):.1f}" y="{height - 2}" font-size="11" '
               f'text-anchor="middle">1.0x</text></svg>')
    return "".join(out)


def eval_html(data: dict[str, Any]) -> str:
    accepted = bool(data.get("accepted"))
    verdict = "ACCEPTED" if accepted else "REJECTED: " + ", ".join(str(r) for r in data.get("reasons") or [])
    geo = data.get("geomean_speedup")
    rows = [f'<p class="{"ok" if accepted else "bad"}">{escape(verdict)}</p>',
            f"<p>solution sha256 {escape(str(data.get('solution_sha256')))}; geometric-mean speedup "
            f"{escape(f'{geo:.3f}x' if isinstance(geo, (int, float)) else 'n/a')}</p>"]
    skipped = (data.get("timing") or {}).get("skipped") if isinstance(data.get("timing"), dict) else None
    if skipped:
        rows.append(f"<p>timing skipped: {escape(str(skipped))}</p>")
    shapes = [s for s in data.get("shapes") or [] if isinstance(s, dict)]
    if shapes:
        rows.append("<table class=\"kv\"><tr><th>shape</th><th>kind</th><th>correct</th><th>speedup</th></tr>")
        for s in shapes:
            pairs = (s.get("speedup") or {}).items()
            speed = ", ".join(f"{b} {v:.2f}x" for b, v in pairs if isinstance(v, (int, float)))
            rows.append(f"<tr><td>{escape(str(s.get('name')))}</td><td>{escape(str(s.get('kind', '')))}</td>"
                        f"<td>{'yes' if s.get('correct') else 'NO'}</td><td>{escape(speed or '-')}</td></tr>")
        rows.append("</table>")
    for f in data.get("findings") or []:
        if isinstance(f, dict):
            rows.append(f"<p class=\"bad\">{escape(str(f.get('reason')))}: {escape(str(f.get('detail')))}</p>")
    return "".join(rows) + chart_svg(shapes)


def render(report: AuditReport, record: Record | None, eval_data: dict[str, Any] | None = None) -> str:
    s = report.summary
    verdict = '<span class="ok">clean</span>' if report.ok else '<span class="bad">FAILED</span>'
    title = f"jg-mcp session {s.run_id}" if s else f"jg-mcp transcript {Path(report.transcript).name}"
    facts = [("transcript", report.transcript), ("lines", str(report.lines)), ("head sha256", report.head_sha256)]
    if s:
        facts += [("goal", f"{s.goal} (sha256 {s.goal_sha256})"), ("condition", s.condition), ("sandbox", s.sandbox),
                  ("started", s.started_at), ("ended", f"{s.ended_at or '-'} ({s.end_reason})"),
                  ("wall time", f"{s.wall_time_s:.1f}s, {s.command_time_s:.1f}s inside commands"),
                  ("calls", ", ".join(f"{k} {v}" for k, v in sorted(s.calls_per_tool.items())) or "none"),
                  (f"final {s.solution_file}", f"sha256 {s.solution_sha256} (from the {s.solution_source})")]
    kv = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in facts)
    findings = "".join(
        f'<li class="{"bad" if f.severity == "error" else "warn"}">{escape(f.severity)} {escape(f.area)}/'
        f'{escape(f.kind)}{escape(f" (line {f.line})" if f.line else "")}: {escape(f.message)}</li>'
        for f in report.findings) or "<li>none</li>"
    parts = [f"<h1>{escape(title)}</h1><p>audit: {verdict}</p><table class=\"kv\">{kv}</table>",
             f'<h2>Findings</h2><ul class="findings">{findings}</ul>']
    if eval_data is not None:
        parts.append("<h2>Eval verdict</h2>" + eval_html(eval_data))
    if record is not None:
        parts.append('<h2>Timeline</h2><p><button id="expand" type="button">expand all</button>'
                     '<button id="collapse" type="button">collapse all</button></p>' + timeline_html(record))
    csp = (f"default-src 'none'; style-src {_csp_hash(STYLE)}; script-src {_csp_hash(SCRIPT)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{escape(csp)}">'
            f'<meta name="viewport" content="width=device-width"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}<script>{SCRIPT}</script></body></html>\n")


def write_html(out: Path, transcript: Path, report: AuditReport, eval_data: dict[str, Any] | None = None) -> None:
    """Write the page; the timeline needs an intact transcript and is left out otherwise."""
    record = load_record(transcript) if report.summary is not None else None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(report, record, eval_data), encoding="utf-8")
