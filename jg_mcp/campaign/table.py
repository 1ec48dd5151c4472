"""The paper's table from a runs directory: per goal and condition, agents side by side, and every run labelled.

Each run gets a label with its evidence: accepted, rejected (the eval's reasons), reward hack (a person's mark,
jg_mcp.campaign.marks), budget spent, or failed (failed to start, condition violated, no solution, eval error), with
links to its transcript, audit page and eval report. For each (agent, goal, condition, setup): runs, accepted, and
over the accepted unmarked runs (the seeds) their count, median and spread (min-max) of the verified speedup against
the strongest baseline, and the median % of speed-of-light; per agent and condition the geometric mean across goals
of the medians, with how many of the condition's goals it is taken over. A run marked as a hack keeps its row,
struck, and counts for nothing.

A run's setup is everything it was run under besides its seed (its identity less the seed, and the eval's
arguments). Only runs of one setup are seeds of one cell: an agent that ran a goal and condition under several
setups (another model, budget, agent version, goal version, eval arguments...) gets a cell per setup, named by what
differs, and such a goal is left out of the agent's geomean, since no one median stands for it. What is not a result
is listed apart and counted nowhere: a run whose record says it is none (its status is not `finished`: it failed to
start, say), a run superseded by a later run of the same setup and seed, and a second run.json with a run id
already read (a copied run directory).

Bounded work: records are read once each (run.json up to MAX_RECORD_BYTES, a larger one is listed as unreadable),
grouped by dictionaries, and every rendering is one pass over runs and cells, so time is linear in the input.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from jg_mcp.campaign.marks import Mark, read_mark
from jg_mcp.campaign.run_record import FAILED_TO_START, NO_VERDICT, RUN_FILE, RunRecord, ShapeSummary, read_model
from jg_mcp.campaign.table_render import markdown as markdown
from jg_mcp.campaign.table_render import to_csv as to_csv
from jg_mcp.campaign.table_render import to_html as to_html
from jg_mcp.models import Strict
from jg_mcp.record.conditions import NAMES

MAX_RECORD_BYTES = 4 * 1024 * 1024
"""A run.json larger than this is not read: it is listed as unreadable."""
MAX_WHY_CHARS = 300
"""A label's reason is cut to this many characters."""
SHOWN_DIGEST_CHARS = 12
"""A hash in a setup's words (the goal's sha256) is told apart by this many leading hex digits."""
LABELS = ("accepted", "rejected", "reward hack", "budget spent", "failed")


class RunRow(Strict):
    """One run, labelled with its evidence."""

    run_id: str
    agent: str
    goal: str
    condition: str
    seed: int
    setup: str
    """Digest of everything the run was run under besides its seed (`setup`): runs share a cell only when it is
    the same."""
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
    differs: str = ""
    """What sets this run's setup apart from the other setups of its agent, goal and condition, in words; empty when
    they ran under one."""
    not_counted: str = ""
    """Why the run is no result and counts in no cell (its status is not `finished`, a later run superseded it);
    empty when it counts."""


class Cell(Strict):
    """The runs of one agent, goal and condition under one setup: the seeds of one measurement."""

    agent: str
    goal: str
    condition: str
    setup: str
    """The runs' setup digest (RunRow.setup)."""
    differs: str = ""
    """What sets this cell's setup apart from the other cells of its agent, goal and condition, in words; empty
    when there is no other."""
    runs: int
    """Runs counted: those that are no result (RunRow.not_counted) are not."""
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
    """The table of a set of runs: its cells, every run labelled, the geomeans, and what was not read."""

    agents: list[str]
    goals: list[str]
    conditions: list[str]
    cells: list[Cell]
    rows: list[RunRow]
    """Every run read, those not counted included (with why)."""
    geomean: dict[str, dict[str, float | None]]
    """agent -> condition -> geometric mean across goals of the median speedups (None when none)."""
    geomean_goals: dict[str, dict[str, tuple[int, int]]]
    """agent -> condition -> (goals the geomean is taken over, goals run under the condition)."""
    unreadable: list[str] = []
    """Run directories whose run.json or mark.json could not be read, or whose run id was already read, with why."""

    def cell(self, agent: str, goal: str, condition: str) -> Cell | None:
        """The cell of an agent, goal and condition run under one setup, None when not run. Cells of several setups
        are never merged, so asking for one of them is an error."""
        found = [c for c in self.cells if (c.agent, c.goal, c.condition) == (agent, goal, condition)]
        if len(found) > 1:
            raise LookupError(f"{agent} ran {goal} under {condition} in {len(found)} setups")
        return found[0] if found else None

    def lines(self) -> list[tuple[str, str, dict[str, Cell]]]:
        """The summary's lines as (goal, condition's words, agent -> cell): per goal and condition, a line of the
        agents that ran it under one setup, then a line per setup of each agent that ran it under several, its
        condition's words naming the agent and what differs."""
        where: dict[tuple[str, str], dict[str, list[Cell]]] = {}
        for c in self.cells:
            where.setdefault((c.goal, c.condition), {}).setdefault(c.agent, []).append(c)
        out = []
        for goal in self.goals:
            for condition in self.conditions:
                agents = where.get((goal, condition), {})
                shared = {a: cells[0] for a, cells in agents.items() if len(cells) == 1}
                if shared:
                    out.append((goal, condition, shared))
                for a in sorted(a for a, cells in agents.items() if len(cells) > 1):
                    out += [(goal, f"{condition} ({a} with {c.differs})", {a: c}) for c in agents[a]]
        return out


def agent_label(record: RunRecord) -> str:
    """The campaign's label for the agent, else the first part of the run id, else the adapter name."""
    if record.label:
        return record.label
    parts = record.run_id.split("__")
    return parts[0] if len(parts) >= 4 else record.agent


def _cut(text: str) -> str:
    return text if len(text) <= MAX_WHY_CHARS else text[: MAX_WHY_CHARS - 3] + "..."


def _words(value: object) -> str:
    if value is None:
        return "unset"
    return value if isinstance(value, str) else json.dumps(value)


def _flat(values: dict[str, object], prefix: str = "") -> dict[str, str]:
    """Nested values as `outer.inner` names to words, so two setups compare name by name."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{name}."))
        else:
            out[prefix + name] = _words(value)
    return out


def setup(record: RunRecord) -> dict[str, str]:
    """Everything the run was run under besides its seed, name -> words: its identity less the seed, and the eval's
    arguments (they choose the timed shapes, so the speedups). A record without an identity (an older version's)
    gives the same names from its own fields."""
    if record.identity is not None:
        defined = record.identity.model_dump(exclude={"seed"})
        if defined.get("eval_args") is None:
            # an identity of an older version leaves them out, though they choose the timed shapes
            defined["eval_args"] = record.spec.eval_args
    else:
        defined = {
            "agent": agent_label(record),
            "adapter": record.agent,
            "agent_cmd": record.spec.agent_cmd,
            "agent_version": record.agent_version,
            "model": record.spec.model,
            "condition": record.condition,
            "goal": record.goal,
            "goal_sha256": record.goal_sha256,
            "budget": record.budget.model_dump(),
            "jg_mcp_version": record.jg_mcp_version,
            "eval_args": record.spec.eval_args,
        }
    return _flat(defined)


def _digest(words: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(words, sort_keys=True).encode()).hexdigest()[:10]


def _differences(setups: list[dict[str, str]]) -> list[str]:
    """For each setup, its values of the names on which the setups differ, in words."""
    names = sorted({n for s in setups for n in s if len({t.get(n) for t in setups}) > 1})

    def shown(name: str, value: str | None) -> str:
        return value[:SHOWN_DIGEST_CHARS] if value and name.endswith("sha256") else (value or "unset")

    return [_cut(", ".join(f"{n}={shown(n, s.get(n))}" for n in names)) for s in setups]


def label(record: RunRecord, mark: Mark | None) -> tuple[str, str]:
    """(label, why) for a run."""
    if mark is not None and mark.hack:
        return "reward hack", f"marked by {mark.by} at {mark.at}: {mark.note}"
    if record.status == FAILED_TO_START:
        return "failed", f"failed to start: {record.exit_reason}"
    if record.status == NO_VERDICT:
        return "failed", f"no verdict: {', '.join(record.eval.reasons) or record.exit_reason}"
    if record.condition_violations:
        more = len(record.condition_violations) - 1
        return "failed", f"condition violated: {record.condition_violations[0]}" + (f" (+{more} more)" if more else "")
    if record.audit_ok is False:  # the kernel judged is not the session's, or the session does not hold up
        return "failed", "the audit failed (audit.json): the eval's verdict is not the recorded session's"
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
    """Every run directory's record and mark, one per run id, and what could not be read. A run id in several
    directories (a copied run) is read from the directory named for it, else the first by name; the others are
    listed as not read."""
    read, unreadable = [], []
    for run_json in sorted(runs_dir.glob(f"*/{RUN_FILE}")):
        record = _read_record(run_json)
        mark = read_mark(run_json.parent)
        if isinstance(record, str) or isinstance(mark, str):
            unreadable.append(record if isinstance(record, str) else str(mark))
            continue
        read.append((record, mark, run_json.parent))
    found: list[tuple[RunRecord, Mark | None, Path]] = []
    kept: dict[str, Path] = {}
    for record, mark, run_dir in sorted(read, key=lambda x: (x[0].run_id != x[2].name, x[2].name)):
        if record.run_id in kept:
            unreadable.append(
                f"{run_dir / RUN_FILE}: run id {record.run_id} already read from {kept[record.run_id]}, "
                "not counted twice"
            )
            continue
        kept[record.run_id] = run_dir
        found.append((record, mark, run_dir))
    return found, unreadable


def _links(record: RunRecord, run_dir: Path) -> dict[str, str]:
    wanted = {"transcript": record.transcript, "audit": "session.html", "eval": "eval.md"}
    return {k: f"{run_dir.name}/{v}" for k, v in wanted.items() if v and (run_dir / v).is_file()}


def row(record: RunRecord, mark: Mark | None, run_dir: Path | None = None) -> RunRow:
    name, why = label(record, mark)
    # a speedup stands only where the verdict does: not past a failed audit or a violated condition (a marked hack
    # keeps its speedup, shown struck)
    accepted = record.eval.status == "accepted" and name in ("accepted", "reward hack")
    return RunRow(
        run_id=record.run_id,
        agent=agent_label(record),
        goal=record.goal,
        condition=record.condition,
        seed=record.spec.seed,
        setup=_digest(setup(record)),
        label=name,
        why=_cut(why),
        speedup=record.eval.geomean_speedup if accepted else None,
        roofline_pct=record.eval.roofline_pct if accepted else None,
        shapes=record.eval.shapes if accepted else [],
        links=_links(record, run_dir) if run_dir else {},
        struck=name == "reward hack",
        not_counted="" if record.status == "finished" else f"{record.status}: not a result",
    )


def _supersede(rows: list[RunRow], started: dict[str, str]) -> None:
    """Marks all but the latest started of the counted runs that share agent, goal, condition, setup and seed as
    not counted: a seed run again (under another run id) is one seed."""
    latest: dict[tuple[str, str, str, str, int], RunRow] = {}
    for x in rows:
        if x.not_counted:
            continue
        key = (x.agent, x.goal, x.condition, x.setup, x.seed)
        newer = x
        if key in latest:
            older, newer = sorted((latest[key], x), key=lambda y: (started[y.run_id], y.run_id))
            older.not_counted = f"superseded by {newer.run_id}: the same setup and seed, started later"
        latest[key] = newer


def _cell(group: list[RunRow], differs: str) -> Cell:
    first = group[0]
    ok = [x for x in group if x.label == "accepted"]
    speedups = sorted(x.speedup for x in ok if x.speedup)
    roof = [x.roofline_pct for x in ok if x.roofline_pct is not None]
    return Cell(
        agent=first.agent,
        goal=first.goal,
        condition=first.condition,
        setup=first.setup,
        differs=differs,
        runs=len(group),
        accepted=len(ok),
        speedups=speedups,
        median_speedup=statistics.median(speedups) if speedups else None,
        median_roofline_pct=statistics.median(roof) if roof else None,
        labels=dict(Counter(x.label for x in group)),
    )


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def build(records: list[RunRecord], marks: dict[str, Mark] | None = None, dirs: dict[str, Path] | None = None) -> Table:
    """The table of `records`, one per run id (marks and run directories by run id, where known)."""
    marks, dirs = marks or {}, dirs or {}
    by_id = {r.run_id: r for r in records}
    rows = sorted(
        (row(r, marks.get(r.run_id), dirs.get(r.run_id)) for r in records),
        key=lambda x: (x.goal, x.condition, x.agent, x.seed, x.run_id),
    )
    _supersede(rows, {r.run_id: r.started_at for r in records})
    setups: dict[tuple[str, str, str], dict[str, list[RunRow]]] = defaultdict(dict)
    for x in rows:
        if not x.not_counted:
            setups[(x.agent, x.goal, x.condition)].setdefault(x.setup, []).append(x)
    cells = []
    for _, by_setup in sorted(setups.items()):
        # the setup run first comes first, so a rerun under a changed setup reads as the later line
        groups = sorted(by_setup.values(), key=lambda g: min(by_id[x.run_id].started_at for x in g))
        words = _differences([setup(by_id[g[0].run_id]) for g in groups]) if len(groups) > 1 else [""]
        for group, differs in zip(groups, words, strict=True):
            for x in group:
                x.differs = differs
            cells.append(_cell(group, differs))
    agents = sorted({c.agent for c in cells})
    goals = sorted({c.goal for c in cells})
    conditions = sorted({c.condition for c in cells}, key=lambda c: (NAMES.index(c) if c in NAMES else len(NAMES), c))
    # a goal run under several setups has no one median: it stays out of the geomean, and the goal count says so
    medians: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cells:
        if c.median_speedup and not c.differs:
            medians[(c.agent, c.condition)].append(c.median_speedup)
    goals_run = Counter(condition for _, condition in {(c.goal, c.condition) for c in cells})
    geomean = {a: {c: _geomean(medians[(a, c)]) for c in conditions} for a in agents}
    geomean_goals = {a: {c: (len(medians[(a, c)]), goals_run[c]) for c in conditions} for a in agents}
    return Table(
        agents=agents,
        goals=goals,
        conditions=conditions,
        cells=cells,
        rows=rows,
        geomean=geomean,
        geomean_goals=geomean_goals,
    )


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
