"""Where a session lives: what it is asked for (`SessionConfig`: its workspace, transcripts and run directories, and
what its header says it runs under), the run's directory and the workspace made for it (`make_place`, on a file
system of its own where asked) and, once it is over, given back to the server's user (`give_back`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from jg_mcp import log
from jg_mcp.errors import JgError
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.places import check_own, make_private_dir
from jg_mcp.live.sandbox import Sandbox
from jg_mcp.live.uids import chown_tree
from jg_mcp.live.workspace import Workspace
from jg_mcp.live.workspace_fs import WorkspaceFs
from jg_mcp.models import Strict

logger = log.get("jg_mcp.live.session")


class SessionConfig(Strict):
    """Where a session lives and is recorded, and what its header says it runs under."""

    workspace_dir: Path | None = None
    """The workspace; None: RUNS_DIR/RUN_ID/workspace."""
    transcripts_dir: Path = Path("transcripts")
    """Where RUN_ID.jsonl and its blobs go."""
    runs_dir: Path = Path("runs")
    """The parent of the run's own directory."""
    condition: str = "goal-only"
    """The named condition (jg_mcp.record.conditions), recorded in the header."""
    sandbox: str = "none"
    """The sandbox mode commands run under (bwrap or none), recorded in the header."""
    transport: str = "stdio"
    """The transport the session is served on, recorded in the header."""
    run_id: str | None = None
    """The run's id; None: a fresh one (`new_run_id`)."""
    workspace_bytes: int | None = None
    """The workspace (and the sandbox's compile cache) lie on a file system of their own of this size while the
    session lives (jg_mcp.live.workspace_fs); None: on the host's file system, bounded by nothing while commands
    run."""


class Place(NamedTuple):
    """Where a session's workspace was made: its root, its own file system (None: on the host's) and what the
    commands' uid owns after they run (as root), to be given back when the session ends."""

    root: Path
    fs: WorkspaceFs | None
    handed: list[Path]


def make_place(config: SessionConfig, run_id: str, box: Sandbox) -> Place:
    """Make the run's directory and the workspace (on a file system of its own where `workspace_bytes` asks)."""
    run = config.runs_dir / run_id
    root = config.workspace_dir or run / "workspace"
    if root.parent.absolute() == run.absolute():
        # The run's directory is its owner's alone, however the session was asked for (serve passes the same
        # path as workspace_dir): the sandbox uid owns the workspace while a command runs and may open it
        # (chmod 755 .) and leave a setuid file there until the seal; no other local user may reach it.
        make_private_dir(run, "run directory")
        run.chmod(0o700)  # a real directory of ours, in directories nobody else can write: checked just now
    elif config.sandbox == "bwrap" and os.geteuid() == 0 and root.parent.exists() and root.parent.stat().st_mode & 1:
        # only then do commands run as another uid, which owns the workspace and may open it
        logger.warning(
            "workspace's parent directory is searchable by every local user: while a command runs, they can "
            "reach what it leaves in the workspace",
            parent=str(root.parent),
        )
    # Refused, not warned of: the workspace and its compile cache are handed (chowned) to the sandbox's uid and
    # bound read-write, so one another user planted or can swap would hand over whatever it points at.
    fs: WorkspaceFs | None = None
    cache = Bwrap._cache_path(root.absolute())
    if config.workspace_bytes is not None:
        fs = WorkspaceFs(root, cache)
        fs.open(config.workspace_bytes)
    else:
        make_private_dir(root, "workspace")
        if isinstance(box, Bwrap) and os.path.lexists(cache):
            check_own(cache, "workspace's compile cache", os.lstat(cache))
    return Place(root, fs, [root, cache] if isinstance(box, Bwrap) and os.geteuid() == 0 else [])


def give_back(place: Place, workspace: Workspace | None) -> None:
    """Once the session is over, the workspace is the server's user's again, a plain directory where it was (so
    a later session, `jg-mcp eval --workspace` and replay take it up): its own file system's files copied out,
    or (on the host's) what the commands' uid owns handed back. What cannot be done is logged; the workspace
    then stays where the next session on it finds it (jg_mcp.live.workspace_fs)."""
    if place.fs is not None:
        if workspace is not None:
            workspace.close()  # its descriptor would hold the mount
        try:
            left = place.fs.close()
        except (OSError, JgError) as exc:
            left = [f"{type(exc).__name__}: {exc}"]
        if left:
            logger.warning("the workspace's own file system could not be taken down", why="; ".join(left))
        return
    for path in place.handed:
        if path.is_dir() and not path.is_symlink() and (missed := chown_tree(path, os.geteuid())):
            logger.warning("the workspace could not be given back whole", path=str(path), missed=missed)
