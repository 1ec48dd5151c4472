"""Shared fixtures: a goal, a session on a temporary workspace, and an in-process client; and the hooks by which
pytest-xdist splits the suite between its workers (tests/scheduling.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jg_mcp.goals import load_goal
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from tests.scheduling import check_names, make_scheduler
from tests.support import GEMM_FP8

PRECOMPILED = Path(sys.prefix) / "torch-pch"
"""Where `.ci/setup --tests` precompiles torch/extension.h (tests/tools/precompile_torch_header.py): named in CPATH,
which the eval's workers keep, it halves the suite's C++ builds."""
if "CPATH" not in os.environ and (PRECOMPILED / "torch" / "extension.h.gch").is_file():
    os.environ["CPATH"] = str(PRECOMPILED)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` as tests/scheduling.py plans it."""
    return make_scheduler(config, log) if config.getoption("dist") == "loadfile" else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    check_names(item.nodeid for item in items)


@pytest.fixture(scope="session")
def gemm_goal():
    return load_goal(GEMM_FP8)


@pytest.fixture
def session(gemm_goal, tmp_path):
    s = Session.open(gemm_goal, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "transcripts"))
    yield s
    s.close("test finished")


@pytest.fixture
def server(gemm_goal, session):
    return build_server(gemm_goal, SingleSession(session))
