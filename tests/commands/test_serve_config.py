"""`jg-mcp serve`'s command line becomes one ServeConfig at the CLI's edge: every option reaches it, and options that
do not go together are refused there."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from jg_mcp.cli import build_parser
from jg_mcp.commands.serve_config import ServeConfig, from_args
from jg_mcp.errors import UsageError


class Watched(argparse.Namespace):
    """A Namespace that notes which options were read."""

    def __init__(self, args: argparse.Namespace):
        super().__init__(**vars(args))
        object.__setattr__(self, "read", set())

    def __getattribute__(self, name: str):
        if not name.startswith("_") and name not in ("read",):
            object.__getattribute__(self, "read").add(name)
        return object.__getattribute__(self, name)


def test_every_serve_option_reaches_the_config():
    args = build_parser().parse_args(["serve", "--goal", "gemm_fp8", "--transport", "http"])
    watched = Watched(args)
    from_args(watched)
    options = set(vars(args)) - {"command", "func", "log_level"}
    assert options - watched.read == set(), "options the config never reads"


def test_the_config_carries_what_the_line_asks_for():
    args = build_parser().parse_args(
        [
            "serve",
            "--goal",
            "gemm_fp8",
            "--transport",
            "http",
            "--port",
            "0",
            "--allow-host",
            "box.lan",
            "--max-session-calls",
            "2",
            "--no-seccomp",
            "--max-tool-calls",
            "7",
            "--condition",
            "knowledge",
            "--hide",
            "/srv/secret",
        ]
    )
    config = from_args(args)
    assert isinstance(config, ServeConfig)
    assert (config.http.port, config.http.allowed_hosts, config.http.session_calls) == (0, ["box.lan"], 2)
    assert (config.seccomp, config.budget.max_tool_calls, config.condition) == (False, 7, "knowledge")
    assert config.hide == [Path("/srv/secret")] and config.http.host == "127.0.0.1"


def test_host_or_port_over_stdio_is_refused_at_the_edge():
    args = build_parser().parse_args(["serve", "--goal", "gemm_fp8", "--port", "9000"])
    with pytest.raises(UsageError, match="--transport http only"):
        from_args(args)
