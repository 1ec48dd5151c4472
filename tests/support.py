"""Helpers shared by test modules: paths, the command line, node tools, the demo run, scripted sessions.

Test modules import these from here, never from one another (importing a test module runs its
module-level code again under a second name and couples unrelated tests).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GEMM_FP8 = REPO / "goals" / "gemm_fp8.yaml"
DEMO_GOAL = REPO / "jg_mcp" / "demo_goal" / "axpy.yaml"
TOOLS_BIN = REPO / ".tools" / "node_modules" / ".bin"
SECRET_VAR = "JG_TEST_API_TOKEN"
"""A secret-looking environment variable that the sandbox must drop."""


@functools.cache
def bwrap_missing() -> str | None:
    """Why bubblewrap cannot run at all here (not installed, or namespaces forbidden), else None."""
    if not shutil.which("bwrap"):
        return "bwrap is not installed (Debian package `bubblewrap`)"
    done = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return f"bwrap cannot create namespaces here: {done.stderr.strip()}" if done.returncode else None


def jg(*args: object, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The command line, as a user runs it, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "jg_mcp", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def node_tool(name: str) -> Path:
    """A tool installed by .ci/setup into .tools/ (npm); tests that need it skip with the reason."""
    path = TOOLS_BIN / name
    if not path.exists():
        pytest.skip(f"{name} not installed: run bash .ci/setup (npm install into .tools/)")
    return path


def copy_goal(tmp_path: Path, name: str = "gemm_fp8") -> Path:
    """A writable copy of a goal pair, for tests that corrupt it."""
    for suffix in (".yaml", ".py"):
        shutil.copy(REPO / "goals" / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    return tmp_path / f"{name}.yaml"


@dataclass(frozen=True)
class DemoRun:
    """One `jg-mcp demo` run as a user runs it (a real stdio server subprocess), what it printed and where."""

    out: Path
    code: int
    lines: tuple[str, ...]
    """stdout, line by line."""
    stderr: str
    live: bool
    """Whether the first numbered step was printed while the process was still running."""


@functools.cache
def demo() -> DemoRun:
    """`jg-mcp demo` run once per test process and shared: test_demo asserts on what it printed, the replay,
    audit and page tests read the transcript and workspace it left (they copy before they tamper)."""
    out = Path(tempfile.mkdtemp(prefix="jg-mcp-test-demo-"))
    atexit.register(shutil.rmtree, out, True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jg_mcp", "demo", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
    )
    lines: list[str] = []
    live = False
    deadline = time.monotonic() + 600
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if not live and line.startswith(" 1. "):
                live = proc.poll() is None
            assert time.monotonic() < deadline, "the demo took more than 600 s"
        stderr = proc.stderr.read()
        return DemoRun(out, proc.wait(timeout=60), tuple(lines), stderr, live)
    finally:
        proc.kill()
        proc.wait()


def demo_dir() -> Path:
    """The shared demo run's output folder (transcripts/, workspace/, eval.json, session.html)."""
    run = demo()
    assert run.code == 0, "\n".join(run.lines) + run.stderr
    return run.out


def demo_run() -> Path:
    """The demo's transcript."""
    return next((demo_dir() / "transcripts").glob("*.jsonl"))


def copy_transcript(src: Path, dest_dir: Path) -> Path:
    """A transcript and its blobs copied, for tests that tamper with them."""
    from jg_mcp.transcript import blobs_dir

    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / src.name
    shutil.copyfile(src, dest)
    shutil.copytree(blobs_dir(src), blobs_dir(dest))
    return dest


def scripted_session(tmp_path: Path, steps: list, goal: Path = DEMO_GOAL, sandbox: str = "none") -> tuple[Path, Path]:
    """An in-process session on the demo goal driven by the scripted client, its commands run unsandboxed or
    (`sandbox="bwrap"`) in bubblewrap; returns (transcript, workspace)."""
    import anyio

    from jg_mcp.goals import load_goal
    from jg_mcp.sandbox import Bwrap
    from jg_mcp.scripted import run_script
    from jg_mcp.server import SingleSession, build_server
    from jg_mcp.session import Session

    loaded = load_goal(goal)
    ws, transcripts = tmp_path / "ws", tmp_path / "transcripts"
    wrap = Bwrap(ws, [transcripts]).wrap if sandbox == "bwrap" else None
    session = Session(loaded, workspace_dir=ws, transcripts_dir=transcripts, sandbox=sandbox, wrap=wrap)
    try:
        anyio.run(run_script, build_server(loaded, SingleSession(session), sandboxed=sandbox == "bwrap"), steps, 120)
    finally:
        session.close("test finished")
    return session.transcript_path, session.workspace.root


def eval_report(solution_sha256: str, goal_sha256: str, speedup: float = 1.25) -> dict:
    """The fields of `jg-mcp eval`'s EvalReport that the audit and the page read."""
    return {
        "version": 1,
        "goal": "axpy",
        "goal_sha256": goal_sha256,
        "solution_sha256": solution_sha256,
        "solution_file": "solution.py",
        "accepted": True,
        "reasons": [],
        "findings": [],
        "shapes": [
            {
                "name": "n16m",
                "kind": "timed",
                "dims": {"N": 16777216},
                "trials": 3,
                "correct": True,
                "speedup": {"torch_add": speedup},
            }
        ],
        "geomean_speedup": speedup,
    }
