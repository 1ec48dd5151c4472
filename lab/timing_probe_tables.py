"""The tables lab/timing_probe.py prints: each variant's time per shape and callable, its spread over processes,
and each baseline/candidate ratio beside the eval's (plain arithmetic on the probe's JSON)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are there (None for a variant that raised); None without any."""
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def spread(values: Iterable[float | None]) -> float | None:
    """(max - min) / median in % of the values that are there; None below two."""
    kept = [v for v in values if v is not None]
    return 100 * (max(kept) - min(kept)) / statistics.median(kept) if len(kept) > 1 else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None without either."""
    return a / b if a is not None and b else None


def cell(value: float | list[float | None] | None, digits: int = 4) -> str:
    """One measurement, or the median of repeated ones with their range; `-` for none."""
    if isinstance(value, list):
        kept = [v for v in value if v is not None]
        return f"{statistics.median(kept):.4f} [{min(kept):.4f}-{max(kept):.4f}]" if kept else "-"
    return "-" if value is None else f"{value:.{digits}f}"


def names(proc: dict) -> list[str]:
    """The variants a process measured, in their order."""
    return list(dict.fromkeys(v for rows in proc["shapes"].values() for r in rows.values() for v in r))


def table(evals: dict, proc: dict) -> str:
    """Per shape and callable: the eval's times, then each variant (median [range] over its repeats)."""
    variants = names(proc)
    lines = [
        "| shape | callable | eval | seen | ipc db1 | " + " | ".join(variants) + " |",
        "| --- " * (5 + len(variants)) + "|",
    ]
    for key, rows in proc["shapes"].items():
        goal, shape = key.split(":")
        ev = evals.get(goal, {}).get("shapes", {}).get(shape, {})
        for name, r in rows.items():
            e = ev.get(name, {})
            cells = [e.get("eval"), e.get("seen"), e.get("ipc_db1"), *(r.get(v) for v in variants)]
            lines.append(f"| {key} | {name} | " + " | ".join(map(cell, cells)) + " |")
    return "\n".join(lines)


def quantities(rows: dict) -> dict[str, dict[str, float | None]]:
    """One process's rows at one shape as label -> variant -> median over the repeats: each callable's time, then
    each baseline's time over the candidate's (label `NAME/candidate`)."""
    times = {name: {v: median(r) for v, r in vs.items()} for name, vs in rows.items()}
    ratios = {
        f"{name}/candidate": {v: ratio(t, times["candidate"][v]) for v, t in vs.items()}
        for name, vs in times.items()
        if name != "candidate"
    }
    return times | ratios


def spreads(procs: list[dict]) -> str:
    """Per shape and variant, the spread over the processes in % ((max - min) / median of their medians) of each
    callable's time and of each baseline/candidate ratio: which variant repeats between processes."""
    variants = names(procs[0])
    lines = ["| shape | spread % over processes | " + " | ".join(variants) + " |", "| --- " * (2 + len(variants)) + "|"]
    for key in procs[0]["shapes"]:
        per = [quantities(p["shapes"][key]) for p in procs]
        for label in per[0]:
            cells = [cell(spread(q[label][v] for q in per), 1) for v in variants]
            lines.append(f"| {key} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def agreement(evals: dict, procs: list[dict]) -> str:
    """Per shape and baseline, the ratio baseline/candidate of the eval's medians, then each variant's (the median
    over the processes): which variant agrees with the eval."""
    variants = names(procs[0])
    lines = ["| shape | ratio | eval | " + " | ".join(variants) + " |", "| --- " * (3 + len(variants)) + "|"]
    for key in procs[0]["shapes"]:
        goal, shape = key.split(":")
        ev = evals.get(goal, {}).get("shapes", {}).get(shape, {})
        per = [quantities(p["shapes"][key]) for p in procs]
        for label in (q for q in per[0] if q.endswith("/candidate")):
            e = ratio(ev.get(label.split("/")[0], {}).get("eval"), ev.get("candidate", {}).get("eval"))
            cells = [e, *(median(q[label][v] for q in per) for v in variants)]
            lines.append(f"| {key} | {label} | " + " | ".join(map(cell, cells)) + " |")
    return "\n".join(lines)
