"""Run evals of the adversarial suite and the known-good solutions once per session, several at a time."""

from __future__ import annotations

import pytest
from eval_suite import Runs


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    r = Runs(tmp_path_factory.mktemp("evals"))
    yield r
    r.pool.shutdown(cancel_futures=True)
