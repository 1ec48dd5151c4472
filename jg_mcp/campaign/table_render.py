"""The table as a self-contained HTML page: a horizontal bar chart (inline SVG), the summary, every run labelled.

The chart is laid out for the page it is on: one bar per (goal, condition, agent), labels to the left of their bars
and sized from the longest label, the SVG scaled down to the page's width (viewBox), so no label is clipped and the
page reads at a normal width. Everything from a record is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jg_mcp.campaign.table import RunRow, Table

PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb")
CHAR_PX = 7.0
"""Width of a character at the chart's 12 px sans-serif, rounded up: what a label is given."""
BAR_AREA_PX = 420
ROW_PX = 20


def md_escape(text: str) -> str:
    """A value for a Markdown table cell: its pipes escaped, its line breaks made spaces."""
    return text.replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def svg_chart(table: Table) -> str:
    """One horizontal bar per (goal, condition, agent): the median verified speedup when any run has one, else
    the fraction of runs accepted."""
    index = table.index()
    speed = any(c.median_speedup for c in table.cells)
    bars = []
    for g in table.goals:
        for c in table.conditions:
            group_label = f"{g} / {c}"
            for j, a in enumerate(table.agents):
                cell = index.get((a, g, c))
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


def _run_row(r: RunRow, prefix: str, shapes_text: Callable[[RunRow], str]) -> str:
    links = " ".join(f'<a href="{html.escape(prefix + v)}">{html.escape(k)}</a>' for k, v in r.links.items()) or "-"
    cells = [
        html.escape(r.run_id),
        html.escape(r.label),
        html.escape(r.why) or "-",
        "-" if r.speedup is None else f"{r.speedup:.2f}x",
        html.escape(shapes_text(r)),
        links,
    ]
    inner = "".join(f"<td>{c}</td>" for c in cells)
    return f'<tr class="struck">{inner}</tr>' if r.struck else f"<tr>{inner}</tr>"


def html_page(
    table: Table,
    header: list[str],
    body: list[list[str]],
    note: str,
    prefix: str,
    shapes_text: Callable[[RunRow], str],
) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in body)
    runs = "".join(_run_row(r, prefix, shapes_text) for r in table.rows)
    unread = "".join(f"<li>{html.escape(u)}</li>" for u in table.unreadable)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>jg-mcp campaign table</title><style>"
        "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
        "tr.struck td{text-decoration:line-through;color:#888}</style></head><body>"
        f"<h1>Campaign results</h1>{svg_chart(table)}<table><tr>{th}</tr>{trs}</table>"
        f"<p>{html.escape(note)}</p><h2>Runs</h2><table><tr><th>run</th><th>label</th><th>evidence</th>"
        f"<th>speedup</th><th>per shape (speedup, % SOL)</th><th>links</th></tr>{runs}</table>"
        + (f"<h2>Not read</h2><ul>{unread}</ul>" if unread else "")
        + "</body></html>\n"
    )
