"""The re-verification harness: `evaluate(EvalOptions(...)) -> EvalReport`.

Cut by trust side: here the judge (harness: orchestration; correctness, timing, graphs: the phases; checks: output
validity; scoring: speedups, floor; report: schema; shapes, clocks, memory, sizing); `candidate/` what runs inside
the candidate's process (worker, guard, the op recorder); `wire/` what crosses between the processes (messages,
channel, buffers); `native/` the candidate's sources and native code; `processes/` the worker processes seen from
outside (process, sandbox, spares). The static source policy is a layer below, jg_mcp.policy. `evaluate` is
imported on first use: the harness brings torch, and the report schema does not need it.
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
