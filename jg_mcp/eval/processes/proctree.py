"""The processes of a worker as the host sees them, from /proc, never from anything the worker says: its process
tree, the processes carrying the eval's token (unsandboxed, what left the tree), stopping, resuming or killing them
all (a forking process cannot outrun any of these: its children are found on the next look), and the files each
has mapped as code (what `jg_mcp.eval.native.native` judges)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from jg_mcp.live.uids import stop_then_kill


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (a process that exits meanwhile is left out)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    return children


def tree(root: int) -> list[int]:
    """`root` and its descendants, nearest first."""
    children, found, queue = _children(), [], [root]
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue += children.get(pid, [])
    return found


def state(pid: int, tid: int | None = None) -> str:
    """The process's (or with `tid`, its thread's) state letter (R, S, D, T, t, Z, X), "X" once it is gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def running(pid: int) -> bool:
    """Whether any thread of the process is running (state R); False where it cannot be read."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return False
    return any(state(pid, tid) == "R" for tid in tids)


def stop_all(find: Callable[[], list[int]], rounds: int = 50) -> list[int] | None:
    """SIGSTOP every process `find` names, and look again until a look finds no process not yet stopped (a process
    forking as it is stopped has its children found on the next look); the pids stopped, or None if new ones still
    appeared after `rounds` looks. It relies on the signal, not on the state /proc reports (which a sandboxing
    kernel such as gVisor may report otherwise): a signalled process runs no more code of its own once the signal
    is delivered, on its next return to user space."""
    stopped: set[int] = set()
    for _ in range(rounds):
        new = [pid for pid in find() if pid not in stopped and state(pid) not in "ZX"]
        if not new:
            for _ in range(10):  # a moment for the stops to show where /proc reports them (microseconds on Linux)
                if all(state(pid) in "TtZX" for pid in stopped):
                    break
                time.sleep(0.0005)
            return sorted(stopped)
        for pid in new:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
        time.sleep(0.0005)
    return None


def resume(pids: list[int]) -> None:
    """SIGCONT every one of `pids`, and wait a moment (at most 5 ms) for them to show running again where /proc
    reports stops: the resumed process's own restart is then over before the harness starts its clock."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
    for _ in range(10):
        if all(state(pid) not in "Tt" for pid in pids):
            break
        time.sleep(0.0005)


def descendant(root: int, marker: bytes) -> int | None:
    """The nearest descendant of `root` (itself included) that runs this Python with `marker` in its command line
    (under bwrap the sandboxed interpreter, not bwrap, whose own command line holds the whole command)."""
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            argv = []
        if argv and argv[0] == os.fsencode(sys.executable) and marker in argv:
            return pid
    return None


@dataclass(frozen=True)
class CodeMapping:
    """An executable mapping of a file in a process, as its /proc/PID/maps shows it."""

    pid: int
    range: str
    """Its address range as /proc/PID/map_files names it (`start-end`, hex)."""
    path: str
    """The file's path as the process sees it (in its own mount namespace), without the ` (deleted)` mark."""
    deleted: bool
    """The file was deleted (or is a memfd, whose path is `/memfd:NAME`) since it was mapped."""
    device: str
    """The mapped file's device, `major:minor` in hex as the maps file writes it."""
    inode: int
    """The mapped file's inode number."""


def code_mappings(pid: int) -> list[CodeMapping] | None:
    """The executable file mappings of the process, one per file (anonymous memory and the kernel's [vdso] left
    out); None once the process is gone. Other errors (a process whose maps the harness may not read) raise."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            lines = f.read().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return None
    found: dict[tuple[bytes, bytes, str], CodeMapping] = {}
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[1][2:3] != b"x" or not fields[5].startswith(b"/"):
            continue
        path = os.fsdecode(fields[5])
        deleted = path.endswith(" (deleted)")
        path = path.removesuffix(" (deleted)")
        key = (fields[3], fields[4], path)
        if key not in found:
            gone = deleted or path.startswith("/memfd:")
            found[key] = CodeMapping(pid, fields[0].decode(), path, gone, fields[3].decode(), int(fields[4]))
    return list(found.values())


def carrying(token: str) -> list[int]:
    """The processes whose environment carries `token` or a token under it (`token.x`: an eval's token finds every
    one of its processes, a process's token its own; this process aside)."""
    marker = f"JG_EVAL_TOKEN={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if any(v == marker or v.startswith(marker + b".") for v in f.read().split(b"\0")):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def sweep(token: str, rounds: int = 5) -> list[int]:
    """Kill every process whose environment carries the eval's token (what an unsandboxed candidate left
    behind, daemons included); returns their pids. Stops them first, so a forking one cannot outrun it."""
    killed: list[int] = []
    for _ in range(rounds):
        found = carrying(token)
        if not found:
            break
        stop_then_kill(found)
        killed += found
        time.sleep(0.05)
    return sorted(set(killed))
