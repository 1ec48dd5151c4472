"""The build cache of a module whose evals build native code."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A build cache of this module's own, so a build kept by another run cannot make a test pass or fail."""
    path = tmp_path_factory.mktemp("jg-cache")
    old = os.environ.get("JG_MCP_CACHE")
    os.environ["JG_MCP_CACHE"] = str(path)
    yield path
    if old is None:
        del os.environ["JG_MCP_CACHE"]
    else:
        os.environ["JG_MCP_CACHE"] = old
