"""The scan of a workspace: which of its files are recorded, and their hashes, within bounds whatever a command
leaves behind.

A scan records at most SCAN_LIMIT files, SCAN_DEPTH levels, paths of SCAN_PATH_CHARS characters (write_file refuses
longer ones), and reads SCAN_READ_BYTES (no file over SCAN_FILE_BYTES), so sparse files of terabytes cost a stat each.
Paths are recorded only when their names are UTF-8 (what a transcript can hold); other names are reported, escaped.
The walk sees each level's files before its subdirectories, so the top-level files (the solution) are recorded
whatever tree a command builds beside them.

Every walk of the workspace (the scan, the runner's quota count) is a `Walk`: it holds one descriptor per directory
level it is in (never one per sibling: a command that makes 30,000 directories must not take the server's
descriptors), enters at most SCAN_DEPTH levels, lists at most SCAN_ENTRIES entries, and says what it did not see.

A file keeps the hash the scan is handed for it (`cached`) when its size, times and inode are unchanged; which hashes
may be handed is the workspace's rule (jg_mcp.live.workspace).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field

from jg_mcp.errors import PathRefused
from jg_mcp.live import safefs
from jg_mcp.live.walk import SHOWN_NAMES, Walk, shown

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


def scan_files(
    root_fd: int,
    hasher: Hasher,
    cached: dict[str, FileState],
    limit: int | None = None,
    read_bytes: int | None = None,
    file_bytes: int | None = None,
    deadline: float | None = None,
) -> Scan:
    """The regular files under the directory `root_fd` with hashes (no link followed, nothing but regular files
    opened, each read only up to its size at the time), through a bounded `Walk`; a file keeps its hash from `cached`
    when its size, times and inode are unchanged. At most `limit` files (default SCAN_LIMIT) are recorded and
    `read_bytes` (SCAN_READ_BYTES) read, no file larger than `file_bytes` (SCAN_FILE_BYTES); names that are not
    UTF-8 are not recorded. Past `deadline` (time.monotonic) the scan stops, partial, and says so."""
    run = _Run(
        out=Scan(states={}),
        hasher=hasher,
        limit=SCAN_LIMIT if limit is None else limit,
        read_bytes=SCAN_READ_BYTES if read_bytes is None else read_bytes,
        file_bytes=SCAN_FILE_BYTES if file_bytes is None else file_bytes,
        cached=cached,
    )
    walk = Walk(safefs.open_dir(root_fd, ()), enter=is_utf8)
    with closing(walk.entries()) as entries:
        for dfd, name, rel, st in entries:
            if deadline is not None and time.monotonic() > deadline:
                run.out.skipped.append(
                    f"the scan stopped at its time bound (before '{shown(rel[:200])}'): the rest was not seen "
                    "and keeps its recorded state"
                )
                run.out.partial = True
                break
            if not _visit(run, dfd, name, rel, st):
                break
    if walk.missed:
        run.out.skipped += walk.missed
        run.out.partial = True
    run.summarise()
    return run.out


def _visit(run: _Run, dfd: int, name: str, rel: str, st: os.stat_result) -> bool:
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
            _hash(run, dfd, name, rel, st)
    return True


def _hash(run: _Run, dfd: int, name: str, rel: str, st: os.stat_result) -> None:
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


@dataclass
class _Run:
    """One scan in progress: its result, its hasher and bounds, and the files it passed over, by reason."""

    out: Scan
    hasher: Hasher
    limit: int
    read_bytes: int
    file_bytes: int
    cached: dict[str, FileState]
    """Hashes this scan may trust (by the workspace's rule, jg_mcp.live.workspace), by path."""
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
