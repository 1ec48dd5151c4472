"""Run evals of the adversarial suite and the known-good solutions once per session, several at a time."""

from __future__ import annotations

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
