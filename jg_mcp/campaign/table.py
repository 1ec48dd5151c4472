"""The paper's table from a runs directory: per goal and condition, agents side by side, and every run labelled.

Each run gets a label with its evidence: accepted, rejected (the eval's reasons), reward hack (a person's mark,
jg_mcp.campaign.marks), budget spent, or failed (failed to start, condition violated, no solution, eval error), with
links to its transcript, audit page and eval report. For each (agent, goal, condition): runs, accepted, and over
the accepted unmarked runs (the seeds) their count, median and spread (min-max) of the verified speedup against
the strongest baseline, and the median % of speed-of-light; per agent and condition the geometric mean across
goals of the medians. A run marked as a hack keeps its row, struck, and counts for nothing.

Bounded work: records are read once each (run.json up to MAX_RECORD_BYTES, a larger one is listed as unreadable),
grouped by a dictionary, and every rendering is one pass over runs and cells, so time is linear in the input.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from jg_mcp.campaign.marks import Mark, read_mark
from jg_mcp.campaign.run_record import FAILED_TO_START, RUN_FILE, RunRecord, ShapeSummary, read_model
from jg_mcp.campaign.table_render import html_page, md_escape
from jg_mcp.models import Strict
from jg_mcp.record.conditions import NAMES
from jg_mcp.terminal import printable

MAX_RECORD_BYTES = 4 * 1024 * 1024
"""A run.json larger than this is not read: it is listed as unreadable."""
MAX_WHY_CHARS = 300
"""A label's reason is cut to this many characters."""
LABELS = ("accepted", "rejected", "reward hack", "budget spent", "failed")


class RunRow(Strict):
    """One run, labelled with its evidence."""

    run_id: str
    agent: str
    goal: str
    condition: str
    seed: int
    label: str
    """One of LABELS."""
    why: str = ""
    """The evidence in words: the eval's reasons, why it failed, the mark's note."""
    speedup: float | None = None
    """The eval's geometric-mean speedup against the strongest baseline (accepted runs only)."""
    roofline_pct: float | None = None
    """Median % of speed-of-light over timed shapes (accepted runs only)."""
    shapes: list[ShapeSummary] = []
    """Per timed shape: speedup and % of speed-of-light (accepted runs only)."""
    links: dict[str, str] = {}
    """transcript, audit, eval: paths relative to the runs directory, for the files that exist."""
    struck: bool = False
    """Marked as a reward hack: shown, never ranked."""


class Cell(Strict):
    """One (agent, goal, condition) group of runs."""

    agent: str
    goal: str
    condition: str
    runs: int
    """Runs recorded."""
    accepted: int
    """Runs whose solution the eval accepted and nobody marked as a hack."""
    speedups: list[float] = []
    """The accepted runs' speedups, sorted (one per seed that had one)."""
    median_speedup: float | None = None
    """Median of `speedups`."""
    median_roofline_pct: float | None = None
    """Median % of speed-of-light among accepted runs with one."""
    labels: dict[str, int] = {}
    """label -> runs."""

    def spread(self) -> tuple[float, float] | None:
        return (self.speedups[0], self.speedups[-1]) if self.speedups else None


class Table(Strict):
    agents: list[str]
    goals: list[str]
    conditions: list[str]
    cells: list[Cell]
    rows: list[RunRow]
    geomean: dict[str, dict[str, float | None]]
    """agent -> condition -> geometric mean across goals of the median speedups (None when none)."""
    unreadable: list[str] = []
    """Run directories whose run.json or mark.json could not be read, with why."""

    def cell(self, agent: str, goal: str, condition: str) -> Cell | None:
        return self.index().get((agent, goal, condition))

    def index(self) -> dict[tuple[str, str, str], Cell]:
        return {(c.agent, c.goal, c.condition): c for c in self.cells}


def agent_label(record: RunRecord) -> str:
    """The campaign's label for the agent, else the first part of the run id, else the adapter name."""
    if record.label:
        return record.label
    parts = record.run_id.split("__")
    return parts[0] if len(parts) >= 4 else record.agent


def _cut(text: str) -> str:
    return text if len(text) <= MAX_WHY_CHARS else text[: MAX_WHY_CHARS - 3] + "..."


def label(record: RunRecord, mark: Mark | None) -> tuple[str, str]:
    """(label, why) for a run."""
    if mark is not None and mark.hack:
        return "reward hack", f"marked by {mark.by} at {mark.at}: {mark.note}"
    if record.status == FAILED_TO_START:
        return "failed", f"failed to start: {record.exit_reason}"
    if record.condition_violations:
        more = len(record.condition_violations) - 1
        return "failed", f"condition violated: {record.condition_violations[0]}" + (f" (+{more} more)" if more else "")
    if record.eval.status == "accepted":
        return "accepted", ""
    if record.eval.status == "rejected":
        return "rejected", ", ".join(record.eval.reasons)
    first = record.exit_reason.split(";")[0]
    if first.startswith("budget spent"):
        return "budget spent", f"{first}; {record.eval.status}"
    return "failed", f"{record.eval.status} ({first})" + (
        f": {', '.join(record.eval.reasons)}" if record.eval.status == "error" and record.eval.reasons else ""
    )


def _read_record(run_json: Path) -> RunRecord | str:
    record = read_model(run_json, RunRecord, MAX_RECORD_BYTES, "a run record")
    return f"{run_json}: no such file" if record is None else record


def load_runs(runs_dir: Path) -> tuple[list[tuple[RunRecord, Mark | None, Path]], list[str]]:
    """Every run directory's record and mark, and what could not be read."""
    found, unreadable = [], []
    for run_json in sorted(runs_dir.glob(f"*/{RUN_FILE}")):
        record = _read_record(run_json)
        mark = read_mark(run_json.parent)
        if isinstance(record, str) or isinstance(mark, str):
            unreadable.append(record if isinstance(record, str) else str(mark))
            continue
        found.append((record, mark, run_json.parent))
    return found, unreadable


def load_records(runs_dir: Path) -> list[RunRecord]:
    return [record for record, _, _ in load_runs(runs_dir)[0]]


def _links(record: RunRecord, run_dir: Path) -> dict[str, str]:
    wanted = {"transcript": record.transcript, "audit": "session.html", "eval": "eval.md"}
    return {k: f"{run_dir.name}/{v}" for k, v in wanted.items() if v and (run_dir / v).is_file()}


def row(record: RunRecord, mark: Mark | None, run_dir: Path | None = None) -> RunRow:
    name, why = label(record, mark)
    accepted = record.eval.status == "accepted"
    return RunRow(
        run_id=record.run_id,
        agent=agent_label(record),
        goal=record.goal,
        condition=record.condition,
        seed=record.spec.seed,
        label=name,
        why=_cut(why),
        speedup=record.eval.geomean_speedup if accepted else None,
        roofline_pct=record.eval.roofline_pct if accepted else None,
        shapes=record.eval.shapes if accepted else [],
        links=_links(record, run_dir) if run_dir else {},
        struck=name == "reward hack",
    )


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def build(records: list[RunRecord], marks: dict[str, Mark] | None = None, dirs: dict[str, Path] | None = None) -> Table:
    """The table of `records` (marks and run directories by run id, where known)."""
    marks, dirs = marks or {}, dirs or {}
    rows = sorted(
        (row(r, marks.get(r.run_id), dirs.get(r.run_id)) for r in records),
        key=lambda x: (x.goal, x.condition, x.agent, x.seed, x.run_id),
    )
    groups: dict[tuple[str, str, str], list[RunRow]] = defaultdict(list)
    for x in rows:
        groups[(x.agent, x.goal, x.condition)].append(x)
    agents = sorted({k[0] for k in groups})
    goals = sorted({k[1] for k in groups})
    conditions = sorted({k[2] for k in groups}, key=lambda c: (NAMES.index(c) if c in NAMES else len(NAMES), c))
    cells = []
    for (agent, goal, condition), group in sorted(groups.items()):
        ok = [x for x in group if x.label == "accepted"]
        speedups = sorted(x.speedup for x in ok if x.speedup)
        roof = [x.roofline_pct for x in ok if x.roofline_pct is not None]
        cells.append(
            Cell(
                agent=agent,
                goal=goal,
                condition=condition,
                runs=len(group),
                accepted=len(ok),
                speedups=speedups,
                median_speedup=statistics.median(speedups) if speedups else None,
                median_roofline_pct=statistics.median(roof) if roof else None,
                labels=dict(Counter(x.label for x in group)),
            )
        )
    medians: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cells:
        if c.median_speedup:
            medians[(c.agent, c.condition)].append(c.median_speedup)
    geomean = {a: {c: _geomean(medians.get((a, c), [])) for c in conditions} for a in agents}
    return Table(agents=agents, goals=goals, conditions=conditions, cells=cells, rows=rows, geomean=geomean)


def build_from(runs_dir: Path) -> Table:
    """The table of a runs directory, marks included."""
    found, unreadable = load_runs(runs_dir)
    table = build(
        [r for r, _, _ in found],
        {r.run_id: m for r, m, _ in found if m is not None},
        {r.run_id: d for r, _, d in found},
    )
    table.unreadable = unreadable
    return table


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


COLUMNS = ("accepted", "speedup median [min-max]", "% SOL")
NOTE = (
    "Speedup: verified, against the strongest baseline (geometric mean over timed shapes), over accepted runs not "
    "marked as hacks: median, [min-max] and n over seeds. % SOL: median % of speed-of-light (the shape's physical "
    "floor over the kernel's time). geomean: across goals, of the medians."
)


def rows(table: Table) -> tuple[list[str], list[list[str]]]:
    """The summary: a row per goal and condition, agents side by side, then the geomeans."""
    header = ["goal", "condition", *[f"{a}: {c}" for a in table.agents for c in COLUMNS]]
    index = table.index()
    body = []
    for goal in table.goals:
        for condition in table.conditions:
            cells = [index.get((a, goal, condition)) for a in table.agents]
            if any(cells):
                body.append([goal, condition, *[v for c in cells for v in _cell_values(c)]])
    for condition in table.conditions:
        body.append(
            ["geomean", condition, *[v for a in table.agents for v in ("", _x(table.geomean[a][condition]), "")]]
        )
    return header, body


def shapes_text(r: RunRow) -> str:
    """Each timed shape's speedup beside its % of speed-of-light."""
    return ", ".join(f"{s.name} {_x(s.speedup)} ({_x(s.roofline_pct, '% SOL')})" for s in r.shapes) or "-"


def markdown(table: Table, prefix: str = "") -> str:
    """The summary and every run with its label; links are `prefix` + the path under the runs directory."""
    header, body = rows(table)
    out = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(md_escape(v) for v in r) + " |" for r in body]
    out += ["", NOTE, "", "## Runs", "", "| run | label | evidence | speedup | per shape | links |", "|" + " --- |" * 6]
    for r in table.rows:
        name = f"~~{md_escape(r.run_id)}~~" if r.struck else md_escape(r.run_id)
        links = " ".join(f"[{k}]({prefix}{v})" for k, v in r.links.items()) or "-"
        out.append(
            f"| {name} | {r.label} | {md_escape(r.why) or '-'} | {_x(r.speedup)} | {md_escape(shapes_text(r))} | "
            f"{links} |"
        )
    if table.unreadable:
        out += ["", "## Not read", "", *[f"- {md_escape(u)}" for u in table.unreadable]]
    return "\n".join(printable(line) for line in out) + "\n"


def to_csv(table: Table) -> str:
    """One line per run: its label, evidence, speedup, % SOL and links."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["run_id", "agent", "goal", "condition", "seed", "label", "why", "speedup", "roofline_pct", "shapes"])
    for r in table.rows:
        w.writerow(
            [
                r.run_id,
                r.agent,
                r.goal,
                r.condition,
                r.seed,
                r.label,
                r.why,
                r.speedup if r.speedup is not None else "",
                r.roofline_pct if r.roofline_pct is not None else "",
                shapes_text(r),
            ]
        )
    return buf.getvalue()


def to_html(table: Table, prefix: str = "") -> str:
    header, body = rows(table)
    return html_page(table, header, body, NOTE, prefix, shapes_text)
