"""How far the eval's speedup and do_bench's ratio each move between fresh processes, shape by shape: the spread
(largest minus smallest, over their mean) over several evals of the same solutions and over several do_bench
processes, and how the mean of the evals agrees with the mean of the do_bench ratios. Reads runs of
eval/h200_check.py from a check.json whose "runs" hold them (eval/results/h200/check.json):

    python eval/h200_spread.py eval/results/h200/check.json \\
        --evals run6_3f27645:evals run6_3f27645:repeat run7_1e75cb5:repeat \\
        --dobench run6_3f27645:dobench run7_1e75cb5:dobench run7_1e75cb5:dobench_repeat
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

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


def pick(runs: dict, ref: str) -> dict:
    run, _, part = ref.partition(":")
    return runs[run][part]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("check_json", type=Path)
    parser.add_argument("--evals", nargs="+", required=True, metavar="RUN:PART")
    parser.add_argument("--dobench", nargs="+", required=True, metavar="RUN:PART")
    args = parser.parse_args()
    runs = json.loads(args.check_json.read_text())["runs"]
    evals = [pick(runs, r) for r in args.evals]
    dobenches = [pick(runs, r) for r in args.dobench]
    print(markdown(rows(evals, dobenches), len(evals), len(dobenches)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
