"""Where a command may write: a workspace, runs, transcripts or replay directory, or a report file, that no other
local user can plant, replace or redirect. Every existing ancestor is root's or ours and writable by nobody else
unless sticky, so once checked the path keeps naming the same directory for the command's life (later opens by
path stay sound); what is missing is made 0700, one mkdir at a time. A report file is written through its
directory's descriptor to a fresh file renamed into place, so no link at its name is followed and nobody holds
it open.

Every command that writes calls these (jg_mcp.commands.arguments checks its arguments with them): `check_place`
and `make_private_dir` for a directory, `check_output` and `write_output` for a file."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from jg_mcp.errors import JgError, UsageError
from jg_mcp.live.safefs import write_atomic


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
    _owned(path, what, st, stat.S_ISDIR, "a directory", "server")


def _owned(path: Path, what: str, st: os.stat_result, is_kind: Callable[[int], bool], kind: str, who: str) -> None:
    """An existing entry is no link, is of its `kind`, is ours (this `who`'s uid) and nobody else can write it."""
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(what, path, "is a symbolic link")
    if not is_kind(st.st_mode):
        raise _refuse(what, path, f"is not {kind}")
    if st.st_uid != os.geteuid():
        raise _refuse(what, path, f"belongs to uid {st.st_uid}, not to this {who}'s uid {os.geteuid()}")
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


def check_output(path: Path, what: str) -> None:
    """Refuse (UsageError) a file a command is to write where another local user could redirect it: its directory
    must pass `_check_chain` (root's or ours, links on the way root's or ours, not writable by others unless
    sticky); the file itself, if it exists, must be a regular file of ours (not a link) that nobody else can
    write."""
    path = Path(os.path.abspath(path))
    _check_chain(path.parent, what, path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _owned(path, what, st, stat.S_ISREG, "a regular file", "command")


def write_output(path: Path, data: str | bytes, what: str) -> None:
    """Write a command's output file: `check_output` again (the work that made `data` may have taken hours), then
    a fresh file in the directory opened once, renamed over `path` (jg_mcp.live.safefs.write_atomic: a link
    planted at `path` since is replaced, never followed). JgError when the file system refuses."""
    path = Path(os.path.abspath(path))
    check_output(path, what)
    raw = data.encode() if isinstance(data, str) else data
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            write_atomic(dir_fd, path.name, raw, str(path))
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise JgError(f"{what} {path}: cannot write it: {exc.strerror or exc}") from None
