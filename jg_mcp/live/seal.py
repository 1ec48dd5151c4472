"""Sealing a directory a sandbox's uid can write (the workspace, the compile cache), as the host sees it: the
directory 0700 and no setuid or setgid bit on anything in it. The sandbox's mounts are nosuid, the host's are not, so a
setuid file a command leaves would otherwise hand a local user the sandbox uid (`jg_mcp.live.bwrap` seals after
every command, at release, and what a killed server left before its uid is handed out again)."""

from __future__ import annotations

import os
import stat
from contextlib import closing
from pathlib import Path

from jg_mcp.live.walk import walk_of

SETID = stat.S_ISUID | stat.S_ISGID


def seal(root: Path) -> list[str]:
    """Close up a directory that a sandbox's uid can write, as the host sees it: `root` 0700 (nobody else reaches
    anything under it) and no setuid or setgid bit on anything in it (the host's mount honours them). Walked with a
    bounded `Walk` (directory descriptors, no link followed), so another command running meantime cannot redirect
    it and a workspace of millions of entries costs it no more than a scan. Returns what the walk could not reach,
    one sentence each: there a setid bit may be left, and `root`'s mode, always set first, is what guards it (only
    the sandbox uid and root can reach anything under `root`, and the uid's own setid files give nobody more)."""
    walk = walk_of(root, lambda top: os.fchmod(top, 0o700))
    with closing(walk.entries()) as entries:
        for dfd, name, _, st in entries:
            if st.st_mode & SETID and not stat.S_ISLNK(st.st_mode):
                _drop_setid(dfd, name)
    return walk.missed


def _drop_setid(dfd: int, name: str) -> None:
    """Clear the setuid and setgid bits of `name` in `dfd`, through a descriptor: what is checked is what changes."""
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return  # gone meanwhile
    try:
        st = os.fstat(fd)
        if st.st_mode & SETID and not stat.S_ISLNK(st.st_mode):
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & ~SETID)
    finally:
        os.close(fd)
