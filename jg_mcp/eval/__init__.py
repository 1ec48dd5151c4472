"""The re-verification harness: `evaluate(EvalOptions(...)) -> EvalReport`.

Modules: harness (orchestration), sources (the solution and goal, read once), process (a worker process from
outside), worker (from inside), spares (worker processes started ahead), channel (the wire), policy (static and
runtime API policy), guard (tamper checks), checks (output validity), shapes (which shapes), timing (how times
are taken), scoring (speedups, floor), report (schema), clocks (NVML while timing). `evaluate` is imported on
first use: the harness brings torch, and the report schema and static policy do not need it.
"""

from typing import Any

from jg_mcp.eval.options import EvalOptions
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport

__all__ = ["EvalOptions", "EvalReport", "Reason", "evaluate"]


def __getattr__(name: str) -> Any:
    if name == "evaluate":
        from jg_mcp.eval.harness import evaluate

        return evaluate
    raise AttributeError(f"module 'jg_mcp.eval' has no attribute {name!r}")
