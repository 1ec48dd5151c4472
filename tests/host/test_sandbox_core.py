"""A crash inside a sandbox never reaches the host's core helper, even after the command tried to lower its core
limit, checked against the kernel itself: a piped core_pattern whose helper leaves a marker.

For a pipe the kernel ignores RLIMIT_CORE but for the value 1, so limit 0 (what the sandbox set before) does not stop
the helper, and a command could lower 1 to 0 unless the seccomp filter refuses it. Each test also crashes a process
the protection does not cover and waits for its marker: the helper is live, so a marker missing means something.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.runner import Runner
from tests.support import bwrap_missing

BWRAP_MISSING = bwrap_missing()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or ""),
    pytest.mark.skipif(os.geteuid() != 0, reason="setting kernel.core_pattern needs root"),
]

CRASH = """\
import ctypes, os, resource, signal, sys

with open("/proc/self/comm", "w") as f:
    f.write(sys.argv[1])
core = resource.RLIMIT_CORE
tries = {
    "setrlimit": lambda: resource.setrlimit(core, (0, 0)),
    "prlimit": lambda: resource.prlimit(0, core, (0, 0)),
    "syscall": lambda: ctypes.CDLL(None, use_errno=True).syscall(
        SETRLIMIT, core, ctypes.byref((ctypes.c_ulong * 2)(0, 0))
    ) == 0 or (_ for _ in ()).throw(OSError(ctypes.get_errno(), "setrlimit")),
}
for name, attempt in tries.items():
    try:
        attempt()
        print(name, "lowered")
    except (OSError, ValueError) as exc:
        print(name, "refused", exc)
print("limit", resource.getrlimit(core), flush=True)
os.kill(os.getpid(), signal.SIGSEGV)
"""
SETRLIMIT = {"x86_64": 160, "aarch64": 164}
"""The setrlimit system call's number (asm/unistd_64.h, asm-generic/unistd.h)."""
CRASH = CRASH.replace("SETRLIMIT", str(SETRLIMIT.get(platform.machine(), -1)))
"""A program that tries to lower its core limit three ways (glibc's setrlimit and prlimit, which call prlimit64, and
the setrlimit system call itself), says what it got, and crashes (SIGSEGV) under the name it is given."""
HELPER = '#!/bin/sh\necho "$1" >> {markers}\nexec cat > /dev/null\n'


@pytest.fixture
def core_helper(tmp_path):
    """kernel.core_pattern piped to a script that appends the crashed process's name to a file (restored after)."""
    place = tmp_path / "helper"
    place.mkdir()
    markers, script = place / "markers", place / "core-helper"
    script.write_text(HELPER.format(markers=markers))
    script.chmod(0o755)
    markers.touch()
    pattern = Path("/proc/sys/kernel/core_pattern")
    saved = pattern.read_text()
    pattern.write_text(f"|{script} %e\n")
    try:
        yield markers
    finally:
        pattern.write_text(saved)


def crashed(markers: Path, name: str, wait_s: float) -> bool:
    """Whether the helper saw a crash of `name`, waiting up to `wait_s` for it (the helper runs asynchronously)."""
    deadline = time.monotonic() + wait_s
    while name not in markers.read_text().split():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def run_in(sandbox: Bwrap, ws: Path, name: str) -> str:
    try:
        out = anyio.run(Runner(ws, wrap=sandbox.wrap).run, f"python crash.py {name}", 60.0)
    finally:
        sandbox.release()
    assert out.exit_code != 0 and "limit" in out.stdout, out
    return out.stdout


def host_crash(script: Path, name: str) -> None:
    """A crash outside every sandbox, with core limit 0: the pipe helper still runs for it."""
    done = subprocess.run(
        ["prlimit", "--core=0", sys.executable, str(script), name],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode != 0, done


def test_a_command_that_lowers_its_core_limit_and_crashes_never_reaches_the_core_helper(core_helper, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "crash.py").write_text(CRASH)
    said = run_in(Bwrap(ws), ws, "jgsandboxed")
    assert said.count("refused") == 3 and "limit (1, 1)" in said, said
    unfiltered = Bwrap(ws)
    unfiltered.filtered = False  # the operator's --no-seccomp: the limit can then be lowered, and the helper runs
    assert "limit (0, 0)" in run_in(unfiltered, ws, "jgunfiltered")
    host_crash(ws / "crash.py", "jghost")
    assert crashed(core_helper, "jghost", 30) and crashed(core_helper, "jgunfiltered", 30), core_helper.read_text()
    assert "jgsandboxed" not in core_helper.read_text().split()


def test_the_eval_candidate_that_lowers_its_core_limit_and_crashes_never_reaches_the_core_helper(core_helper, tmp_path):
    from jg_mcp.eval.processes.isolation import bwrap_argv, filter_file, prepare, pythonpath
    from jg_mcp.live import lifeline

    solution, cache = tmp_path / "solution", tmp_path / "cache"
    solution.mkdir()
    cache.mkdir()
    (solution / "crash.py").write_text(CRASH)
    prepare(solution, cache)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(pythonpath())}
    with contextlib.ExitStack() as files:
        rules = files.enter_context(filter_file())
        argv = bwrap_argv(solution, cache, env, rules.fileno())
        done = subprocess.run(
            [*argv, sys.executable, "/jg/solution/crash.py", "jgcandidate"],
            capture_output=True,
            text=True,
            timeout=120,
            pass_fds=[lifeline.read_end(), rules.fileno()],
        )
    assert done.returncode != 0 and done.stdout.count("refused") == 3 and "limit (1, 1)" in done.stdout, done
    host_crash(solution / "crash.py", "jghost")
    assert crashed(core_helper, "jghost", 30), core_helper.read_text()
    assert "jgcandidate" not in core_helper.read_text().split()
