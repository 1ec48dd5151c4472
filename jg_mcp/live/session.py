"""A session: one agent, one goal, one workspace, one transcript."""

from __future__ import annotations

import os
import platform
import secrets
import shutil
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jg_mcp import __version__, log
from jg_mcp.goals import REFERENCE_FILE, LoadedGoal
from jg_mcp.gpu import query_gpu
from jg_mcp.live.runner import Runner
from jg_mcp.live.sandbox import SECRET_VALUE, Sandbox, is_secret, sandbox_of
from jg_mcp.live.workspace import Scan, Workspace
from jg_mcp.record.transcript import COMMAND_BLOB_CAP, Close, FileChange, Header, Notice, TranscriptWriter, key_id

logger = log.get("jg_mcp.live.session")
Wrap = Callable[[list[str]], list[str]]


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
    """Creates the workspace and transcript on start, records changes, closes with a manifest.

    `wrap` is the Sandbox commands run in (a Sandbox's bound `wrap` is taken as that Sandbox; None runs them
    unsandboxed): the header records its environment (secret-looking values left out) and limits."""

    def __init__(
        self,
        loaded: LoadedGoal,
        workspace_dir: Path | None = None,
        transcripts_dir: Path = Path("transcripts"),
        runs_dir: Path = Path("runs"),
        condition: str = "goal-only",
        sandbox: str = "none",
        wrap: Sandbox | Wrap | None = None,
        transport: str = "stdio",
        run_id: str | None = None,
        transcript_key: bytes | None = None,
    ):
        self.loaded = loaded
        self.run_id = run_id or new_run_id(loaded.name)
        root = Path(workspace_dir) if workspace_dir else Path(runs_dir) / self.run_id / "workspace"
        root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(loaded.module_path, root / REFERENCE_FILE)
        (root / REFERENCE_FILE).chmod(0o444)
        self.workspace = Workspace(root, protected=(REFERENCE_FILE,))
        self.transcript_path = Path(transcripts_dir) / f"{self.run_id}.jsonl"
        self.writer = TranscriptWriter(self.transcript_path, key=transcript_key)
        self.scan_lock = threading.RLock()
        """Held while the workspace is scanned and its changes recorded, and around write_file's write and
        record, so one call's file changes stay together and the scan's previous state is not shared."""
        self._unrecorded: list[str] = []
        box = sandbox_of(wrap)
        quota = box.limits.max_workspace_bytes if box.limits is not None else None
        self.runner = Runner(self.workspace.root, wrap=box.wrap, env=box.env, quota_bytes=quota)
        self.sandbox = sandbox
        env, limits = command_setting(box)
        recorded_env, redacted = recordable_env(env)
        self.writer.append(
            Header(
                jg_mcp_version=__version__,
                run_id=self.run_id,
                goal=loaded.name,
                goal_sha256=loaded.sha256(),
                condition=condition,
                sandbox=sandbox,
                sandbox_limits=limits,
                env=recorded_env,
                env_redacted=redacted,
                workspace=str(self.workspace.root),
                host=host_info(),
                gpu=query_gpu().model_dump(),
                started_at=now_iso(),
                transport=transport,
                key_id=key_id(transcript_key) if transcript_key is not None else None,
            )
        )
        self.record_changes(None, "session start")

    def record_changes(self, request_id: str | int | None, cause: str, blob_cap: int = COMMAND_BLOB_CAP) -> list[str]:
        """Store every workspace file that changed since the last look (each read once, through a descriptor,
        hashed and stored in the same pass); returns their paths. What the scan could not record is noted.
        Blocks on the file system: call it from a worker thread when on the event loop."""
        with self.scan_lock:
            stored: dict[str, bool] = {}

            def hasher(fd: int, size: int) -> tuple[str, int]:
                digest, n, kept = self.writer.store_fd(fd, size, blob_cap)
                stored[digest] = kept
                return digest, n

            changed, deleted, scan = self.workspace.changes(hasher)
            events: list[FileChange | Notice] = [
                FileChange(
                    request_id=request_id,
                    path=rel,
                    op="write",
                    sha256=state.sha256,
                    size=state.size,
                    stored=stored.get(state.sha256, (self.writer.blobs / state.sha256).is_file()),
                    cause=cause,
                )
                for rel, state in changed.items()
            ]
            events += [FileChange(request_id=request_id, path=rel, op="delete", cause=cause) for rel in deleted]
            events += self._scan_notices(scan)
            self.writer.append_all(events)
        return [*changed, *deleted]

    def _scan_notices(self, scan: Scan) -> list[Notice]:
        """An error notice for what a scan could not record; a warning when the unrecorded __pycache__ files
        changed."""
        out = [Notice(level="error", message=f"workspace scan incomplete: {s}") for s in scan.skipped]
        if scan.unrecorded and scan.unrecorded != self._unrecorded:
            shown = ", ".join(scan.unrecorded[:20]) + (" ..." if len(scan.unrecorded) > 20 else "")
            out.append(
                Notice(
                    level="warning",
                    message=f"{len(scan.unrecorded)} files under __pycache__ are not "
                    f"recorded (bytecode; a replay will not have them): {shown}",
                )
            )
        self._unrecorded = scan.unrecorded
        return out

    def notice(self, level: str, message: str) -> None:
        self.writer.record(Notice(level=level, message=message))

    def close(self, reason: str) -> None:
        """Kill leftover commands, record final changes and the manifest. Safe to call twice."""
        if self.writer.closed:
            return
        self.runner.kill_all()
        with self.scan_lock:
            if self.writer.closed:
                return
            self.record_changes(None, "session end")
            self.writer.append(Close(reason=reason, ended_at=now_iso(), manifest=self.workspace.manifest()))
        logger.info("transcript closed", transcript=str(self.transcript_path), head_sha256=self.writer.head_sha256)
