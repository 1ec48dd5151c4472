"""run_command's engine: a shell in the workspace with a timeout, a killed process group,
capped output (jg_mcp.live.output), periodic progress and a workspace size check.

Where the workspace has a file system of its own (jg_mcp.live.workspace_fs) its size is bounded while commands run,
and the check only tells the agent when that file system is full; on the host's file system it counts the workspace
after each command (a notice, not a bound).

The runner tells the workspace's `Commands` when each command starts and ends (a process group left behind counts
as running until `kill_all`), so a scan never trusts a hash taken while a command could write the file unseen
(jg_mcp.live.workspace). The size check walks the workspace with the same bounded `Walk` as the scan."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import anyio
from anyio.abc import Process
from pydantic import BaseModel

from jg_mcp.live.groups import end_group, group_running, kill_group
from jg_mcp.live.output import DEFAULT_CAP, CappedBuffer, ProgressFn, pump, ticker
from jg_mcp.live.walk import Commands, commands_in, walk_of

MAX_PARALLEL_COMMANDS = 4
"""Most commands of one runner (one session) running at once; more wait their turn. Each sandboxed command has
its own in-memory /tmp and /dev/shm, so this bounds what parallel calls can hold."""
DRAIN_AFTER_EXIT_S = 0.5
GROUP_EXIT_S = 2.0
"""Longest a contained command's result waits for what is left of its process group (a sandbox's pid 1 and the
processes of its namespace) to be gone; past it, the group is left to `kill_all` as a background job's is."""


class CommandResult(BaseModel):
    exit_code: int | None
    """The command's exit status; None when its timeout killed it. Negative: the command (the shell, or what it
    ran last in place of itself) was killed by that signal (-9: SIGKILL, -11: SIGSEGV), sandboxed or not. A command
    that exits 128+N itself (bash's `$?` after a child it waited for was killed) reports 128+N."""
    stdout: str
    stderr: str
    duration_s: float
    """Seconds from the command's turn (a free slot) to its end, its sandbox's setup included."""
    timed_out: bool = False
    """True when the timeout expired and the process group was killed."""
    stdout_elided_bytes: int = 0
    """Bytes cut from the middle of stdout (head and tail are kept)."""
    stderr_elided_bytes: int = 0
    notice: str | None = None
    """Set when the workspace grew past its quota (what it holds, the quota, what to do), or when the walks the
    sandbox makes of the workspace around the command could not reach all of it (what that leaves, what to do)."""


@dataclass
class _Done:
    """How a command ended: its process's status (None: it never started), its outputs, whether its timeout
    killed it, the signal that killed it (None: none did), and sentences for the agent's result."""

    returncode: int | None
    out: CappedBuffer
    err: CappedBuffer
    timed_out: bool
    signal: int | None
    notes: list[str]


class RunnerClosed(RuntimeError):
    """A command whose session closed before it ran: it waited for a slot or was being set up (it never ran), or
    its process was being started (killed as it started)."""


class Argv(list[str]):
    """An argv whose process must inherit `files` (bwrap reads its options from one), which the runner passes
    and closes once the process has started, and `fds`, which it passes and leaves open (a lifeline). `ended` is
    called (in a worker thread) once the process has exited, before the command's result goes back; then
    `killed_by` says which signal killed the command inside, when the process's own status cannot (a sandbox's
    reaper, jg_mcp.live.reaper). `notes` are sentences for the agent's result (set by the wrap, or by `ended`).
    `contained`: everything in the process's group belongs to the command and ends with it (a sandbox, whose pid 1
    takes its pid namespace down): once the process has exited, what is left of the group is killed, and awaited
    before `ended`, never left running as a background job."""

    def __init__(
        self,
        args: Iterable[str],
        files: Sequence[BinaryIO] = (),
        fds: Sequence[int] = (),
        ended: Callable[[], object] = lambda: None,
        contained: bool = False,
    ):
        super().__init__(args)
        self.files = list(files)
        self.fds = tuple(fds)
        self.ended = ended
        self.contained = contained
        self.killed_by: Callable[[], int | None] = lambda: None
        self.notes: list[str] = []

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(f.fileno() for f in self.files) + self.fds

    def close(self) -> None:
        for f in self.files:
            f.close()


def command_env(extra_path: Sequence[str] = ()) -> dict[str, str]:
    """The environment a command sees: ours, with this interpreter's bin directory first on PATH."""
    env = dict(os.environ)
    path = [str(Path(sys.executable).parent), *extra_path, env.get("PATH", "/usr/bin:/bin")]
    env["PATH"] = os.pathsep.join(path)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def tree_bytes(root: Path, stop_after: int) -> tuple[int, list[str]]:
    """The bytes of the regular files under `root` (hard links counted once, links not followed), counted through
    a bounded `Walk` (a descriptor per level, never one per sibling), stopping once past `stop_after`; and what the
    walk could not see, one sentence each: when that is not empty, the count is a lower bound."""
    total, seen = 0, set()
    try:
        walk = walk_of(root)
        with closing(walk.entries()) as entries:
            for _, _, _, st in entries:
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
                    if total > stop_after:
                        break
    except OSError as exc:  # the workspace directory itself could not be opened or listed
        return total, [f"the workspace directory could not be listed: {exc.strerror}"]
    return total, walk.missed


FULL_FRACTION = 50
"""The workspace's own file system counts as full, for the notice, when less than 1/FULL_FRACTION of it is free."""


def full_notice(root: Path) -> str | None:
    """A notice for the agent when the workspace's own file system (`root` on it) is all but full, else None."""
    st = os.statvfs(root)
    size, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    if free * FULL_FRACTION >= size:
        return None
    return (
        f"the workspace's file system is full: {free} of its {size} bytes are free (the compile cache counts "
        "too), and writes past them fail with 'No space left on device'; delete large files (build outputs, "
        "checkpoints, caches) before writing more"
    )


def quota_notice(root: Path, quota: int) -> str | None:
    """A notice for the agent when the workspace holds more than `quota` bytes, or when it could not be counted
    whole (what could not be seen may hold more): else None."""
    held, missed = tree_bytes(root, quota)
    if held > quota:
        return (
            f"the workspace holds more than its quota of {quota} bytes (counted {held} so far): delete large "
            "files (build outputs, checkpoints, caches) before writing more; files are capped one by one, the "
            "total is only checked after each command"
        )
    if missed:
        return (
            f"the workspace's size could not be counted whole, so it may hold more than its quota of {quota} "
            f"bytes (counted {held} in what could be seen): {'; '.join(missed)}. Make every directory readable, "
            "and remove deep or numerous directories, so that the size can be checked"
        )
    return None


async def _wrapped_ended(argv: Argv, proc: Process, notes: list[str]) -> int | None:
    """Once the process of a wrapped command has exited: what is left of a contained group ended (a sandbox's pid 1
    may outlast bwrap's outer process by a moment), then the wrap's `ended`, its notes added to `notes`. Returns the
    signal that killed the command by the reaper's word, where the process's own status agrees with it, else None."""
    with anyio.CancelScope(shield=True):
        if argv.contained:
            await anyio.to_thread.run_sync(end_group, proc.pid, GROUP_EXIT_S)
        await anyio.to_thread.run_sync(argv.ended)
    notes += argv.notes[len(notes) :]
    reported = argv.killed_by()
    return reported if reported is not None and proc.returncode == 128 + reported else None


class Runner:
    """Runs shell commands in `cwd`; `wrap` turns the shell argv into a sandboxed one (an `Argv` when the
    process must inherit files). With `quota_bytes`, each result carries a notice while `cwd` holds more; with
    `own_fs` (`cwd` is a file system of its own, of that size), while it is full."""

    def __init__(
        self,
        cwd: Path,
        wrap: Callable[[list[str]], list[str]] = lambda argv: argv,
        env: dict[str, str] | None = None,
        cap: int = DEFAULT_CAP,
        progress_every_s: float = 5.0,
        quota_bytes: int | None = None,
        commands: Commands | None = None,
        own_fs: bool = False,
    ):
        self.cwd = Path(cwd)
        self.wrap = wrap
        self.env = env if env is not None else command_env()
        self.cap = cap
        self.progress_every_s = progress_every_s
        self.quota_bytes = quota_bytes
        self.own_fs = own_fs
        self.commands = commands if commands is not None else commands_in(self.cwd)
        """Told when each command starts and ends: the workspace's hash cache depends on it."""
        self._left: dict[int, object] = {}
        """The `Commands` tokens of the groups in `groups` whose command has returned: ended by `kill_all`."""
        self.slots = anyio.Semaphore(MAX_PARALLEL_COMMANDS)
        self.closed = False
        """Set by `kill_all`: commands still waiting for a slot never start."""
        self.groups: set[int] = set()
        """Process groups started by this runner that still had processes when their command returned (background
        jobs); killed at session end."""
        self._busy = 0
        """Commands being set up, started or run: from before the wrap until their process is reaped."""
        self._quiet = threading.Condition()

    async def run(self, command: str, timeout_s: float, on_progress: ProgressFn | None = None) -> CommandResult:
        """Run `command` once one of the runner's MAX_PARALLEL_COMMANDS slots is free. Its timeout counts from this
        call: a wait for a slot spends it, and a command whose wait took it all does not run. Once `kill_all` has run
        (the session closes), no waiting command starts: RunnerClosed. The wrap (a sandbox's, which walks the
        workspace) runs in a worker thread."""
        start, acquired = time.monotonic(), False
        with anyio.move_on_after(timeout_s):
            await self.slots.acquire()
            acquired = True
        if not acquired:
            waited = round(time.monotonic() - start, 4)
            notice = f"the command did not run: it waited {waited} s for one of the session's {MAX_PARALLEL_COMMANDS} "
            notice += "command slots, its whole timeout"
            return CommandResult(exit_code=None, stdout="", stderr="", duration_s=waited, timed_out=True, notice=notice)
        try:
            if self.closed:
                raise RunnerClosed("the session is closing: the command did not run")
            return await self._run(command, max(0.0, timeout_s - (time.monotonic() - start)), on_progress)
        finally:
            self.slots.release()

    async def _run(self, command: str, timeout_s: float, on_progress: ProgressFn | None) -> CommandResult:
        begun = time.monotonic()
        token = self.commands.started()
        with self._quiet:
            self._busy += 1
        try:
            done = await self._execute(command, begun + timeout_s, on_progress, token)
        finally:
            if token not in self._left.values():  # else processes were left behind: running until kill_all
                self.commands.ended(token)
            with self._quiet:
                self._busy -= 1
                self._quiet.notify_all()
        notices = list(done.notes)
        if self.own_fs:
            full = full_notice(self.cwd)
            notices += [full] if full else []
        elif self.quota_bytes is not None:
            quota = await anyio.to_thread.run_sync(quota_notice, self.cwd, self.quota_bytes)
            notices += [quota] if quota else []
        exit_code = None
        if not done.timed_out and done.returncode is not None:
            exit_code = -done.signal if done.signal else done.returncode
        return CommandResult(
            exit_code=exit_code,
            stdout=done.out.text(),
            stderr=done.err.text(),
            duration_s=round(time.monotonic() - begun, 4),
            timed_out=done.timed_out,
            stdout_elided_bytes=done.out.elided,
            stderr_elided_bytes=done.err.elided,
            notice="; ".join(notices) or None,
        )

    async def _execute(self, command: str, deadline: float, on_progress: ProgressFn | None, token: object) -> _Done:
        """Set the command up (the wrap), start it, pump its output, wait for it (killing its group at `deadline`,
        a time.monotonic() value: the setup spends the timeout too, and a setup that spent it all starts nothing).
        A group left with processes keeps the command's `token` in `_left`."""
        argv = await anyio.to_thread.run_sync(self.wrap, ["/bin/bash", "-c", command])
        notes = list(argv.notes) if isinstance(argv, Argv) else []
        out, err = CappedBuffer(self.cap), CappedBuffer(self.cap)
        if self.closed or time.monotonic() >= deadline:  # the session closed, or the timeout passed, in the setup
            if isinstance(argv, Argv):
                argv.close()
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(argv.ended)
                argv.killed_by()
            if self.closed:
                raise RunnerClosed("the session closed while the command was being set up: the command did not run")
            notes.append("the command did not run: setting up its sandbox took its whole timeout")
            return _Done(None, out, err, True, None, notes)
        timed_out = False
        try:
            # Shielded: a cancellation (the client cancels or disconnects) that lands while the process is being
            # started would lose the process object after the spawn, and with it the group to kill; it is taken
            # at the next await instead, where the `finally` below kills the group.
            with anyio.CancelScope(shield=True):
                proc = await anyio.open_process(
                    argv,
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    pass_fds=argv.pass_fds if isinstance(argv, Argv) else (),
                )
        except BaseException:
            if isinstance(argv, Argv):
                argv.killed_by()  # nothing ran: this closes what would have told how it ended (the reaper's pipe)
            raise
        finally:
            if isinstance(argv, Argv):
                argv.close()
        self.groups.add(proc.pid)
        closed_as_it_started = self.closed  # kill_all ran while the process was started: it did not know the group
        signal_number = None
        try:
            if closed_as_it_started:
                raise RunnerClosed("the session closed as the command's process started: it was killed as it started")
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump, proc.stdout, out)
                tg.start_soon(pump, proc.stderr, err)
                if on_progress is not None:
                    tg.start_soon(ticker, time.monotonic(), self.progress_every_s, out, err, on_progress)
                with anyio.move_on_after(max(0.0, deadline - time.monotonic())) as scope:
                    await proc.wait()
                timed_out = scope.cancelled_caught
                if timed_out:
                    kill_group(proc.pid)
                    await proc.wait()
                with anyio.move_on_after(DRAIN_AFTER_EXIT_S):
                    await out.done.wait()
                    await err.done.wait()
                tg.cancel_scope.cancel()
        finally:
            if proc.returncode is None or timed_out or closed_as_it_started:
                kill_group(proc.pid)
                with anyio.CancelScope(shield=True):
                    await proc.wait()
            if isinstance(argv, Argv):
                signal_number = await _wrapped_ended(argv, proc, notes)
            await proc.aclose()
            if not group_running(proc.pid):
                self.groups.discard(proc.pid)  # nothing left to kill, and the number may be reused by another group
            else:
                self._left[proc.pid] = token
        if signal_number is None and proc.returncode is not None and proc.returncode < 0:
            signal_number = -proc.returncode
        return _Done(proc.returncode, out, err, timed_out, signal_number, notes)

    def wait_quiet(self, timeout_s: float | None) -> bool:
        """Wait (in a thread, never on the event loop) until no command is being set up, started or run; False if
        `timeout_s` passed first. After `kill_all`, that is how long it takes a command caught in its setup or its
        spawn to stop: a close waits for it before its last scan, so nothing runs after the close event."""
        with self._quiet:
            return self._quiet.wait_for(lambda: self._busy == 0, timeout_s)

    def kill_all(self) -> None:
        """Kill every process group this runner started, background jobs included; start no more commands (one
        being set up or started then stops itself: `wait_quiet`)."""
        self.closed = True
        for pgid in list(self.groups):  # a copy: the event loop may change the set meanwhile (a close from a thread)
            kill_group(pgid)
            self.groups.discard(pgid)
            token = self._left.pop(pgid, None)
            if token is not None:
                self.commands.ended(token)
        self.commands.invalidate()  # the session's final manifest is hashed afresh
