"""Race-free file access beneath a directory descriptor.

Every path is resolved relative to an open directory descriptor, never by name from the root of the
file system, and no symbolic link is ever followed: directories are opened with `openat2`
(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel has it (Linux 5.6+), else one component at a
time with O_NOFOLLOW | O_DIRECTORY. Files are acted on only when they are regular files: they are first
opened with O_PATH (no side effect, even on a device or a FIFO), checked with fstat, then reopened
through that descriptor, so a file swapped in by name between the check and the use is never touched.
Writes go to a fresh temporary name in the target's directory and are renamed over the target.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
from collections.abc import Sequence

from jg_mcp.errors import PathRefused

SYS_OPENAT2 = 437
"""openat2's syscall number (the same on x86_64 and aarch64)."""
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
EAGAIN_RETRIES = 64
"""openat2 answers EAGAIN when a rename raced the lookup; it is retried this many times."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _openat2(dir_fd: int, path: str, flags: int) -> int:
    how = _OpenHow(flags, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    for _ in range(EAGAIN_RETRIES):
        fd = _libc.syscall(
            ctypes.c_long(SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err not in (errno.EAGAIN, errno.EINTR):
            raise OSError(err, os.strerror(err), path)
    raise OSError(errno.EAGAIN, "the path kept changing while it was opened", path)


def _probe_openat2() -> bool:
    root = os.open("/", DIR_FLAGS)
    try:
        os.close(_openat2(root, ".", DIR_FLAGS))
    except (OSError, AttributeError):
        return False
    finally:
        os.close(root)
    return True


HAVE_OPENAT2 = _probe_openat2()
"""Whether this kernel has openat2; tests set it False to exercise the component-by-component walk."""


def refuse_link_or_kind(dir_fd: int, name: str, shown: str) -> None:
    """Raise PathRefused saying why `name` under `dir_fd` could not be opened as a directory, if it is
    a symbolic link or not a directory; return when it is neither (the caller re-raises its error)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise PathRefused(
            f"'{shown}' is or passes through a symbolic link; the file tools do not follow links "
            "(use the path it points to, inside the workspace)"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise PathRefused(f"'{shown}' is not a directory")


def _walk(dir_fd: int, parts: Sequence[str], create: bool) -> int:
    cur = os.open(".", DIR_FLAGS, dir_fd=dir_fd)
    try:
        for i, name in enumerate(parts):
            if create:
                try:
                    os.mkdir(name, 0o755, dir_fd=cur)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(name, DIR_FLAGS, dir_fd=cur)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    refuse_link_or_kind(cur, name, "/".join(parts[: i + 1]))
                raise
            os.close(cur)
            cur = nxt
    except BaseException:
        os.close(cur)
        raise
    return cur


def open_dir(root_fd: int, parts: Sequence[str], create: bool = False) -> int:
    """A new descriptor (its own open file description, so listing it does not disturb another thread's
    listing) of the directory `parts` (clean components: no '', '.', '..') beneath `root_fd`; with `create`,
    missing directories are made on the way. Symbolic links are refused."""
    if not parts:
        return os.open(".", DIR_FLAGS, dir_fd=root_fd)
    if create or not HAVE_OPENAT2:
        return _walk(root_fd, parts, create)
    try:
        return _openat2(root_fd, "/".join(parts), DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
            os.close(_walk(root_fd, parts, False))  # names the offending component, or raises its error
        raise


def kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a special file"


def open_regular(dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    """Open the regular file `name` in `dir_fd` for reading (O_NONBLOCK: it never blocks); anything else is
    refused with PathRefused naming what it is. Returns the descriptor and its fstat."""
    path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(path_fd)
        if not stat.S_ISREG(st.st_mode):
            raise PathRefused(
                f"'{shown}' is {kind(st.st_mode)}, not a regular file; the file tools act on regular files only"
            )
        try:
            fd = os.open(f"/proc/self/fd/{path_fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:  # no /proc: open by name, then check it is the same file
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            again = os.fstat(fd)
            if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)
                raise PathRefused(f"'{shown}' changed while it was opened; try again") from None
        return fd, st
    finally:
        os.close(path_fd)


def read_bounded(fd: int, size: int, chunk: int = 1 << 20):
    """Yield the first `size` bytes of `fd` (fewer if it is shorter) in chunks."""
    left = size
    while left > 0:
        data = os.read(fd, min(chunk, left))
        if not data:
            return
        left -= len(data)
        yield data


def write_atomic(dir_fd: int, name: str, data: bytes, shown: str) -> bool:
    """Replace (or create) `name` in `dir_fd` with `data` through a fresh temporary file and a rename, so
    no reader sees half a file and no link at `name` is ever written through (a symbolic link there is
    replaced; a directory or special file is refused). An existing file's permissions (and owner, where
    allowed) are kept. Returns whether the file is new."""
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode) and not stat.S_ISLNK(old.st_mode):
        raise PathRefused(
            f"'{shown}' is {kind(old.st_mode)}, not a regular file; the file tools act on regular files only"
        )
    tmp = f".jg-{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if old is not None and stat.S_ISREG(old.st_mode):
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                try:
                    os.fchown(fd, old.st_uid, old.st_gid)
                except PermissionError:
                    pass
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    return old is None
