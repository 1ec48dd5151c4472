"""Process groups, as the host sees them: the one way a command's processes are killed and known to be gone. A
command runs as the leader of a group of its own, and everything it starts stays in it (a sandbox's pid 1 too:
jg_mcp.live.sandbox.NAMESPACES), so a kill of the group reaches all of it."""

from __future__ import annotations

import os
import signal
import time


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """True while some process is in the group (one we may not signal counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_running(pgid: int) -> bool:
    """True while a process in the group has not exited. A zombie does not count: dead, it waits for its parent to
    reap it, and an orphan's new parent, the host's (or a container's) init, may never do so."""
    if not group_alive(pgid):
        return False
    for entry in os.scandir("/proc"):
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                state, _, group = fh.read().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):  # not a process, or one that has just ended
            continue
        if int(group) == pgid and state not in (b"Z", b"X"):
            return True
    return False


def end_group(pgid: int, within_s: float) -> None:
    """Kill what is left of a group whose leader has exited, and wait (blocking: call it in a thread) until none of
    it runs, at most `within_s`. A group with a process in it, a zombie too, keeps its number, so the kill cannot
    reach another group that took the number since."""
    deadline = time.monotonic() + within_s
    while group_running(pgid) and time.monotonic() < deadline:
        kill_group(pgid)
        time.sleep(0.005)
