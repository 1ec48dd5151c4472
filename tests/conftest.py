"""Shared fixtures: a goal, a session on a temporary workspace, and an in-process client."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jg_mcp.goals import load_goal
from jg_mcp.server import SingleSession, build_server
from jg_mcp.session import Session

REPO = Path(__file__).resolve().parent.parent
GEMM_FP8 = REPO / "goals" / "gemm_fp8.yaml"
DEMO_GOAL = REPO / "jg_mcp" / "demo_goal" / "axpy.yaml"
TOOLS_BIN = REPO / ".tools" / "node_modules" / ".bin"


@pytest.fixture(scope="session")
def gemm_goal():
    return load_goal(GEMM_FP8)


@pytest.fixture
def session(gemm_goal, tmp_path):
    s = Session(gemm_goal, workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "transcripts")
    yield s
    s.close("test finished")


@pytest.fixture
def server(gemm_goal, session):
    return build_server(gemm_goal, SingleSession(session))


def node_tool(name: str) -> Path:
    """A tool installed by .ci/run into .tools/ (npm); tests that need it skip with the reason."""
    path = TOOLS_BIN / name
    if not path.exists():
        pytest.skip(f"{name} not installed: run .ci/run (npm install into .tools/)")
    return path


def copy_goal(tmp_path: Path, name: str = "gemm_fp8") -> Path:
    """A writable copy of a goal pair, for tests that corrupt it."""
    for suffix in (".yaml", ".py"):
        shutil.copy(REPO / "goals" / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    return tmp_path / f"{name}.yaml"
