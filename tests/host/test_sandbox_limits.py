"""What a sandboxed command runs under and what its result says: no core dumps, death by a signal reported the
same sandboxed or not, and the walks around each command bounded, their time inside the command's."""

from __future__ import annotations

import os
import stat
import time

import anyio
import pytest

from jg_mcp.live import bwrap as bwrap_module
from jg_mcp.live import uids, walk
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.runner import Runner
from jg_mcp.live.sandbox import NoSandbox
from tests.support import bwrap_missing

BWRAP_MISSING = bwrap_missing()

pytestmark = pytest.mark.slow


def run_all(runner: Runner, *commands: str, timeout_s: float = 30):
    async def go():
        with anyio.fail_after(120):
            return [await runner.run(c, timeout_s) for c in commands]

    return anyio.run(go)


def runner_for(kind: str, ws):
    if kind == "bwrap":
        if BWRAP_MISSING:
            pytest.skip(BWRAP_MISSING)
        box = Bwrap(ws)
        return Runner(ws, wrap=box.wrap, env=box.env), box
    box = NoSandbox()
    return Runner(ws, wrap=box.wrap, env=box.env), box


def test_a_command_cannot_forge_the_reapers_report_of_its_death(tmp_path):
    """The command can open its reaper's descriptors through /proc (same uid): a report written there is believed
    only where bwrap's own status agrees (128+N)."""
    runner, box = runner_for("bwrap", tmp_path)
    try:
        (forged,) = run_all(runner, "for f in /proc/$PPID/fd/*; do printf 9 > $f; done 2>/dev/null; exit 3")
    finally:
        box.release()
    assert forged.exit_code == 3, forged


@pytest.mark.parametrize("kind", ["none", "bwrap"])
def test_a_command_killed_by_a_signal_reports_minus_the_signal_and_an_exit_of_137_stays_137(tmp_path, kind):
    runner, box = runner_for(kind, tmp_path)
    try:
        killed, termed, crashed, exited, piped = run_all(
            runner,
            "kill -KILL $$",
            "kill -TERM $$",
            "python -c 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'",
            "exit 137",
            "yes | head -c 10 > /dev/null; echo ${PIPESTATUS[0]}",
        )
    finally:
        box.release()
    assert (killed.exit_code, termed.exit_code, crashed.exit_code) == (-9, -15, -11), (killed, termed, crashed)
    assert exited.exit_code == 137
    assert piped.stdout.strip() == "141", piped  # `yes` dies of SIGPIPE as it would outside: nothing ignores it


def test_a_sandboxed_command_cannot_dump_core_nor_raise_the_limit(tmp_path):
    runner, box = runner_for("bwrap", tmp_path)
    try:
        [r] = run_all(runner, "ulimit -c; ulimit -Hc; ulimit -c unlimited 2>/dev/null && echo raised || echo refused")
    finally:
        box.release()
    assert r.stdout.split() == ["0", "0", "refused"], r


def make_dirs(root, n: int) -> None:
    d = root / "d"
    d.mkdir()
    for i in range(n):
        os.mkdir(d / str(i))


@pytest.mark.skipif(os.geteuid() != 0, reason="the hand-over to a sandbox uid happens only under a root server")
def test_the_hand_over_and_seal_walks_stop_at_their_bound_and_the_result_says_so(tmp_path, monkeypatch):
    if BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    monkeypatch.setattr(walk, "SCAN_ENTRIES", 300)
    ws = tmp_path / "ws"
    ws.mkdir()
    make_dirs(ws, 1000)
    box = Bwrap(ws)
    runner = Runner(ws, wrap=box.wrap, env=box.env)
    try:
        [r] = run_all(runner, "true")
    finally:
        box.release()
    assert r.exit_code == 0
    assert r.notice and "300 entries" in r.notice and "hand" in r.notice, r.notice


@pytest.mark.skipif(os.geteuid() != 0, reason="the hand-over to a sandbox uid happens only under a root server")
def test_a_seal_stopped_at_its_bound_says_so_and_leaves_the_workspace_closed_to_other_users(tmp_path, monkeypatch):
    if BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    monkeypatch.setattr(walk, "SCAN_ENTRIES", 300)
    ws = tmp_path / "ws"
    ws.mkdir()
    box = Bwrap(ws)
    runner = Runner(ws, wrap=box.wrap, env=box.env)
    try:
        [made] = run_all(
            runner, "cp /bin/true a_setuid && chmod 4755 a_setuid && mkdir d && cd d && mkdir $(seq 400) && chmod 755 ."
        )
        mode = stat.S_IMODE(os.stat(ws).st_mode)
        sealed = os.stat(ws / "a_setuid").st_mode
    finally:
        box.release()
    assert made.exit_code == 0, made
    assert made.notice and "could not be sealed whole" in made.notice and "300 entries" in made.notice, made.notice
    assert mode == 0o700 and not sealed & (stat.S_ISUID | stat.S_ISGID)


@pytest.mark.skipif(os.geteuid() != 0, reason="the hand-over to a sandbox uid happens only under a root server")
def test_the_setup_walk_counts_in_the_commands_duration_and_timeout(tmp_path, monkeypatch):
    if BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    slow = uids.chown_tree

    def chown_slowly(*args, **kw):
        time.sleep(1.5)
        return slow(*args, **kw)

    monkeypatch.setattr(bwrap_module, "chown_tree", chown_slowly)
    ws = tmp_path / "ws"
    ws.mkdir()
    box = Bwrap(ws)
    runner = Runner(ws, wrap=box.wrap, env=box.env)
    try:
        [r] = run_all(runner, "true")
        [late] = run_all(runner, "echo ran", timeout_s=1)
    finally:
        box.release()
    assert r.duration_s >= 1.5, r
    assert late.timed_out and late.exit_code is None and late.stdout == "" and late.duration_s >= 1.5, late
    assert late.notice and "setting up its sandbox took its whole timeout" in late.notice


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand files to another uid")
def test_the_hand_over_gives_each_entry_the_uid_and_its_group(tmp_path):
    """An entry whose owner is already the sandbox uid but whose group is another's is handed over too."""
    (tmp_path / "ws").mkdir()
    f = tmp_path / "ws" / "f"
    f.write_text("x")
    os.chown(f, 61000, 0)
    assert uids.chown_tree(tmp_path / "ws", 61000) == []
    assert (f.stat().st_uid, f.stat().st_gid) == (61000, 61000)


FORGE_BY_PIDFD = (
    "python3 -c 'import ctypes, os, sys\n"
    "pfd = os.pidfd_open(int(sys.argv[1]))\n"
    "libc = ctypes.CDLL(None)\n"
    "for fd in range(3, 64):\n"
    "    got = libc.syscall(438, pfd, fd, 0)\n"
    "    if got >= 0:\n"
    '        os.write(got, b"9")\n'
    "' $PPID; exit 137"
)
"""pidfd_getfd (438 on x86_64 and aarch64) on the reaper's descriptors (bash's parent), then an exit that agrees
with the forgery."""


def test_a_command_cannot_take_its_reapers_descriptors(tmp_path):
    """The reaper runs as the command's uid: made non-dumpable, it cannot be ptraced nor have its status pipe taken
    (red team: pidfd_getfd took it and `exit 137` then read as a SIGKILL)."""
    runner, box = runner_for("bwrap", tmp_path)
    try:
        (forged,) = run_all(runner, FORGE_BY_PIDFD)
    finally:
        box.release()
    assert forged.exit_code == 137, forged


def test_a_command_too_long_to_start_leaks_no_descriptor(tmp_path):
    """A spawn that fails (here an argument past the kernel's limit) closes the reaper's pipe."""
    runner, box = runner_for("bwrap", tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    try:
        for _ in range(5):
            with pytest.raises(OSError):
                run_all(runner, "echo " + "x" * 200_000)
    finally:
        box.release()
    assert len(os.listdir("/proc/self/fd")) <= before
