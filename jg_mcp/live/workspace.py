"""The session's workspace: path confinement for the file tools, and change tracking.

The workspace directory is opened once; every later access goes through that descriptor with
jg_mcp.live.safefs (no symbolic link followed, regular files only), so a command that swaps a directory for
a link, or a file for a FIFO or a device, cannot make the server read, write or wait outside it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from jg_mcp.errors import PathRefused
from jg_mcp.live import safefs

SCAN_LIMIT = 50_000
"""Most files a scan records; past it, the rest are named as skipped."""
SCAN_DEPTH = 128
"""Deepest directory level a scan enters."""
UNRECORDED_DIR = "__pycache__"
"""Directories whose files are not recorded (bytecode the interpreter rewrites); a scan names them."""
Hasher = Callable[[int, int], tuple[str, int]]
"""Given a regular file's descriptor and size, returns (sha256, bytes hashed): file_sha256, or a
transcript's blob store which also keeps the content."""


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    sha256: str
    ctime_ns: int = 0
    ino: int = 0


@dataclass
class Scan:
    states: dict[str, FileState]
    """Regular files: workspace-relative path -> state."""
    unrecorded: list[str] = field(default_factory=list)
    """Files under __pycache__, not recorded."""
    skipped: list[str] = field(default_factory=list)
    """What the scan could not record, each a sentence: the file limit, the depth limit, unreadable files."""


def file_sha256(fd: int, size: int) -> tuple[str, int]:
    """sha256 of the first `size` bytes of `fd`, and how many bytes there were."""
    h, n = hashlib.sha256(), 0
    for chunk in safefs.read_bounded(fd, size):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


def clean_parts(path: str, root: Path) -> tuple[str, ...]:
    """The components of an agent-supplied path inside `root` ('..' resolved by name, which is exact since
    no link is followed), or PathRefused."""
    if "\0" in path:
        raise PathRefused("path contains a NUL byte")
    if not path.strip():
        raise PathRefused("path is empty")
    p = PurePosixPath(path)
    if p.is_absolute():
        try:
            p = p.relative_to(root)
        except ValueError:
            raise PathRefused(
                f"'{path}' is outside the workspace {root}; use a path relative to the workspace"
            ) from None
    parts: list[str] = []
    for part in p.parts:
        if part == "..":
            if not parts:
                raise PathRefused(f"'{path}' leads outside the workspace {root}; use a path relative to the workspace")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return tuple(parts)


class Workspace:
    """A directory the agent may read and write, and nothing outside it."""

    def __init__(self, root: Path, protected: tuple[str, ...] = ()):
        self.root = Path(root).resolve()
        self.protected = set(protected)
        self.fd = os.open(self.root, safefs.DIR_FLAGS)
        weakref.finalize(self, os.close, self.fd)
        self._states: dict[str, FileState] = {}

    def parts(self, path: str, for_write: bool = False) -> tuple[str, ...]:
        """Map an agent-supplied path to its components inside the workspace, or refuse it."""
        parts = clean_parts(path, self.root)
        if for_write:
            if not parts:
                raise PathRefused(f"'{path}' is the workspace directory")
            if "/".join(parts) in self.protected:
                raise PathRefused(f"'{'/'.join(parts)}' is a goal file copied in for reference and is read-only")
        return parts

    @contextmanager
    def dir_fd(self, parts: tuple[str, ...], create: bool = False) -> Iterator[int]:
        fd = safefs.open_dir(self.fd, parts, create)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def open_file(self, parts: tuple[str, ...]) -> Iterator[tuple[int, os.stat_result]]:
        """The regular file at `parts`, open for reading, and its fstat; PathRefused for anything else."""
        if not parts:
            raise PathRefused("the workspace directory is not a file")
        with self.dir_fd(parts[:-1]) as dfd:
            fd, st = safefs.open_regular(dfd, parts[-1], "/".join(parts))
        try:
            yield fd, st
        finally:
            os.close(fd)

    def kind(self, parts: tuple[str, ...]) -> str | None:
        """'dir', 'file', another kind's name, or None when nothing is there (no link followed)."""
        if not parts:
            return "dir"
        try:
            with self.dir_fd(parts[:-1]) as dfd:
                st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "file" if stat.S_ISREG(st.st_mode) else safefs.kind(st.st_mode)

    def listing(self, parts: tuple[str, ...]) -> list[str]:
        """The names in the directory `parts`, directories marked with a trailing '/'."""
        with self.dir_fd(parts) as dfd:
            names = os.listdir(dfd)
            return sorted(n + ("/" if _is_dir(dfd, n) else "") for n in names)

    def write(self, parts: tuple[str, ...], data: bytes) -> bool:
        """Atomically replace or create the file at `parts` (parents made); returns whether it is new."""
        with self.dir_fd(parts[:-1], create=True) as dfd:
            return safefs.write_atomic(dfd, parts[-1], data, "/".join(parts))

    def remove(self, parts: tuple[str, ...]) -> None:
        with self.dir_fd(parts[:-1]) as dfd:
            os.unlink(parts[-1], dir_fd=dfd)

    def scan(self, hasher: Hasher = file_sha256, limit: int | None = None) -> Scan:
        """Current regular files with hashes (no link followed, nothing but regular files opened, each
        read only up to its size at the time); unchanged files (size, times, inode) reuse the cached hash.
        At most `limit` files (default SCAN_LIMIT) are recorded."""
        limit = SCAN_LIMIT if limit is None else limit
        out = Scan(states={})
        top = safefs.open_dir(self.fd, ())
        try:
            names = iter(sorted(os.listdir(top)))
        except BaseException:
            os.close(top)
            raise
        stack = [(top, "", names)]
        try:
            while stack:
                dfd, prefix, names = stack[-1]
                name = next(names, None)
                if name is None:
                    os.close(dfd)
                    stack.pop()
                    continue
                rel = prefix + name
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    self._enter(out, stack, dfd, name, rel)
                elif stat.S_ISREG(st.st_mode):
                    if f"/{UNRECORDED_DIR}/" in f"/{rel}":
                        out.unrecorded.append(rel)
                    elif len(out.states) >= limit:
                        out.skipped.append(f"files past the first {limit} (such as '{rel}') were not recorded")
                        break
                    else:
                        self._hash(out, dfd, name, rel, st, hasher)
        finally:
            for dfd, _, _ in stack:
                os.close(dfd)
        return out

    def _enter(self, out: Scan, stack: list, dfd: int, name: str, rel: str) -> None:
        if len(stack) >= SCAN_DEPTH:
            out.skipped.append(f"'{rel}' is deeper than {SCAN_DEPTH} levels: its files were not recorded")
            return
        try:
            sub = os.open(name, safefs.DIR_FLAGS, dir_fd=dfd)
        except OSError:  # replaced by something else since the stat: gone from this scan
            return
        try:
            names = iter(sorted(os.listdir(sub)))
        except OSError as exc:
            os.close(sub)
            out.skipped.append(f"'{rel}' could not be listed: {exc.strerror}")
            return
        stack.append((sub, rel + "/", names))

    def _hash(self, out: Scan, dfd: int, name: str, rel: str, st: os.stat_result, hasher: Hasher) -> None:
        old = self._states.get(rel)
        if old and (old.size, old.mtime_ns, old.ctime_ns, old.ino) == (
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            st.st_ino,
        ):
            out.states[rel] = old
            return
        try:
            fd, st = safefs.open_regular(dfd, name, rel)
        except (PathRefused, FileNotFoundError):  # swapped for something else, or gone, since the stat
            return
        except OSError as exc:
            out.skipped.append(f"'{rel}' could not be read: {exc.strerror}")
            return
        try:
            digest, size = hasher(fd, st.st_size)
        finally:
            os.close(fd)
        out.states[rel] = FileState(size, st.st_mtime_ns, digest, st.st_ctime_ns, st.st_ino)

    def changes(self, hasher: Hasher = file_sha256) -> tuple[dict[str, FileState], list[str], Scan]:
        """Files written and deleted since the previous call (the first call sees everything), and the scan.
        A scan that skipped something (`Scan.skipped`) reports no deletions: files it did not see keep their
        previous state. Callers serialise calls (Session holds a lock): the previous state is shared."""
        scan = self.scan(hasher)
        now = scan.states
        if scan.skipped:
            now = {**{p: s for p, s in self._states.items() if f"/{UNRECORDED_DIR}/" not in f"/{p}"}, **now}
        changed = {p: s for p, s in now.items() if p not in self._states or self._states[p].sha256 != s.sha256}
        deleted = sorted(set(self._states) - set(now))
        self._states = now
        return changed, deleted, scan

    def manifest(self) -> dict[str, dict[str, object]]:
        """path -> {sha256, size} of the files as of the last `changes` (what the transcript recorded)."""
        return {p: {"sha256": s.sha256, "size": s.size} for p, s in sorted(self._states.items())}


def _is_dir(dfd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False
