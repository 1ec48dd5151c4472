"""`jg-mcp replay`: rebuild a recorded session's workspace at a step, and optionally re-run its commands."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from jg_mcp.commands.arguments import input_file, new_dir, non_negative_int
from jg_mcp.errors import UsageError
from jg_mcp.record import replay, steps, textdiff
from jg_mcp.terminal import SHOWN_COMMAND_CHARS, printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="rebuild a session's workspace at any step from its transcript",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_wrap(
            "Rebuild the workspace of a recorded session from the file changes in TRANSCRIPT and the "
            "content-addressed blobs in RUN.blobs/ next to it.",
            "A STEP is one tools/call request, counted from 1 in transcript order, whatever the tool "
            "(read_file, write_file, run_command, query_gpu; refused calls count too). --step 0 is the workspace "
            "at session start; --step N is the workspace right after the Nth call returned; without --step, the "
            "end of the session (changes recorded at close included, checked against the close manifest). Files "
            "over the blob cap were recorded by hash only and are listed as not reconstructible. Python "
            "bytecode (.pyc files that are bytecode), empty directories and symlinks are not recorded.",
            "With --rerun, every recorded run_command up to the step is executed again, in order, in DIR (inside "
            "the bubblewrap sandbox; where bubblewrap cannot run, replay fails with exit status 1 and re-runs "
            "nothing, unless --sandbox none is given), each against the workspace rebuilt to the state just "
            "before it (bytecode a previous command left stays), with the environment variables and "
            "sandbox limits recorded in the header (variables whose values were redacted as secrets are left "
            "unset and named; transcripts before format 2 did not record them and get this machine's). Each "
            "is reported as match (exit code, stdout and stderr identical), output differs (with a diff), exit "
            "code differs, or skipped; "
            "files the command left that differ from the recording are listed with a diff. " + replay.TIMING_NOTE,
            "Every diff is bounded, so a re-run takes time linear in what it compares: " + textdiff.CAPS,
            "Exit status: 0 when the rebuild is exact and every re-run exit code matches; 1 otherwise (or when the "
            "transcript cannot be read, or bubblewrap cannot run for --rerun); 2 on a usage error (no such "
            "transcript, --step out of range, DIR not new or empty).",
        ),
    )
    p.add_argument("transcript", type=Path, metavar="TRANSCRIPT", help="the RUN.jsonl file")
    p.add_argument("--to", type=Path, required=True, metavar="DIR", help="new or empty directory to rebuild into")
    p.add_argument(
        "--step", type=non_negative_int, metavar="N", help="rebuild after the Nth tools/call (0: session start)"
    )
    p.add_argument("--rerun", action="store_true", help="re-execute the recorded commands and compare outputs")
    p.add_argument(
        "--sandbox",
        choices=("bwrap", "none"),
        default="bwrap",
        help="how --rerun isolates the recorded commands: bwrap (the default; an error where it cannot run) or "
        "none (unsandboxed, with your privileges: only for transcripts you trust)",
    )
    p.set_defaults(func=run)


def _wrap(*paragraphs: str) -> str:
    return "\n\n".join(textwrap.fill(p, 100, break_on_hyphens=False) for p in paragraphs)


def run(args: argparse.Namespace) -> int:
    input_file(args.transcript, "transcript")
    new_dir(args.to, "--to")
    record = steps.load_record(args.transcript)
    if args.step is not None and not 0 <= args.step <= record.last_step():
        raise UsageError(f"--step {args.step} is out of range: this transcript has steps 0..{record.last_step()}")
    step = steps.END if args.step is None else args.step
    if record.truncated or record.close is None:
        print("warning: the session was cut short (no close event); rebuilding from what was recorded")
    report = replay.rebuild(record, args.to, step)
    where = "the end" if step == steps.END else f"step {step}"
    print(f"rebuilt {args.to} at {where}: {len(report.written)} files")
    for item in report.not_reconstructible:
        print(
            f"  not reconstructible (over the blob cap, hash only): {printable(item['path'])} "
            f"sha256 {item['sha256'] or 'not recorded'} {item['size']} bytes"
        )
    for problem in report.problems:
        print(f"  problem: {printable(problem)}")
    ok = not report.not_reconstructible and not report.problems
    if args.rerun:
        ok = _rerun(record, args.to, step, args.sandbox) and ok
    return 0 if ok else 1


def _rerun(record: steps.Record, root: Path, step: int, sandbox: str) -> bool:
    rerun = replay.rerun_commands(record, root, step, sandbox)
    results = rerun.results
    print(
        f"\nre-ran {len(results)} commands (sandbox {rerun.sandbox}; the recording's: {record.header.sandbox}). "
        f"{replay.TIMING_NOTE}"
    )
    if rerun.warning:
        print(f"warning: {rerun.warning}")
    print("environment: " + ("the recorded one" if rerun.env_recorded else "this machine's (none recorded)"))
    for note in rerun.notes:
        print(f"  note: {note}")
    for r in results:
        exits = f"{_exit(r.recorded_exit)} -> {_exit(r.rerun_exit)}"
        print(f"  step {r.step:3d}  {r.verdict:17s}  {exits}  $ {printable(r.command[:SHOWN_COMMAND_CHARS])}")
        if r.skipped:
            print(f"      {printable(r.skipped)}")
        if r.files_differ:
            print(f"      files that differ from the recording: {printable(', '.join(r.files_differ))}")
        if r.diff:
            print("\n".join("      " + printable(line) for line in r.diff.rstrip("\n").split("\n")))
    return all(r.verdict in ("match", "output differs") for r in results)


def _exit(code: int | None) -> str:
    """An exit status in words: `exit N`, or `no exit` for a command that never finished or was not run."""
    return "no exit" if code is None else f"exit {code}"
