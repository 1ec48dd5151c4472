"""The goal-only MCP server: four tools, the goal as resources and a prompt, everything recorded."""

from __future__ import annotations

import inspect
import json
import threading
import time
from typing import Annotated, Any, Protocol
from weakref import WeakKeyDictionary

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from jg_mcp import __version__, gpu
from jg_mcp.errors import PathRefused
from jg_mcp.goal_text import instruction, render_markdown
from jg_mcp.goals import REFERENCE_FILE, LoadedGoal
from jg_mcp.gpu import GpuReport
from jg_mcp.live.paging import NotText, read_page
from jg_mcp.live.runner import CommandResult
from jg_mcp.live.session import Session, outcome
from jg_mcp.live.stdio import OVERSIZED, UNREADABLE, serve_stdio, storable
from jg_mcp.live.walk import shown
from jg_mcp.record.transcript import WRITE_BLOB_CAP, Request, Response, sha256_bytes

MAX_REQUEST_BYTES = WRITE_BLOB_CAP + 1024 * 1024
"""Largest request params (UTF-8 bytes of their strings) recorded and served; larger ones are recorded by size and
refused."""
MAX_TIMEOUT_S = 3600
MAX_CALLS_IN_FLIGHT = 64
"""Tool calls one session may have unanswered at once; more are answered at once with an error saying so."""
CANCELLED_SCAN_WAIT_S = 2.0
"""How long a cancelled run_command still waits for the scan of its changes before it answers (the scan goes
on and records them when it ends, unless the session has closed by then)."""
CANCELLED = "cancelled: the client cancelled the call or disconnected before it finished"
"""The recorded error of a call cancelled mid-way (its response has `cancelled` set)."""


class SessionPool(Protocol):
    """Finds the Session behind a request's ServerSession (one for stdio, one per client over HTTP)."""

    def get(self, request_session: Any) -> Session: ...


class SingleSession:
    def __init__(self, session: Session):
        self.session = session

    def get(self, request_session: Any) -> Session:
        return self.session


class FileText(BaseModel):
    path: str
    content: str
    """Lines start_line..end_line of the file, newlines kept."""
    start_line: int
    end_line: int
    total_lines: int | None
    """Lines in the file; None for files over 64 MiB, which are not counted."""
    next_offset: int | None
    """Pass as `offset` to read on; None when the end was reached."""
    cut_line: int | None = None
    """A line longer than a page (100,000 characters) was cut here: its number; the rest of it is not returned."""


class WriteResult(BaseModel):
    path: str
    size: int
    sha256: str
    created: bool


def _size(value: Any, limit: int) -> int:
    """UTF-8 bytes of a JSON-like value's strings (plus a few per item), counted until past `limit`."""
    if isinstance(value, str):
        return len(value) if len(value) > limit else len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, dict):
        items: Any = (x for kv in value.items() for x in kv)
    elif isinstance(value, (list, tuple)):
        items = iter(value)
    else:
        return 8
    total = 2
    for item in items:
        total += _size(item, limit) + 2
        if total > limit:
            break
    return total


def _dump(result: Any) -> dict[str, Any] | None:
    if result is None:
        return None
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(result)


def _id_keys(rid: Any) -> frozenset[str]:
    """What a request id collides on: the SDK takes 7 and "7" for one id (its table of requests in flight coerces
    a numeric string, its HTTP transport routes answers by the id as text)."""
    if rid is None:
        return frozenset()
    return frozenset({str(rid), str(coerce_request_id(rid))})


class TranscriptMiddleware:
    """Records every inbound request and its response, with timing, in the session's transcript.

    At most one request per id is in flight in a session: one whose id (see `_id_keys`) a request of the same
    session still holds is refused at once with an error naming the id, the refusal recorded on the line after
    the request. Otherwise two calls would share an id, and the transcript, whose responses and file changes name
    their request by id, could not tell which did what (jg_mcp.record.steps). An id is held from the request's
    arrival until its answer, and, when the call ended in an error or was cancelled, until the workspace jobs
    queued before then have finished, since a cancelled call's changes may still be recorded under its id."""

    def __init__(self, pool: SessionPool):
        self.pool = pool
        self._held: WeakKeyDictionary[Session, set[str]] = WeakKeyDictionary()
        self._lock = threading.Lock()

    async def __call__(self, ctx, call_next):
        session = self.pool.get(ctx.session)
        rid = ctx.request_id
        raw = dict(ctx.params) if ctx.params is not None else None
        if ctx.method == UNREADABLE:
            self._refuse_unreadable(session, rid, raw or {})
        if ctx.method == OVERSIZED or _size(raw, MAX_REQUEST_BYTES) > MAX_REQUEST_BYTES:
            self._refuse(session, rid, ctx.method, raw or {})
        params = storable(raw)
        keys = _id_keys(rid)
        if not self._hold(session, keys):
            self._refuse_in_flight(session, rid, ctx.method, params)
        try:
            result = await self._serve(session, ctx, call_next, params)
        except BaseException:
            if keys:
                session.submit(lambda: self._free(session, keys))
            raise
        self._free(session, keys)
        return result

    def _hold(self, session: Session, keys: frozenset[str]) -> bool:
        """Take `keys` for a request of `session`; False when a request in flight holds one of them."""
        with self._lock:
            held = self._held.setdefault(session, set())
            if held & keys:
                return False
            held |= keys
            return True

    def _free(self, session: Session, keys: frozenset[str]) -> None:
        with self._lock:
            self._held.get(session, set()).difference_update(keys)

    @staticmethod
    async def _serve(session: Session, ctx: Any, call_next: Any, params: Any) -> Any:
        rid = ctx.request_id
        session.writer.record(Request(request_id=rid, method=ctx.method, params=params))
        start = time.monotonic()
        is_call = ctx.method == "tools/call"
        try:
            if is_call and session.calls_in_flight >= MAX_CALLS_IN_FLIGHT:
                result: Any = _busy()
            else:
                session.calls_in_flight += is_call
                try:
                    result = await call_next(ctx)
                finally:
                    session.calls_in_flight -= is_call
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            session.writer.record(
                Response(
                    request_id=rid,
                    method=ctx.method,
                    duration_ms=(time.monotonic() - start) * 1000,
                    is_error=True,
                    error=CANCELLED if cancelled else storable(f"{type(exc).__name__}: {exc}"),
                    cancelled=cancelled,
                )
            )
            raise
        dumped = storable(_dump(result))
        session.writer.record(
            Response(
                request_id=rid,
                method=ctx.method,
                duration_ms=(time.monotonic() - start) * 1000,
                is_error=bool(dumped and dumped.get("isError")),
                result=dumped,
            )
        )
        return result

    @staticmethod
    def _refuse_in_flight(session: Session, rid: Any, method: str, params: Any) -> None:
        """Record a request whose id a request in flight holds, and its refusal on the next line; refuse it."""
        message = (
            f"request refused: id {json.dumps(rid)} is the id of a request of this session still in flight "
            "(unanswered); every request needs an id of its own: send it again with a new id"
        )
        session.writer.append_all(
            [
                Request(request_id=rid, method=method, params=params),
                Response(request_id=rid, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_REQUEST, message)

    @staticmethod
    def _refuse_unreadable(session: Session, rid: Any, params: dict[str, Any]) -> None:
        """Record a request the JSON-RPC parser refused (stood in for by the stdio reader) and its refusal on the
        next line, and refuse it."""
        method, message = str(params.get("method", "unknown")), str(params.get("reason", "unreadable request"))
        original = params.get("params")
        session.writer.append_all(
            [
                Request(request_id=rid, method=method, params=original if isinstance(original, dict) else None),
                Response(request_id=rid, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_PARAMS, message)

    @staticmethod
    def _refuse(session: Session, rid: Any, method: str, params: dict[str, Any]) -> None:
        """Record a request too large to keep as its method and size only, its refusal on the next line, and
        refuse it."""
        if method == OVERSIZED:  # stood in for by the stdio reader (jg_mcp.live.stdio) for a line over its limit
            method, size, unit = str(params.get("method", "unknown")), int(params.get("size", 0)), "bytes"
        else:
            size, unit = _size(params, MAX_REQUEST_BYTES), "bytes or more"
        message = (
            f"request refused: its params hold {size} {unit}, over the limit of {MAX_REQUEST_BYTES} "
            f"(write_file content may be at most {WRITE_BLOB_CAP} bytes)"
        )
        session.writer.append_all(
            [
                Request(request_id=rid, method=method, params=None, params_size=size),
                Response(request_id=rid, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_PARAMS, message)


def _busy() -> CallToolResult:
    message = (
        f"refused: this session already has {MAX_CALLS_IN_FLIGHT} tool calls unanswered (the limit); wait for "
        "some of their answers before sending more"
    )
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _refused(path: str, exc: PathRefused | OSError, doing: str) -> ToolError:
    """The agent's message for a refused path or a failed file operation (never a bare OSError)."""
    path = shown(path)
    if isinstance(exc, PathRefused):
        return ToolError(str(exc))
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"'{path}' does not exist in the workspace (or one of its directories does not)")
    return ToolError(f"cannot {doing} '{path}': {exc.strerror or exc}")


def _read_text(session: Session, path: str, offset: int, limit: int) -> FileText:
    ws = session.workspace
    try:
        parts = ws.parts(path)
        if ws.kind(parts) == "dir":
            entries = ws.listing(parts)
            raise ToolError(f"'{path}' is a directory; it holds: {', '.join(entries[:200]) or '(nothing)'}")
        with ws.open_file(parts) as (fd, st):
            page = read_page(fd, st.st_size, offset, limit)
    except NotText:
        raise ToolError(
            f"'{path}' is a binary file ({st.st_size} bytes), not UTF-8 text; inspect it with "
            "run_command (e.g. `xxd`, `file`, `python -c ...`)"
        ) from None
    except (PathRefused, OSError) as exc:
        raise _refused(path, exc, "read") from None
    end = offset - 1 + len(page.lines)
    return FileText(
        path="/".join(parts),
        content="".join(page.lines),
        start_line=offset,
        end_line=end,
        total_lines=page.total,
        next_offset=end + 1 if page.more else None,
        cut_line=page.cut,
    )


def _write_text(session: Session, path: str, content: str, request_id: str | int | None) -> WriteResult:
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > WRITE_BLOB_CAP:
        raise ToolError(f"content is {len(data)} bytes; the limit is {WRITE_BLOB_CAP}")
    ws = session.workspace
    with session.scan_lock:
        if session.closing:
            raise ToolError(f"the session is closed ({session.close_reason or 'closing'}): nothing is written")
        try:
            parts = ws.parts(path, for_write=True)
            created = ws.write(parts, data)
        except (PathRefused, OSError) as exc:
            raise _refused(path, exc, "write") from None
        session.record_changes(request_id, "write_file", blob_cap=WRITE_BLOB_CAP)
    return WriteResult(path="/".join(parts), size=len(data), sha256=sha256_bytes(data), created=created)


async def _record_command(session: Session, request_id: str | int | None) -> None:
    """Record what a command changed, in its turn among the session's workspace jobs. A cancelled call waits
    for that at most CANCELLED_SCAN_WAIT_S (the scan goes on and records when it ends)."""
    job = session.submit(lambda: session.record_changes(request_id, "run_command"))
    try:
        await outcome(job)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCELLED_SCAN_WAIT_S):
            await outcome(job)
        raise
    except OSError as exc:
        raise ToolError(
            f"the command ran, but the workspace could not be scanned for its changes: {exc.strerror or exc}"
        ) from None


class JgServer(MCPServer):
    """MCPServer whose stdio transport refuses messages over a size limit (jg_mcp.live.stdio) before reading
    them whole."""

    async def run_stdio_async(self) -> None:
        await serve_stdio(self._lowlevel_server)


def _tool(server: MCPServer, annotations: ToolAnnotations):
    """Register a tool whose description is its docstring, dedented for the agent that reads it."""

    def decorator(fn):
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations)
        return fn

    return decorator


def build_server(loaded: LoadedGoal, pool: SessionPool, sandboxed: bool = False) -> MCPServer:
    goal = loaded.goal
    server = JgServer(
        name="jg-mcp",
        title=f"jg-mcp: {goal.title}",
        version=__version__,
        instructions=instruction(loaded),
        middleware=[TranscriptMiddleware(pool)],
    )

    @_tool(
        server,
        ToolAnnotations(
            title="Read a workspace file", read_only_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def read_file(
        path: Annotated[str, Field(description="File path, relative to the workspace root.")],
        ctx: Context,
        offset: Annotated[int, Field(ge=1, description="First line to return, counting from 1.")] = 1,
        limit: Annotated[int, Field(ge=1, le=100_000, description="Most lines to return.")] = 2000,
    ) -> FileText:
        """Read a UTF-8 text file from the workspace, `limit` lines from line `offset`.

        Large files come in pages of at most 100,000 characters: call again with `offset=next_offset` until
        `next_offset` is null. A longer line is cut (`cut_line`). `total_lines` is null for files over 64 MiB.
        Binary files are refused with their size; inspect them with run_command instead. Paths outside the
        workspace, symbolic links and special files (FIFOs, devices, sockets) are refused."""
        session = pool.get(ctx.request_context.session)
        return await anyio.to_thread.run_sync(lambda: _read_text(session, path, offset, limit), limiter=session.readers)

    @_tool(
        server,
        ToolAnnotations(
            title="Write a workspace file",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def write_file(
        path: Annotated[str, Field(description="File path, relative to the workspace root.")],
        content: Annotated[str, Field(description="The complete new content of the file (UTF-8).")],
        ctx: Context,
    ) -> WriteResult:
        """Create or overwrite a text file in the workspace with `content`; parent directories are created.

        The file is replaced atomically. Returns the size in bytes and the sha256 of what was written.
        Paths outside the workspace or through symbolic links, and the read-only reference copy, are refused."""
        session, rid = pool.get(ctx.request_context.session), ctx.request_context.request_id
        return await session.in_turn(lambda: _write_text(session, path, content, rid))

    @_tool(
        server,
        ToolAnnotations(
            title="Run a shell command in the workspace",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=not sandboxed,
        ),
    )
    async def run_command(
        command: Annotated[str, Field(min_length=1, description="A bash command line, run in the workspace root.")],
        ctx: Context,
        timeout_s: Annotated[
            float, Field(ge=1, le=MAX_TIMEOUT_S, description="Seconds before the command's process group is killed.")
        ] = 600,
    ) -> CommandResult:
        """Run `command` with bash in the workspace directory and return its exit code, stdout, stderr and duration.

        On timeout every process the command started is killed and `timed_out` is true. Output over
        64 KiB per stream keeps its head and tail; the elided byte count is reported. Long commands
        send progress notifications with the elapsed time and the latest output line. Processes started
        in the background may be ended when the command returns: do not rely on them between calls."""
        session = pool.get(ctx.request_context.session)
        if "\0" in command:
            raise ToolError("command contains a NUL byte")

        async def progress(elapsed: float, last_line: str) -> None:
            await ctx.report_progress(elapsed, None, f"{elapsed:.0f}s elapsed; {last_line}"[:300])

        if session.closing:
            raise ToolError(f"the session is closed ({session.close_reason or 'closing'}): nothing is run")
        try:
            result = await session.runner.run(command, timeout_s, progress)
        finally:
            await _record_command(session, ctx.request_context.request_id)
        return result

    @_tool(
        server,
        ToolAnnotations(title="Query the GPUs", read_only_hint=True, idempotent_hint=False, open_world_hint=False),
    )
    async def query_gpu(ctx: Context) -> GpuReport:
        """Report the machine's NVIDIA GPUs through NVML: name, driver and CUDA version, compute capability,
        memory total/used/free, utilisation, SM and memory clocks (current and max), temperature and power.
        On a machine without an NVIDIA GPU, `available` is false and `reason` says why."""
        return await anyio.to_thread.run_sync(gpu.query_gpu, limiter=pool.get(ctx.request_context.session).readers)

    @server.resource(f"goal://{goal.name}", name="goal", title=goal.title, mime_type="text/markdown")
    def goal_resource() -> str:
        """The goal: objective, constraints, solution contract, shapes, tolerance, hardware and budget."""
        return render_markdown(loaded)

    @server.resource(
        f"goal://{goal.name}/{REFERENCE_FILE}",
        name="reference",
        title="Reference implementation",
        mime_type="text/x-python",
    )
    def reference_resource() -> str:
        """The goal's reference implementation and input maker (also in the workspace as reference.py)."""
        return loaded.module_path.read_text()

    @server.prompt(name="goal", title=goal.title)
    def goal_prompt() -> str:
        """The goal-only instruction: the goal, and nothing else."""
        return instruction(loaded)

    return server
