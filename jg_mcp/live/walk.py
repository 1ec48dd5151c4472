"""Walking a workspace: `Walk`, the one bounded walk every scan and quota count makes (one descriptor per level,
bounded depth and entries, and what it could not see said), and `Commands`, what a workspace's hash cache must know
of the commands run in it (see jg_mcp.live.workspace for the rule)."""

from __future__ import annotations

import errno
import itertools
import os
import stat
import threading
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jg_mcp.live import safefs

SCAN_DEPTH = 128
"""Deepest directory level a walk of the workspace (a scan, a quota count) enters: the most descriptors it holds."""
SCAN_ENTRIES = 200_000
"""Most directory entries (files, directories, links, anything) one walk of the workspace lists: past it the walk
stops and says so. With SCAN_DEPTH it bounds what a walk costs (time, memory) whatever a command leaves behind,
empty directories by the million included."""
SCAN_PATH_CHARS = 1024
"""Longest path (characters, from the top of the walk) a walk yields or enters: a longer one is noted as not seen,
nor anything under it. Real sources and artefacts sit far shallower; without it, 120 levels of 250-character names
made every recorded file carry a 30 KB path (into the server's memory, each file_change line and the manifest)."""
SHOWN_NAMES = 10
"""Most paths a sentence about files not recorded names."""


def _cut(path: str) -> str:
    """`path` shown, its middle left out past 200 characters (a sentence about it stays short)."""
    text = shown(path)
    return text if len(text) <= 200 else f"{text[:100]}...{text[-100:]}"


def shown(name: str) -> str:
    """`name` printable and encodable: bytes that are not UTF-8 as `\\xNN`."""
    return name.encode(errors="surrogateescape").decode(errors="backslashreplace")


class Commands:
    """What a workspace's hash cache must know of the commands run in it: whether any is running, and an epoch
    that moves whenever one starts or ends (or the session closes). A Runner and a Workspace of one directory
    share one (`commands_in`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._epoch = 0
        self._running: set[object] = set()

    def started(self) -> object:
        """A command is about to start; returns the token `ended` takes."""
        token = object()
        with self._lock:
            self._epoch += 1
            self._running.add(token)
        return token

    def ended(self, token: object) -> None:
        """The command of `token` has ended and left no process behind (a second call does nothing more)."""
        with self._lock:
            self._epoch += 1
            self._running.discard(token)

    def invalidate(self) -> None:
        """Trust no hash taken before now (the session closes: its final manifest is hashed afresh)."""
        with self._lock:
            self._epoch += 1

    def quiet_epoch(self) -> int | None:
        """The epoch when no command is running, else None: a hash taken now may be trusted later only while
        this is unchanged."""
        with self._lock:
            return None if self._running else self._epoch


_COMMANDS: weakref.WeakValueDictionary[tuple[int, int], Commands] = weakref.WeakValueDictionary()
_COMMANDS_LOCK = threading.Lock()


def commands_in(directory: int | Path) -> Commands:
    """The `Commands` of a workspace directory (a descriptor or a path), one per directory (device, inode) while
    something holds it."""
    st = os.stat(directory)
    with _COMMANDS_LOCK:
        found = _COMMANDS.get((st.st_dev, st.st_ino))
        if found is None:
            found = _COMMANDS[(st.st_dev, st.st_ino)] = Commands()
        return found


Entry = tuple[int, str, str, os.stat_result]
"""A walked entry: its directory's descriptor, its name, its path under the top, its lstat."""


@dataclass
class _Level:
    """A directory the walk is in: its descriptor, its path's prefix, the names still to visit, and (while its
    other entries are visited) the subdirectories it holds, visited after them."""

    fd: int
    prefix: str
    names: Iterator[str]
    subdirs: list[str] | None = field(default_factory=list)
    """None once the walk visits the subdirectories."""


def walk_of(root: Path, first: Callable[[int], object] = lambda top: None) -> Walk:
    """A `Walk` of the directory `root`, opened once (no link followed), after `first` acted on `root` itself through
    the same descriptor (a chmod, a chown: what is changed is what is walked); the descriptor is closed if `first`
    raises."""
    top = os.open(root, safefs.DIR_FLAGS)
    try:
        first(top)
    except BaseException:
        os.close(top)
        raise
    return Walk(top)


class Walk:
    """A depth-first walk of the tree under the open directory `top` (which it takes and closes), through
    descriptors and with no link followed: `entries()` yields an `Entry` for everything under `top`, and enters the
    directories whose name `enter` accepts.

    Order: at each level, first everything but the directories, in name order, then each directory in name order,
    the walk going down into it just after yielding it. So a level's files all come before anything deeper: the
    workspace's top-level files (solution.py) are seen before any deep tree can take the walk's bounds (or a scan's
    file limit).

    It holds one descriptor per level it is in (two while listing one): each directory is listed at once, then its
    entries are visited one by one (a directory's name is kept until its turn), a subdirectory being opened
    (O_NOFOLLOW, relative to its parent) only when the walk goes down into it. It enters at most SCAN_DEPTH levels,
    lists at most SCAN_ENTRIES entries, and neither yields nor enters a path longer than SCAN_PATH_CHARS. What it
    could not see (too deep, too long a path, a directory it could not open or list, past the entry bound) is in
    `missed`, one sentence each (the first SHOWN_NAMES, then a count): an empty `missed` means every entry was
    seen. Listing `top` itself failing raises OSError."""

    def __init__(self, top: int, enter: Callable[[str], bool] = lambda name: True):
        self.top = top
        self.enter = enter
        self.missed: list[str] = []
        self.left = SCAN_ENTRIES
        self.stopped = False
        """The entry bound was reached: no directory is listed any more."""
        self._more = 0

    def note(self, sentence: str) -> None:
        if len(self.missed) < SHOWN_NAMES:
            self.missed.append(sentence)
            return
        self._more += 1
        more = f"and {self._more} more places the walk could not see"
        if self.missed[-1].startswith("and ") and self._more > 1:
            self.missed[-1] = more
        else:
            self.missed.append(more)

    def entries(self) -> Generator[Entry]:
        """The walk (close it, or run it to its end, to close its descriptors)."""
        try:
            names = self._list(self.top, "")
        except BaseException:
            os.close(self.top)
            raise
        stack = [_Level(self.top, "", iter(names))]
        try:
            while stack:
                level = stack[-1]
                name = next(level.names, None)
                if name is None:
                    if level.subdirs is not None:  # the level's other entries are done: now its directories
                        level.names, level.subdirs = iter(level.subdirs), None
                        continue
                    os.close(level.fd)
                    stack.pop()
                    continue
                rel = level.prefix + name
                if len(rel) > SCAN_PATH_CHARS:
                    self.note(f"'{_cut(rel)}' is a path longer than {SCAN_PATH_CHARS} characters: not seen")
                    continue
                try:
                    st = os.stat(name, dir_fd=level.fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    self.note(f"'{_cut(rel)}' could not be examined: {exc.strerror}")
                    continue
                if stat.S_ISDIR(st.st_mode) and level.subdirs is not None:
                    level.subdirs.append(name)  # its turn comes after the level's other entries
                    continue
                yield level.fd, name, rel, st
                if stat.S_ISDIR(st.st_mode) and self.enter(name):
                    self._descend(stack, level.fd, name, rel)
        finally:
            for level in stack:
                os.close(level.fd)

    def _descend(self, stack: list[_Level], dfd: int, name: str, rel: str) -> None:
        if self.stopped:
            return
        if len(rel) + 2 > SCAN_PATH_CHARS:  # '/' and a name of one character: longer than the bound
            self.note(
                f"'{_cut(rel)}/' is {len(rel)} characters long: nothing under it was seen, every path there "
                f"being longer than {SCAN_PATH_CHARS} characters"
            )
            return
        if len(stack) >= SCAN_DEPTH:
            self.note(f"'{shown(rel)}/' is deeper than {SCAN_DEPTH} levels: nothing under it was seen")
            return
        try:
            sub = os.open(name, safefs.DIR_FLAGS, dir_fd=dfd)
        except (FileNotFoundError, NotADirectoryError):  # gone, or swapped for something else, since the stat
            return
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a link since the stat: not followed
                return
            self.note(f"'{shown(rel)}/' could not be opened: {exc.strerror}")
            return
        try:
            names = self._list(sub, rel + "/")
        except OSError as exc:
            os.close(sub)
            self.note(f"'{shown(rel)}/' could not be listed: {exc.strerror}")
            return
        stack.append(_Level(sub, rel + "/", iter(names)))

    def _list(self, fd: int, prefix: str) -> list[str]:
        """The names in the directory `fd`, sorted, at most the entries left of the walk's bound."""
        with os.scandir(fd) as entries:
            names = [e.name for e in itertools.islice(entries, self.left + 1)]
        if len(names) > self.left:
            names = names[: self.left]
            self.stopped = True
            where = f" (in '{shown(prefix)}')" if prefix else ""
            self.note(f"the walk stopped at its bound of {SCAN_ENTRIES} entries{where}: the rest was not seen")
        self.left -= len(names)
        return sorted(names)
