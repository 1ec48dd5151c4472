"""Policy: what a solution's source may use, an allow-list checked in the harness before the candidate runs (the
run-time record of forbidden operators is in jg_mcp.eval.ops).

The static pass refuses, each with its line and a sentence the agent can act on:
- importing anything outside the allowed modules (torch, triton, math, ...);
- reflection and dynamic code: `getattr` with a computed name, `setattr`/`delattr`, dunder attributes
  (`__dict__`, `__class__`, `__globals__`, ...), `exec`/`eval`/`compile`/`__import__`, `globals`/`vars`;
- private or by-name torch access (`torch._C`, `torch.ops`, any `torch._name`), streams, threads and processes,
  files and the environment (except reading one named variable), patching imported modules, tensor subclasses;
- any spelling of a forbidden API: the name, an alias, a constant-folded string, and the method of the same
  name on a tensor (`x.bmm` when `torch.bmm` is forbidden);
- native code built with `torch.utils.cpp_extension` whose sources call a library (cuBLAS, cuDNN, ATen ops).

A forbidden name forbids its whole operator family (jg_mcp.eval.ops): `torch.tensordot` is a matrix product
whether or not a goal's list names it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from jg_mcp.eval.ops import family_names
from jg_mcp.eval.report import Finding, Reason

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
SUBCLASS_ATTRS = {"__torch_function__", "__torch_dispatch__", "TorchFunctionMode", "TorchDispatchMode"}
NATIVE_LIBRARY = re.compile(
    r"cublas|cudnn|cutlass|cusparse|\bat::(?!Tensor\b|ScalarType\b|k[A-Z]|cuda::getCurrent"
    r"CUDAStream\b|Half\b|BFloat16\b)\w+|torch::(?!Tensor\b|kBFloat16\b|kFloat\b|kHalf\b|"
    r"kInt\b|kLong\b|empty\b|zeros\b|TensorOptions\b|Dtype\b)\w+",
    re.IGNORECASE,
)
"""Library calls in native sources: cuBLAS, cuDNN, CUTLASS, and ATen/torch operators (allocation and types pass)."""


def _contains(parts: list[str], key: list[str]) -> bool:
    """`key` appears in `parts` as a contiguous run."""
    return any(parts[i : i + len(key)] == key for i in range(len(parts) - len(key) + 1))


def _const_str(node: ast.AST) -> str | None:
    """The value of a string constant, a constant concatenation, or `''.join` of constants; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _const_str(node.left), _const_str(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], (ast.List, ast.Tuple))
        and (sep := _const_str(node.func.value)) is not None
    ):
        parts = [_const_str(e) for e in node.args[0].elts]
        return sep.join(p for p in parts if p is not None) if all(p is not None for p in parts) else None
    return None


@dataclass
class _Scan(ast.NodeVisitor):
    forbidden: list[str]
    allowed: set[str]
    findings: list[Finding] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> dotted name it was imported as."""
    native: bool = False
    """The source builds native code (cpp_extension)."""

    def add(self, reason: Reason, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(reason=reason, detail=f"line {getattr(node, 'lineno', 0)}: {what}"))

    def dotted(self, node: ast.AST) -> str | None:
        """`t.nn.functional.linear` -> `torch.nn.functional.linear` through the import aliases."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if len(node.args) >= 2 and (name := _const_str(node.args[1])) is not None:
                base = self.dotted(node.args[0])
                return f"{base}.{name}" if base else None
        return None

    def check_module(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root not in self.allowed:
            reason = CATEGORY.get(root, Reason.STATIC_IMPORT)
            allowed = ", ".join(sorted(self.allowed - {"__future__"}))
            self.add(reason, node, f"imports `{name}`: a solution may import only {allowed}")

    def check_name(self, dotted: str, node: ast.AST) -> None:
        """A dotted name rooted at an imported module: forbidden APIs, private and refused torch parts."""
        for bad in self.forbidden:
            if dotted == bad or dotted.startswith(bad + "."):
                self.add(Reason.STATIC_FORBIDDEN, node, f"uses forbidden `{bad}` (as `{dotted}`)")
        parts = dotted.split(".")
        if parts[0] == "os" and dotted not in ("os", "os.environ", "os.environ.get", "os.getenv"):
            self.add(
                Reason.STATIC_IO,
                node,
                f"`{dotted}`: of `os` a solution may only read one named variable (os.environ.get('NAME'))",
            )
        if parts[0] in ("torch", "triton") and any(p.startswith("_") for p in parts[1:]):
            self.add(Reason.STATIC_DYNAMIC, node, f"private API `{dotted}`: use public torch and triton APIs")
        elif any(p.startswith("_") and not p.endswith("__") for p in parts[1:]):
            self.add(Reason.STATIC_DYNAMIC, node, f"private API `{dotted}`")
        if any(dotted == e or dotted.startswith(e + ".") for e in EVALUATORS):
            self.add(Reason.STATIC_DYNAMIC, node, f"`{dotted}` evaluates annotations (strings in them) as code")
        if parts[0] == "torch":
            refused = [reason for key, reason in TORCH_REFUSED.items() if _contains(parts[1:], key.split("."))]
            if refused:
                self.add(
                    refused[0],
                    node,
                    f"`{dotted}` is not allowed in a solution (streams, processes, files, "
                    "by-name operators and subclass machinery are refused)",
                )
        if parts[-1] in SUBCLASS_ATTRS or dotted.startswith("torch.utils._python_dispatch"):
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{dotted}`")
        if parts[0] == "torch" and "cpp_extension" in parts:
            self.native = True

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_module(a.name, node)
            self.aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            self.check_name(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(Reason.STATIC_IMPORT, node, "relative import: a solution is a single file")
        self.check_module(node.module or "", node)
        for a in node.names:
            full = f"{node.module}.{a.name}"
            if a.name == "*":
                self.add(Reason.STATIC_DYNAMIC, node, f"`from {node.module} import *`: import names explicitly")
                continue
            self.aliases[a.asname or a.name] = full
            self.check_name(full, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        if name.startswith("__") and name.endswith("__"):
            self.add(Reason.STATIC_INTROSPECTION, node, f"dunder attribute `.{name}`: reflection is not allowed")
        if name in SUBCLASS_ATTRS:
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `.{name}`")
        dotted = self.dotted(node)
        parent = getattr(node, "parent", None)
        if dotted and not isinstance(parent, ast.Attribute):
            self.check_name(dotted, node)
        if dotted is None:
            bad = next((b for b in self.forbidden if b.startswith("torch.") and b.rsplit(".", 1)[-1] == name), None)
            if bad is not None:
                self.add(Reason.STATIC_FORBIDDEN, node, f"calls `.{name}`, the method spelling of forbidden `{bad}`")
        if name.startswith("_") and not name.startswith("__") and dotted is None:
            base = node.value
            if not (isinstance(base, ast.Name) and base.id in ("self", "cls")):
                self.add(
                    Reason.STATIC_DYNAMIC, node, f"private attribute `.{name}` of an object the solution did not define"
                )
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases and not isinstance(getattr(node, "parent", None), ast.Attribute):
            self.check_name(self.aliases[node.id], node)
        if node.id in DYNAMIC_NAMES:
            self.add(Reason.STATIC_DYNAMIC, node, f"`{node.id}`: dynamic code and reflection are not allowed")
        parent = getattr(node, "parent", None)
        if node.id in REFLECTION_CALLS and not (isinstance(parent, ast.Call) and parent.func is node):
            what = f"`{node.id}` referenced, not called: dynamic access under another name"
            self.add(Reason.STATIC_DYNAMIC, node, what)
        if node.id in IO_NAMES:
            self.add(Reason.STATIC_IO, node, f"`{node.id}`: a solution may not open files")
        if node.id.startswith("__") and node.id.endswith("__") and node.id not in ("__name__", "__file__"):
            self.add(Reason.STATIC_INTROSPECTION, node, f"`{node.id}`: reflection is not allowed")

    def visit_arg(self, node: ast.arg) -> None:
        self.check_annotation(node.annotation)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.check_annotation(node.returns)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_annotation(node.annotation)
        self.check_target(node.target)
        self.generic_visit(node)

    def check_annotation(self, annotation: ast.AST | None) -> None:
        """Strings in an annotation are code to whatever evaluates annotations (typing, functools, TorchScript): scan
        each one that parses as an expression as the code it is."""
        for node in ast.walk(annotation) if annotation is not None else []:
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            try:
                tree = ast.parse(node.value.strip(), mode="eval")
            except SyntaxError:
                continue
            for outer in ast.walk(tree):
                outer.lineno = getattr(node, "lineno", 0)  # type: ignore[attr-defined]
                for child in ast.iter_child_nodes(outer):
                    child.parent = outer  # type: ignore[attr-defined]
            self.visit(tree.body)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) < 2 or _const_str(node.args[1]) is None:
                self.add(Reason.STATIC_DYNAMIC, node, f"`{node.func.id}` with a computed name")
            elif (dotted := self.dotted(node)) is not None:
                self.check_name(dotted, node)
            elif (name := _const_str(node.args[1])) is not None and name.startswith("_"):
                self.add(Reason.STATIC_DYNAMIC, node, f"`getattr` of private or dunder `{name}`")
        dotted = self.dotted(node.func)
        if dotted in ("os.environ.get", "os.getenv") and (not node.args or _const_str(node.args[0]) is None):
            self.add(Reason.STATIC_IO, node, "reads the environment with a computed name")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self.dotted(node.value) == "os.environ" and _const_str(node.slice) is None:
            self.add(Reason.STATIC_IO, node, "reads the environment with a computed name")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and any(b.endswith("__matmul__") for b in self.forbidden):
            self.add(Reason.STATIC_FORBIDDEN, node, "uses the forbidden `@` operator")
        folded = _const_str(node)
        if folded is not None:
            self.check_string(folded, node)
        else:
            self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.check_string(node.value, node)

    def check_string(self, text: str, node: ast.AST) -> None:
        """Name-like strings (no whitespace) naming a forbidden API; prose (docstrings) is skipped."""
        if self.native and (m := NATIVE_LIBRARY.search(text)):
            self.add(
                Reason.STATIC_FORBIDDEN,
                node,
                f"native source calls a library (`{m.group(0)}`): write the kernel itself",
            )
        if not text or any(c.isspace() for c in text):
            return
        for bad in self.forbidden:
            leaf = bad.rsplit(".", 1)[-1]
            if (len(leaf) > 3 and leaf in text) or text == bad:
                self.add(Reason.STATIC_FORBIDDEN, node, f"string names forbidden `{bad}`: {text!r}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_target(node.target)
        self.generic_visit(node)

    def check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute) and (dotted := self.dotted(target)):
            self.add(Reason.STATIC_MONKEYPATCH, target, f"assigns `{dotted}` of an imported module")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if (dotted := self.dotted(base)) and dotted.startswith("torch."):
                self.add(Reason.STATIC_SUBCLASS, node, f"class `{node.name}` subclasses `{dotted}`")
        self.generic_visit(node)


def static_check(source: str, forbidden: list[str], allowed: set[str] | None = None) -> list[Finding]:
    """Every static finding in a solution's source; a syntax error is itself a finding."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Finding(reason=Reason.SYNTAX, detail=f"line {exc.lineno}: {exc.msg}")]
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]
    scan = _Scan(forbidden=family_names(forbidden), allowed=ALLOWED_MODULES | (allowed or set()))
    scan.native = "cpp_extension" in source
    scan.visit(tree)
    seen: set[tuple[Reason, str]] = set()
    unique = []
    for f in scan.findings:
        if (f.reason, f.detail) not in seen:
            seen.add((f.reason, f.detail))
            unique.append(f)
    return unique


def policy_text(forbidden: list[str], allowed: set[str] | None = None) -> str:
    """The policy in one paragraph, as the agent is told it (goal constraints and the goal resource)."""
    mods = ", ".join(sorted((ALLOWED_MODULES | (allowed or set())) - {"__future__", "os"}))
    return (
        f"The solution file may import only {mods} (and read one named environment variable with "
        "os.environ.get('NAME')). It may not use reflection or dynamic code (getattr with a computed name, "
        "setattr, dunder attributes such as __dict__ or __class__, exec/eval/compile, private torch APIs such as "
        "torch._C or torch.ops), threads, processes or CUDA streams, files, or tensor subclasses. Native code "
        "built with torch.utils.cpp_extension may not call cuBLAS, cuDNN, CUTLASS or ATen operators. A forbidden "
        "API is forbidden under every spelling (alias, method, string)."
    )
