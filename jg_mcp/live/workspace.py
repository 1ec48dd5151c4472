"""The session's workspace: path confinement for the file tools, and change tracking (its scan:
jg_mcp.live.workspace_scan).

The workspace directory is opened once; every later access goes through that descriptor with
jg_mcp.live.safefs (no symbolic link followed, regular files only), so a command that swaps a directory for
a link, or a file for a FIFO or a device, cannot make the server read, write or wait outside it.

A scan hashes only the files whose hash it cannot trust from an earlier scan. The rule (`Commands`): a cached hash
is trusted only when it was taken while no command was running in the workspace and no command has started since
(and the file's size, times and inode are unchanged). A process writing through a shared mapping to a page that is
already dirty and writable changes the content and none of that metadata (on tmpfs no mmap write changes it), and
only a command's processes can hold such a mapping: they all end with the command (the sandbox), so once no command
has run since a hash was taken, nothing but a write that changes the metadata can have touched the file. Hence the
first scan after a command (and the session's last scan: `Runner.kill_all` ends the epoch) hashes every file
afresh, bounded by SCAN_READ_BYTES, and scans made while a command runs keep nothing.
"""

from __future__ import annotations

import itertools
import os
import stat
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from jg_mcp.errors import PathRefused
from jg_mcp.live import safefs
from jg_mcp.live.walk import SCAN_PATH_CHARS, Commands, commands_in, shown
from jg_mcp.live.workspace_scan import FileState, Hasher, Scan, file_sha256, is_utf8, scan_files

LISTED_ENTRIES = 10_000
"""Most entries of one directory `Workspace.listing` reads (a command can make millions)."""


def clean_parts(path: str, root: Path) -> tuple[str, ...]:
    """The components of an agent-supplied path inside `root` ('..' resolved by name, which is exact since
    no link is followed), or PathRefused."""
    if "\0" in path:
        raise PathRefused("path contains a NUL byte")
    if not is_utf8(path):
        raise PathRefused(
            "path is not valid UTF-8 text (it holds a lone surrogate); the workspace records UTF-8 names only: "
            "rename such a file with run_command"
        )
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

    def __init__(self, root: Path, fd: int, commands: Commands, protected: tuple[str, ...] = ()):
        self.root = root
        self.protected = set(protected)
        self.fd = fd
        """The workspace's directory, open: every path is resolved beneath it."""
        self.close = weakref.finalize(self, os.close, self.fd)
        """Close the workspace's descriptor (once; a mount at the workspace cannot be taken down while it is open)."""
        self._states: dict[str, FileState] = {}
        self.commands = commands
        """The commands run here (a Runner of this directory shares them): when the hash cache may be trusted."""
        self._cache: tuple[int | None, dict[str, FileState]] = (None, {})
        """The hashes of the last scan and the quiet epoch it started in (None: a command was running, nothing
        kept)."""

    @classmethod
    def open(cls, root: Path, protected: tuple[str, ...] = ()) -> Workspace:
        """The workspace at `root` (resolved once), its directory opened; `protected` are the files it refuses to
        write."""
        resolved = Path(root).resolve()
        fd = os.open(resolved, safefs.DIR_FLAGS)
        try:
            commands = commands_in(fd)
        except BaseException:
            os.close(fd)
            raise
        return cls(resolved, fd, commands, protected)

    def parts(self, path: str, for_write: bool = False) -> tuple[str, ...]:
        """Map an agent-supplied path to its components inside the workspace, or refuse it."""
        parts = clean_parts(path, self.root)
        if for_write:
            if not parts:
                raise PathRefused(f"'{path}' is the workspace directory")
            if len("/".join(parts)) > SCAN_PATH_CHARS:
                raise PathRefused(
                    f"the path is longer than the {SCAN_PATH_CHARS} characters the workspace records; use a shorter one"
                )
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

    def listing(self, parts: tuple[str, ...]) -> tuple[list[str], bool]:
        """The names in the directory `parts`, directories marked with a trailing '/', sorted; and whether that is
        all of them: at most LISTED_ENTRIES are read (the first the directory yields), whatever it holds."""
        with self.dir_fd(parts) as dfd, os.scandir(dfd) as found:
            names = [e.name for e in itertools.islice(found, LISTED_ENTRIES + 1)]
            complete = len(names) <= LISTED_ENTRIES
            names = names[:LISTED_ENTRIES]
            listed = sorted(
                shown(n) + ("/" if _is_dir(dfd, n) else "") + ("" if is_utf8(n) else " (name not UTF-8)") for n in names
            )
        return listed, complete

    def write(self, parts: tuple[str, ...], data: bytes) -> bool:
        """Atomically replace or create the file at `parts` (parents made); returns whether it is new."""
        with self.dir_fd(parts[:-1], create=True) as dfd:
            return safefs.write_atomic(dfd, parts[-1], data, "/".join(parts))

    def remove(self, parts: tuple[str, ...]) -> None:
        with self.dir_fd(parts[:-1]) as dfd:
            os.unlink(parts[-1], dir_fd=dfd)

    def scan(
        self,
        hasher: Hasher = file_sha256,
        limit: int | None = None,
        read_bytes: int | None = None,
        file_bytes: int | None = None,
        deadline: float | None = None,
    ) -> Scan:
        """Current regular files with hashes, by `scan_files` within its bounds (`limit`, `read_bytes`, `file_bytes`,
        `deadline`). A file keeps its cached hash only under the module's rule: unchanged size, times and inode, and
        no command run since the hash was taken (nor running then)."""
        quiet = self.commands.quiet_epoch()
        epoch, cached = self._cache
        out = scan_files(
            self.fd,
            hasher,
            cached if quiet is not None and epoch == quiet else {},
            limit,
            read_bytes,
            file_bytes,
            deadline,
        )
        self._cache = (quiet, dict(out.states) if quiet is not None else {})
        return out

    def changes(
        self,
        hasher: Hasher = file_sha256,
        read_bytes: int | None = None,
        file_bytes: int | None = None,
        deadline: float | None = None,
    ) -> tuple[dict[str, FileState], list[str], Scan]:
        """Files written (in the walk's order: a level's files before deeper ones) and deleted since the previous call
        (the first call sees everything), and the scan.
        A file the scan saw but did not read (`Scan.unread`) keeps its previous state; a scan that did not see
        every file (`Scan.partial`) reports no deletions: files it did not see keep their previous state.
        Every path returned is UTF-8 (a transcript can hold it). Callers serialise calls (Session holds a lock):
        the previous state is shared."""
        scan = self.scan(hasher, read_bytes=read_bytes, file_bytes=file_bytes, deadline=deadline)
        if scan.partial:
            kept = dict(self._states)
        else:
            kept = {p: self._states[p] for p in scan.unread if p in self._states}
        now = {**scan.states, **{p: s for p, s in kept.items() if p not in scan.states}}  # in the walk's order
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
