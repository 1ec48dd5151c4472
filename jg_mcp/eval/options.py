"""What `jg-mcp eval` is asked to evaluate, and how."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class EvalOptions(BaseModel):
    """What to evaluate and how."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    goal: Path
    """The goal's YAML file."""
    workspace: Path
    """The agent's workspace."""
    solution: str | None = None
    """Workspace-relative solution file (default: the goal's)."""
    shapes: Literal["timed", "smoke", "all"] = "all"
    """Which goal shapes to check; shapes drawn from the shape domain are always added."""
    device: Literal["cuda", "cpu"] | None = None
    """Where to run; default cuda when available."""
    only: list[str] = []
    """If given, only the goal shapes with these names (drawn domain shapes are still added)."""
    trials: int = 3
    """Correctness trials per shape, each with fresh inputs."""
    domain_shapes: int = 2
    """Untimed shapes drawn from the goal's shape domain."""
    timeout_s: float = 300.0
    """Wall-clock limit for each answer from a candidate process."""
    timing: dict[str, Any] = {}
    """Overrides of the timing parameters (jg_mcp.eval.timing.DEFAULTS: warmup, block_ms, budget_s, ...)."""
    do_bench: bool = False
    """Also time each baseline with triton.testing.do_bench, as an independent cross-check."""
