"""`jg-mcp table`: the results table of a runs directory (Markdown, CSV, HTML with an SVG chart)."""

from __future__ import annotations

import argparse
from pathlib import Path

from jg_mcp.commands.arguments import output_file
from jg_mcp.errors import JgError, UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "table",
        help="tabulate a runs directory: per goal and condition, agents side by side",
        description="Read RUNS/*/run.json (and each run's mark.json: `jg-mcp mark`) and print, per goal and "
        "condition and for each agent: runs, accepted, the median verified speedup against the strongest baseline "
        "with its spread and count over seeds, the median % of speed-of-light, and the geometric mean across goals; "
        "then every run with its label (accepted, rejected, reward hack, budget spent, failed), its evidence, its "
        "per-shape speedup and % of speed-of-light, and links to its transcript, audit page and eval report. Only "
        "accepted runs not marked as hacks count. Time linear in the runs; a run.json over 4 MiB is not read.",
    )
    p.add_argument("runs", type=Path, metavar="RUNS", help="a directory of run directories")
    p.add_argument("--csv", type=Path, metavar="PATH", help="also write the table as CSV")
    p.add_argument("--html", type=Path, metavar="PATH", help="also write a self-contained HTML page with a chart")
    p.add_argument("--markdown", type=Path, metavar="PATH", help="also write the Markdown to a file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from jg_mcp.campaign import table

    if not args.runs.is_dir():
        raise UsageError(f"{args.runs} is not a directory")
    for flag in ("csv", "html", "markdown"):
        output_file(getattr(args, flag), f"--{flag}")
    t = table.build_from(args.runs)
    if not t.rows and not t.unreadable:
        raise JgError(f"no run.json under {args.runs}")
    print(table.markdown(t, f"{args.runs}/"), end="")
    if args.markdown:
        args.markdown.write_text(table.markdown(t, _prefix(args.runs, args.markdown.parent)))
    if args.csv:
        args.csv.write_text(table.to_csv(t))
    if args.html:
        args.html.write_text(table.to_html(t, _prefix(args.runs, args.html.parent)))
    return 0


def _prefix(runs: Path, where: Path) -> str:
    """The runs directory as a link prefix from a file in `where`."""
    import os

    rel = os.path.relpath(runs.resolve(), where.resolve())
    return "" if rel == "." else rel + "/"
