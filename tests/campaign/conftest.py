"""A second tiny goal: the demo goal under another name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import DEMO_GOAL


@pytest.fixture
def axpy_copy(tmp_path) -> Path:
    """The demo goal copied to tmp_path as `axpy_copy`."""
    shutil.copy(DEMO_GOAL.with_suffix(".py"), tmp_path / "axpy_copy.py")
    text = DEMO_GOAL.read_text().replace("name: axpy\n", "name: axpy_copy\n", 1)
    assert "name: axpy_copy" in text
    (tmp_path / "axpy_copy.yaml").write_text(text)
    return tmp_path / "axpy_copy.yaml"
