"""A session: one agent, one goal, one workspace, one transcript."""

from __future__ import annotations

import os
import platform
import secrets
import shutil
import socket
import sys
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jg_mcp import __version__, log
from jg_mcp.goals import LoadedGoal
from jg_mcp.gpu import query_gpu
from jg_mcp.runner import Runner
from jg_mcp.sandbox import SECRET_VALUE, Sandbox, is_secret, sandbox_of
from jg_mcp.transcript import Close, FileChange, Header, Notice, TranscriptWriter
from jg_mcp.workspace import Workspace

logger = log.get("jg_mcp.session")
REFERENCE_FILE = "reference.py"
COMMAND_BLOB_CAP = 8 * 1024 * 1024
Wrap = Callable[[list[str]], list[str]]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id(goal_name: str) -> str:
    return f"{goal_name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


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
    ):
        self.loaded = loaded
        self.run_id = run_id or new_run_id(loaded.name)
        root = Path(workspace_dir) if workspace_dir else Path(runs_dir) / self.run_id / "workspace"
        root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(loaded.module_path, root / REFERENCE_FILE)
        (root / REFERENCE_FILE).chmod(0o444)
        self.workspace = Workspace(root, protected=(REFERENCE_FILE,))
        self.transcript_path = Path(transcripts_dir) / f"{self.run_id}.jsonl"
        self.writer = TranscriptWriter(self.transcript_path)
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
            )
        )
        self.record_changes(None, "session start")

    def record_changes(self, request_id: str | int | None, cause: str, blob_cap: int = COMMAND_BLOB_CAP) -> list[str]:
        """Store every workspace file that changed since the last look; returns their paths."""
        changed, deleted = self.workspace.changes()
        for rel, state in changed.items():
            data = (self.workspace.root / rel).read_bytes() if state.size <= blob_cap else b""
            stored = state.size <= blob_cap
            if stored:
                self.writer.store_blob(data)
            self.writer.append(
                FileChange(
                    request_id=request_id, path=rel, op="write", sha256=state.sha256,
                    size=state.size, stored=stored, cause=cause,
                )
            )
        for rel in deleted:
            self.writer.append(FileChange(request_id=request_id, path=rel, op="delete", cause=cause))
        return [*changed, *deleted]

    def notice(self, level: str, message: str) -> None:
        if not self.writer.closed:
            self.writer.append(Notice(level=level, message=message))

    def close(self, reason: str) -> None:
        """Kill leftover commands, record final changes and the manifest. Safe to call twice."""
        if self.writer.closed:
            return
        self.runner.kill_all()
        self.record_changes(None, "session end")
        self.writer.append(Close(reason=reason, ended_at=now_iso(), manifest=self.workspace.manifest()))
        logger.info("transcript closed", transcript=str(self.transcript_path), head_sha256=self.writer.head_sha256)
