"""How far the eval's speedup and do_bench's ratio each move between fresh processes, shape by shape: the spread
(largest minus smallest, over their mean) over several evals of the same solutions and over several do_bench
processes, and how the mean of the evals agrees with the mean of the do_bench ratios; and whether the pad (decided
in each process from its host times) goes with how far two evals' speedups part; and whether the candidate's and
the baseline's times move together between processes or apart. Reads the committed runs of
eval/h200_check.py, one file each (eval/results/h200/runs/RUN.json; eval/h200_runs.py), as RUN:PART:

    python eval/h200_spread.py --evals run6_3f27645:evals run6_3f27645:repeat run7_1e75cb5:repeat \\
        --dobench run6_3f27645:dobench run7_1e75cb5:dobench run7_1e75cb5:dobench_repeat
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from h200_runs import RESULTS, pick  # noqa: E402
from h200_tables import speedups  # noqa: E402

from jg_mcp.eval import EvalReport  # noqa: E402


def spread(values: list[float]) -> float:
    return 100 * (max(values) - min(values)) / statistics.fmean(values)


def rows(evals: list[dict], dobenches: list[dict]) -> list[dict]:
    """Per goal and timed shape present in every eval and do_bench run: both spreads (medians and interquartile
    means) and the agreement of the two means."""
    out = []
    for goal in evals[0]:
        reports = [EvalReport.model_validate(e[goal]) for e in evals if goal in e]
        if len(reports) < len(evals) or not all(goal in d for d in dobenches):
            continue
        by_median = [speedups(r) for r in reports]
        by_iqm = [speedups(r, "iqm_ms") for r in reports]
        for shape in by_median[0]:
            db = [d[goal].get(shape, {}) for d in dobenches]
            if not all("do_bench_ratio" in x for x in db) or not all(shape in s for s in by_median):
                continue
            ev = [s[shape] for s in by_median]
            ratios = [x["do_bench_ratio"] for x in db]
            row = {"goal": goal, "shape": shape, "eval": spread(ev), "do_bench": spread(ratios)}
            row["agreement_of_means"] = 100 * (statistics.fmean(ev) / statistics.fmean(ratios) - 1)
            if all(shape in s for s in by_iqm) and all("do_bench_ratio_iqm" in x for x in db):
                row["eval_iqm"] = spread([s[shape] for s in by_iqm])
                row["do_bench_iqm"] = spread([x["do_bench_ratio_iqm"] for x in db])
            out.append(row)
    return out


def markdown(table: list[dict], n_evals: int, n_dobench: int) -> str:
    def cell(row: dict, key: str, sign: str = "") -> str:
        return "-" if key not in row else f"{row[key]:{sign}.1f}"

    lines = [
        f"| goal | shape | eval spread % ({n_evals} processes) | do_bench spread % ({n_dobench} processes) "
        "| eval spread % IQM | do_bench spread % IQM | mean eval / mean do_bench % |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table:
        lines.append(
            f"| {r['goal']} | {r['shape']} | {cell(r, 'eval')} | {cell(r, 'do_bench')} | {cell(r, 'eval_iqm')} "
            f"| {cell(r, 'do_bench_iqm')} | {cell(r, 'agreement_of_means', '+')} |"
        )
    lines.append("")
    for key, label in (
        ("eval", "eval"),
        ("do_bench", "do_bench"),
        ("eval_iqm", "eval IQM"),
        ("do_bench_iqm", "do_bench IQM"),
    ):
        values = [r[key] for r in table if key in r]
        if values:
            lines.append(
                f"- {label}: spread within 2% at {sum(v <= 2 for v in values)}/{len(values)} shapes, within 3% at "
                f"{sum(v <= 3 for v in values)}, median spread {statistics.median(values):.2f}%"
            )
    agree = [r["agreement_of_means"] for r in table]
    lines.append(
        f"- mean of the evals within 3% of the mean of do_bench: {sum(abs(a) <= 3 for a in agree)}/{len(agree)}"
    )
    return "\n".join(lines) + "\n"


def pad_pairs(evals: list[dict]) -> list[dict]:
    """Every pair of evals of the same solution, per timed shape in both: how far the second's speedup is from the
    first's, beside each one's pad and launch-bound call (does the pad, decided from host times in each process,
    explain the process-to-process spread?)."""
    out = []
    for i, first in enumerate(evals):
        for second in evals[i + 1 :]:
            for goal in first.keys() & second.keys():
                a, b = EvalReport.model_validate(first[goal]), EvalReport.model_validate(second[goal])
                sa, sb = speedups(a), speedups(b)
                for shape in sa.keys() & sb.keys():
                    xa = next(x for x in a.shapes if x.name == shape)
                    xb = next(x for x in b.shapes if x.name == shape)
                    out.append(
                        {
                            "goal": goal,
                            "shape": shape,
                            "repeat_pct": 100 * (sb[shape] / sa[shape] - 1),
                            "pads": (xa.pad_ms, xb.pad_ms),
                            "launch_bound": (xa.launch_bound, xb.launch_bound),
                        }
                    )
    return out


def pad_summary(pairs: list[dict]) -> list[str]:
    """The repeat's size where both evals padded, where neither did and where one did (the call flipped), and
    among the padded pairs the correlation of the pads' difference with the repeat's size."""
    groups = {
        "both padded": [p for p in pairs if all(p["launch_bound"])],
        "neither padded": [p for p in pairs if not any(p["launch_bound"])],
        "one padded": [p for p in pairs if p["launch_bound"][0] != p["launch_bound"][1]],
    }
    lines = []
    for label, group in groups.items():
        sizes = [abs(p["repeat_pct"]) for p in group]
        if sizes:
            lines.append(
                f"- {label}: {len(sizes)} pairs, median |repeat| {statistics.median(sizes):.2f}%, "
                f"max {max(sizes):.2f}%, over 2% at {sum(v > 2 for v in sizes)}"
            )
    padded = groups["both padded"]
    if len(padded) > 2:
        diffs = [abs(p["pads"][0] - p["pads"][1]) for p in padded]
        sizes = [abs(p["repeat_pct"]) for p in padded]
        if statistics.pstdev(diffs) > 0 and statistics.pstdev(sizes) > 0:
            r = statistics.correlation(diffs, sizes)
            lines.append(f"- both padded: correlation of |pad difference| with |repeat| {r:+.2f}")
    return lines


def callable_spreads(evals: list[dict], dobenches: list[dict]) -> list[dict]:
    """Per goal and timed shape in every run: the spread over the processes of the candidate's time, of the
    strongest baseline's and of their ratio, for the eval (candidate and baseline each in a process of its own)
    and for do_bench (both in one process). A ratio that spreads less than its two times moved together (the
    process moved both alike); one that spreads as much as both together, they moved apart."""
    out = []
    for goal in evals[0]:
        if not all(goal in e for e in evals) or not all(goal in d for d in dobenches):
            continue
        reports = [EvalReport.model_validate(e[goal]) for e in evals]
        for shape, base in reports[0].strongest_baseline.items():
            timings = [next((x for x in r.shapes if x.name == shape), None) for r in reports]
            runs = [d[goal].get(shape, {}).get("do_bench_runs_ms", {}) for d in dobenches]
            if any(t is None or t.candidate is None or base not in t.baselines for t in timings):
                continue
            if not all("candidate" in r and base in r for r in runs):
                continue
            cand = [t.candidate.median_ms for t in timings]  # type: ignore[union-attr]
            ref = [t.baselines[base].median_ms for t in timings]  # type: ignore[union-attr]
            db_cand = [statistics.fmean(r["candidate"]) for r in runs]
            db_ref = [statistics.fmean(r[base]) for r in runs]
            out.append(
                {
                    "goal": goal,
                    "shape": shape,
                    "baseline": base,
                    "eval": (spread(cand), spread(ref), spread([b / a for a, b in zip(cand, ref, strict=True)])),
                    "do_bench": (
                        spread(db_cand),
                        spread(db_ref),
                        spread([b / a for a, b in zip(db_cand, db_ref, strict=True)]),
                    ),
                }
            )
    return out


def callable_markdown(table: list[dict]) -> str:
    lines = [
        "| goal | shape | baseline | eval: candidate % | baseline % | ratio % | do_bench: candidate % | baseline % "
        "| ratio % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table:
        cells = [f"{v:.1f}" for v in (*r["eval"], *r["do_bench"])]
        lines.append(f"| {r['goal']} | {r['shape']} | {r['baseline']} | " + " | ".join(cells) + " |")
    lines.append("")
    for method in ("eval", "do_bench"):
        moved = [r[method] for r in table if max(r[method][:2]) > 0]
        together = sum(ratio < max(cand, base) for cand, base, ratio in moved)
        lines.append(
            f"- {method}: the ratio spread less than the more moving of its two times at {together}/{len(moved)} "
            "shapes (the two moved together)"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=RESULTS, help="the results folder (default: %(default)s)")
    parser.add_argument("--evals", nargs="+", required=True, metavar="RUN:PART")
    parser.add_argument("--dobench", nargs="+", required=True, metavar="RUN:PART")
    args = parser.parse_args()
    evals = [pick(r, args.root) for r in args.evals]
    dobenches = [pick(r, args.root) for r in args.dobench]
    print(markdown(rows(evals, dobenches), len(evals), len(dobenches)), end="")
    print("\nPads and the repeat (every pair of the evals):\n" + "\n".join(pad_summary(pad_pairs(evals))))
    print(
        "\nSpread over the processes of each time and of the ratio:\n\n"
        + callable_markdown(callable_spreads(evals, dobenches)),
        end="",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
