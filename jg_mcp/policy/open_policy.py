"""The open policy, the eval's default: a solution may be written in anything (Triton, CUDA C++ built with
torch.utils.cpp_extension from sources in the workspace, inline PTX, several files), because the verdict rests on
what the harness observes from outside the candidate's processes (docs/threat-model.md), not on how the source is
spelt.

So the source check keeps only the rules that protect a verdict fact and that an honest solution never trips:
- a forbidden operator under any spelling (the goal's `forbidden` list with its operator families): the score
  compares the agent's kernel with the library's, so the library's kernel may not stand in for it;
- importing a kernel library (flash-attn, FlashInfer, Liger, xformers, Transformer Engine, ...): the same fact, for
  kernels that live outside torch. The candidate's sandbox also hides these packages, so an import by any spelling
  fails there (jg_mcp.eval.processes.isolation.hidden_packages).
Everything else the Triton-only policy (`--policy triton`, jg_mcp.policy.check) refuses in Python is either caught
from outside (outputs, inputs, time, loaded native code, processes left behind) or, where it is still a hint, named
as a gap in the threat model: a native library reaches all of it anyway.
"""

from __future__ import annotations

import ast

from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding

KERNEL_LIBRARIES = (
    "apex",
    "bitsandbytes",
    "causal_conv1d",
    "cupy",
    "deep_ep",
    "deep_gemm",
    "fbgemm_gpu",
    "flash_attn",
    "flash_attn_interface",
    "flash_mla",
    "flashinfer",
    "jax",
    "liger_kernel",
    "mamba_ssm",
    "sgl_kernel",
    "tensorrt",
    "tensorrt_llm",
    "torch_tensorrt",
    "torchao",
    "transformer_engine",
    "unsloth",
    "vllm",
    "xformers",
)
"""Python packages that ship kernels for the goals' operators (or a BLAS/DNN binding): a solution may not import
them, and the candidate's sandbox hides them."""
KEPT = frozenset({Reason.SYNTAX, Reason.STATIC_FORBIDDEN})
"""The reasons of the Triton-only policy's scan that the open policy keeps."""


def open_rules(forbidden: list[str]) -> str:
    """The rules as the agent reads them under the open policy: at most 800 characters besides the goal's own list
    of forbidden operations, each named by its last part (torch.nn.functional.softmax is `softmax`: every spelling
    of it is forbidden)."""
    leaves = dict.fromkeys(name.rsplit(".", 1)[-1] for name in forbidden)  # any spelling is forbidden: the leaf says it
    names = ", ".join(leaves) if leaves else "nothing named by the goal"
    return (
        "Your own kernels, in any language: Triton, CUDA C++ via torch.utils.cpp_extension (load_inline, or load with "
        f"sources in the workspace), inline PTX, several files. Forbidden under any name: {names}, and any library "
        "kernel for this operator (cuBLAS, flash-attn, FlashInfer, Liger, xformers...). Leave inputs "
        "unmodified, return fresh outputs, keep no results between calls. The eval rebuilds native code from your "
        "sources (prebuilt binaries are ignored), checks outputs on fresh inputs and times the calls itself."
    )


def open_check(source: str, forbidden: list[str]) -> list[Finding]:
    """The open policy's findings in one Python file: forbidden operators by any spelling the scan of the
    Triton-only policy resolves, syntax errors, and imports of kernel libraries."""
    from jg_mcp.policy.check import static_check  # the allow-list's tables are large: only when a check runs

    findings = [f for f in static_check(source, forbidden) if f.reason in KEPT]
    if any(f.reason == Reason.SYNTAX for f in findings):
        return findings
    return findings + kernel_imports(ast.parse(source))


def kernel_imports(tree: ast.AST) -> list[Finding]:
    """Each import of a kernel library (KERNEL_LIBRARIES), with its line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] in KERNEL_LIBRARIES:
                detail = f"line {node.lineno}: imports `{name}`, a library of ready-made kernels: write your own"
                found.append(Finding(reason=Reason.STATIC_IMPORT, detail=detail))
    return found
