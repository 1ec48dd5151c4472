"""Sandbox uids for a root server: one per live sandbox, unique across every jg-mcp server on the host.

RLIMIT_NPROC counts every process of a uid, and a uid owns its workspace; two sandboxes that shared
one would share a process cap and each other's files. So a uid is held through a lock file, one per
uid, in a directory only root can reach (`LOCK_DIR`): `fcntl.flock` on it for as long as the sandbox
lives. Every server process on the host takes its uids through the same directory, the kernel drops
the lock when the holder closes the file or dies, and no stale state is left behind.
"""

from __future__ import annotations

import fcntl
import glob
import grp
import os
import pwd
import signal
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path

from jg_mcp.errors import JgError
from jg_mcp.live.walk import walk_of

LOCK_DIR = Path("/run/jg-mcp/uids")


class SandboxError(JgError):
    """bubblewrap was required but cannot run here, or no sandbox uid is free."""


def processes() -> Iterator[tuple[int, set[int], bool]]:
    """Each process's pid, the uids it holds (real, effective, saved, file-system) and whether it is a zombie."""
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            uids = {int(x) for x in fields["Uid"].split()}
        except (OSError, ValueError, KeyError):
            continue
        yield int(status.split("/")[2]), uids, fields.get("State", "").split()[:1] == ["Z"]


def running_uids() -> set[int]:
    """Every uid a running process holds: real (what RLIMIT_NPROC counts), effective, saved and file-system. A
    setuid file a session left runs with its uid as the effective one and another as the real one, and can still
    write what that uid owns."""
    return {uid for _, uids, _ in processes() for uid in uids}


def holders(uid: int) -> list[int]:
    """The live processes (zombies aside) holding `uid` as their real, effective, saved or file-system uid."""
    return [pid for pid, uids, zombie in processes() if uid in uids and not zombie]


def end_holders(uid: int, wait_s: float = 5.0) -> list[int]:
    """Kill every process holding `uid` and wait until none is left (at most `wait_s`): a sandbox's uid is its
    alone, so whatever still holds it when the sandbox is released (a daemon that left its process group, or one
    its pid namespace is still tearing down) is the sandbox's. Stopped first, so a forking one cannot outrun it;
    returns the pids found."""
    seen: set[int] = set()
    deadline = time.monotonic() + wait_s
    while (found := holders(uid)) and time.monotonic() < deadline:
        seen.update(found)
        stop_then_kill(found)
        time.sleep(0.01)
    return sorted(seen)


def stop_then_kill(pids: list[int]) -> None:
    """SIGSTOP every one of `pids`, then SIGKILL them: stopped first, none can fork or signal meanwhile (pids
    already gone are passed over)."""
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def names_an_account(uid: int) -> bool:
    """True when `uid` is a user, or as a gid a group, of the account databases."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def private_dir(path: Path) -> Path:
    """`path`, created 0700 if missing; refused unless it is a directory of ours that nobody else can write."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxError(f"{path} must be a directory owned by uid {os.geteuid()} that only it can write")
    return path


class UidPool:
    """Hands out sandbox uids. A uid is free when no sandbox on the host holds its lock in `lock_dir`, no
    user or group has it, and no running process has it as its real uid (a closed session's processes
    still dying)."""

    def __init__(self, lock_dir: Path = LOCK_DIR) -> None:
        self.lock_dir = Path(lock_dir)
        self._locks: dict[int, int] = {}
        self._lock = threading.RLock()
        """Reentrant: a collected sandbox gives its uid back from a weakref finalizer, which the garbage collector
        may run on a thread in the middle of `take` (a plain lock hung that thread and every later `take`)."""

    @property
    def held(self) -> set[int]:
        """The uids this pool holds now."""
        return set(self._locks)

    def take(self, first: int, count: int) -> int:
        with self._lock:
            where = private_dir(self.lock_dir)
            busy = running_uids()
            for uid in range(first, first + count):
                if uid in self._locks or uid in busy or names_an_account(uid):
                    continue
                fd = os.open(where / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._locks[uid] = fd
                return uid
        raise SandboxError(
            f"no free sandbox uid in {first}..{first + count - 1} ({len(self._locks)} held by live sessions "
            f"of this server; the rest are held by other jg-mcp servers (locks in {self.lock_dir}), are "
            "accounts or run processes): close sessions or widen SandboxLimits.uid_count"
        )

    def note(self, uid: int, paths: Iterable[Path]) -> None:
        """Write in `uid`'s lock file the directories its holder gives the uid (none: nothing left to seal), so
        that whoever takes the uid after a holder that died without cleaning up finds them (`noted`)."""
        fd = self._locks[uid]
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"".join(os.fsencode(p) + b"\0" for p in paths), 0)

    def noted(self, uid: int) -> list[Path]:
        """What the last holder of `uid` wrote with `note` and did not clear: it died holding the uid."""
        fd, data, chunk = self._locks[uid], b"", b"-"
        while chunk:
            chunk = os.pread(fd, 1 << 16, len(data))
            data += chunk
        return [Path(os.fsdecode(p)) for p in data.split(b"\0") if p]

    def give_back(self, uid: int) -> None:
        with self._lock:
            fd = self._locks.pop(uid, None)
            if fd is not None:
                os.close(fd)


UIDS = UidPool()
"""The pool every Bwrap takes from unless given another."""


def chown_tree(root: Path, uid: int, keep: Iterable[str] = ()) -> list[str]:
    """chown `root` and everything under it (but `root`'s entries named in `keep`) to `uid`, through a bounded
    `Walk` (directory descriptors, no link followed), so a command running meanwhile cannot redirect it outside.
    Returns what the walk could not reach, one sentence each (empty: everything was handed over): what it did not
    reach keeps its owner, so a file the server wrote there (write_file, as root) stays read-only to commands."""
    keep = set(keep)

    def hand_over(top: int) -> None:
        st = os.fstat(top)
        if (st.st_uid, st.st_gid) != (uid, uid):
            os.fchown(top, uid, uid)

    walk = walk_of(root, hand_over)
    with closing(walk.entries()) as entries:
        for dfd, name, rel, st in entries:
            if rel in keep or (st.st_uid, st.st_gid) == (uid, uid):
                continue
            try:
                os.chown(name, uid, uid, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                pass  # gone meanwhile
    return walk.missed
