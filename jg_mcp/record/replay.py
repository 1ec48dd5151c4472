"""Replay: rebuild a session's workspace at any step from its transcript, and re-run its commands.

Steps are those of jg_mcp.record.steps: step N is the workspace after the Nth `tools/call`, step 0 the workspace
at session start (the goal's reference copy), and "the end" (END) also applies the changes recorded when the
session closed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import anyio

from jg_mcp import log
from jg_mcp.errors import PathRefused
from jg_mcp.goals import REFERENCE_FILE
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.places import make_private_dir
from jg_mcp.live.runner import CommandResult, Runner
from jg_mcp.live.safefs import read_bounded
from jg_mcp.live.sandbox import SandboxLimits
from jg_mcp.live.sandbox_probe import choose
from jg_mcp.live.uids import SandboxError
from jg_mcp.live.workspace import Workspace
from jg_mcp.models import Strict
from jg_mcp.record.events import FileChange
from jg_mcp.record.steps import END, BlobError, Record, ToolCall, read_blob, state_at
from jg_mcp.record.textdiff import unified

logger = log.get("jg_mcp.record.replay")

HOST_LIMITS = ("first_uid", "uid_count")
"""Sandbox limits that are this host's to choose (which uids sandboxes take), never a transcript's."""

TIMING_NOTE = (
    "Timings (GPU kernels, wall clock) and anything that prints dates, process ids or addresses will "
    "differ on every run: such output differences are reported with a diff, not counted as failures."
)


class Rebuild(Strict):
    step: int
    written: list[str] = []
    deleted: list[str] = []
    not_reconstructible: list[dict[str, Any]] = []
    """Files whose content was over the blob cap: path, sha256, size."""
    problems: list[str] = []
    """Missing or altered blobs, and differences from the close manifest."""


def sync(record: Record, root: Path, step: int) -> Rebuild:
    """Make the regular files under `root` (outside __pycache__) exactly the state after `step`. Files are
    written and removed through directory descriptors (jg_mcp.live.workspace): a symbolic link a re-run command
    left in `root` is never followed; a path through one is reported as a problem."""
    target = state_at(record, step)
    report = Rebuild(step=step)
    ws = Workspace.open(root)
    scan = ws.scan()
    present = scan.states
    report.problems += scan.skipped
    for rel in sorted(set(present) - set(target)):
        try:
            ws.remove(ws.parts(rel))
        except (PathRefused, OSError) as exc:
            report.problems.append(f"'{rel}' cannot be removed: {getattr(exc, 'strerror', None) or exc}")
            continue
        report.deleted.append(rel)
    for rel, change in sorted(target.items()):
        if rel in present and present[rel].sha256 == change.sha256:
            continue
        try:
            data = read_blob(record, change)
        except BlobError as exc:
            report.problems.append(str(exc))
            continue
        if data is None:
            report.not_reconstructible.append({"path": rel, "sha256": change.sha256, "size": change.size})
            continue
        try:
            ws.write(ws.parts(rel), data)
        except (PathRefused, OSError) as exc:
            report.problems.append(f"'{rel}' cannot be written: {getattr(exc, 'strerror', None) or exc}")
            continue
        report.written.append(rel)
    if ws.kind((REFERENCE_FILE,)) == "file":
        with ws.open_file((REFERENCE_FILE,)) as (fd, _):
            os.fchmod(fd, 0o444)
    return report


def rebuild(record: Record, dest: Path, step: int = END) -> Rebuild:
    """Rebuild the workspace after `step` into `dest` (a new or empty directory), made or checked as serve's
    workspace is (jg_mcp.live.places.make_private_dir: UsageError where another local user could plant, replace
    or redirect it; with --rerun it is handed to the sandbox's uid)."""
    if step != END and not 0 <= step <= record.last_step():
        raise ValueError(f"step {step} is out of range: the transcript has steps 0..{record.last_step()}")
    make_private_dir(dest, "replay destination")
    if any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty; replay rebuilds into a new or empty directory")
    report = sync(record, dest, step)
    if step == END and record.close is not None:
        rebuilt = {p: {"sha256": s.sha256, "size": s.size} for p, s in Workspace.open(dest).scan().states.items()}
        missing = {r["path"] for r in report.not_reconstructible}
        for rel in sorted(set(rebuilt) | set(record.close.manifest)):
            if rel not in missing and rebuilt.get(rel) != record.close.manifest.get(rel):
                report.problems.append(f"'{rel}' differs from the close manifest (line {record.close.seq + 1})")
    logger.info("rebuilt", step=step, files=len(report.written), dest=str(dest))
    return report


class Rerun(Strict):
    step: int
    command: str
    recorded_exit: int | None
    rerun_exit: int | None
    exit_matches: bool
    stdout_matches: bool
    stderr_matches: bool
    files_differ: list[str]
    """Paths whose content after the re-run differs from what the command left in the recording."""
    diff: str
    """Unified diff of the recorded against the re-run output (and files), empty when identical."""
    skipped: str = ""
    """Why the command could not be re-run faithfully (files not reconstructible, no recorded result)."""

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if not self.exit_matches:
            return "exit code differs"
        return "match" if self.stdout_matches and self.stderr_matches else "output differs"


def _diff(label: str, recorded: str, rerun: str) -> str:
    """The bounded unified diff (jg_mcp.record.textdiff) of what was recorded against what the re-run gave, what
    it summarised on lines of their own."""
    diff = unified(recorded, rerun, f"recorded {label}", f"re-run {label}")
    return "".join(diff.lines) + "".join(f"({line})\n" for line in diff.summary)


def _file_text(root: Path, record: Record, rel: str, recorded: FileChange | None) -> tuple[str, str]:
    ws = Workspace.open(root)
    try:
        with ws.open_file(ws.parts(rel)) as (fd, st):
            now = b"".join(read_bounded(fd, st.st_size)).decode(errors="replace")
    except (PathRefused, OSError):
        now = ""
    try:
        data = read_blob(record, recorded) if recorded is not None and recorded.op == "write" else b""
    except BlobError as exc:
        return f"({exc})\n", now
    return (data or b"").decode(errors="replace"), now


def rerun_call(record: Record, root: Path, call: ToolCall, runner: Runner) -> Rerun:
    before = sync(record, root, call.step - 1)
    command = str(call.arguments.get("command", ""))
    recorded = call.structured
    skipped = ""
    if before.not_reconstructible or before.problems:
        skipped = "the workspace before it cannot be rebuilt exactly: " + "; ".join(
            [r["path"] for r in before.not_reconstructible] + before.problems
        )
    elif "exit_code" not in recorded:
        why = "cancelled" if call.cancelled else "refused or the session was cut short"
        skipped = f"no recorded result to compare with (the call was {why})"
    if skipped:
        return Rerun(
            step=call.step,
            command=command,
            recorded_exit=recorded.get("exit_code"),
            rerun_exit=None,
            exit_matches=False,
            stdout_matches=False,
            stderr_matches=False,
            files_differ=[],
            diff="",
            skipped=skipped,
        )
    timeout = float(call.arguments.get("timeout_s", 600))
    result: CommandResult = anyio.run(runner.run, command, timeout)
    after = state_at(record, call.step)
    present = Workspace.open(root).scan().states
    differ = sorted(
        p
        for p in set(after) | set(present)
        if (after[p].sha256 if p in after else None) != (present[p].sha256 if p in present else None)
    )
    parts = [
        _diff("exit code", f"{recorded['exit_code']}\n", f"{result.exit_code}\n"),
        _diff("stdout", recorded.get("stdout", ""), result.stdout),
        _diff("stderr", recorded.get("stderr", ""), result.stderr),
    ]
    for rel in differ:
        parts.append(_diff(rel, *_file_text(root, record, rel, after.get(rel))) or f"binary or unreadable: {rel}\n")
    return Rerun(
        step=call.step,
        command=command,
        recorded_exit=recorded["exit_code"],
        rerun_exit=result.exit_code,
        exit_matches=result.exit_code == recorded["exit_code"],
        stdout_matches=result.stdout == recorded.get("stdout", ""),
        stderr_matches=result.stderr == recorded.get("stderr", ""),
        files_differ=differ,
        diff="".join(parts),
    )


class RerunReport(Strict):
    sandbox: str
    """How the re-run commands were isolated: `bwrap` or `none`."""
    warning: str | None
    """Why the sandbox is off, when it is."""
    env_recorded: bool
    """The commands ran with the environment recorded in the header (else, for transcripts before
    format 2, with this machine's)."""
    notes: list[str]
    """What of the recorded setting could not be reproduced: redacted values, missing PATH entries, another
    sandbox mode, limits this version does not know."""
    results: list[Rerun]


def rerun_limits(record: Record) -> tuple[SandboxLimits, list[str]]:
    """The sandbox limits to re-run the commands under: each recorded one this version knows, where it is a whole
    number from 1 to this host's default, else the default; the uids are always this host's. Whoever wrote the
    transcript chose its header, so a re-run never gets more room (a larger tmpfs, more processes) or another uid
    than a session here does by default. Also returns a note naming what could not be applied."""
    recorded = record.header.sandbox_limits or {}
    default = SandboxLimits()
    kept: dict[str, int] = {}
    unknown, raised = [], []
    for name, value in recorded.items():
        if name not in SandboxLimits.model_fields:
            unknown.append(f"{name}={value}")
        elif name in HOST_LIMITS:
            continue
        elif type(value) is int and 1 <= value <= getattr(default, name):
            kept[name] = value
        else:
            raised.append(f"{name}={str(value)[:40]}")
    notes = [f"recorded sandbox limits this version cannot apply: {', '.join(unknown)}"] if unknown else []
    if raised:
        notes.append(f"recorded sandbox limits past this host's defaults, re-run at the defaults: {', '.join(raised)}")
    return SandboxLimits(**kept), notes


def rerun_env(record: Record) -> tuple[dict[str, str] | None, list[str]]:
    """The environment to re-run the commands with: the recorded one, where the values redacted when
    recording are left unset rather than guessed. None when the transcript did not record it. Also
    returns notes on what differs from the recording."""
    header = record.header
    if header.env is None:
        return None, [
            (
                f"this transcript (format {header.format_version}) did not record the commands' "
                "environment: they run with this machine's, so output that depends on it may differ"
            )
        ]
    notes = []
    if header.env_redacted:
        notes.append(
            "values redacted when recording, so left unset in the re-run (output that depends on "
            f"them may differ): {', '.join(header.env_redacted)}"
        )
    missing = [d for d in header.env.get("PATH", "").split(os.pathsep) if d and not os.path.isdir(d)]
    if missing:
        notes.append(f"directories on the recorded PATH that do not exist here: {', '.join(missing)}")
    return dict(header.env), notes


def rerun_commands(record: Record, root: Path, step: int = END, sandbox_mode: str = "bwrap") -> RerunReport:
    """Re-run every recorded run_command up to `step` in `root`, each against the state just before it,
    inside the bubblewrap sandbox (the recording itself hidden from the commands), with the recorded
    environment and sandbox limits where the transcript has them.

    The commands are an agent's, and the reviewer re-running them holds other privileges than the agent did:
    where bubblewrap cannot run, SandboxError (none runs), never the quiet fallback to no sandbox that `serve
    --sandbox auto` makes; `sandbox_mode` "none", the reviewer's explicit choice, runs them unsandboxed.

    `root` is left holding the state after `step`, as `rebuild` leaves it."""
    root = root.resolve()
    recording = record.path.resolve().parent
    limits, limit_notes = rerun_limits(record)
    sandbox = Bwrap(root, hidden=[] if recording in (root, *root.parents) else [recording], limits=limits)
    try:
        with tempfile.TemporaryDirectory(prefix=".replay-probe-", dir=root.parent) as where:
            mode, warning = choose(sandbox_mode, sandbox, Path(where))
    except SandboxError as exc:
        raise SandboxError(
            f"replay --rerun {exc}: no command was re-run; pass --sandbox none to re-run the recorded commands "
            "without a sandbox, with your privileges"
        ) from None
    if mode == "none":
        warning = "SANDBOX OFF (--sandbox none): the recorded commands run unsandboxed with your privileges"
    env, notes = rerun_env(record)
    notes += limit_notes
    if env is not None:
        sandbox.env = env
        if mode != record.header.sandbox:
            notes.append(
                f"recorded with sandbox {record.header.sandbox}, re-run with {mode}: paths in the recorded "
                "environment (HOME, caches, TMPDIR) may be missing or read-only here"
            )
    runner = Runner(
        root, wrap=sandbox.wrap if mode == "bwrap" else (lambda argv: argv), env=env if mode == "none" else None
    )
    results = []
    try:
        for call in record.calls:
            if call.tool == "run_command" and (step == END or call.step <= step):
                logger.info("re-running", step=call.step, command=call.arguments.get("command", "")[:120], sandbox=mode)
                results.append(rerun_call(record, root, call, runner))
    finally:
        runner.kill_all()
        sandbox.release()
        sync(record, root, step)
    return RerunReport(sandbox=mode, warning=warning, env_recorded=env is not None, notes=notes, results=results)
