"""The table (jg_mcp.campaign.table) rendered: Markdown, CSV, and a self-contained HTML page with a horizontal bar
chart (inline SVG), the summary and every run labelled.

The chart is laid out for the page it is on: one bar per summary line and agent, labels to the left of their bars
and sized from the longest label, the SVG scaled down to the page's width (viewBox), so no label is clipped and the
page reads at a normal width. Everything from a record is escaped.
"""

from __future__ import annotations

import csv
import html
import io
from typing import TYPE_CHECKING

from jg_mcp.terminal import printable

if TYPE_CHECKING:
    from jg_mcp.campaign.table import Cell, RunRow, Table

PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb")
CHAR_PX = 7.0
"""Width of a character at the chart's 12 px sans-serif, rounded up: what a label is given."""
BAR_AREA_PX = 420
ROW_PX = 20
COLUMNS = ("accepted", "speedup median [min-max]", "% SOL")
NOTE = (
    "Speedup: verified, against the strongest baseline (geometric mean over timed shapes), over accepted runs not "
    "marked as hacks: median, [min-max] and n over seeds. % SOL: median % of speed-of-light (the shape's physical "
    "floor over the kernel's time). The seeds of a line share everything else (agent version, model, budget, goal "
    "version, eval arguments); where an agent ran a goal and condition under several such setups, each setup has "
    "its own line, named by what differs. geomean: across goals, of the medians; goals in geomean: over how many "
    "of the goals run under the condition (a goal with no accepted speedup, or run under several setups, is left "
    "out). Runs that are no result (failed to start, say) or that a later run of the same setup and seed superseded "
    "are listed under Not counted."
)


def md_escape(text: str) -> str:
    """A value for a Markdown table cell: its pipes escaped, its line breaks made spaces."""
    return text.replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _x(value: float | None, suffix: str = "x") -> str:
    return "-" if value is None else f"{value:.2f}{suffix}"


def speedup_text(cell: Cell) -> str:
    """`median [min-max] n=N` over the accepted runs' speedups."""
    spread = cell.spread()
    if spread is None:
        return "-"
    if len(cell.speedups) == 1:
        return f"{_x(cell.median_speedup)} n=1"
    return f"{_x(cell.median_speedup)} [{spread[0]:.2f}-{spread[1]:.2f}] n={len(cell.speedups)}"


def _cell_values(cell: Cell | None) -> list[str]:
    if cell is None:
        return ["-"] * 3
    return [f"{cell.accepted}/{cell.runs}", speedup_text(cell), _x(cell.median_roofline_pct, "%")]


def rows(table: Table) -> tuple[list[str], list[list[str]]]:
    """The summary: its lines (a goal and condition, or one setup of it), agents side by side, then per condition
    the geomeans and how many goals each is taken over."""
    header = ["goal", "condition", *[f"{a}: {c}" for a in table.agents for c in COLUMNS]]
    body = [
        [goal, condition, *[v for a in table.agents for v in _cell_values(cells.get(a))]]
        for goal, condition, cells in table.lines()
    ]
    for condition in table.conditions:
        body.append(
            ["geomean", condition, *[v for a in table.agents for v in ("", _x(table.geomean[a][condition]), "")]]
        )
        over = [table.geomean_goals[a][condition] for a in table.agents]
        body.append(["goals in geomean", condition, *[v for k, n in over for v in ("", f"{k} of {n}", "")]])
    return header, body


def shapes_text(r: RunRow) -> str:
    """Each timed shape's speedup beside its % of speed-of-light."""
    return ", ".join(f"{s.name} {_x(s.speedup)} ({_x(s.roofline_pct, '% SOL')})" for s in r.shapes) or "-"


def markdown(table: Table, prefix: str = "") -> str:
    """The summary, every counted run with its label, then the runs not counted and the records not read; links
    are `prefix` + the path under the runs directory."""
    header, body = rows(table)
    out = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(md_escape(v) for v in r) + " |" for r in body]
    out += ["", NOTE, "", "## Runs", "", "| run | label | evidence | speedup | per shape | links |", "|" + " --- |" * 6]
    left_out = []
    for r in table.rows:
        links = " ".join(f"[{k}]({prefix}{v})" for k, v in r.links.items()) or "-"
        evidence = md_escape(r.why) or "-"
        if r.not_counted:
            left_out.append(f"| {md_escape(r.run_id)} | {md_escape(r.not_counted)} | {evidence} | {links} |")
            continue
        name = f"~~{md_escape(r.run_id)}~~" if r.struck else md_escape(r.run_id)
        if r.differs:
            name += f" ({md_escape(r.differs)})"
        out.append(f"| {name} | {r.label} | {evidence} | {_x(r.speedup)} | {md_escape(shapes_text(r))} | {links} |")
    if left_out:
        out += ["", "## Not counted", "", "| run | why | evidence | links |", "|" + " --- |" * 4, *left_out]
    if table.unreadable:
        out += ["", "## Not read", "", *[f"- {md_escape(u)}" for u in table.unreadable]]
    return "\n".join(printable(line) for line in out) + "\n"


def to_csv(table: Table) -> str:
    """One line per counted run: its label, evidence, speedup, % SOL and per-shape figures. The condition of a run
    whose agent ran that goal and condition under several setups names what differs, as the summary's line does, so
    grouping by the columns never pools setups."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["run_id", "agent", "goal", "condition", "seed", "label", "why", "speedup", "roofline_pct", "shapes"])
    for r in table.rows:
        if r.not_counted:
            continue
        w.writerow(
            [
                r.run_id,
                r.agent,
                r.goal,
                f"{r.condition} ({r.differs})" if r.differs else r.condition,
                r.seed,
                r.label,
                r.why,
                r.speedup if r.speedup is not None else "",
                r.roofline_pct if r.roofline_pct is not None else "",
                shapes_text(r),
            ]
        )
    return buf.getvalue()


def svg_chart(table: Table) -> str:
    """One horizontal bar per summary line and agent: the median verified speedup when any run has one, else the
    fraction of runs accepted."""
    speed = any(c.median_speedup for c in table.cells)
    bars = []
    for goal, condition, cells in table.lines():
        group_label = f"{goal} / {condition}"
        for j, a in enumerate(table.agents):
            cell = cells.get(a)
            if cell is None:
                continue
            value = (cell.median_speedup or 0.0) if speed else cell.accepted / cell.runs
            bars.append((group_label, a, value, j))
            group_label = ""
    title = "median verified speedup (x), accepted runs" if speed else "accepted runs (fraction of runs)"
    legend = "   ".join(table.agents)
    left = int(max([len(b[0]) for b in bars] + [8]) * CHAR_PX) + 16
    width = max(left + BAR_AREA_PX + 70, int((len(title) + 2) * CHAR_PX) + 20, int(len(legend) * CHAR_PX) + 60)
    top = max([b[2] for b in bars] + [1.0])
    y0 = 50
    height = y0 + len(bars) * ROW_PX + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'style="max-width:100%;height:auto" font-family="sans-serif" font-size="12" role="img" '
        f'aria-label="{html.escape(title)}">',
        f'<text x="10" y="18" font-size="14">{html.escape(title)}</text>',
    ]
    x = 10
    for j, a in enumerate(table.agents):
        parts.append(
            f'<rect x="{x}" y="28" width="10" height="10" fill="{PALETTE[j % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="37">{html.escape(a)}</text>'
        )
        x += int((len(a) + 4) * CHAR_PX) + 14
    for i, (group_label, agent, value, j) in enumerate(bars):
        y = y0 + i * ROW_PX
        w = value / top * BAR_AREA_PX
        if group_label:
            parts.append(f'<text x="{left - 8}" y="{y + 13}" text-anchor="end">{html.escape(group_label)}</text>')
        parts.append(
            f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{ROW_PX - 5}" fill="{PALETTE[j % len(PALETTE)]}">'
            f"<title>{html.escape(agent)}: {value:.3g}</title></rect>"
            f'<text x="{left + w + 4:.1f}" y="{y + 13}">{value:.2f}</text>'
        )
    axis_y = y0 + len(bars) * ROW_PX + 4
    parts.append(f'<line x1="{left}" y1="{y0}" x2="{left}" y2="{axis_y}" stroke="#333"/>')
    if speed and top >= 1:
        x1 = left + BAR_AREA_PX / top
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y0}" x2="{x1:.1f}" y2="{axis_y}" stroke="#999" stroke-dasharray="4"/>'
            f'<text x="{x1:.1f}" y="{axis_y + 14}" text-anchor="middle">1x</text>'
        )
    return "\n".join([*parts, "</svg>"])


def _links_html(r: RunRow, prefix: str) -> str:
    return " ".join(f'<a href="{html.escape(prefix + v)}">{html.escape(k)}</a>' for k, v in r.links.items()) or "-"


def _run_row(r: RunRow, prefix: str) -> str:
    cells = [
        html.escape(r.run_id + (f" ({r.differs})" if r.differs else "")),
        html.escape(r.label),
        html.escape(r.why) or "-",
        "-" if r.speedup is None else f"{r.speedup:.2f}x",
        html.escape(shapes_text(r)),
        _links_html(r, prefix),
    ]
    inner = "".join(f"<td>{c}</td>" for c in cells)
    return f'<tr class="struck">{inner}</tr>' if r.struck else f"<tr>{inner}</tr>"


def _left_out_row(r: RunRow, prefix: str) -> str:
    cells = [html.escape(r.run_id), html.escape(r.not_counted), html.escape(r.why) or "-", _links_html(r, prefix)]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def to_html(table: Table, prefix: str = "") -> str:
    """The page: the chart, the summary, every counted run, then the runs not counted and the records not read;
    links are `prefix` + the path under the runs directory."""
    header, body = rows(table)
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in body)
    runs = "".join(_run_row(r, prefix) for r in table.rows if not r.not_counted)
    left_out = "".join(_left_out_row(r, prefix) for r in table.rows if r.not_counted)
    unread = "".join(f"<li>{html.escape(u)}</li>" for u in table.unreadable)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>jg-mcp campaign table</title><style>"
        "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
        "tr.struck td{text-decoration:line-through;color:#888}</style></head><body>"
        f"<h1>Campaign results</h1>{svg_chart(table)}<table><tr>{th}</tr>{trs}</table>"
        f"<p>{html.escape(NOTE)}</p><h2>Runs</h2><table><tr><th>run</th><th>label</th><th>evidence</th>"
        f"<th>speedup</th><th>per shape (speedup, % SOL)</th><th>links</th></tr>{runs}</table>"
        + (
            "<h2>Not counted</h2><table><tr><th>run</th><th>why</th><th>evidence</th><th>links</th></tr>"
            f"{left_out}</table>"
            if left_out
            else ""
        )
        + (f"<h2>Not read</h2><ul>{unread}</ul>" if unread else "")
        + "</body></html>\n"
    )
