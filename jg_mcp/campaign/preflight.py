"""What must hold before a run starts, checked before anything runs: the agent's executable and the GPU it is given.

A run whose check fails is recorded as `failed to start` without launching anything; `campaign --dry-run` prints
the same checks for every agent and GPU of a campaign.
"""

from __future__ import annotations

from functools import cache


@cache
def _gpus() -> tuple[int, str]:
    """(how many GPUs NVML sees, why none when none)."""
    from jg_mcp.gpu import query_gpu

    report = query_gpu()
    return (len(report.devices), "") if report.available else (0, report.reason or "no GPU")


def gpu_problem(index: int) -> str | None:
    """Why GPU `index` cannot be given to a run (NVML's indices, as CUDA_VISIBLE_DEVICES takes them), else None."""
    count, why = _gpus()
    if count == 0:
        return f"no GPU {index} on this machine ({why})"
    if index >= count:
        return f"no GPU {index} on this machine (it has {count}: 0..{count - 1})"
    return None
