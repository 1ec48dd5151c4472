"""The messages between the harness and a worker process: pydantic models tagged on `op` (harness to worker)
and `event` (worker to harness), versioned.

The harness validates every message it receives against `WorkerMessage`; anything that does not validate,
or arrives out of turn, is a `tampered` finding. The worker never receives a seed, a reference or a goal:
only buffers to read inputs from and write outputs to, and which callable to run on them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, TypeAdapter

from jg_mcp.eval.report import Finding
from jg_mcp.models import Strict

PROTOCOL_VERSION = 5
"""3: the worker says `started` before its setup. 4: `Done.raised` says how a call ended that did not return.
5: blocks are clocked by the harness (`Gates`, `Queued`, `Resume`); the worker reports no times, flushes and pads
nothing."""


class WireModel(Strict):
    """A message between the harness and a worker (jg_mcp.models.Strict's rules): frozen, and no NaN or inf a
    forged message could slip into a time."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)


class BufferRef(WireModel):
    """Memory the harness allocated and shares: a memfd (CPU, its descriptor passed after the Bind message, in buffer
    order) or a CUDA IPC handle (GPU)."""

    kind: Literal["memfd", "cuda_ipc"]
    """How the worker maps it."""
    nbytes: int = Field(ge=0)
    """Size in bytes."""
    handle: str | None = None
    """The cudaIpcMemHandle_t as hex, for `cuda_ipc`."""


class TensorSpec(WireModel):
    """A tensor laid over a shared buffer."""

    buffer: int = Field(ge=0)
    """Index into the binding's buffers."""
    dtype: str
    """torch dtype name without `torch.`, e.g. `bfloat16`."""
    shape: list[int]
    """Sizes."""
    stride: list[int]
    """Strides in elements."""
    offset: int = Field(default=0, ge=0)
    """Storage offset in elements."""


class Setup(WireModel):
    """The first message: what this worker runs."""

    op: Literal["setup"] = "setup"
    version: int = PROTOCOL_VERSION
    role: Literal["candidate", "baseline"]
    """`candidate`: import the solution file; `baseline`: import the goal module (trusted library code)."""
    device: Literal["cpu", "cuda"]
    """Where tensors live."""
    module: str
    """The file to import: the copied solution, or the goal's module (baseline role only)."""
    functions: dict[str, str]
    """Callable label -> function name in the module (`candidate` -> `kernel`; baseline names -> functions)."""
    forbidden_ops: list[str] = []
    """aten operator names whose use during a checked call is recorded (a hint; the static policy decides)."""


class Bind(WireModel):
    """Map shared buffers and name the tensors laid over them."""

    op: Literal["bind"] = "bind"
    name: str
    """Binding name, e.g. `in0`, `out`, `ring`."""
    buffers: list[BufferRef]
    """The buffers; each is mapped once."""
    tensors: list[list[TensorSpec]]
    """Groups of tensors: one group per input set (the callable's positional arguments), output set or ring slot."""


class Release(WireModel):
    """Unmap bindings (their memory is about to be freed)."""

    op: Literal["release"] = "release"
    names: list[str]


class Call(WireModel):
    """Call a callable once on an input group, synchronise, copy its outputs into an output group."""

    op: Literal["call"] = "call"
    fn: str
    """Callable label."""
    inputs: tuple[str, int]
    """(binding, group) of the arguments."""
    outputs: tuple[str, int]
    """(binding, group) the outputs are copied into."""
    poison_bytes: list[int] = []
    """Byte sizes of allocator blocks to fill with 0xFF and free before the call, so memory the kernel never writes
    reads as poison (a labelling hint: the harness judges the bytes in its own output buffers)."""


class Gates(WireModel):
    """The binding whose first tensor holds the two 8-byte flags that order a worker's blocks against the harness's
    clock (GPU only): the worker's stream waits until `go` (the first) holds the block's `seq` before its first call,
    and writes `seq` into `done` (the second) after its last (jg_mcp/eval/wire/stream_ops.py)."""

    op: Literal["gates"] = "gates"
    binding: str


class Block(WireModel):
    """Calls back to back, each call's outputs copied into ring slot `i % slots` (unless there is no ring). On the GPU
    the calls are queued behind the `go` flag and followed by the `done` flag (`Gates`), and `Queued` is sent once
    they are queued; on the CPU `Queued` is sent once they have run. `BlockDone` follows, after a synchronisation,
    with the guard's hints. No times: the harness clocks the block itself. An empty block (baseline role only) times
    the ordering alone; `fn` NULL_FN returns an empty output of the ring's layout (the copy alone)."""

    op: Literal["block"] = "block"
    fn: str
    """Callable label, or NULL_FN."""
    inputs: str
    """Binding holding the input groups."""
    sets: list[int]
    """Input group of each call, in order."""
    ring: str | None
    """Binding of the output ring (None: outputs dropped)."""
    seq: int = Field(default=0, ge=0)
    """The value of the `go` flag the block waits for and that it writes into `done` (GPU)."""


class Resume(WireModel):
    """CPU stand-in: the harness has read the worker's CPU clock after `Queued`; the worker goes on to its checks.
    (The kernel updates another process's CPU clock when its threads stop running, so the worker waits, blocked,
    while the harness reads it.)"""

    op: Literal["resume"] = "resume"


NULL_FN = "<null>"
"""The callable of a calibration block: no work, an empty output of the ring's layout copied into the ring."""


class Graph(WireModel):
    """Calls under a CUDA graph (GPU; on the CPU stand-in, the same calls one by one): capture one graph of the
    calls on `sets` in order (kept until its binding is released, so a graph is captured once per shape; before
    `go`), then replay it `replays` times back to back behind `go`, and copy call i's outputs into ring slot i
    (unless there is no ring) before `done`. Answered as a Block is. No flush: the harness clears the L2 before the
    block, and each call reads a set of its own."""

    op: Literal["graph"] = "graph"
    fn: str
    """Callable label."""
    inputs: str
    """Binding holding the input groups."""
    sets: list[int] = Field(min_length=1)
    """Input group of each call in the graph, in order."""
    replays: int = Field(ge=1, le=1024)
    """Replays of the whole graph."""
    ring: str | None
    """Binding of the output ring, a slot per call (None: outputs not copied)."""
    seq: int = Field(default=0, ge=0)
    """As a Block's."""


class DoBench(WireModel):
    """triton.testing.do_bench of one callable, its calls rotating over a binding's input groups as the eval's
    timed calls do (baseline role: the cross-check)."""

    op: Literal["do_bench"] = "do_bench"
    fn: str
    inputs: str


class Warm(WireModel):
    """Call one callable once on one input group and discard the result (compilation, autotuning and caches
    before timing); answered with Done."""

    op: Literal["warm"] = "warm"
    fn: str
    inputs: tuple[str, int]


class Bye(WireModel):
    op: Literal["bye"] = "bye"


Commands = Setup | Bind | Gates | Release | Call | Block | Graph | Resume | DoBench | Warm | Bye
Command = Annotated[Commands, Field(discriminator="op")]
COMMAND: TypeAdapter[Commands] = TypeAdapter(Command)


class OutputMeta(WireModel):
    """What one returned value was, as the worker saw it (a hint: the harness judges the bytes it reads)."""

    type: str
    """Qualified type name."""
    dtype: str | None = None
    shape: list[int] | None = None
    device: str | None = None
    plain: bool = False
    """A plain dense strided torch.Tensor."""
    aliases_input: bool = False
    """It shares storage with an input."""
    copied: bool = False
    """Its bytes were copied into the harness's output buffer."""


class Started(WireModel):
    """The worker's first message, before its setup: its imports are done (see `jg_mcp.eval.processes.spares`)."""

    event: Literal["started"] = "started"


class Ready(WireModel):
    event: Literal["ready"] = "ready"
    version: int
    hints: list[Finding] = []
    """What the worker's in-process guard saw at import (early findings, never a reason to accept)."""


class ImportFailed(WireModel):
    event: Literal["import_failed"] = "import_failed"
    reason: Literal["import_error", "early_exit"]
    error: str


class Bound(WireModel):
    event: Literal["bound"] = "bound"
    name: str


class Done(WireModel):
    """A Call finished."""

    event: Literal["done"] = "done"
    raised: Literal["exception", "exit"] | None = None
    """How the call ended when it did not return, set by the worker's code from the exception's type (`exit`:
    SystemExit); None when it returned. The harness never parses `error` to decide anything."""
    error: str | None = None
    """The exception the callable raised, formatted: free text the candidate controls, a detail for the report."""
    outputs: list[OutputMeta] = []
    hints: list[Finding] = []


class Queued(WireModel):
    """A block's calls are queued behind `go` (GPU) or have run (CPU): the harness's clock of the block ends here."""

    event: Literal["queued"] = "queued"
    enqueue_ms: float = Field(default=0.0, ge=0)
    """Host time per call to queue the calls (a hint that sizes the next gate, never a time that is scored)."""


class BlockDone(WireModel):
    """A block has finished (after `Queued`, or instead of it when the block failed)."""

    event: Literal["block_done"] = "block_done"
    error: str | None = None
    hints: list[Finding] = []


class Benched(WireModel):
    event: Literal["benched"] = "benched"
    median_ms: float | None = None
    error: str | None = None


class WorkerError(WireModel):
    """The worker's own code failed (before the candidate was imported: a harness problem)."""

    event: Literal["worker_error"] = "worker_error"
    error: str


WorkerMessages = Started | Ready | ImportFailed | Bound | Done | Queued | BlockDone | Benched | WorkerError
WorkerMessage = Annotated[WorkerMessages, Field(discriminator="event")]
WORKER_MESSAGE: TypeAdapter[WorkerMessages] = TypeAdapter(WorkerMessage)

__all__ = [
    "COMMAND",
    "WORKER_MESSAGE",
    "Bind",
    "Block",
    "BlockDone",
    "Bound",
    "BufferRef",
    "Bye",
    "Call",
    "Benched",
    "DoBench",
    "Done",
    "Gates",
    "Graph",
    "ImportFailed",
    "NULL_FN",
    "OutputMeta",
    "Queued",
    "Ready",
    "Release",
    "Resume",
    "Setup",
    "Started",
    "TensorSpec",
    "Warm",
    "WorkerError",
]
