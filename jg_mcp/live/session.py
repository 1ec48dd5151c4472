"""A session: one agent, one goal, one workspace, one transcript. Where it lives on the host, and what it is asked
for, is `jg_mcp.live.session_place`."""

from __future__ import annotations

import os
import platform
import secrets
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio

from jg_mcp import __version__, log
from jg_mcp.goals import REFERENCE_FILE, LoadedGoal
from jg_mcp.gpu import query_gpu
from jg_mcp.live.environment import SECRET_VALUE, is_secret
from jg_mcp.live.jobs import JobQueue, outcome
from jg_mcp.live.runner import Runner
from jg_mcp.live.sandbox import Sandbox, sandbox_of
from jg_mcp.live.session_place import Place, SessionConfig, give_back, make_place
from jg_mcp.live.workspace import Workspace
from jg_mcp.live.workspace_scan import Scan
from jg_mcp.record.events import Close, FileChange, Header, Notice
from jg_mcp.record.keys import key_id
from jg_mcp.record.transcript import COMMAND_BLOB_CAP, TranscriptWriter

logger = log.get("jg_mcp.live.session")
Wrap = Callable[[list[str]], list[str]]
T = TypeVar("T")
CLOSE_WAIT_S = 5.0
"""How long a close waits for the session's last workspace scan before it closes the transcript without it."""
QUIET_WAIT_S = 2.0
"""How long a close waits for commands caught in their setup or spawn to stop (`Runner.wait_quiet`) before its
last scan: one caught in its spawn is killed at once; one still being set up never starts, whenever its setup ends."""
CLOSE_SCAN_S = 1.0
"""Longest the session's last scan walks: past it, it stops (the files not seen keep their recorded state, and an
error notice says so) and the close event is written. MCP clients kill a stdio server about 2 s after closing its
input; the last scan hashes every file afresh (see jg_mcp.live.workspace), some 0.2 ms a file, so a workspace of
SCAN_LIMIT files would otherwise outlast that and leave no close event. The walk sees a level's files before its
subdirectories, so the top-level files (the solution) are recorded first."""
READ_THREADS = 4
"""Threads one session's reads (read_file, query_gpu) may hold at once; more calls wait, holding none."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_run_id(goal_name: str) -> str:
    return f"{goal_name}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def host_info() -> dict[str, str]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "pid": str(os.getpid()),
    }


def recordable_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """`env` fit for a transcript: the variables whose name (token, key, secret, password, auth, ...) or
    value (a password in a URL, a known token form) looks like a secret are left out; returns (the rest,
    the names left out)."""
    redacted = sorted(k for k, v in env.items() if is_secret(k) or SECRET_VALUE.search(v))
    return {k: v for k, v in sorted(env.items()) if k not in redacted}, redacted


def command_setting(box: Sandbox) -> tuple[dict[str, str], dict[str, Any] | None]:
    """The environment commands see and the sandbox limits they run under, as the sandbox sets them."""
    return box.env, box.limits.model_dump() if box.limits is not None else None


class Session:
    """A session's workspace, transcript and command runner, the changes it records and its close with a manifest.
    `Session.open` makes the parts (directories, the workspace's file system, the transcript's header and first
    scan); the constructor only holds them."""

    def __init__(
        self,
        loaded: LoadedGoal,
        run_id: str,
        place: Place,
        workspace: Workspace,
        writer: TranscriptWriter,
        runner: Runner,
        sandbox: str = "none",
    ):
        self.loaded = loaded
        self.run_id = run_id
        self.place = place
        self.fs = place.fs
        self.workspace = workspace
        self.writer = writer
        self.transcript_path = writer.path
        self.runner = runner
        self.sandbox = sandbox
        self.scan_lock = threading.RLock()
        """Held while the workspace is scanned and its changes recorded, and around write_file's write and
        record, so one call's file changes stay together and the scan's previous state is not shared."""
        self.worker = JobQueue(f"jg-scan-{self.run_id}")
        """Runs the scans and writes of tool calls (`in_turn`), and the final scan, in order."""
        self.readers = anyio.CapacityLimiter(READ_THREADS)
        """The threads this session's read-only tool calls may hold (never anyio's default limiter)."""
        self._unrecorded: list[str] = []
        self._record_lock = threading.Lock()
        self._recorded: dict[str, dict[str, object]] = {}
        """The manifest as of the last changes recorded: what a close that cannot scan again names."""
        self._closing: Future[None] | None = None
        self.close_reason: str | None = None
        self.commands: dict[object, str | int | None] = {}
        """The request ids of the run_command calls whose changes are not recorded yet (running, or their scan still
        to come), by a token of each call: a scan cannot tell which of them made a change it sees."""
        self.calls_in_flight = 0
        """Tool calls received and not yet answered (counted by the server, which caps them)."""

    @classmethod
    def open(
        cls,
        loaded: LoadedGoal,
        config: SessionConfig | None = None,
        wrap: Sandbox | Wrap | None = None,
        transcript_key: bytes | None = None,
    ) -> Session:
        """Make the workspace (the goal's reference copied in, read-only) and the transcript, write its header and
        record the workspace as it starts. `wrap` is the Sandbox commands run in (a Sandbox's bound `wrap` is taken
        as that Sandbox; None runs them unsandboxed): the header records its environment (secret-looking values
        left out) and limits. `transcript_key`: every event then carries an HMAC under it."""
        config = config or SessionConfig()
        run_id = config.run_id or new_run_id(loaded.name)
        box = sandbox_of(wrap)
        place = make_place(config, run_id, box)
        workspace: Workspace | None = None
        try:
            shutil.copyfile(loaded.module_path, place.root / REFERENCE_FILE)
            (place.root / REFERENCE_FILE).chmod(0o444)
            workspace = Workspace.open(place.root, protected=(REFERENCE_FILE,))
            writer = TranscriptWriter.open(config.transcripts_dir / f"{run_id}.jsonl", key=transcript_key)
            quota = box.limits.max_workspace_bytes if box.limits is not None else None
            runner = Runner(workspace.root, wrap=box.wrap, env=box.env, quota_bytes=quota, own_fs=place.fs is not None)
            session = cls(loaded, run_id, place, workspace, writer, runner, config.sandbox)
            env, limits = command_setting(box)
            recorded_env, redacted = recordable_env(env)
            writer.append(
                Header(
                    jg_mcp_version=__version__,
                    run_id=run_id,
                    goal=loaded.name,
                    goal_sha256=loaded.sha256(),
                    condition=config.condition,
                    sandbox=config.sandbox,
                    protections=box.protections,
                    sandbox_limits=limits,
                    env=recorded_env,
                    env_redacted=redacted,
                    workspace=str(workspace.root),
                    host=host_info(),
                    gpu=query_gpu().model_dump(),
                    started_at=now_iso(),
                    transport=config.transport,
                    key_id=key_id(transcript_key) if transcript_key is not None else None,
                    workspace_fs_bytes=place.fs.size if place.fs is not None else None,
                )
            )
            session.record_changes(None, "session start")
        except BaseException:
            give_back(place, workspace)
            raise
        return session

    def record_changes(
        self,
        request_id: str | int | None,
        cause: str,
        blob_cap: int = COMMAND_BLOB_CAP,
        made: tuple[str, str] | None = None,
        deadline: float | None = None,
    ) -> list[str]:
        """Store every workspace file that changed since the last look (each read once, through a descriptor,
        hashed and stored in the same pass); returns their paths. What the scan could not record is noted.
        A change seen while other commands ran (`commands`) names them in `running`: any of them may have made it,
        except the change `made` names (a path and the sha256 the call itself wrote there). The scan stops at
        `deadline` (time.monotonic), if given. Blocks on the file system: call it from a worker thread when on the
        event loop."""
        with self.scan_lock:
            others = [rid for rid in list(self.commands.values()) if rid != request_id] or None
            stored: dict[str, bool] = {}

            def hasher(fd: int, size: int) -> tuple[str, int]:
                digest, n, kept = self.writer.store_fd(fd, size, blob_cap)
                stored[digest] = kept
                return digest, n

            changed, deleted, scan = self.workspace.changes(hasher, deadline=deadline)
            events: list[FileChange | Notice] = [
                FileChange(
                    request_id=request_id,
                    path=rel,
                    op="write",
                    sha256=state.sha256,
                    size=state.size,
                    stored=stored.get(state.sha256, (self.writer.blobs / state.sha256).is_file()),
                    cause=cause,
                    running=None if made == (rel, state.sha256) else others,
                )
                for rel, state in changed.items()
            ]
            events += [
                FileChange(request_id=request_id, path=rel, op="delete", cause=cause, running=others) for rel in deleted
            ]
            events += self._scan_notices(scan)
            with self._record_lock:
                self.writer.append_all(events)
                if not self.writer.closed:
                    self._recorded = self.workspace.manifest()
        return [*changed, *deleted]

    def _scan_notices(self, scan: Scan) -> list[Notice]:
        """An error notice for what a scan could not record; a warning when the unrecorded bytecode files changed."""
        out = [Notice(level="error", message=f"workspace scan incomplete: {s}") for s in scan.skipped]
        if scan.unrecorded and scan.unrecorded != self._unrecorded:
            shown = ", ".join(scan.unrecorded[:20]) + (" ..." if len(scan.unrecorded) > 20 else "")
            out.append(
                Notice(
                    level="warning",
                    message=f"{len(scan.unrecorded)} Python bytecode files (.pyc) are not "
                    f"recorded (a replay will not have them): {shown}",
                )
            )
        self._unrecorded = scan.unrecorded
        return out

    def notice(self, level: str, message: str) -> None:
        self.writer.record(Notice(level=level, message=message))

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue `fn` (a scan, a write and its record) behind the session's other workspace jobs."""
        return self.worker.submit(fn)

    async def in_turn(self, fn: Callable[[], T]) -> T:
        """Run `fn` in its turn among the session's workspace jobs, waiting on the event loop; a wait cancelled
        before the job started drops it."""
        future = self.submit(fn)
        try:
            return await outcome(future)
        except BaseException:
            future.cancel()
            raise

    @property
    def closing(self) -> bool:
        """Whether the session is closing or closed: no more writes are made."""
        return self._closing is not None or self.writer.closed

    def _start_close(self, reason: str) -> Future[None]:
        """Kill leftover commands and queue the final scan and close event (once; later reasons are ignored)."""
        self.runner.kill_all()
        with self._record_lock:
            if self._closing is None:
                self.close_reason = reason
                self._closing = self.submit(lambda: self._finish(reason))
            return self._closing

    def _finish(self, reason: str) -> None:
        if not self.runner.wait_quiet(QUIET_WAIT_S):
            self.notice(
                "warning",
                f"a command was still being set up {QUIET_WAIT_S:g}s into the close: it will not run, and the last "
                "scan is taken now",
            )
        try:
            self.record_changes(None, "session end", deadline=time.monotonic() + CLOSE_SCAN_S)
        except Exception as exc:  # noqa: BLE001 (the session's boundary: the close event is written whatever failed)
            self.notice("error", f"the final workspace scan failed: {type(exc).__name__}: {exc}")
        self._close_event(reason)
        self._give_back()

    def _give_back(self) -> None:
        give_back(self.place, self.workspace)

    def _close_event(self, reason: str, missing: str | None = None) -> None:
        """Write the close event (with the manifest as last recorded), after a notice saying what is `missing`."""
        with self._record_lock:
            if self.writer.closed:
                return
            events: list[Notice | Close] = [Notice(level="error", message=missing)] if missing else []
            events.append(Close(reason=reason, ended_at=now_iso(), manifest=self._recorded))
            self.writer.append_all(events)
        logger.info("transcript closed", transcript=str(self.transcript_path), head_sha256=self.writer.head_sha256)

    def _give_up(self, reason: str, wait_s: float) -> None:
        self._close_event(
            reason,
            f"the last workspace scan did not finish within {wait_s:g}s of the close: changes since the "
            "previous scan are not recorded, and the manifest is the one last recorded",
        )

    def close(self, reason: str, wait_s: float | None = None) -> None:
        """Kill leftover commands, record final changes and the manifest. Safe to call twice; blocks the
        calling thread (never the event loop: use `aclose` there) until the close event is written. When the
        last scan does not finish within `wait_s` (None: however long it takes), the close event is written
        without it, after a notice that says so."""
        if self.writer.closed:
            return
        closing = self._start_close(reason)
        try:
            closing.result(timeout=wait_s)
        except TimeoutError:
            self._give_up(self.close_reason or reason, wait_s or 0)

    async def aclose(self, reason: str, wait_s: float = CLOSE_WAIT_S) -> None:
        """`close` for the event loop: waits for the last scan on the loop, at most `wait_s`."""
        if self.writer.closed:
            return
        closing = self._start_close(reason)
        with anyio.move_on_after(wait_s):
            await outcome(closing)
        if not closing.done():
            self._give_up(self.close_reason or reason, wait_s)
