"""Policy: refuse forbidden APIs and known cheating constructs statically (AST), and record them at run time.

The static pass resolves import aliases, `getattr` with constant or constant-folded strings, and string
literals that name a forbidden API; it also flags constructs that have no place in a kernel and are the
tools of known reward hacks (introspection, threads and streams, file and environment access, patching
imported modules, ending the process, tensor subclasses). The runtime pass wraps every forbidden
callable in the candidate process so that a call that slipped past the static pass is recorded.
"""

from __future__ import annotations

import ast
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jg_mcp.eval.report import Finding, Reason

INTROSPECTION_MODULES = {"gc", "inspect", "ctypes", "cffi", "_ctypes", "dis", "traceback", "mmap", "sys._getframe"}
CONCURRENCY_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "sched"}
IO_MODULES = {"pickle", "shelve", "tempfile", "shutil", "socket", "hashlib", "sqlite3", "dbm", "marshal", "glob"}
DYNAMIC_MODULES = {"importlib", "builtins", "operator", "runpy", "pkgutil", "code", "codeop"}
PROCESS_MODULES = {"signal", "atexit", "faulthandler", "resource"}

INTROSPECTION_ATTRS = {
    "_getframe",
    "f_locals",
    "f_globals",
    "f_back",
    "f_code",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "__globals__",
    "__code__",
    "__closure__",
    "cell_contents",
    "__builtins__",
    "__subclasses__",
    "__dict__",
    "__getattribute__",
    "get_objects",
    "get_referrers",
    "settrace",
    "setprofile",
    "addaudithook",
    "_current_frames",
}
CONCURRENCY_ATTRS = {
    "Stream",
    "stream",
    "set_stream",
    "ExternalStream",
    "fork",
    "spawnv",
    "posix_spawn",
    "Thread",
    "Process",
}
IO_ATTRS = {
    "environ",
    "getenv",
    "putenv",
    "save",
    "load",
    "write_bytes",
    "write_text",
    "read_bytes",
    "read_text",
    "listdir",
    "scandir",
    "walk",
}
ANY_IO_ATTRS = {"tobytes", "stdin"}
PROCESS_ATTRS = {"exit", "_exit", "abort", "kill", "killpg", "raise_signal", "system", "execv", "execl", "execvp"}
DYNAMIC_CALLS = {"__import__", "eval", "exec", "compile", "globals", "vars", "locals", "setattr", "delattr", "hash"}
DYNAMIC_ATTRS = {"ops", "_C", "_ops", "import_module", "attrgetter", "methodcaller"}
SUBCLASS_ATTRS = {
    "__torch_function__",
    "__torch_dispatch__",
    "TorchFunctionMode",
    "TorchDispatchMode",
    "_make_subclass",
}
SUSPICIOUS_STRINGS = ("/dev/shm", "/proc/", "JG_")


@dataclass
class _Scan(ast.NodeVisitor):
    forbidden: list[str]
    findings: list[Finding] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> dotted name it was imported as."""

    def add(self, reason: Reason, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.findings.append(Finding(reason=reason, detail=f"line {line}: {what}"))

    def dotted(self, node: ast.AST) -> str | None:
        """`t.nn.functional.linear` -> `torch.nn.functional.linear` through the import aliases."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if len(node.args) >= 2 and (name := _const_str(node.args[1])) is not None:
                base = self.dotted(node.args[0])
                return f"{base}.{name}" if base else None
        return None

    def check_name(self, dotted: str, node: ast.AST) -> None:
        root = dotted.split(".")[0]
        other_module = root in self.modules and root != "torch"
        for bad in self.forbidden:
            method = bad.startswith("torch.Tensor.") and not other_module and "." + bad.rsplit(".", 1)[1]
            if dotted == bad or dotted.startswith(bad + ".") or (method and dotted.endswith(method)):
                self.add(Reason.STATIC_FORBIDDEN, node, f"uses forbidden `{bad}` (as `{dotted}`)")
        leaf = dotted.rsplit(".", 1)[-1]
        parts = set(dotted.split(".")[1:])
        if root in INTROSPECTION_MODULES or dotted == "sys._getframe":
            self.add(Reason.STATIC_INTROSPECTION, node, f"interpreter introspection through `{dotted}`")
        elif root in CONCURRENCY_MODULES:
            self.add(Reason.STATIC_CONCURRENCY, node, f"threads or processes through `{dotted}`")
        elif root in IO_MODULES:
            self.add(Reason.STATIC_IO, node, f"files, hashing or serialisation through `{dotted}`")
        elif root in DYNAMIC_MODULES:
            self.add(Reason.STATIC_DYNAMIC, node, f"dynamic access through `{dotted}`")
        elif root in PROCESS_MODULES:
            self.add(Reason.STATIC_PROCESS, node, f"process control through `{dotted}`")
        elif parts & PROCESS_ATTRS and root in ("os", "sys", "torch"):
            self.add(Reason.STATIC_PROCESS, node, f"ends or signals the process: `{dotted}`")
        elif parts & IO_ATTRS and root in ("os", "torch", "pathlib", "numpy", "np"):
            self.add(Reason.STATIC_IO, node, f"environment or file access: `{dotted}`")
        elif parts & CONCURRENCY_ATTRS and root in ("torch", "os"):
            self.add(Reason.STATIC_CONCURRENCY, node, f"streams or processes: `{dotted}`")
        elif root == "torch" and set(dotted.split(".")[1:]) & DYNAMIC_ATTRS:
            self.add(Reason.STATIC_DYNAMIC, node, f"private or by-name operator access: `{dotted}`")
        elif leaf in SUBCLASS_ATTRS or dotted.startswith("torch.utils._python_dispatch"):
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `{dotted}`")

    @property
    def modules(self) -> set[str]:
        """Dotted roots that name imported modules (a local alias resolves to one of these)."""
        return {v.split(".")[0] for v in self.aliases.values()}

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            self.check_name(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            full = f"{node.module}.{a.name}" if node.module else a.name
            self.aliases[a.asname or a.name] = full
            self.check_name(full, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTROSPECTION_ATTRS:
            self.add(Reason.STATIC_INTROSPECTION, node, f"interpreter introspection through `.{node.attr}`")
        if node.attr in ANY_IO_ATTRS:
            self.add(Reason.STATIC_IO, node, f"reads raw bytes or stdin: `.{node.attr}`")
        if node.attr in SUBCLASS_ATTRS:
            self.add(Reason.STATIC_SUBCLASS, node, f"tensor subclass or torch mode machinery: `.{node.attr}`")
        dotted = self.dotted(node)
        if dotted and not isinstance(getattr(node, "parent", None), ast.Attribute):
            self.check_name(dotted, node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases and not isinstance(getattr(node, "parent", None), ast.Attribute):
            self.check_name(self.aliases[node.id], node)
        if node.id in DYNAMIC_CALLS:
            self.add(Reason.STATIC_DYNAMIC, node, f"dynamic code or attribute access: `{node.id}`")
        if node.id == "open":
            self.add(Reason.STATIC_IO, node, "opens files: `open`")

    def named_env_lookup(self, node: ast.AST) -> bool:
        """`os.environ.get("NAME")`, `os.getenv("NAME")` or `os.environ["NAME"]`: reading one variable the solution
        names (TRITON_INTERPRET, say) cannot find a seed; enumerating the environment could."""
        if isinstance(node, ast.Call) and self.dotted(node.func) in ("os.environ.get", "os.getenv"):
            return bool(node.args) and _const_str(node.args[0]) is not None
        if isinstance(node, ast.Subscript) and self.dotted(node.value) == "os.environ":
            return _const_str(node.slice) is not None
        return False

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self.named_env_lookup(node):
            self.visit(node.slice)
        else:
            self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if self.named_env_lookup(node):
            for arg in [*node.args, *node.keywords]:
                self.visit(arg)
            return
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
            if _const_str(node.args[1]) is None:
                self.add(Reason.STATIC_DYNAMIC, node, "getattr with a computed name")
            elif (dotted := self.dotted(node)) is not None:
                self.check_name(dotted, node)
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
        """Name-like strings (no whitespace) that contain a forbidden API's name; prose (docstrings) is skipped."""
        if not text or any(c.isspace() for c in text):
            return
        for bad in self.forbidden:
            leaf = bad.rsplit(".", 1)[-1]
            if len(leaf) > 3 and leaf in text or text == bad:
                self.add(Reason.STATIC_FORBIDDEN, node, f"string names forbidden `{bad}`: {text!r}")
        for s in SUSPICIOUS_STRINGS:
            if s.lower() in text.lower():
                self.add(Reason.STATIC_IO, node, f"string refers to `{s}`: {text!r}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_target(node.target)
        self.generic_visit(node)

    def check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            dotted = self.dotted(target)
            if dotted and dotted.split(".")[0] in set(self.aliases.values()) | {"torch", "time", "triton"}:
                self.add(Reason.STATIC_MONKEYPATCH, target, f"assigns `{dotted}` of an imported module")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if (dotted := self.dotted(base)) and dotted.startswith("torch.") and dotted.endswith("Tensor"):
                self.add(Reason.STATIC_SUBCLASS, node, f"class `{node.name}` subclasses `{dotted}`")
        self.generic_visit(node)


def _const_str(node: ast.AST) -> str | None:
    """The value of a string constant, a constant concatenation, or `''.join` of constants; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _const_str(node.left), _const_str(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # type: ignore[attr-defined]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], (ast.List, ast.Tuple))
        and (sep := _const_str(node.func.value)) is not None
    ):
        parts = [_const_str(e) for e in node.args[0].elts]
        return sep.join(parts) if all(p is not None for p in parts) else None  # type: ignore[arg-type]
    return None


def static_check(source: str, forbidden: list[str]) -> list[Finding]:
    """Every static finding in a solution's source; a syntax error is itself a finding."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Finding(reason=Reason.SYNTAX, detail=f"line {exc.lineno}: {exc.msg}")]
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]
    scan = _Scan(forbidden=forbidden)
    scan.visit(tree)
    seen: set[tuple[Reason, str]] = set()
    unique = []
    for f in scan.findings:
        if (f.reason, f.detail) not in seen:
            seen.add((f.reason, f.detail))
            unique.append(f)
    return unique


class _RecordedOp:
    """Stands in for a torch op packet (`torch.ops.aten.X`): records calls and forwards every attribute,
    so torch's own code that walks the op namespace (`overloads()`, `.default`) keeps working."""

    def __init__(self, original: Any, record: Callable[[], None]):
        self._original = original
        self._record = record

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._record()
        return self._original(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


@dataclass
class CallRecorder:
    """Wraps forbidden callables in this process; a call while `armed` is recorded by name."""

    calls: list[str] = field(default_factory=list)
    armed: bool = True
    replaced: list[tuple[Any, str, Any]] = field(default_factory=list)
    """(owner, attribute, original) of every wrapper installed."""

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        original = getattr(owner, attr, None)
        if original is None or not callable(original):
            return
        recorder = self

        def record() -> None:
            if recorder.armed:
                recorder.calls.append(label)

        if hasattr(original, "overloads"):
            recorded: Any = _RecordedOp(original, record)
        else:

            @functools.wraps(original)
            def recorded(*args: Any, **kwargs: Any) -> Any:
                record()
                return original(*args, **kwargs)

            del recorded.__wrapped__
        try:
            setattr(owner, attr, recorded)
        except (AttributeError, TypeError):
            return
        self.replaced.append((owner, attr, original))

    def restore(self) -> None:
        """Put the originals back (the candidate process never does; a test in the harness's process must)."""
        for owner, attr, original in reversed(self.replaced):
            setattr(owner, attr, original)
        self.replaced.clear()


def _resolve(dotted: str) -> tuple[Any, str] | None:
    """`torch.nn.functional.linear` -> (the torch.nn.functional module, 'linear')."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for p in parts[cut:-1]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj, parts[-1]
    return None


def install_wrappers(forbidden: list[str]) -> CallRecorder:
    """Wrap each forbidden callable, and its aliases in torch's C namespaces, so calls are recorded."""
    import torch

    recorder = CallRecorder()
    for dotted in forbidden:
        found = _resolve(dotted)
        if found is None:
            continue
        owner, attr = found
        recorder.wrap(owner, attr, dotted)
        for alias_owner in (torch._C._VariableFunctions, torch._C._nn, torch.Tensor):
            if alias_owner is not owner and dotted.startswith("torch.") and hasattr(alias_owner, attr):
                if alias_owner is torch.Tensor and not dotted.startswith("torch.Tensor."):
                    continue
                recorder.wrap(alias_owner, attr, dotted)
        if attr == "__matmul__":
            recorder.wrap(owner, "__rmatmul__", dotted)
    return recorder


def harness_call(recorder: CallRecorder, fn: Callable[..., Any], *args: Any) -> Any:
    """Call harness-owned code (reference, baselines) without recording its forbidden calls."""
    recorder.armed = False
    try:
        return fn(*args)
    finally:
        recorder.armed = True
