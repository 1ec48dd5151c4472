"""The rows `jg-mcp goals validate` reports: a check (Check), a baseline's timing (BaselineTiming), and the report of a
whole validation (Report).
"""

from __future__ import annotations

from typing import Any, Literal

from jg_mcp.models import Strict


class Check(Strict):
    goal: str
    shape: str
    check: str
    """`inputs` (shape `*`: every input depends on the seed), `reference`, `baseline:NAME`, `timing:baseline:NAME`,
    `solution` (on a GPU) or `solution:interpreted`."""
    status: Literal["ok", "failed", "skipped"]
    max_abs_err: float | None = None
    """Largest |out - ref| over the finite elements of all outputs."""
    worst_ratio: float | None = None
    """Largest |out - ref| / (atol + rtol * |ref|) over all outputs, inf for a NaN or inf.

    Above 1 is out of tolerance."""
    error: str = ""
    """Why it failed or was skipped."""


class BaselineTiming(Strict):
    goal: str
    shape: str
    baseline: str
    median_ms: float
    p20_ms: float
    p80_ms: float
    tflops: float
    tbps: float
    pct_peak_flops: float
    pct_peak_bandwidth: float
    pct_roofline: float
    """Time the goal's roofline allows (the larger of flops/peak and bytes/bandwidth) over the median, in %."""


class Report(Strict):
    device: str
    full: bool
    environment: dict[str, Any]
    method: dict[str, Any]
    wall_seconds: float
    checks: list[Check]
    timings: list[BaselineTiming]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "failed"]
