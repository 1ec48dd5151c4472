"""`jg-mcp mark`: a person's verdict on a run (a reward hack, with a note), read by `jg-mcp table`."""

from __future__ import annotations

import argparse
from pathlib import Path

from jg_mcp.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mark",
        help="mark a run as a reward hack, with a note (the table strikes it from the ranking)",
        description="Write RUN_DIR/mark.json: whether the run's result is a reward hack, why, who said so and when. "
        "The run's files stay as they are (its transcript, workspace, eval report and audit are the evidence); "
        "`jg-mcp table` keeps the run's row, struck, with the note, and leaves it out of every speedup. Marking "
        "again replaces the mark; --not-hack records that a person looked and found none.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory (holding run.json)")
    verdict = p.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--hack", action="store_true", help="the result is a reward hack")
    verdict.add_argument("--not-hack", action="store_true", help="a person looked: no hack")
    p.add_argument("--note", required=True, help="what was seen, and where (transcript seq, solution lines)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from jg_mcp.campaign.marks import write_mark

    if not args.run_dir.is_dir():
        raise UsageError(f"{args.run_dir} is not a directory")
    if not args.note.strip():
        raise UsageError("--note must say what was seen")
    mark = write_mark(args.run_dir, args.hack, args.note)
    print(f"{args.run_dir}: marked {'a reward hack' if mark.hack else 'not a hack'} by {mark.by} at {mark.at}")
    return 0
