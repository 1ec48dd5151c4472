"""The policy's tables (jg_mcp.eval.policy): the modules a solution may import, what each refused module or torch
attribute is refused as, the names and patterns that are dynamic code, files or native library calls, and the syntax
a solution may use with the kind of name each node's fields hold."""

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
    "package": Reason.STATIC_DYNAMIC,  # torch.package.sys_importer.import_module('sys'): any module, by name
    "utils.collect_env": Reason.STATIC_PROCESS,  # torch.utils.collect_env.run('cmd'): a shell command
    "jit": Reason.STATIC_DYNAMIC,  # TorchScript: code compiled from text or source, run by its own interpreter
    "compiler": Reason.STATIC_DYNAMIC,  # torch.compiler.load_cache_artifacts: compiled code from bytes
    "onnx": Reason.STATIC_IO,  # writes files where it is told (external data: raw tensor bytes)
    "profiler": Reason.STATIC_IO,  # writes traces where it is told
    "autograd.grad": Reason.STATIC_DYNAMIC,  # a library op's derivative is another library op (softplus' a sigmoid)
    "autograd.backward": Reason.STATIC_DYNAMIC,
    "autograd.functional": Reason.STATIC_DYNAMIC,
    "func": Reason.STATIC_DYNAMIC,  # torch.func's grad, vjp, jacrev: the same
    "distributions": Reason.STATIC_DYNAMIC,  # library softmax, logsumexp and norms under distributions' names
    "ao": Reason.STATIC_DYNAMIC,  # quantized and fused modules (LinearReLU) under names no family holds
    "overrides": Reason.STATIC_SUBCLASS,
    "Tensor._make_subclass": Reason.STATIC_SUBCLASS,
}
TRITON_REFUSED = {
    "runtime.build": Reason.STATIC_DYNAMIC,  # compiles C source text into a module and loads it
    "runtime.cache": Reason.STATIC_IO,  # the files of Triton's cache, whose libraries Triton loads
    "compile": Reason.STATIC_DYNAMIC,  # triton.compile: code from text or a file
    "compiler": Reason.STATIC_DYNAMIC,
    "backends": Reason.STATIC_DYNAMIC,  # the drivers, which build and load their native modules
    "knobs": Reason.STATIC_DYNAMIC,  # where Triton finds its cache, compilers, overrides and hooks
    "load_binary": Reason.STATIC_DYNAMIC,  # a GPU binary from bytes
    "set_active": Reason.STATIC_DYNAMIC,  # another driver
    "tools.compile": Reason.STATIC_DYNAMIC,
    "tools.link": Reason.STATIC_DYNAMIC,
    "tools.disasm": Reason.STATIC_PROCESS,
    "tools.build_extern": Reason.STATIC_PROCESS,
}
"""Triton's parts that build, place or load code, as TORCH_REFUSED's keys (a contiguous run of a dotted name's
parts after `triton`): what a solution writes is Triton's language (triton.jit, triton.language, autotune,
heuristics, Config, the tensor descriptor helpers); through these it would place or load code the eval does not
judge (the native check judges libraries in the Triton cache by the library rules only, for Triton's launchers)."""
TRITON_CODE_MODULES = {"triton.runtime.build": Reason.STATIC_DYNAMIC, "triton.runtime.cache": Reason.STATIC_IO}
"""Modules whose public functions and classes are refused as objects, under any name that reaches them (the
autotuner imports the cache's)."""
TORCH_UTILS_ALLOWED = {"cpp_extension"}
"""Of torch.utils a solution may use only these: the others start processes (data's DataLoader workers, whose
recorded operators never reach the harness), run code from text (benchmark's Timer) or write files."""
CPP_BUILDERS = {"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"}
"""Native builds a solution may call, only directly, with a constant identifier for `name` and no `build_directory`:
the eval's cache decides where they are built (a path in a name, or a build directory, put a library in the Triton
cache, whose libraries the native check judges by the library rules only)."""
_HOST_FLAGS = (
    r"-O[0-3s]?|-g[0-3]?|-w|-std=[\w+]+|-D\w+(=[\w.+-]*)?|-U\w+|-march=[\w-]+|-mtune=[\w-]+"
    r"|-m(no-)?[a-z0-9]+(-[a-z0-9]+)*|-f(?!openmp)(no-)?[a-z0-9]+(-[a-z0-9]+)*|-W(no-)?[a-z0-9]+(-[a-z0-9+]+)*"
)
BUILD_FLAGS = {
    "extra_cflags": re.compile(_HOST_FLAGS),
    "extra_cuda_cflags": re.compile(
        _HOST_FLAGS + r"|-?-use_fast_math|-lineinfo|--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda"
        r"|-arch=(sm|compute)_\d+[af]?|--gpu-architecture=(sm|compute)_\d+[af]?"
        r"|-gencode=arch=compute_\d+[af]?,code=(sm|compute)_\d+[af]?|-maxrregcount=\d+|-Xptxas=-v"
        r"|--ptxas-options=-v|--resource-usage|--threads=\d+|-ftz=(true|false)|-prec-(div|sqrt)=(true|false)"
        r"|--fmad=(true|false)"
    ),
    "extra_ldflags": re.compile(r"-l\w[\w+.-]*"),
}
"""The flags a native build may take, each a whole match: optimisation, language, macros, target and warnings; for
nvcc its code generation; for the linker libraries by plain name (the native check judges each). Anything else
can run a program (gcc's -wrapper, nvcc's -ccbin), write the output elsewhere (-Wl,-o) or load a library from a
chosen path (-L, -l:FILE, an rpath)."""
BUILD_KEYWORDS = {
    "name",
    "sources",
    "cpp_sources",
    "cuda_sources",
    "functions",
    "with_cuda",
    "verbose",
    "is_python_module",
    "with_pytorch_error_handling",
    "keep_intermediates",
    "use_pch",
    "no_implicit_headers",
    *BUILD_FLAGS,
}
"""A native build's keywords a solution may pass (its positional arguments: the name and the sources only); others
choose where it builds or what it reads (build_directory, extra_include_paths) or build a program
(is_standalone)."""
DIRECT_CALLS = CPP_BUILDERS | {"torch.compile"}
"""Functions whose arguments the scan checks (visit_Call), so used only as a direct call with spelt-out arguments:
torch.compile may not take `options`, which name the compiler Inductor runs (any program)."""
GATEWAY_ATTRS = {
    "numpy": (
        Reason.STATIC_IO,
        "hands over a numpy array, whose methods write files (tofile, dump) and reach raw memory (ctypes); numpy is "
        "not an allowed module",
    ),
    "from_file": (Reason.STATIC_IO, "maps a file at a chosen path (a storage's from_file writes and reads it)"),
    "backward": (Reason.STATIC_DYNAMIC, "computes library ops' derivatives, other library ops under other names"),
}
"""Attribute names refused on any object, whose type the scan cannot know (a storage a call returned): what hands
over a module a solution may not use, reaches files, or runs library derivatives."""
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

GLOBALS_ATTRS = {"get_capture_scope", "used_global_vals"}
"""Public attributes of trusted objects that hand over other code's globals, and so every module (a Triton function's
`get_capture_scope()` is its module's globals); the interpreter's own (frames, generators, code, tracebacks) are
jg_mcp.eval.trusted.interpreter_attributes."""

ALLOWED_SYNTAX = frozenset(
    """Module FunctionDef ClassDef Return Delete Assign AugAssign AnnAssign For While If With Raise Try Assert
    Import ImportFrom Global Nonlocal Expr Pass Break Continue
    BoolOp NamedExpr BinOp UnaryOp Lambda IfExp Dict Set ListComp SetComp DictComp GeneratorExp Yield YieldFrom
    Compare Call FormattedValue JoinedStr Constant Attribute Subscript Starred Name List Tuple Slice
    Load Store Del And Or Add Sub Mult MatMult Div Mod Pow LShift RShift BitOr BitXor BitAnd FloorDiv
    Invert Not UAdd USub Eq NotEq Lt LtE Gt GtE Is IsNot In NotIn
    comprehension ExceptHandler arguments arg keyword alias withitem""".split()
)
"""The node types (`ast` class names) a solution may use: what a kernel file needs. Any other node is refused, with
REFUSED_SYNTAX's sentence where the policy knows it (pattern matching, coroutines) and as unknown otherwise (what a
future Python adds): the scan never skips syntax it has no rule for."""

ATTRIBUTE = "attribute"
"""A name read from an object: `x.name`, a class pattern's `name=`; the attribute rules."""
VARIABLE = "variable"
"""A variable read, bound or declared: a Name, a parameter, an `as` name, global/nonlocal, a pattern's capture, a type
parameter; the variable rules."""
DEFINITION = "definition"
"""The name of a function or class the file defines: the variable rules outside a class body; in one, dunder methods
(`__init__`) are allowed but a finalizer and torch hooks are not."""
KEYWORD = "keyword"
"""An argument's name in a call or a class statement: no dunder, and no private parameter of an imported API."""
IMPORTED = "imported"
"""A dotted module path, or a name imported from a module: each part after the root module by the attribute rules."""
LITERAL = "literal"
"""Not a name: a constant's value, a flag, a count, a conversion code, a comment."""

NAME_FIELDS: dict[str, dict[str, str]] = {
    "FunctionDef": {"name": DEFINITION, "type_comment": LITERAL},
    "AsyncFunctionDef": {"name": DEFINITION, "type_comment": LITERAL},
    "ClassDef": {"name": DEFINITION},
    "Assign": {"type_comment": LITERAL},
    "AnnAssign": {"simple": LITERAL},
    "For": {"type_comment": LITERAL},
    "AsyncFor": {"type_comment": LITERAL},
    "With": {"type_comment": LITERAL},
    "AsyncWith": {"type_comment": LITERAL},
    "ImportFrom": {"module": IMPORTED, "level": LITERAL},
    "alias": {"name": IMPORTED, "asname": VARIABLE},
    "Global": {"names": VARIABLE},
    "Nonlocal": {"names": VARIABLE},
    "Attribute": {"attr": ATTRIBUTE},
    "Name": {"id": VARIABLE},
    "Constant": {"value": LITERAL, "kind": LITERAL},
    "FormattedValue": {"conversion": LITERAL},
    "comprehension": {"is_async": LITERAL},
    "ExceptHandler": {"name": VARIABLE},
    "arg": {"arg": VARIABLE, "type_comment": LITERAL},
    "keyword": {"arg": KEYWORD},
    "MatchClass": {"kwd_attrs": ATTRIBUTE},
    "MatchAs": {"name": VARIABLE},
    "MatchStar": {"name": VARIABLE},
    "MatchMapping": {"rest": VARIABLE},
    "MatchSingleton": {"value": LITERAL},
    "TypeVar": {"name": VARIABLE},
    "ParamSpec": {"name": VARIABLE},
    "TypeVarTuple": {"name": VARIABLE},
}
"""By node type, the fields that hold a name or a plain value rather than nodes, and what each is; fields holding
nodes are scanned as nodes. A field holding anything else that is not listed here (a field a future Python adds) is
refused until this table says how to check it."""

_MATCH = (
    Reason.STATIC_DYNAMIC,
    "`match`: a class pattern reads attributes by name, some named only at run time (a class's `__match_args__`); "
    "use if/elif",
)
_ASYNC = (Reason.STATIC_CONCURRENCY, "coroutines (`async`, `await`): a kernel runs as plain calls")
_LAZY = (
    Reason.STATIC_DYNAMIC,
    "type parameters and `type` aliases: their bounds and values are code evaluated lazily, like string annotations",
)
_PATTERNS = "MatchValue MatchSingleton MatchSequence MatchMapping MatchClass MatchStar MatchAs MatchOr".split()
REFUSED_SYNTAX: dict[str, tuple[Reason, str]] = {
    **dict.fromkeys(["Match", "match_case", *_PATTERNS], _MATCH),
    **dict.fromkeys(["AsyncFunctionDef", "AsyncFor", "AsyncWith", "Await"], _ASYNC),
    **dict.fromkeys(["TypeAlias", "TypeVar", "ParamSpec", "TypeVarTuple"], _LAZY),
    "TryStar": (Reason.SYNTAX, "`except*` (exception groups): use `except`"),
}
"""Syntax the policy knows and refuses, with the reason and the sentence the agent reads."""
