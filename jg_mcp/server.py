"""The goal-only MCP server: four tools, the goal as resources and a prompt, everything recorded."""

from __future__ import annotations

import inspect
import time
from typing import Annotated, Any, Protocol

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from jg_mcp import __version__
from jg_mcp.errors import PathRefused
from jg_mcp.goal_text import instruction, render_markdown
from jg_mcp.goals import LoadedGoal
from jg_mcp import gpu
from jg_mcp.gpu import GpuReport
from jg_mcp.runner import CommandResult
from jg_mcp.session import REFERENCE_FILE, Session
from jg_mcp.transcript import Request, Response, sha256_bytes

TOOL_NAMES = ("read_file", "write_file", "run_command", "query_gpu")
MAX_READ_CHARS = 100_000
MAX_WRITE_BYTES = 16 * 1024 * 1024
MAX_TIMEOUT_S = 3600


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
    total_lines: int
    next_offset: int | None
    """Pass as `offset` to read on; None when the end was reached."""


class WriteResult(BaseModel):
    path: str
    size: int
    sha256: str
    created: bool


def _dump(result: Any) -> dict[str, Any] | None:
    if result is None:
        return None
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(result)


def _storable(value: Any) -> Any:
    """`value` with lone surrogates (valid in JSON, not in UTF-8) escaped, so the transcript can hold it."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value


class TranscriptMiddleware:
    """Records every inbound request and its response, with timing, in the session's transcript."""

    def __init__(self, pool: SessionPool):
        self.pool = pool

    async def __call__(self, ctx, call_next):
        session = self.pool.get(ctx.session)
        rid = ctx.request_id
        params = _storable(dict(ctx.params)) if ctx.params is not None else None
        if not session.writer.closed:
            session.writer.append(Request(request_id=rid, method=ctx.method, params=params))
        start = time.monotonic()
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            if not session.writer.closed:
                session.writer.append(
                    Response(
                        request_id=rid, method=ctx.method, duration_ms=(time.monotonic() - start) * 1000,
                        is_error=True, error=_storable(f"{type(exc).__name__}: {exc}"),
                    )
                )
            raise
        if not session.writer.closed:
            dumped = _storable(_dump(result))
            session.writer.append(
                Response(
                    request_id=rid, method=ctx.method, duration_ms=(time.monotonic() - start) * 1000,
                    is_error=bool(dumped and dumped.get("isError")), result=dumped,
                )
            )
        return result


def _read_text(session: Session, path: str, offset: int, limit: int) -> FileText:
    try:
        real = session.workspace.resolve(path)
    except PathRefused as exc:
        raise ToolError(str(exc)) from None
    if not real.exists():
        raise ToolError(f"'{path}' does not exist in the workspace")
    if real.is_dir():
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in real.iterdir())
        raise ToolError(f"'{path}' is a directory; it holds: {', '.join(entries[:200]) or '(nothing)'}")
    data = real.read_bytes()
    try:
        if b"\0" in data[:8192]:
            raise UnicodeDecodeError("utf-8", data[:1], 0, 1, "NUL byte")
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"'{path}' is a binary file ({len(data)} bytes), not UTF-8 text; inspect it with "
            "run_command (e.g. `xxd`, `file`, `python -c ...`)"
        ) from None
    lines = text.splitlines(keepends=True)
    first = offset - 1
    chunk, chars = [], 0
    for line in lines[first : first + limit]:
        if chars + len(line) > MAX_READ_CHARS and chunk:
            break
        chunk.append(line[:MAX_READ_CHARS])
        chars += len(chunk[-1])
    end = first + len(chunk)
    return FileText(
        path=session.workspace.relative(real),
        content="".join(chunk),
        start_line=offset,
        end_line=end,
        total_lines=len(lines),
        next_offset=end + 1 if end < len(lines) else None,
    )


def _tool(server: MCPServer, annotations: ToolAnnotations):
    """Register a tool whose description is its docstring, dedented for the agent that reads it."""

    def decorator(fn):
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations)
        return fn

    return decorator


def build_server(loaded: LoadedGoal, pool: SessionPool, sandboxed: bool = False) -> MCPServer:
    goal = loaded.goal
    server = MCPServer(
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
        )
    )
    def read_file(
        path: Annotated[str, Field(description="File path, relative to the workspace root.")],
        ctx: Context,
        offset: Annotated[int, Field(ge=1, description="First line to return, counting from 1.")] = 1,
        limit: Annotated[int, Field(ge=1, le=100_000, description="Most lines to return.")] = 2000,
    ) -> FileText:
        """Read a UTF-8 text file from the workspace, `limit` lines from line `offset`.

        Large files come in pages: call again with `offset=next_offset` until `next_offset` is null.
        Binary files are refused with their size; inspect them with run_command instead.
        Paths outside the workspace are refused."""
        return _read_text(pool.get(ctx.request_context.session), path, offset, limit)

    @_tool(
        server,
        ToolAnnotations(
            title="Write a workspace file", read_only_hint=False, destructive_hint=True,
            idempotent_hint=True, open_world_hint=False,
        )
    )
    def write_file(
        path: Annotated[str, Field(description="File path, relative to the workspace root.")],
        content: Annotated[str, Field(description="The complete new content of the file (UTF-8).")],
        ctx: Context,
    ) -> WriteResult:
        """Create or overwrite a text file in the workspace with `content`; parent directories are created.

        Returns the size in bytes and the sha256 of what was written. Paths outside the workspace
        and the read-only reference copy are refused."""
        session = pool.get(ctx.request_context.session)
        data = content.encode("utf-8", errors="surrogatepass")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
        try:
            real = session.workspace.resolve(path, for_write=True)
            created = not real.exists()
            real.parent.mkdir(parents=True, exist_ok=True)
            real.write_bytes(data)
        except PathRefused as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:
            raise ToolError(f"cannot write '{path}': {exc.strerror or exc}") from None
        session.record_changes(ctx.request_context.request_id, "write_file", blob_cap=MAX_WRITE_BYTES)
        return WriteResult(path=session.workspace.relative(real), size=len(data), sha256=sha256_bytes(data), created=created)

    @_tool(
        server,
        ToolAnnotations(
            title="Run a shell command in the workspace", read_only_hint=False, destructive_hint=True,
            idempotent_hint=False, open_world_hint=not sandboxed,
        )
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

        try:
            result = await session.runner.run(command, timeout_s, progress)
        finally:
            session.record_changes(ctx.request_context.request_id, "run_command")
        return result

    @_tool(
        server,
        ToolAnnotations(
            title="Query the GPUs", read_only_hint=True, idempotent_hint=False, open_world_hint=False
        )
    )
    def query_gpu() -> GpuReport:
        """Report the machine's NVIDIA GPUs through NVML: name, driver and CUDA version, compute capability,
        memory total/used/free, utilisation, SM and memory clocks (current and max), temperature and power.
        On a machine without an NVIDIA GPU, `available` is false and `reason` says why."""
        return gpu.query_gpu()

    @server.resource(f"goal://{goal.name}", name="goal", title=goal.title, mime_type="text/markdown")
    def goal_resource() -> str:
        """The goal: objective, constraints, solution contract, shapes, tolerance, hardware and budget."""
        return render_markdown(loaded)

    @server.resource(
        f"goal://{goal.name}/{REFERENCE_FILE}", name="reference", title="Reference implementation",
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
