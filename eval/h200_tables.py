"""The tables of eval/h200_check.py: the speedups it compares, the repeat's agreement, and check.md."""

from __future__ import annotations

import statistics

from jg_mcp.eval import EvalReport


def speedups(report: EvalReport, stat: str = "median_ms") -> dict[str, float]:
    """Per timed shape, the strongest baseline's time over the solution's: the eval's own speedups (`median_ms`),
    or the same ratio of the two interquartile means (`iqm_ms`, reports of version 7 on; under the CUDA graphs at a
    shape timed so)."""
    out = {}
    for s in report.shapes:
        base = report.strongest_baseline.get(s.name)
        if s.kind != "timed" or base is None:
            continue
        cand, lib = s.candidate, s.baselines.get(base)
        if stat == "median_ms":
            out[s.name] = s.speedup[base]
        elif s.timed_by == "graph" and cand and cand.graph and lib and lib.graph:
            out[s.name] = lib.graph.iqm_ms / cand.graph.iqm_ms
        elif cand is not None and cand.iqm_ms and lib and lib.iqm_ms:
            out[s.name] = lib.iqm_ms / cand.iqm_ms
    return out


def repeat_agreement(results: dict, stat: str = "median_ms") -> dict[str, dict[str, float]]:
    """Per goal and timed shape, how far the repeat's speedup is from the first eval's, in percent."""
    rows = {}
    for goal, second in results["repeat"].items():
        first = results["evals"].get(goal)
        if first:
            a = speedups(EvalReport.model_validate(first), stat)
            b = speedups(EvalReport.model_validate(second), stat)
            rows[goal] = {shape: 100 * (b[shape] / a[shape] - 1) for shape in a if shape in b}
    return rows


def markdown(results: dict) -> str:
    walls = ", ".join(f"{k} {v:.0f} s" for k, v in results.get("part_wall_s", {}).items())
    lines = ["# eval check on the GPU", "", f"- wall {results['wall_s']:.0f} s ({walls})", *phase_totals(results)]
    lines += [
        "",
        "| goal | verdict | geomean | wall s | worst do_bench agreement % | worst repeat % |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    repeat = results.get("repeat_agreement", {})
    for goal, raw in results["evals"].items():
        report = EvalReport.model_validate(raw)
        db = results["dobench"].get(goal, {})
        worst_db = max((abs(r["agreement_pct"]) for r in db.values() if isinstance(r, dict)), default=None)
        worst_rep = max((abs(v) for v in repeat.get(goal, {}).values()), default=None)
        verdict = "accepted" if report.accepted else "REJECTED: " + ", ".join(report.reasons)
        lines.append(
            f"| {goal} | {verdict} | {report.geomean_speedup or 0:.3f} | {report.wall_s:.1f} | "
            f"{'-' if worst_db is None else f'{worst_db:.1f}'} | "
            f"{'-' if worst_rep is None else f'{worst_rep:.1f}'} |"
        )
    lines += ["", *targets_met(results)]
    lines += shape_table(results, repeat)
    lines += misses(results, repeat)
    lines += graph_table(results)
    if results["hacks"]:
        lines += ["", "| GPU hack | rejected for its reason | reasons |", "| --- | --- | --- |"]
        lines += [
            f"| {n} | {'yes' if h['ok'] else 'NO'} | {', '.join(h['reasons'])} |" for n, h in results["hacks"].items()
        ]
    if "demo" in results:
        lines += ["", f"- demo: exit {results['demo']['exit']} in {results['demo']['wall_s']:.0f} s"]
    if results.get("skipped"):
        lines += [f"- SKIPPED (past --deadline-s): {', '.join(results['skipped'])}"]
    if results.get("errors"):
        lines += [f"- ERRORS: {', '.join(results['errors'])}"]
    return "\n".join(lines) + "\n"


def phase_totals(results: dict) -> list[str]:
    """Which GPU ran the evals, and per part the evals' phases summed over the goals (the phases overlap: the
    baselines' preparation runs beside the candidate's start and correctness)."""
    lines = []
    for part in ("evals", "repeat"):
        reports = [EvalReport.model_validate(raw) for raw in results.get(part, {}).values()]
        if not reports:
            continue
        if not lines:
            env = reports[0].environment
            lines.append(
                f"- GPU: {env.gpu or 'none'} {env.gpu_uuid or ''}, driver {env.driver or '-'}".replace(" ,", ",")
            )
        totals: dict[str, float] = {}
        for report in reports:
            for name, seconds in report.phases.items():
                totals[name] = totals.get(name, 0.0) + seconds
        summed = ", ".join(f"{name} {seconds:.1f}" for name, seconds in totals.items())
        lines.append(f"- {part}, phases summed over {len(reports)} goals (s): {summed}")
    return lines


def dobench_repeat(results: dict, ratio_key: str = "do_bench_ratio") -> dict[str, dict[str, float]]:
    """Per goal and timed shape, how far do_bench's ratio in a second fresh process (part `dobench_repeat`) is from
    the first's, in percent (`ratio_key`: `do_bench_ratio`, of medians, or `do_bench_ratio_iqm`)."""
    rows = {}
    for goal, second in results.get("dobench_repeat", {}).items():
        first = results["dobench"].get(goal, {})
        rows[goal] = {
            shape: 100 * (row[ratio_key] / first[shape][ratio_key] - 1)
            for shape, row in second.items()
            if ratio_key in row and ratio_key in first.get(shape, {})
        }
    return rows


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def mhz_pair(mhz: dict[str, float] | None) -> str:
    return "-" if not mhz else ", ".join(f"{v:.0f}" for v in mhz.values())


def shape_table(results: dict, repeat: dict) -> list[str]:
    """Per timed shape: the eval's speedup, do_bench's ratio and its order's own effect, the repeat, do_bench's own
    repeat in a second process, the agreement and the repeat with every time read as an interquartile mean, the
    pad, the clocks (the shape's, then each callable's in the eval and in do_bench), and the agreement with times
    read in clock cycles."""
    lines = [
        "",
        "| goal | shape | timed by | eval speedup | do_bench ratio | agreement % | do_bench order % | repeat % "
        "| do_bench repeat % | agreement % IQM | repeat % IQM | pad ms | SM MHz | power-cap share | host waits "
        "| SM MHz eval: solution, baseline | SM MHz do_bench: solution, baseline | agreement % per clock cycle |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    repeat_iqm = results.get("repeat_agreement_iqm", {})
    db_repeat = dobench_repeat(results)
    for goal, raw in results["evals"].items():
        report = EvalReport.model_validate(raw)
        db = results["dobench"].get(goal, {})
        for shape, sp in speedups(report).items():
            s = next(x for x in report.shapes if x.name == shape)
            row = db.get(shape) if isinstance(db.get(shape), dict) else {}
            clocks = s.clocks
            cap = clocks.slowdowns.get("sw_power_cap") if clocks else None
            ratio = row.get("do_bench_ratio")
            waits = [n for n, t in {"candidate": s.candidate, **s.baselines}.items() if t and t.host_waits]
            cells = [
                goal,
                shape,
                s.timed_by,
                f"{sp:.3f}",
                "-" if ratio is None else f"{ratio:.3f}",
                pct(row.get("agreement_pct")),
                pct(row.get("do_bench_order_pct")),
                pct(repeat.get(goal, {}).get(shape)),
                pct(db_repeat.get(goal, {}).get(shape)),
                pct(row.get("agreement_iqm_pct")),
                pct(repeat_iqm.get(goal, {}).get(shape)),
                f"{s.pad_ms:.3f}",
                "-" if not clocks else f"{clocks.sm_mhz_median:.0f}",
                "-" if cap is None else f"{cap:.0%}",
                ", ".join(waits) or "-",
                mhz_pair(row.get("eval_mhz")),
                mhz_pair(row.get("do_bench_mhz")),
                pct(row.get("agreement_cycles_pct")),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


POWER_CAPPED = 0.5
"""A shape whose power cap was active in at least this share of the eval's clock samples counts as power-capped."""


MOVED_PCT = 2.0
"""A callable whose time per call in the processes that measured it (the eval, the repeat, do_bench) spans more
than this many % moved between processes."""


def per_call_ms(report: EvalReport | None, shape: str, name: str) -> float | None:
    """One callable's time per call at a shape of a report, as its speedup used it (under the graph where the shape
    was timed so); None where the report did not time it."""
    s = next((x for x in report.shapes if x.name == shape), None) if report else None
    timing = None if s is None else s.candidate if name == "candidate" else s.baselines.get(name)
    if s is None or timing is None:
        return None
    return timing.graph.median_ms if s.timed_by == "graph" and timing.graph else timing.median_ms


def moved(first: EvalReport, repeat: EvalReport | None, shape: str, base: str, row: dict) -> str | None:
    """The solution's and the strongest baseline's (`base`) times per call in each process that measured them (the
    eval, the repeat, do_bench), when either spans more than MOVED_PCT: a callable whose time is chosen per process
    (fused_add_rmsnorm's compiled baseline at deepseek_v3, docs/decisions/2026-12-04-per-process-baseline-levels.md)
    shows as one that moved while the other held."""
    cells, spans = [], []
    for name in ("candidate", base):
        times = [
            per_call_ms(first, shape, name),
            per_call_ms(repeat, shape, name),
            row.get("do_bench_ms", {}).get(name),
        ]
        known = [t for t in times if t]
        spans.append(100 * (max(known) / min(known) - 1) if len(known) > 1 else 0.0)
        shown = ", ".join("-" if t is None else f"{t * 1e3:.2f}" for t in times)
        cells.append(f"{'solution' if name == 'candidate' else base} {shown} ({spans[-1]:.1f}% apart)")
    if max(spans) <= MOVED_PCT:
        return None
    return f"times per process (eval, repeat, do_bench; us): {'; '.join(cells)}"


def misses(results: dict, repeat: dict) -> list[str]:
    """One line per timed shape that missed a target (do_bench agreement beyond 3%, the repeat beyond 2%), with
    what was measured there of the causes seen on the H200: the power cap, a pad (some callable launch-bound), the
    solution or the strongest baseline waiting on the GPU from the host, do_bench's own two orders apart, a callable
    whose time moved between the processes that measured it. A miss with none of them says so."""
    lines = []
    for goal, raw in results["evals"].items():
        report = EvalReport.model_validate(raw)
        second = results.get("repeat", {}).get(goal)
        repeated = EvalReport.model_validate(second) if second else None
        db = results["dobench"].get(goal, {})
        for shape in speedups(report):
            row = db.get(shape) if isinstance(db.get(shape), dict) else {}
            agree, rep, order = row.get("agreement_pct"), repeat.get(goal, {}).get(shape), row.get("do_bench_order_pct")
            missed = [f"do_bench {agree:+.1f}%"] if agree is not None and abs(agree) > 3 else []
            missed += [f"repeat {rep:+.1f}%"] if rep is not None and abs(rep) > 2 else []
            if not missed:
                continue
            s = next(x for x in report.shapes if x.name == shape)
            cap = s.clocks.slowdowns.get("sw_power_cap") if s.clocks else None
            base = report.strongest_baseline[shape]
            compared = {"candidate": s.candidate, base: s.baselines.get(base)}  # what the speedup divides
            waits = [n for n, t in compared.items() if t and t.host_waits]
            causes = []
            if cap is not None and cap >= POWER_CAPPED:
                causes.append(
                    f"power-capped {cap:.0%} (SM MHz, solution and baseline: eval {mhz_pair(row.get('eval_mhz'))}, "
                    f"do_bench {mhz_pair(row.get('do_bench_mhz'))})"
                )
            if s.pad_ms > 0:
                causes.append(f"padded {s.pad_ms:.3f} ms (launch-bound)")
            if waits:
                causes.append(f"host waits: {', '.join(waits)}")
            if order is not None and abs(order) > 3:
                causes.append(f"do_bench's own two orders {order:+.1f}% apart")
            if between := moved(report, repeated, shape, base, row):
                causes.append(between)
            lines.append(f"- {goal} {shape}: {', '.join(missed)}; {'; '.join(causes) or 'none of the known causes'}")
    return ["", "Misses, and what was measured at each:", *lines] if lines else []


def targets_met(results: dict) -> list[str]:
    """How many timed shapes agree with do_bench within 3% and repeat within 2%, with times read as medians (the
    eval's speedups) and as interquartile means; and, where do_bench ran in a second process, how many of its own
    ratios repeated within 2%."""
    lines = []
    for label, agree_key, repeat_key in (
        ("medians", "agreement_pct", "repeat_agreement"),
        ("interquartile means", "agreement_iqm_pct", "repeat_agreement_iqm"),
    ):
        agree = [r.get(agree_key) for rows in results["dobench"].values() for r in rows.values() if isinstance(r, dict)]
        rep = [v for rows in results.get(repeat_key, {}).values() for v in rows.values()]
        both = [
            (row.get(agree_key), results.get(repeat_key, {}).get(goal, {}).get(shape))
            for goal, rows in results["dobench"].items()
            for shape, row in rows.items()
            if isinstance(row, dict)
        ]
        lines.append(
            f"- {label}: {sum(a is not None and abs(a) <= 3 for a in agree)}/{len(agree)} within 3% of do_bench, "
            f"{sum(abs(v) <= 2 for v in rep)}/{len(rep)} repeat within 2%, "
            f"{sum(a is not None and r is not None and abs(a) <= 3 and abs(r) <= 2 for a, r in both)}/{len(both)} both"
        )
    per_cycle = [
        (r["agreement_pct"], r["agreement_cycles_pct"])
        for rows in results["dobench"].values()
        for r in rows.values()
        if isinstance(r, dict) and "agreement_cycles_pct" in r
    ]
    if per_cycle:
        missed = [c for a, c in per_cycle if abs(a) > 3]
        lines.append(
            f"- per clock cycle (each callable's time times its own median SM clock): "
            f"{sum(abs(c) <= 3 for _, c in per_cycle)}/{len(per_cycle)} within 3% of do_bench; of the "
            f"{len(missed)} shapes that missed 3% in milliseconds, {sum(abs(c) <= 3 for c in missed)} agree per cycle"
        )
    for label, ratio_key in (("medians", "do_bench_ratio"), ("interquartile means", "do_bench_ratio_iqm")):
        moved = [v for rows in dobench_repeat(results, ratio_key).values() for v in rows.values()]
        if moved:
            lines.append(
                f"- do_bench itself, {label}, second fresh process against the first: "
                f"{sum(abs(v) <= 2 for v in moved)}/{len(moved)} within 2%"
            )
    return lines


GRAPH_SERIES = {
    "do_bench_runs_ms": "independent graph",
    "graph_burst_runs_ms": "in the eval's pattern",
    "graph_burst_evallead_runs_ms": "with the eval's lead",
    "graph_renewed_runs_ms": "one replay after renewal and clear",
    "graph_cleared_runs_ms": "one replay after a clear",
    "graph_rewritten_runs_ms": "one replay after renewal",
    "graph_elsewhere_runs_ms": "one replay after another process's clear",
    "graph_evalcode_runs_ms": "the eval's code, this process",
    "graph_workerproc_runs_ms": "the eval's code, a worker process",
}
"""The series an independent measurement may hold at a graph-timed shape (eval/h200_dobench.py), by row key."""


def graph_table(results: dict) -> list[str]:
    """At each shape the eval timed under CUDA graphs, per part of the independent measurement and callable: the
    eval's graph time and each series' median (us per call), and each series over the eval's (%)."""
    reports = {goal: EvalReport.model_validate(raw) for goal, raw in results.get("evals", {}).items()}
    lines = []
    for part, goals in results.items():
        if part.startswith("dobench") and isinstance(goals, dict):
            for goal, shapes in goals.items():
                for shape_name, row in shapes.items():
                    if goal in reports and isinstance(row, dict) and row.get("measured_by") == "graph":
                        lines += graph_rows(f"| {part} | {goal} | {shape_name} |", reports[goal], shape_name, row)
    if not lines:
        return []
    head = " | ".join(f"{label} us" for label in GRAPH_SERIES.values())
    return [
        "",
        "At the shapes the eval timed under CUDA graphs, each callable's time per call (us) in the eval and in each way"
        " the independent measurement timed it (over the eval's, %):",
        "",
        f"| part | goal | shape | callable | eval graph us | {head} |",
        "| --- | --- | --- | --- | --- |" + " --- |" * len(GRAPH_SERIES),
        *lines,
    ]


def graph_rows(lead: str, report: EvalReport, shape_name: str, row: dict) -> list[str]:
    """One shape's rows of `graph_table`, each callable's after `lead` (its part, goal and shape cells)."""
    shape = next(s for s in report.shapes if s.name == shape_name)
    timed = {"candidate": shape.candidate, **shape.baselines}
    lines = []
    for name in row["do_bench_runs_ms"]:
        graph = timed[name].graph if timed.get(name) is not None else None
        if graph is None:
            continue
        eval_us = 1e3 * graph.median_ms
        cells = []
        for key in GRAPH_SERIES:
            values = [v for v in row.get(key, {}).get(name, []) if v is not None]
            us = 1e3 * statistics.median(values) if values else None
            cells.append("-" if us is None else f"{us:.3f} ({100 * (us / eval_us - 1):+.1f}%)")
        lines.append(f"{lead} {name} | {eval_us:.3f} | {' | '.join(cells)} |")
    return lines
