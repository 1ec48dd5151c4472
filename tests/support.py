"""Helpers shared by test modules: paths, the command line, node tools, the demo run, scripted sessions.

Test modules import these from here, never from one another (importing a test module runs its
module-level code again under a second name and couples unrelated tests).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
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


@functools.cache
def demo_dir() -> Path:
    """`jg-mcp demo` run once per test process, as a user runs it (a real stdio server subprocess).

    Keyed by process id and marked done on disk, so every module that asks for it shares one run."""
    out = Path(tempfile.gettempdir()) / f"jg-mcp-test-demo-{os.getpid()}"
    if not (out / "done").exists():
        shutil.rmtree(out, ignore_errors=True)
        atexit.register(shutil.rmtree, out, True)
        done = jg("--log-level", "WARNING", "demo", "--out", out)
        assert done.returncode == 0, done.stdout + done.stderr
        (out / "done").touch()
    return out


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
