"""Names resolved on trusted objects: the policy (jg_mcp.policy.check) follows a dotted name rooted at an allowed module
step by step with getattr on the real modules in the harness (torch, triton and the allowed standard library are
trusted; the candidate's code never runs here)."""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import sys
import types
from typing import Any

UNKNOWN = object()
"""What a step that does not resolve reaches."""


def trusted(root: str) -> Any:
    """An allowed, trusted module (torch, triton, the standard library's allowed ones) as the harness has it."""
    module = sys.modules.get(root)
    if module is None:
        with contextlib.redirect_stdout(sys.stderr):
            module = importlib.import_module(root)
    return module


def step(obj: Any, part: str) -> Any:
    """`obj.part` on a real, trusted object; a submodule not yet imported is imported (stdout kept clean)."""
    try:
        return getattr(obj, part)
    except Exception:  # noqa: BLE001 - any failure of a trusted object's attribute is "does not resolve"
        if not isinstance(obj, types.ModuleType):
            return UNKNOWN
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return importlib.import_module(f"{obj.__name__}.{part}")
    except (Exception, SystemExit):  # noqa: BLE001 - a trusted submodule that does not import does not resolve
        return UNKNOWN


def is_torch_machinery(cls: type) -> bool:
    """A torch.Tensor subclass or a torch function/dispatch mode (torch is loaded: the name reached it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    return issubclass(cls, (torch.Tensor, TorchFunctionMode, TorchDispatchMode)) and cls is not torch.Tensor


def is_module_state(cls: type) -> bool:
    """torch.nn.Parameter or torch.nn.Buffer: tensor subclasses an nn.Module's weights are made with, which a solution
    may call (`self.weight = torch.nn.Parameter(w)`) though never derive from nor use as a value (is_torch_machinery).
    Neither defines a torch function or dispatch hook that would run the solution's code inside torch's ops."""
    torch = sys.modules.get("torch")
    return torch is not None and cls in (torch.nn.Parameter, getattr(torch.nn, "Buffer", torch.nn.Parameter))


def is_tensor_method(name: str) -> bool:
    """A torch.Tensor method of that name (only asked for names of a forbidden family's relatives)."""
    try:
        import torch
    except ImportError:
        return True
    return hasattr(torch.Tensor, name)


def is_tensor_machinery(cls: type) -> bool:
    """torch.Tensor itself, a subclass of it, or a torch function/dispatch mode: what no class may derive from."""
    torch = sys.modules.get("torch")
    return torch is not None and (cls is torch.Tensor or is_torch_machinery(cls))


def builtin_class(name: str) -> bool:
    """A builtin class a solution may derive from (an exception, `object`, a container); not `type`, which makes
    classes."""
    obj = getattr(builtins, name, None)
    return isinstance(obj, type) and obj is not type


@functools.cache
def interpreter_attributes() -> frozenset[str]:
    """The interpreter's own attributes of frames, code objects, generators, coroutines and tracebacks, as this Python
    has them (`gi_frame`, `f_back`, `f_globals`, `f_builtins`, `tb_frame`, `co_consts`, ...): public names, no dunder
    among them, that reach other code's frames and globals, and so every module."""
    kinds = (
        types.FrameType,
        types.CodeType,
        types.GeneratorType,
        types.CoroutineType,
        types.AsyncGeneratorType,
        types.TracebackType,
    )
    prefixes = ("f_", "co_", "gi_", "cr_", "ag_", "tb_")
    return frozenset(name for kind in kinds for name in dir(kind) if name.startswith(prefixes))
