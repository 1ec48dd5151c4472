"""The committed results of eval/h200_check.py: one immutable JSON file per GPU run under
eval/results/h200/runs/ (`NAME.json`, written once, never rewritten) and a short index of them,
eval/results/h200/history.md (one table row per run, appended when the run's file is written).

A run's name is `runN_COMMIT[_what]`: the check's run number, the commit it checked and, for a partial run, what it
ran. eval/results/h200/check.md narrates the runs and names each as "check.json `NAME`", which is `runs/NAME.json`.

    python eval/h200_runs.py list                    # the index
    python eval/h200_runs.py tables run62_2794ed9    # that run's check.md tables, from its file
    python eval/h200_runs.py add OUT/check.json run63_abc1234   # commit a check's output as a new run
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "h200"
HEADER = (
    "# H200 check runs\n\n"
    "One row per run of `eval/h200_check.py`, its results in `runs/NAME.json` (written once; "
    "eval/h200_runs.py). What each run found: check.md.\n\n"
    "| run | parts | wall s | evals accepted | GPU hacks rejected | demo exit |\n"
    "| --- | --- | --- | --- | --- | --- |\n"
)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def runs_dir(root: Path = RESULTS) -> Path:
    return root / "runs"


def history_row(name: str, results: dict) -> str:
    """The index's row of one run: what it ran and its headline verdicts (a dash where the run did not run it)."""

    def count(part: str, ok: str) -> str:
        items = results.get(part) or {}
        good = sum(bool(v.get(ok)) for v in items.values() if isinstance(v, dict))
        return f"{good}/{len(items)}" if items else "-"

    wall = results.get("wall_s")
    demo = results.get("demo", {}).get("exit", "-")
    parts = ",".join(results.get("parts", [])) or "-"
    return f"| {name} | {parts} | {'-' if wall is None else f'{wall:.0f}'} | {count('evals', 'accepted')} | " + (
        f"{count('hacks', 'ok')} | {demo} |\n"
    )


def write_run(results: dict, name: str, root: Path = RESULTS) -> Path:
    """Commit one run: write `runs/NAME.json` (refused when it exists: a run's file is never rewritten), then append
    its row to history.md. This is what eval/h200_check.py calls once per run, with its `results`."""
    if not NAME.fullmatch(name):
        raise ValueError(f"run name {name!r}: letters, digits, '_', '-', '.' only")
    path = runs_dir(root) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x") as f:
        json.dump(results, f, separators=(",", ":"))
        f.write("\n")
    history = root / "history.md"
    if not history.exists():
        history.write_text(HEADER)
    with history.open("a") as f:
        f.write(history_row(name, results))
    return path


def read_run(name: str, root: Path = RESULTS) -> dict:
    path = runs_dir(root) / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in runs_dir(root).glob("*.json"))[-5:])
        raise SystemExit(f"no run {name!r} in {runs_dir(root)} (latest: {known})")
    return json.loads(path.read_text())


def pick(ref: str, root: Path = RESULTS) -> dict:
    """`RUN:PART` (run62_2794ed9:evals): that part of that run's results."""
    run, _, part = ref.partition(":")
    results = read_run(run, root)
    if part not in results:
        raise SystemExit(f"run {run} has no part {part!r} (it has: {', '.join(results)})")
    return results[part]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=RESULTS, help="the results folder (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="print the index")
    tables = sub.add_parser("tables", help="print a run's check.md tables")
    tables.add_argument("name")
    add = sub.add_parser("add", help="commit the check.json that h200_check.py wrote under --out as a new run")
    add.add_argument("check_json", type=Path)
    add.add_argument("name")
    args = parser.parse_args(argv)
    if args.command == "list":
        print((args.root / "history.md").read_text(), end="")
    elif args.command == "tables":
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from h200_tables import markdown

        print(markdown(read_run(args.name, args.root)), end="")
    else:
        print(write_run(json.loads(args.check_json.read_text()), args.name, args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
