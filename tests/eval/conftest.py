"""Run evals of the adversarial suite and the known-good solutions once per session, several at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_suite import Runs, cpu_timing_goal


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    r = Runs(tmp_path_factory.mktemp("evals"))
    yield r
    r.pool.shutdown(cancel_futures=True)


@pytest.fixture(scope="session")
def timing_goal(tmp_path_factory):
    return cpu_timing_goal(tmp_path_factory.mktemp("goal"))


EVAL_FIXTURES = frozenset({"runs", "timing_goal"})
"""Fixtures that exist to run whole evals (a batch of the suite's, or one timed on the CPU)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A test of this folder that asks for an eval fixture runs evals of solutions, so it is slow (`pytest -m "not
    slow"` leaves it out) without a mark of its own. The hook sees the whole session's items: only this folder's."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and EVAL_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
