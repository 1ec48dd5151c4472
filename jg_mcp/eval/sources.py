"""What the harness reads from outside its own process, once: the solution's bytes from the agent's workspace
and a private copy of the goal's two files, which is what the eval hashes and uses."""

from __future__ import annotations

import shutil
from pathlib import Path

from jg_mcp.errors import JgError, PathRefused
from jg_mcp.goals import LoadedGoal, load_goal
from jg_mcp.live.safefs import read_bounded
from jg_mcp.live.workspace import Workspace


def private_goal(yaml_path: Path, work: Path) -> LoadedGoal:
    """Load the goal from a private copy of its two files: what is hashed is what is used, whatever happens to
    the originals meanwhile, and no worker is pointed at the originals."""
    dest = work / "goal"
    dest.mkdir()
    shutil.copyfile(yaml_path, dest / yaml_path.name)
    shutil.copyfile(yaml_path.with_suffix(".py"), dest / yaml_path.with_suffix(".py").name)
    return load_goal(dest / yaml_path.name)


MAX_SOLUTION_BYTES = 16 * 1024 * 1024
"""The largest solution file read (the server's write_file limit)."""


def read_solution(workspace: Path, rel: str) -> bytes:
    """The solution's bytes, read once through the workspace's directory descriptor: the agent controls the
    workspace, so a link (to a host file the harness, often root, could read) or a FIFO is refused, not followed,
    and nothing is checked by name and then reopened."""
    try:
        ws = Workspace(workspace)
        with ws.open_file(ws.parts(rel)) as (fd, st):
            if st.st_size > MAX_SOLUTION_BYTES:
                raise JgError(f"solution file {workspace / rel} is {st.st_size} bytes, over {MAX_SOLUTION_BYTES}")
            return b"".join(read_bounded(fd, st.st_size))
    except (PathRefused, OSError) as exc:
        raise JgError(f"no solution file {workspace / rel} to evaluate: {exc}") from None
