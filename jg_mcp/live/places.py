"""Where a session may live: a workspace, runs or transcripts directory that no other local user can plant,
replace or redirect. Every existing ancestor is root's or ours and writable by nobody else unless sticky, so once
checked the path keeps naming the same directory for the session's life (later opens by path stay sound); what is
missing is made 0700, one mkdir at a time."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from jg_mcp.errors import UsageError


def _refuse(what: str, path: Path, problem: str) -> UsageError:
    return UsageError(f"{what} {path}: {problem}; choose a directory that no other user can write or replace")


def _check_chain(path: Path, what: str, place: Path) -> None:
    """Every existing directory from / down to `path` (included) is root's or ours, and others may not rename or
    plant entries in it (not writable by group or other, unless sticky). A link on the way must be root's or ours
    (its directory is checked already, so nobody swaps it); its target's chain is checked in turn."""
    for d in (*reversed(path.parents), path):
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            return  # made later, 0700, by `make_private_dir`
        if st.st_uid not in (0, os.geteuid()):
            raise _refuse(what, place, f"{d} belongs to uid {st.st_uid}, who can replace what is in it")
        if stat.S_ISLNK(st.st_mode):
            _check_chain(Path(os.path.realpath(d)), what, place)
        elif not stat.S_ISDIR(st.st_mode):
            raise _refuse(what, place, f"{d} is not a directory")
        elif st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise _refuse(
                what, place, f"{d} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}, not sticky)"
            )


def check_own(path: Path, what: str, st: os.stat_result) -> None:
    """An existing directory the session writes and hands to its sandbox: a real directory (not a link), ours,
    and writable by nobody else."""
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(what, path, "is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(what, path, "is not a directory")
    if st.st_uid != os.geteuid():
        raise _refuse(what, path, f"belongs to uid {st.st_uid}, not to this server's uid {os.geteuid()}")
    if st.st_mode & 0o022:
        raise _refuse(what, path, f"is writable by other users (mode {stat.S_IMODE(st.st_mode):o})")


def check_place(path: Path, what: str) -> None:
    """Refuse (UsageError) a directory that another local user could plant, replace or redirect before or while a
    session uses it: its ancestors must be root's or ours and not writable by others unless sticky (`_check_chain`);
    the directory itself, if it exists, a real directory of ours that nobody else can write (`check_own`)."""
    path = Path(os.path.abspath(path))  # lexical: no link followed
    _check_chain(path.parent, what, path)
    with contextlib.suppress(FileNotFoundError):
        check_own(path, what, os.lstat(path))


def make_private_dir(path: Path, what: str) -> None:
    """`check_place`, then make what is missing of `path` 0700, one mkdir at a time (mkdir never follows a link),
    each checked with lstat after: a directory another user made first in a sticky parent is refused."""
    check_place(path, what)
    path = Path(os.path.abspath(path))
    for d in (*reversed(path.parents), path):
        if os.path.lexists(d):
            continue
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)
        check_own(d, what if d == path else f"{what}'s directory", os.lstat(d))
