"""The re-verification harness: `evaluate(EvalOptions(...)) -> EvalReport`.

Modules: harness (orchestration), process (the candidate process from outside), child (from inside),
channel (the wire), policy (static and runtime API policy), guard (tamper checks), checks (output
validity), shapes (which shapes), timing (how times are taken), scoring (speedups, floor), report (schema).
"""

from jg_mcp.eval.harness import EvalOptions, evaluate
from jg_mcp.eval.report import EvalReport, Reason

__all__ = ["EvalOptions", "EvalReport", "Reason", "evaluate"]
