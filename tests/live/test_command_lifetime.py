"""A sandboxed command outlives neither its kill nor the server: the runner's kill (the call cancelled, the client
gone, the session closed, the timeout) and the server's SIGKILL take the whole sandbox down, wherever bubblewrap is
in its start.

bwrap's pid 1 binds itself to bwrap's outer process (--die-with-parent) only once it is up; under load it can be
slow to get there while the command it forked already runs. A kill or a death that ends only the outer process in
that window orphans pid 1 with the command still running, and the lifeline, checked before, lets it run on. These
tests hold pid 1 in that window for as long as they need: a `--lock-file` that is a FIFO, which bwrap's pid 1 opens
(and blocks on, no writer) just before it sets its parent-death signal, while the command runs beside it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.runner import Argv, Runner
from tests.support import bwrap_missing

BWRAP_MISSING = bwrap_missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(BWRAP_MISSING), reason=BWRAP_MISSING or "")]
WAIT_S = 30
HELD = "/tmp/jg-held-init"
"""Where the FIFO is bound inside the sandbox (its /tmp is a writable tmpfs, so bwrap can make the mount point)."""


def running(pattern: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, timeout=30)
    return [int(p) for p in done.stdout.split()]


def wait_for(predicate: Callable[[], object], seconds: float) -> bool:
    """Poll (a process's start and end have no event to wait on) until true; False once `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def held_init(tmp_path) -> Iterator[tuple[Runner, Path]]:
    """A runner whose sandboxes' pid 1 waits, before binding itself to bwrap's outer process, until the FIFO it
    yields is opened for writing; released (and any survivor killed) at the end."""
    ws, fifo = tmp_path / "ws", tmp_path / "hold"
    ws.mkdir()
    os.mkfifo(fifo, 0o666)
    box = Bwrap(ws)

    def wrap(argv: list[str]) -> Argv:
        wrapped = box.wrap(argv)
        at = wrapped.index("--args") + 2  # bwrap's own options, after those read from the memfd
        wrapped[at:at] = ["--bind", str(fifo), HELD, "--lock-file", HELD]
        return wrapped

    runner = Runner(ws, wrap=wrap, env=box.env)
    try:
        yield runner, fifo
    finally:
        release(fifo)
        runner.kill_all()
        box.release()


def release(fifo: Path) -> None:
    """Let every pid 1 blocked on the FIFO go on (a FIFO opened for writing while no one reads it: ENXIO)."""
    for _ in range(16):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return
        time.sleep(0.05)


def survivors_after(marker: str) -> list[int]:
    """The command's processes still there WAIT_S after its kill (none, once they are gone); killed here."""
    wait_for(lambda: not running(f"^{marker}"), WAIT_S)
    left = running(f"^{marker}")
    for pid in left:
        os.kill(pid, 9)
    return left


@pytest.mark.parametrize("end", ["call cancelled", "session closed"])
def test_a_kill_takes_down_a_sandbox_whose_pid_1_is_not_yet_bound_to_bwrap(held_init, end):
    """The call is cancelled (the client cancels it or disconnects), or the session closes (its client gone, a
    SIGTERM): `kill_all`), once the command runs."""
    runner, _ = held_init
    marker = f"jg-held-{uuid.uuid4().hex}"

    async def end_once_running() -> None:
        with anyio.fail_after(WAIT_S + 30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(runner.run, f"exec -a {marker} sleep 600", 600)
                while not await anyio.to_thread.run_sync(running, f"^{marker}"):
                    await anyio.sleep(0.05)
                if end == "call cancelled":
                    tg.cancel_scope.cancel()
                else:
                    await anyio.to_thread.run_sync(runner.kill_all)

    anyio.run(end_once_running)
    assert not survivors_after(marker), f"the command outlived its kill ({end})"


def test_a_timeout_kills_a_sandbox_whose_pid_1_is_not_yet_bound_to_bwrap(held_init):
    runner, _ = held_init
    marker = f"jg-held-{uuid.uuid4().hex}"

    async def go():
        with anyio.fail_after(WAIT_S + 30):
            return await runner.run(f"exec -a {marker} sleep 600", 3)

    result = anyio.run(go)
    assert result.timed_out
    assert not survivors_after(marker), "the command outlived the timeout that killed it"


SPAWN_HELD = f"""
import subprocess, sys, time
from pathlib import Path
from jg_mcp.live.bwrap import Bwrap
ws, fifo, command = Path(sys.argv[1]), sys.argv[2], ["/bin/bash", "-c", sys.argv[3]]
argv = Bwrap(ws).wrap(command)
at = argv.index("--args") + 2
argv[at:at] = ["--bind", fifo, "{HELD}", "--lock-file", "{HELD}"]
subprocess.Popen(argv, pass_fds=argv.pass_fds, start_new_session=True, stdin=subprocess.DEVNULL)
time.sleep(600)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root server gives bwrap a pid namespace of its own")
def test_a_server_killed_while_its_sandbox_s_pid_1_is_not_yet_bound_to_bwrap_takes_the_command_down(tmp_path):
    """SIGKILL (the operator, the OOM killer) lands on the server once the command runs but before bwrap's pid 1 has
    bound itself to bwrap's outer process: the lifeline has passed, and bwrap's --die-with-parent ends only the outer
    process; the command must end all the same."""
    ws, fifo = tmp_path / "ws", tmp_path / "hold"
    ws.mkdir()
    os.mkfifo(fifo, 0o666)
    marker = f"jg-held-{uuid.uuid4().hex}"
    server = subprocess.Popen([sys.executable, "-c", SPAWN_HELD, str(ws), str(fifo), f"exec -a {marker} sleep 600"])
    try:
        assert wait_for(lambda: running(f"^{marker}"), WAIT_S), "the command did not start"
        os.kill(server.pid, signal.SIGKILL)
        server.wait(timeout=WAIT_S)
        assert not survivors_after(marker), "the command outlived the server that started it"
    finally:
        server.kill()
        server.wait(timeout=WAIT_S)
        release(fifo)
