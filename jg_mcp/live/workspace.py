"""The session's workspace: path confinement for the file tools, and change tracking.

The workspace directory is opened once; every later access goes through that descriptor with
jg_mcp.live.safefs (no symbolic link followed, regular files only), so a command that swaps a directory for
a link, or a file for a FIFO or a device, cannot make the server read, write or wait outside it.

A scan is bounded whatever a command leaves behind: at most SCAN_LIMIT files, SCAN_DEPTH levels, paths of
SCAN_PATH_CHARS characters (write_file refuses longer ones), and SCAN_READ_BYTES read (no file over SCAN_FILE_BYTES),
so sparse files of terabytes cost a stat each. Paths are recorded only when their names are UTF-8 (what a transcript
can hold); other names are reported, escaped. The walk sees each level's files before its subdirectories, so the
top-level files (the solution) are recorded whatever tree a command builds beside them.

Every walk of the workspace (the scan, the runner's quota count) is a `Walk`: it holds one descriptor per directory
level it is in (never one per sibling: a command that makes 30,000 directories must not take the server's
descriptors), enters at most SCAN_DEPTH levels, lists at most SCAN_ENTRIES entries, and says what it did not see.

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

import hashlib
import itertools
import os
import stat
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from jg_mcp.errors import PathRefused
from jg_mcp.live import safefs
from jg_mcp.live.walk import SCAN_PATH_CHARS, SHOWN_NAMES, Walk, commands_in, shown

LISTED_ENTRIES = 10_000
"""Most entries of one directory `Workspace.listing` reads (a command can make millions)."""
SCAN_LIMIT = 50_000
"""Most files a scan records; past it, the rest are named as skipped."""
SCAN_FILE_BYTES = 256 * 1024 * 1024
"""Largest file a scan reads (and hashes): past it the file is named as not recorded. Sources, compiled
artefacts and test data are far smaller; a sparse file of any size costs a command nothing, so without it one
`truncate -s 8G` made the scan read 8 GiB."""
SCAN_READ_BYTES = 1024 * 1024 * 1024
"""Most bytes one scan reads: changed files past it are named as not recorded, and the next scan reads them
(unchanged files cost nothing). About 3 s of hashing on a slow host: what the scan after a command may take."""
BYTECODE_DIR, BYTECODE_SUFFIX = "__pycache__", ".pyc"
"""Where the interpreter caches bytecode, rewritten at every import: a file there named *.pyc that is bytecode by its
content (`is_bytecode`) is not recorded, and a scan names it. Every other file is recorded wherever it lies: a source
or data file under `__pycache__/`, a file only named .pyc, and a .pyc outside `__pycache__/` (which Python imports
with no source beside it: code the record must hold), so no place or name is left out of the record."""
BYTECODE_HEADER = 17
"""Bytes of a .pyc file `is_bytecode` reads: the 16-byte header and the first byte of the marshalled code object."""
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
    """Bytecode files (`is_bytecode`), not recorded."""
    skipped: list[str] = field(default_factory=list)
    """What the scan could not record, each a sentence: the file limit, the depth limit, unreadable files, files
    past the byte bounds, names that are not UTF-8 (shown escaped)."""
    unread: list[str] = field(default_factory=list)
    """Regular files seen but not hashed (unreadable, or past the byte bounds): they keep their previous state."""
    partial: bool = False
    """Some files were not seen (the file limit, the depth or entry bound of the walk, a directory that could not
    be listed): any previously recorded file may still be there."""
    bytes_read: int = 0
    """What the hasher read."""


def file_sha256(fd: int, size: int) -> tuple[str, int]:
    """sha256 of the first `size` bytes of `fd`, and how many bytes there were."""
    h, n = hashlib.sha256(), 0
    for chunk in safefs.read_bounded(fd, size):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


def is_bytecode(dfd: int, name: str, rel: str) -> bool:
    """Whether the file `name` in `dfd` is Python bytecode: named *.pyc and starting with a .pyc header (a magic
    number ending in CR LF, then after the 16-byte header a marshalled code object). Anything else, whatever its
    name, is recorded."""
    if not name.endswith(BYTECODE_SUFFIX):
        return False
    try:
        fd, _ = safefs.open_regular(dfd, name, rel)
    except (PathRefused, OSError):
        return False
    try:
        head = os.pread(fd, BYTECODE_HEADER, 0)
    except OSError:
        return False
    finally:
        os.close(fd)
    return len(head) == BYTECODE_HEADER and head[2:4] == b"\r\n" and head[16] in (0x63, 0xE3)


def is_utf8(name: str) -> bool:
    """Whether `name` came from bytes that are UTF-8 (os.listdir escapes other bytes as lone surrogates, which
    no JSON encoder, hence no transcript, accepts)."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


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

    def __init__(self, root: Path, protected: tuple[str, ...] = ()):
        self.root = Path(root).resolve()
        self.protected = set(protected)
        self.fd = os.open(self.root, safefs.DIR_FLAGS)
        self.close = weakref.finalize(self, os.close, self.fd)
        """Close the workspace's descriptor (once; a mount at the workspace cannot be taken down while it is open)."""
        self._states: dict[str, FileState] = {}
        self.commands = commands_in(self.fd)
        """The commands run here (a Runner of this directory shares them): when the hash cache may be trusted."""
        self._cache: tuple[int | None, dict[str, FileState]] = (None, {})
        """The hashes of the last scan and the quiet epoch it started in (None: a command was running, nothing
        kept)."""

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
        """Current regular files with hashes (no link followed, nothing but regular files opened, each
        read only up to its size at the time), through a bounded `Walk`. A file keeps its cached hash only under
        the module's rule: unchanged size, times and inode, and no command run since the hash was taken (nor
        running then). At most `limit` files (default SCAN_LIMIT) are recorded and `read_bytes` (SCAN_READ_BYTES)
        read, no file larger than `file_bytes` (SCAN_FILE_BYTES); names that are not UTF-8 are not recorded. Past
        `deadline` (time.monotonic) the scan stops, partial, and says so."""
        quiet = self.commands.quiet_epoch()
        epoch, cached = self._cache
        run = _Run(
            out=Scan(states={}),
            hasher=hasher,
            limit=SCAN_LIMIT if limit is None else limit,
            read_bytes=SCAN_READ_BYTES if read_bytes is None else read_bytes,
            file_bytes=SCAN_FILE_BYTES if file_bytes is None else file_bytes,
            cached=cached if quiet is not None and epoch == quiet else {},
        )
        walk = Walk(safefs.open_dir(self.fd, ()), enter=is_utf8)
        with closing(walk.entries()) as entries:
            for dfd, name, rel, st in entries:
                if deadline is not None and time.monotonic() > deadline:
                    run.out.skipped.append(
                        f"the scan stopped at its time bound (before '{shown(rel[:200])}'): the rest was not seen "
                        "and keeps its recorded state"
                    )
                    run.out.partial = True
                    break
                if not self._visit(run, dfd, name, rel, st):
                    break
        if walk.missed:
            run.out.skipped += walk.missed
            run.out.partial = True
        run.summarise()
        self._cache = (quiet, dict(run.out.states) if quiet is not None else {})
        return run.out

    def _visit(self, run: _Run, dfd: int, name: str, rel: str, st: os.stat_result) -> bool:
        """Record or pass over one walked entry (the walk enters directories); False when the file limit ends
        the scan."""
        out = run.out
        is_dir, is_reg = stat.S_ISDIR(st.st_mode), stat.S_ISREG(st.st_mode)
        if (is_dir or is_reg) and not is_utf8(name):
            run.bad_names.append(f"'{shown(rel)}" + ("/'" if is_dir else "'"))
        elif is_reg:
            if f"/{BYTECODE_DIR}/" in f"/{rel}" and is_bytecode(dfd, name, rel):
                out.unrecorded.append(rel)
            elif len(out.states) >= run.limit:
                out.skipped.append(f"files past the first {run.limit} (such as '{rel}') were not recorded")
                out.partial = True
                return False
            else:
                self._hash(run, dfd, name, rel, st)
        return True

    def _hash(self, run: _Run, dfd: int, name: str, rel: str, st: os.stat_result) -> None:
        out = run.out
        old = run.cached.get(rel)
        if old and (old.size, old.mtime_ns, old.ctime_ns, old.ino) == (
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            st.st_ino,
        ):
            out.states[rel] = old
            return
        if st.st_size > run.file_bytes:  # not even opened
            run.unread(run.too_large, rel)
            return
        try:
            fd, st = safefs.open_regular(dfd, name, rel)
        except (PathRefused, FileNotFoundError):  # swapped for something else, or gone, since the stat
            return
        except OSError as exc:
            run.unread(run.unreadable, rel, exc.strerror)
            return
        try:
            if st.st_size > run.file_bytes:  # grew since the stat
                run.unread(run.too_large, rel)
                return
            if out.bytes_read + st.st_size > run.read_bytes:
                run.unread(run.over_budget, rel)
                return
            digest, size = run.hasher(fd, st.st_size)
        except OSError as exc:  # an I/O error on this file: the others are still recorded
            run.unread(run.unreadable, rel, exc.strerror)
            return
        finally:
            os.close(fd)
        out.bytes_read += size
        out.states[rel] = FileState(size, st.st_mtime_ns, digest, st.st_ctime_ns, st.st_ino)

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


@dataclass
class _Run:
    """One scan in progress: its result, its hasher and bounds, and the files it passed over, by reason."""

    out: Scan
    hasher: Hasher
    limit: int
    read_bytes: int
    file_bytes: int
    cached: dict[str, FileState]
    """Hashes this scan may trust (see the module's rule), by path."""
    unreadable: list[str] = field(default_factory=list)
    too_large: list[str] = field(default_factory=list)
    over_budget: list[str] = field(default_factory=list)
    bad_names: list[str] = field(default_factory=list)
    """Each list holds paths as a sentence names them: quoted, maybe followed by why."""

    def unread(self, reason: list[str], rel: str, why: str | None = None) -> None:
        """`rel` was seen but not read, for `reason` (one of the lists above)."""
        reason.append(f"'{rel}'" + (f" ({why})" if why else ""))
        self.out.unread.append(rel)

    def summarise(self) -> None:
        """One sentence in `skipped` per reason files were passed over, naming the first few."""
        for paths, what in (
            (self.unreadable, "files that could not be read were not recorded"),
            (
                self.too_large,
                f"files larger than the {self.file_bytes} bytes a scan reads of one file were not recorded",
            ),
            (
                self.over_budget,
                f"changed files were not recorded, the scan having read its {self.read_bytes} bytes; the next scan "
                "reads them",
            ),
            (self.bad_names, "names that are not UTF-8 (shown escaped) were not recorded, nor anything under them"),
        ):
            if paths:
                named = ", ".join(paths[:SHOWN_NAMES]) + (", ..." if len(paths) > SHOWN_NAMES else "")
                self.out.skipped.append(f"{what}: {named} ({len(paths)} in all)")


def _is_dir(dfd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False
