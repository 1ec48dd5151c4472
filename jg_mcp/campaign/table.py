"""The paper's table from a runs directory: per goal and condition, agents side by side.

For each (agent, goal, condition): runs, accepted, best and median verified speedup against the strongest
baseline (the eval's geometric mean over timed shapes), median % of roofline; per agent and condition the
geometric mean across goals of the median speedups. Only accepted runs count as speedups; the others are
listed with their reasons. Rendered as Markdown, CSV, and a self-contained HTML page with an inline SVG chart.
"""

from __future__ import annotations

import csv
import html
import io
import math
import statistics
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from jg_mcp.campaign.conditions import NAMES
from jg_mcp.campaign.run import RUN_FILE, RunRecord, load_record


class Cell(BaseModel):
    """One (agent, goal, condition) group of runs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    agent: str
    goal: str
    condition: str
    runs: int
    """Runs recorded."""
    accepted: int
    """Runs whose solution the eval accepted."""
    best_speedup: float | None = None
    """Best speedup among accepted runs (None: no accepted run had a timed speedup, e.g. on CPU)."""
    median_speedup: float | None = None
    """Median speedup among accepted runs with one."""
    median_roofline_pct: float | None = None
    """Median % of roofline among accepted runs with one."""
    rejections: dict[str, int] = {}
    """Why the other runs count for nothing: reason -> runs."""


class Table(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agents: list[str]
    goals: list[str]
    conditions: list[str]
    cells: list[Cell]
    geomean: dict[str, dict[str, float | None]]
    """agent -> condition -> geometric mean across goals of the median speedups (None when none)."""

    def cell(self, agent: str, goal: str, condition: str) -> Cell | None:
        return next((c for c in self.cells if (c.agent, c.goal, c.condition) == (agent, goal, condition)), None)


def agent_label(record: RunRecord) -> str:
    """The agent part of the run id (the campaign's label), else the adapter name."""
    parts = record.run_id.split("__")
    return parts[0] if len(parts) == 4 else record.agent


def rejection(record: RunRecord) -> str:
    if record.eval.status == "accepted":
        return ""
    if record.eval.status == "no solution":
        return f"no solution ({record.exit_reason.split(';')[0]})"
    return ", ".join(record.eval.reasons) or record.eval.status


def load_records(runs_dir: Path) -> list[RunRecord]:
    return [load_record(p.parent) for p in sorted(runs_dir.glob(f"*/{RUN_FILE}"))]


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def build(records: list[RunRecord]) -> Table:
    agents = sorted({agent_label(r) for r in records})
    goals = sorted({r.goal for r in records})
    conditions = sorted({r.condition for r in records}, key=lambda c: (NAMES.index(c) if c in NAMES else len(NAMES), c))
    cells = []
    for agent in agents:
        for goal in goals:
            for condition in conditions:
                group = [r for r in records if (agent_label(r), r.goal, r.condition) == (agent, goal, condition)]
                if not group:
                    continue
                ok = [r for r in group if r.eval.status == "accepted"]
                speedups = [r.eval.geomean_speedup for r in ok if r.eval.geomean_speedup]
                roof = [r.eval.roofline_pct for r in ok if r.eval.roofline_pct is not None]
                cells.append(
                    Cell(
                        agent=agent,
                        goal=goal,
                        condition=condition,
                        runs=len(group),
                        accepted=len(ok),
                        best_speedup=max(speedups) if speedups else None,
                        median_speedup=statistics.median(speedups) if speedups else None,
                        median_roofline_pct=statistics.median(roof) if roof else None,
                        rejections=dict(Counter(rejection(r) for r in group if r.eval.status != "accepted")),
                    )
                )
    geomean = {
        a: {
            c: _geomean([x.median_speedup for x in cells if x.agent == a and x.condition == c and x.median_speedup])
            for c in conditions
        }
        for a in agents
    }
    return Table(agents=agents, goals=goals, conditions=conditions, cells=cells, geomean=geomean)


def _x(value: float | None, suffix: str = "x") -> str:
    return "-" if value is None else f"{value:.2f}{suffix}"


def _row_values(cell: Cell | None) -> list[str]:
    if cell is None:
        return ["-"] * 4
    return [
        f"{cell.accepted}/{cell.runs}",
        _x(cell.best_speedup),
        _x(cell.median_speedup),
        _x(cell.median_roofline_pct, "%"),
    ]


COLUMNS = ("accepted", "best", "median", "% roofline")
NOTE = (
    "Speedup: verified, against the strongest baseline (geometric mean over timed shapes), accepted runs only; "
    "best and median over seeds. geomean: across goals, of the medians."
)


def rows(table: Table) -> tuple[list[str], list[list[str]]]:
    header = ["goal", "condition", *[f"{a}: {c}" for a in table.agents for c in COLUMNS]]
    body = []
    for goal in table.goals:
        for condition in table.conditions:
            values = [v for a in table.agents for v in _row_values(table.cell(a, goal, condition))]
            if any(v != "-" for v in values):
                body.append([goal, condition, *values])
    for condition in table.conditions:
        body.append(
            ["geomean", condition, *[v for a in table.agents for v in ("", "", _x(table.geomean[a][condition]), "")]]
        )
    return header, body


def rejections(table: Table) -> list[str]:
    return [
        f"{c.agent} / {c.goal} / {c.condition}: " + "; ".join(f"{n}x {why}" for why, n in c.rejections.items())
        for c in table.cells
        if c.rejections
    ]


def markdown(table: Table) -> str:
    header, body = rows(table)
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in body]
    out += ["", NOTE, ""]
    rej = rejections(table)
    out += ["## Runs that count for nothing", "", *[f"- {r}" for r in rej]] if rej else []
    return "\n".join(out) + "\n"


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            "agent",
            "goal",
            "condition",
            "runs",
            "accepted",
            "best_speedup",
            "median_speedup",
            "median_roofline_pct",
            "rejections",
        ]
    )
    for c in table.cells:
        w.writerow(
            [
                c.agent,
                c.goal,
                c.condition,
                c.runs,
                c.accepted,
                c.best_speedup or "",
                c.median_speedup or "",
                c.median_roofline_pct or "",
                "; ".join(f"{n}x {why}" for why, n in c.rejections.items()),
            ]
        )
    return buf.getvalue()


PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb")


def svg_chart(table: Table) -> str:
    """Grouped bars per goal x condition, one bar per agent: the median speedup when any run has one, else the
    acceptance rate."""
    speed = any(c.median_speedup for c in table.cells)
    groups = [(g, c) for g in table.goals for c in table.conditions if any(table.cell(a, g, c) for a in table.agents)]

    def value(cell: Cell | None) -> float:
        if cell is None:
            return 0.0
        return (cell.median_speedup or 0.0) if speed else cell.accepted / cell.runs

    top = max([value(table.cell(a, g, c)) for a in table.agents for g, c in groups] + [1.0])
    bar, gap, h, left, bottom = 18, 24, 220, 50, 90
    width = left + len(groups) * (len(table.agents) * bar + gap) + 20
    title = "median verified speedup (x)" if speed else "accepted runs (fraction)"
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h + bottom + 40}" '
            'font-family="sans-serif" font-size="11">'
        ),
        f'<text x="{left}" y="14" font-size="13">{title}</text>',
        f'<line x1="{left}" y1="{20 + h}" x2="{width - 10}" y2="{20 + h}" stroke="#333"/>',
    ]
    for tick in (0.0, top / 2, top):
        y = 20 + h - tick / top * h
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2g}</text>')
    if speed and top >= 1:
        y = 20 + h - 1 / top * h
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#999" stroke-dasharray="4"/>'
        )
    for i, (g, c) in enumerate(groups):
        x0 = left + 10 + i * (len(table.agents) * bar + gap)
        for j, a in enumerate(table.agents):
            v = value(table.cell(a, g, c))
            bh = v / top * h
            parts.append(
                f'<rect x="{x0 + j * bar}" y="{20 + h - bh:.1f}" width="{bar - 2}" height="{bh:.1f}" '
                f'fill="{PALETTE[j % len(PALETTE)]}"><title>{html.escape(a)}: {v:.3g}</title></rect>'
            )
        label = html.escape(f"{g} / {c}")
        parts.append(f'<text transform="translate({x0 + 4},{28 + h}) rotate(35)">{label}</text>')
    for j, a in enumerate(table.agents):
        y = h + bottom + 20
        parts.append(
            f'<rect x="{left + j * 150}" y="{y}" width="10" height="10" fill="{PALETTE[j % len(PALETTE)]}"/>'
            f'<text x="{left + j * 150 + 14}" y="{y + 9}">{html.escape(a)}</text>'
        )
    return "\n".join([*parts, "</svg>"])


def to_html(table: Table) -> str:
    header, body = rows(table)
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in body)
    rej = "".join(f"<li>{html.escape(r)}</li>" for r in rejections(table))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>jg-mcp campaign table</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:3px 8px;text-align:right}td:first-child,td:nth-child(2){text-align:left}</style></head><body>"
        f"<h1>Campaign results</h1>{svg_chart(table)}<table><tr>{th}</tr>{trs}</table>"
        f"<p>{html.escape(NOTE)}</p>"
        + (f"<h2>Runs that count for nothing</h2><ul>{rej}</ul>" if rej else "")
        + "</body></html>\n"
    )
