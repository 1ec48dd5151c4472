"""The policy's tables (jg_mcp.policy.check): the modules a solution may import, what each refused module or torch
attribute is refused as, the names and patterns that are dynamic code, files or native library calls, and the syntax
a solution may use with the kind of name each node's fields hold."""

from __future__ import annotations

import ast

from jg_mcp.eval.reasons import Reason

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
    "quantization": Reason.STATIC_DYNAMIC,  # torch.ao's under their former names
    "nn.intrinsic": Reason.STATIC_DYNAMIC,
    "nn.qat": Reason.STATIC_DYNAMIC,
    "nn.quantizable": Reason.STATIC_DYNAMIC,
    "nn.quantized": Reason.STATIC_DYNAMIC,
    "cuda.gds": Reason.STATIC_IO,  # GPUDirect Storage: a tensor's bytes to and from a file at a chosen path
    "cuda.tunable": Reason.STATIC_IO,  # TunableOp's results file, written where it is told
    "serialization": Reason.STATIC_IO,
    "classes": Reason.STATIC_DYNAMIC,  # load_library: a native library by path; TorchScript classes by name
    "CUDAPluggableAllocator": Reason.STATIC_DYNAMIC,  # C functions looked up by name in a library at a path
    "change_current_allocator": Reason.STATIC_DYNAMIC,
    "cuda.cudart": Reason.STATIC_DYNAMIC,  # the raw CUDA runtime's bindings
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
NATIVE_BUILDS = "utils.cpp_extension"
"""torch's native builds (load, load_inline, CppExtension, BuildExtension, ...), as TORCH_REFUSED's keys: refused as
a class. A library built and loaded into the candidate's process runs with the interpreter's and torch's full powers
(the Python C API reaches every module and callable, c10 switches off the dispatch keys the recorder sits at), which
nothing the harness checks from outside can bound: a solution's compiled code is Triton's. The native check of the
libraries a candidate maps (jg_mcp.eval.native.native) stays, as a second line."""
ENV_READS = {"os.environ.get", "os.getenv"}
"""What reads one environment variable, named by a constant string (calls.Calls): all a solution may use of
`os`."""
DIRECT_CALLS = {"torch.compile", *ENV_READS}
"""Functions whose arguments the scan checks (calls.Calls), so used only as a direct call with spelt-out
arguments: torch.compile may not take `options`, which name the compiler Inductor runs (any program); an environment
read takes a constant name."""
GATEWAY_ATTRS = {
    "numpy": (
        Reason.STATIC_IO,
        "hands over a numpy array, whose methods write files (tofile, dump) and reach raw memory (ctypes); numpy is "
        "not an allowed module",
    ),
    "from_file": (Reason.STATIC_IO, "maps a file at a chosen path (a storage's from_file writes and reads it)"),
    "backward": (Reason.STATIC_DYNAMIC, "computes library ops' derivatives, other library ops under other names"),
    "load_binary": (Reason.STATIC_DYNAMIC, "loads GPU code from bytes (Triton's driver): code the eval never judged"),
    "launcher_cls": (Reason.STATIC_DYNAMIC, "builds a launcher for GPU code of the caller's choosing"),
    "set_active": (Reason.STATIC_DYNAMIC, "replaces Triton's driver"),
    "reset_active": (Reason.STATIC_DYNAMIC, "replaces Triton's driver"),
}
"""Attribute names refused on any object, whose type the scan cannot know (a storage a call returned): what hands
over a module a solution may not use, reaches files, runs library derivatives, or loads GPU code Triton did not
compile (its driver's loader and launcher, reached through any object: `d = triton.runtime.driver.active`)."""
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
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make"}
"""A named tuple's documented public API, spelt with a leading underscore so as not to clash with its fields: allowed
on the objects the solution makes (a private name rooted at an import stays refused, `torch.return_types._make`)."""
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
IO_MODULES = {"os", "posix", "nt", "posixpath", "ntpath", "genericpath"}

GLOBALS_ATTRS = {"get_capture_scope", "used_global_vals"}
"""Public attributes of trusted objects that hand over other code's globals, and so every module (a Triton function's
`get_capture_scope()` is its module's globals); the interpreter's own (frames, generators, code, tracebacks) are
jg_mcp.policy.trusted.interpreter_attributes."""

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
OPERATOR_METHODS: dict[type[ast.operator], str] = {
    ast.Add: "__add__",
    ast.Sub: "__sub__",
    ast.Mult: "__mul__",
    ast.MatMult: "__matmul__",
    ast.Div: "__truediv__",
    ast.FloorDiv: "__floordiv__",
    ast.Mod: "__mod__",
    ast.Pow: "__pow__",
    ast.LShift: "__lshift__",
    ast.RShift: "__rshift__",
    ast.BitAnd: "__and__",
    ast.BitOr: "__or__",
    ast.BitXor: "__xor__",
}
"""The method each binary operator calls (its reflected `__r...__` and in-place `__i...__` forms follow)."""
OPERATOR_SYMBOLS: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.MatMult: "@",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
_BINARY = "add sub mul matmul truediv floordiv mod divmod pow lshift rshift and or xor".split()
CLASS_DUNDERS = frozenset(
    """__init__ __post_init__ __call__ __repr__ __str__ __format__ __hash__ __bool__ __eq__ __ne__ __lt__ __le__
    __gt__ __ge__ __len__ __iter__ __next__ __reversed__ __contains__ __getitem__ __setitem__ __delitem__ __missing__
    __enter__ __exit__ __neg__ __pos__ __abs__ __invert__ __int__ __float__ __complex__ __index__ __round__
    __trunc__ __floor__ __ceil__""".split()
    + [f"__{form}{op}__" for op in _BINARY for form in ("", "r", "i")]
)
"""The dunder methods a class body may define: construction, calls, text, hashing and comparisons, the container,
iterator and context-manager protocols, numeric conversions and operators, each called on the file's own objects by
its own code. Not what intercepts attribute access (`__getattr__`, `__getattribute__`, `__setattr__`, `__delattr__`,
`__dir__`, the descriptor hooks `__get__`, `__set__`, `__delete__`, `__set_name__`): a library that reads or writes
attributes by names spelt at run time would hand each value to the file (functools.update_wrapper to a class's
`__setattr__`). Not what takes part in creating a class or an instance (`__new__`: it may hand back any object where
`__init__` only initialises, and on a `type` subclass sees class creation; `__init_subclass__`, `__class_getitem__`,
`__mro_entries__`, `__prepare__`, `__instancecheck__`, `__subclasscheck__`), copying and pickling (`__reduce__`,
`__getstate__`, `__deepcopy__`: a library's copy hands its memo to them), nor the interfaces by which a library
builds a tensor from an object's raw address or a path (`__cuda_array_interface__`, `__dlpack__`, `__fspath__`);
the finalizer and torch's hooks have their own findings."""
OWN = ("self", "cls", "ctx")
"""The names whose attributes a solution may assign: the instance or class a method of its own gets, and an autograd
Function's context. Every other object's attributes it may only read (a Triton CompiledKernel's `kernel`, set, is
GPU code Triton loads at its first launch)."""
