"""Shared fixtures: a goal, a session on a temporary workspace, and an in-process client."""

from __future__ import annotations

import pytest

from jg_mcp.goals import load_goal
from jg_mcp.server import SingleSession, build_server
from jg_mcp.session import Session
from tests.support import DEMO_GOAL, GEMM_FP8, REPO, TOOLS_BIN, copy_goal, node_tool

__all__ = ["DEMO_GOAL", "GEMM_FP8", "REPO", "TOOLS_BIN", "copy_goal", "node_tool"]


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
