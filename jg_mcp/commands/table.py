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
        description="Read RUNS/*/run.json and print, per goal and condition and for each agent: runs, accepted, "
        "best and median verified speedup against the strongest baseline, median % of roofline, and the "
        "geometric mean across goals. Only accepted runs count as speedups; the others are listed with reasons.",
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
    records = table.load_records(args.runs)
    if not records:
        raise JgError(f"no run.json under {args.runs}")
    t = table.build(records)
    text = table.markdown(t)
    print(text, end="")
    for path, content in ((args.markdown, text), (args.csv, table.to_csv(t)), (args.html, table.to_html(t))):
        if path:
            path.write_text(content)
    return 0
