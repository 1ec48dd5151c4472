"""The policy's tables (jg_mcp.eval.policy): the modules a solution may import, what each refused module or torch
attribute is refused as, and the names and patterns that are dynamic code, files or native library calls."""

from __future__ import annotations

import re

from jg_mcp.eval.report import Reason

ALLOWED_MODULES = {
    "torch",
    "triton",
    "math",
    "functools",
    "itertools",
    "typing",
    "dataclasses",
    "collections",
    "enum",
    "__future__",
    "os",
}
"""Modules a solution may import; `os` only to read one named environment variable."""
CATEGORY = {
    **dict.fromkeys(
        [
            "sys",
            "gc",
            "inspect",
            "ctypes",
            "cffi",
            "_ctypes",
            "dis",
            "traceback",
            "mmap",
            "weakref",
            "types",
            "ast",
            "code",
            "codeop",
            "tracemalloc",
            "faulthandler",
        ],
        Reason.STATIC_INTROSPECTION,
    ),
    **dict.fromkeys(
        ["threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "sched", "queue"],
        Reason.STATIC_CONCURRENCY,
    ),
    **dict.fromkeys(
        [
            "pickle",
            "shelve",
            "tempfile",
            "shutil",
            "socket",
            "hashlib",
            "sqlite3",
            "dbm",
            "marshal",
            "glob",
            "pathlib",
            "io",
            "json",
            "struct",
            "numpy",
            "posix",
            "zlib",
        ],
        Reason.STATIC_IO,
    ),
    **dict.fromkeys(["importlib", "builtins", "operator", "runpy", "pkgutil", "copyreg"], Reason.STATIC_DYNAMIC),
    **dict.fromkeys(["signal", "atexit", "resource"], Reason.STATIC_PROCESS),
}
TORCH_REFUSED = {
    "ops": Reason.STATIC_DYNAMIC,
    "library": Reason.STATIC_DYNAMIC,
    "fx": Reason.STATIC_DYNAMIC,
    "multiprocessing": Reason.STATIC_CONCURRENCY,
    "distributed": Reason.STATIC_CONCURRENCY,
    "Stream": Reason.STATIC_CONCURRENCY,
    "stream": Reason.STATIC_CONCURRENCY,
    "set_stream": Reason.STATIC_CONCURRENCY,
    "ExternalStream": Reason.STATIC_CONCURRENCY,
    "save": Reason.STATIC_IO,
    "load": Reason.STATIC_IO,
    "from_file": Reason.STATIC_IO,
    "hub": Reason.STATIC_IO,
    "overrides": Reason.STATIC_SUBCLASS,
    "Tensor._make_subclass": Reason.STATIC_SUBCLASS,
}
DYNAMIC_NAMES = {
    "setattr",
    "delattr",
    "exec",
    "eval",
    "compile",
    "__import__",
    "globals",
    "locals",
    "vars",
    "breakpoint",
    "input",
    "type",
}
REFLECTION_CALLS = {"getattr", "hasattr"}
"""Allowed only as a direct call with a constant name (which the scan resolves); any other reference, such as
`g = getattr`, is dynamic access under another name."""
EVALUATORS = {
    "typing.get_type_hints",
    "typing.ForwardRef",
    "typing.evaluate_forward_ref",
    "functools.singledispatch",
    "functools.singledispatchmethod",
}
"""Functions that evaluate annotations, strings included, as code (`def f(x: "__import__('os')")`)."""
IO_NAMES = {"open", "print_file"}
MAX_SOURCE_BYTES = 1 << 20
"""A solution file above this many bytes (a kernel file is kilobytes) is refused before it is parsed."""
SUBCLASS_ATTRS = {"__torch_function__", "__torch_dispatch__", "TorchFunctionMode", "TorchDispatchMode"}
NATIVE_LIBRARY = re.compile(
    r"cublas|cudnn|cutlass|cusparse|\bat::(?!Tensor\b|ScalarType\b|k[A-Z]|cuda::getCurrent"
    r"CUDAStream\b|Half\b|BFloat16\b)\w+|torch::(?!Tensor\b|kBFloat16\b|kFloat\b|kHalf\b|"
    r"kInt\b|kLong\b|empty\b|zeros\b|TensorOptions\b|Dtype\b)\w+",
    re.IGNORECASE,
)
"""Library calls in native sources: cuBLAS, cuDNN, CUTLASS, and ATen/torch operators (allocation and types pass)."""

IO_MODULES = {"os", "posix", "nt", "posixpath", "ntpath", "genericpath"}
