"""Goals: the YAML + sibling Python module pair that defines one kernel objective."""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from jg_mcp.errors import GoalError, GoalNotFound
from jg_mcp.models import Strict
from jg_mcp.schema_errors import first_problem

REPO_GOALS = Path(__file__).resolve().parent.parent / "goals"
DEMO_GOALS = Path(__file__).resolve().parent / "demo_goal"
REFERENCE_FILE = "reference.py"
"""Where a session puts a read-only copy of the goal's module in the workspace (served as the reference
resource too); the audit flags any later change to it."""
SEED_BITS = 62
"""Seeds for a goal's input maker are drawn below 2**SEED_BITS: non-negative and within a signed 64-bit integer, so
every generator (torch's, numpy's, Python's) takes one as it is."""


class Frozen(Strict):
    """A part of a goal: fixed once loaded."""

    model_config = ConfigDict(frozen=True)


class Shape(Frozen):
    name: str
    """A label naming where the shape comes from, e.g. `llama3_8b_prefill_qkv`."""
    dims: dict[str, int]
    """Dimension values by name (M, N, K, batch, seq, ...), passed to the input maker."""

    @field_validator("dims")
    @classmethod
    def _positive(cls, dims: dict[str, int]) -> dict[str, int]:
        bad = [k for k, v in dims.items() if v <= 0]
        if bad:
            raise ValueError(f"dimensions must be positive: {', '.join(bad)}")
        return dims


class DimRange(Frozen):
    min: int = Field(ge=1)
    """Smallest value the eval may draw."""
    max: int = Field(ge=1)
    """Largest value the eval may draw."""
    multiple_of: int = Field(default=1, ge=1)
    """Drawn values are multiples of this (the divisibility a solution may rely on)."""

    def problem(self, value: int) -> str | None:
        """Why `value` lies outside this range, or None when it is inside."""
        if not self.min <= value <= self.max:
            return f"outside {self.min}..{self.max}"
        if value % self.multiple_of:
            return f"not a multiple of {self.multiple_of}"
        return None


class Tolerance(Frozen):
    atol: float = Field(ge=0)
    """Absolute tolerance against the float32 reference."""
    rtol: float = Field(ge=0)
    """Relative tolerance against the float32 reference: |out - ref| <= atol + rtol * |ref|."""


class Output(Frozen):
    name: str
    """Name of the output, as the objective refers to it."""
    dtype: Literal["bfloat16", "float16", "float32", "float8_e4m3fn", "int32", "int64"]
    """The dtype the solution must return for this output."""


class Baseline(Frozen):
    function: str
    """Name of the callable in the goal module; called with the reference's arguments."""
    devices: list[Literal["cpu", "cuda"]] = ["cuda", "cpu"]
    """Devices where this baseline runs (some library ops exist only on CUDA)."""
    description: str = ""
    """The library code this baseline stands for, e.g. `torch._scaled_mm (cuBLASLt), rowwise scales`."""


class Hardware(Frozen):
    name: str
    """The GPU the goal targets, e.g. `NVIDIA H200 SXM (sm_90)`."""
    peak_tflops: float = Field(gt=0)
    """Dense peak of the goal's main datatype, TFLOP/s, used for % of roofline and the physical floor."""
    peak_bandwidth_tbps: float = Field(gt=0)
    """HBM bandwidth, TB/s, used for % of roofline and the physical floor."""


class SolutionSpec(Frozen):
    file: str = "solution.py"
    """Workspace-relative file that holds the solution."""
    function: str = "kernel"
    """Name of the function in that file; it takes the reference's positional arguments."""


class GoalBudget(Frozen):
    wall_clock_minutes: int = Field(gt=0)
    """Wall-clock time the agent is given for the session."""


class Goal(Frozen):
    name: str = Field(pattern=r"^[a-z0-9_]+$")
    """Identifier, equal to the file stem: `gemm_fp8`."""
    title: str
    """One line for humans."""
    objective: str
    """One paragraph: what to build and what is minimised."""
    constraints: list[str]
    """Rules the solution must respect, stated to the agent."""
    hardware: Hardware
    """The target GPU and its peaks."""
    reference: str
    """Name of the plain-PyTorch reference callable in the goal module (float32 or higher)."""
    inputs: str
    """Name of the input maker in the goal module: (dims: dict, seed: int, device: str) -> tuple of tensors."""
    edge_inputs: str | None = None
    """Name of the maker of edge-case inputs in the goal module, as `inputs` (the same shapes and dtypes): values the
    goal's domain holds that a numerically careless kernel gets wrong (logits far from zero, all-zero rows, very short
    sequences, any routing). The eval checks one trial of them at every smoke, drawn and timed shape."""
    outputs: list[Output] = Field(min_length=1)
    """What the solution returns, in order (one entry: a tensor; several: a tuple)."""
    shapes: list[Shape] = Field(min_length=1)
    """The timed shapes, taken from real models."""
    smoke_shapes: list[Shape] = Field(min_length=1)
    """Small shapes for CPU and the Triton interpreter."""
    shape_domain: dict[str, DimRange]
    """Ranges the eval draws untimed shapes from; a dimension not named here keeps the timed value."""
    tolerance: Tolerance
    """Correctness tolerance, justified in a YAML comment."""
    baselines: dict[str, Baseline] = Field(min_length=1)
    """The library code to beat, by name."""
    forbidden: list[str] = []
    """Dotted names of APIs a solution may not call, e.g. `torch._scaled_mm`."""
    solution: SolutionSpec = SolutionSpec()
    """Where the solution lives in the workspace and what it is called."""
    budget: GoalBudget
    """Time the agent is given."""
    flops: str
    """Name of the callable in the goal module: (dims) -> floating-point operations of one call."""
    bytes: str
    """Name of the callable in the goal module: (dims) -> minimum bytes moved by one call."""

    @model_validator(mode="after")
    def _domain_names_dims(self) -> Goal:
        dims = set().union(*(s.dims for s in self.shapes))
        unknown = sorted(set(self.shape_domain) - dims)
        if unknown:
            raise ValueError(f"shape_domain names dimensions no shape has: {', '.join(unknown)}")
        return self

    @model_validator(mode="after")
    def _shapes_in_domain(self) -> Goal:
        """Timed and smoke shapes must be shapes a solution is required to handle."""
        for field in ("shapes", "smoke_shapes"):
            for shape in getattr(self, field):
                for dim, value in shape.dims.items():
                    r = self.shape_domain.get(dim)
                    why = r.problem(value) if r else None
                    if r and why:
                        step = f", multiple of {r.multiple_of}" if r.multiple_of > 1 else ""
                        raise ValueError(
                            f"{field} '{shape.name}': {dim}={value} is {why} "
                            f"(shape_domain {dim}: {r.min}..{r.max}{step})"
                        )
        return self


class LoadedGoal:
    """A validated goal whose module is imported when first needed (`module`): a server, an audit or a goal's text
    needs only the files, and importing a goal's module imports torch (2.2 of a server's 3.8 s start on a 2-core
    machine)."""

    def __init__(self, goal: Goal, yaml_path: Path, module: ModuleType | None = None):
        self.goal = goal
        self.yaml_path = yaml_path
        self.module_path = yaml_path.with_suffix(".py")
        self._module = module
        self._importing = threading.Lock()

    @property
    def module(self) -> ModuleType:
        """The goal's module, imported on first use; GoalError when it cannot be, or a callable the goal names is
        not one."""
        with self._importing:
            if self._module is None:
                self._module = _import_checked(self.yaml_path, self.goal)
            return self._module

    @property
    def name(self) -> str:
        return self.goal.name

    def fn(self, name: str) -> Callable[..., Any]:
        return getattr(self.module, name)

    @property
    def reference(self) -> Callable[..., Any]:
        return self.fn(self.goal.reference)

    def reference_parameters(self) -> list[str]:
        """The names of the reference's parameters: from the imported function once the module is imported, else
        from its `def` at the module's top level (nothing imported), else from the function imported now."""
        if self._module is None:
            for node in _top_level(ast.parse(self.module_path.read_text(), str(self.module_path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == self.goal.reference:
                    a = node.args
                    rest = [a.vararg] if a.vararg else []
                    rest += a.kwonlyargs + ([a.kwarg] if a.kwarg else [])
                    return [arg.arg for arg in a.posonlyargs + a.args + rest]
        import inspect

        return list(inspect.signature(self.reference).parameters)

    @property
    def make_inputs(self) -> Callable[..., tuple]:
        return self.fn(self.goal.inputs)

    @property
    def make_edge_inputs(self) -> Callable[..., tuple] | None:
        return self.fn(self.goal.edge_inputs) if self.goal.edge_inputs else None

    def baseline(self, name: str) -> Callable[..., Any]:
        return self.fn(self.goal.baselines[name].function)

    def flops(self, dims: dict[str, int]) -> float:
        return float(self.fn(self.goal.flops)(dims))

    def bytes(self, dims: dict[str, int]) -> float:
        return float(self.fn(self.goal.bytes)(dims))

    def sha256(self) -> str:
        """Hash of the YAML and the module together: what a transcript pins."""
        h = hashlib.sha256()
        for p in (self.yaml_path, self.module_path):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        return h.hexdigest()


def _import_module(path: Path, goal_name: str) -> ModuleType:
    mod_name = f"jg_goal_{goal_name}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise GoalError(path, "", "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise GoalError(path, "", f"import failed: {type(exc).__name__}: {exc}") from exc
    return module


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The statements that run at a module's top level, into `if` and `try` blocks."""
    found: list[ast.stmt] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        found.append(node)
        if isinstance(node, ast.If | ast.Try):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]
    return found


def _defined_names(module_path: Path, yaml_path: Path) -> set[str]:
    """The names a module binds at its top level (def, class, assignment, import), read without running it."""
    try:
        tree = ast.parse(module_path.read_text(), str(module_path))
    except SyntaxError as exc:
        raise GoalError(yaml_path, "", f"{module_path.name} line {exc.lineno}: syntax error: {exc.msg}") from None
    names: set[str] = set()
    for node in _top_level(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _callables(goal: Goal) -> dict[str, str]:
    """Each field of a goal that names a function of its module, and the name."""
    refs = {"reference": goal.reference, "inputs": goal.inputs, "flops": goal.flops, "bytes": goal.bytes}
    refs |= {"edge_inputs": goal.edge_inputs} if goal.edge_inputs else {}
    return refs | {f"baselines.{k}.function": b.function for k, b in goal.baselines.items()}


def _import_checked(yaml_path: Path, goal: Goal) -> ModuleType:
    module_path = yaml_path.with_suffix(".py")
    module = _import_module(module_path, goal.name)
    for field, fn_name in _callables(goal).items():
        if not callable(getattr(module, fn_name, None)):
            raise GoalError(yaml_path, field, f"'{fn_name}' is not a callable in {module_path.name}")
    return module


def load_goal(path: str | Path, import_module: bool = True) -> LoadedGoal:
    """Read and validate a goal, and import its module unless told not to (then the module's syntax and the names
    the goal gives its functions are checked without running it, and it is imported when first used); every
    problem is one GoalError naming file and field."""
    yaml_path = Path(path)
    if yaml_path.suffix not in (".yaml", ".yml"):
        yaml_path = yaml_path.with_suffix(".yaml")
    if not yaml_path.is_file():
        known = [p.stem for d in (yaml_path.parent, DEMO_GOALS) if d.is_dir() for p in d.glob("*.yaml")]
        close = difflib.get_close_matches(yaml_path.stem, known, n=1)
        raise GoalNotFound(yaml_path, "", "no such goal file" + (f"; did you mean '{close[0]}'?" if close else ""))
    try:
        data = yaml.safe_load(yaml_path.read_text())
    except yaml.YAMLError as exc:
        raise GoalError(yaml_path, "", f"YAML syntax error: {exc}") from exc
    if not isinstance(data, dict):
        raise GoalError(yaml_path, "", "must be a YAML mapping of goal fields")
    try:
        goal = Goal.model_validate(data)
    except ValidationError as exc:
        raise GoalError(yaml_path, *first_problem(Goal, exc)) from None
    if goal.name != yaml_path.stem:
        raise GoalError(yaml_path, "name", f"'{goal.name}' differs from the file name '{yaml_path.stem}'")
    module_path = yaml_path.with_suffix(".py")
    if not module_path.is_file():
        raise GoalError(yaml_path, "", f"sibling module {module_path.name} is missing")
    if import_module:
        return LoadedGoal(goal, yaml_path, _import_checked(yaml_path, goal))
    defined = _defined_names(module_path, yaml_path)
    for field, fn_name in _callables(goal).items():
        if fn_name not in defined:
            raise GoalError(yaml_path, field, f"'{fn_name}' is not defined at the top level of {module_path.name}")
    return LoadedGoal(goal, yaml_path)


def goals_dir(explicit: str | Path | None = None) -> Path:
    """The goals directory: an explicit one, else ./goals, else the repository's."""
    if explicit:
        return Path(explicit)
    here = Path.cwd() / "goals"
    return here if here.is_dir() else REPO_GOALS


def find_goal(name_or_path: str, directory: str | Path | None = None) -> Path:
    """Accept a goal name (`gemm_fp8`, or `axpy`, the demo's embedded goal) or a path to its YAML.

    The path is returned whether or not it exists: `load_goal` says when it does not.
    """
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    found = goals_dir(directory) / f"{name_or_path}.yaml"
    demo = DEMO_GOALS / f"{name_or_path}.yaml"
    return demo if not found.is_file() and demo.is_file() else found


def list_goal_files(directory: str | Path | None = None) -> list[Path]:
    return sorted(goals_dir(directory).glob("*.yaml"))
