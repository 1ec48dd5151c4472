"""What an eval ran on, for its report: the device, the GPU and its driver, the library versions, the host, and
the baselines' compile cache (chosen here, before any baseline process starts: jg_mcp/eval/processes/compile_cache.py).
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

import jg_mcp
from jg_mcp.eval.processes.compile_cache import baseline_dir
from jg_mcp.eval.report import Environment


def host_environment(device: str, work: Path) -> tuple[Environment, Path]:
    """The report's environment of an eval on `device`, and the baselines' compile cache (the eval's own under
    `work` where the shared one cannot be trusted)."""
    import triton

    from jg_mcp.gpu import query_gpu

    gpu = query_gpu() if device == "cuda" else None
    name = torch.cuda.get_device_name() if device == "cuda" else None
    cache, problem = baseline_dir(torch.__version__, triton.__version__, name, work / "bcache")
    environment = Environment(
        device=device,
        gpu=name,
        driver=gpu.driver_version if gpu else None,
        gpu_uuid=str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid) if name else None,
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        jg_mcp=jg_mcp.__version__,
        host=platform.node(),
        interpreter=device != "cuda",
        baseline_cache=str(cache),
        baseline_cache_problem=problem,
    )
    return environment, cache
