"""The goal-only MCP server: four tools, the goal as resources and a prompt, everything recorded."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from jg_mcp import __version__, gpu
from jg_mcp.errors import PathRefused
from jg_mcp.goal_text import instruction, render_markdown
from jg_mcp.goals import REFERENCE_FILE, LoadedGoal
from jg_mcp.gpu import GpuReport
from jg_mcp.live.jobs import outcome
from jg_mcp.live.paging import NotText, PageStopped, SkipTooFar, read_page
from jg_mcp.live.recording import SessionPool, TranscriptMiddleware
from jg_mcp.live.runner import CommandResult, RunnerClosed
from jg_mcp.live.session import Session
from jg_mcp.live.stdio import serve_stdio
from jg_mcp.live.walk import shown
from jg_mcp.record.events import sha256_bytes
from jg_mcp.record.transcript import WRITE_BLOB_CAP

MAX_TIMEOUT_S = 3600
MAX_COMMAND_BYTES = 128 * 1024 - 1
"""Linux's limit on one argument (MAX_ARG_STRLEN, with its NUL): bash -c takes the command as one."""
SHOWN_ENTRIES = 200
"""Most names of a directory that read_file's refusal of it names."""
PROGRESS_CHARS = 300
"""Longest progress message run_command sends while a command runs (its elapsed time and its latest output)."""
CANCELLED_SCAN_WAIT_S = 2.0
"""How long a cancelled run_command still waits for the scan of its changes before it answers (the scan goes
on and records them when it ends, unless the session has closed by then)."""


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


def _refused(path: str, exc: PathRefused | OSError, doing: str) -> ToolError:
    """The agent's message for a refused path or a failed file operation (never a bare OSError)."""
    path = shown(path)
    if isinstance(exc, PathRefused):
        return ToolError(str(exc))
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"'{path}' does not exist in the workspace (or one of its directories does not)")
    return ToolError(f"cannot {doing} '{path}': {exc.strerror or exc}")


def _read_text(
    session: Session, path: str, offset: int, limit: int, stop: Callable[[], bool] = lambda: False
) -> FileText:
    """read_file's work, in a worker thread: it gives up (a ToolError) once `stop()` or `session.closing` is true,
    between the chunks of its skip to `offset`."""
    ws = session.workspace
    try:
        parts = ws.parts(path)
        if ws.kind(parts) == "dir":
            entries, complete = ws.listing(parts)
            shown_names = ", ".join(entries[:SHOWN_ENTRIES]) or "(nothing)"
            if not complete:
                shown_names += f" ... (the first {len(entries)} entries listed, in name order; it holds more)"
            elif len(entries) > SHOWN_ENTRIES:
                shown_names += f" ... ({len(entries)} entries in all)"
            raise ToolError(f"'{path}' is a directory; it holds: {shown_names}")
        with ws.open_file(parts) as (fd, st):
            page = read_page(fd, st.st_size, offset, limit, stop=lambda: stop() or session.closing)
    except NotText:
        raise ToolError(
            f"'{path}' is a binary file ({st.st_size} bytes), not UTF-8 text; inspect it with "
            "run_command (e.g. `xxd`, `file`, `python -c ...`)"
        ) from None
    except SkipTooFar as exc:
        raise ToolError(f"'{path}': {exc}") from None
    except PageStopped:
        raise ToolError(
            f"the read of '{path}' was stopped: "
            + (f"the session is closed ({session.close_reason or 'closing'})" if session.closing else "cancelled")
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


T = TypeVar("T")


async def in_thread_until_cancelled(fn: Callable[[Callable[[], bool]], T], limiter: anyio.CapacityLimiter) -> T:
    """`fn(stop)` in a worker thread of `limiter`; `stop()` turns true once this call is cancelled, so that `fn`,
    asking it between steps, ends soon (the thread keeps its slot of `limiter` until it has)."""
    stopped = threading.Event()
    done: list[T] = []
    failed: list[BaseException] = []

    async def watch() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            done.append(await anyio.to_thread.run_sync(lambda: fn(stopped.is_set), limiter=limiter))
        except Exception as exc:  # noqa: BLE001 (re-raised as it is below, not wrapped in the task group's group)
            failed.append(exc)
        tg.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return done[0]


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
        digest = sha256_bytes(data)
        session.record_changes(request_id, "write_file", blob_cap=WRITE_BLOB_CAP, made=("/".join(parts), digest))
    return WriteResult(path="/".join(parts), size=len(data), sha256=digest, created=created)


async def _record_command(session: Session, request_id: str | int | None, mark: object) -> None:
    """Record what a command changed, in its turn among the session's workspace jobs. A cancelled call waits
    for that at most CANCELLED_SCAN_WAIT_S (the scan goes on and records when it ends). The command (`mark` in
    `session.commands`) stays among the possible authors of what other calls' scans see until its own scan has
    run, however its call ended."""

    def record() -> list[str]:
        try:
            return session.record_changes(request_id, "run_command")
        finally:
            session.commands.pop(mark, None)

    job = session.submit(record)
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
        return await in_thread_until_cancelled(
            lambda stop: _read_text(session, path, offset, limit, stop), session.readers
        )

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
        send progress notifications with the elapsed time and the latest output line while the output
        fits in the first 32 KiB of each stream; past that, with the byte counts of output so far (a
        line of the tail may still be cut from the result). Processes started in the background may be
        ended when the command returns: do not rely on them between calls."""
        session = pool.get(ctx.request_context.session)
        if "\0" in command:
            raise ToolError("command contains a NUL byte")
        if (size := len(command.encode(errors="surrogateescape"))) > MAX_COMMAND_BYTES:
            raise ToolError(
                f"the command is {size} bytes; the kernel takes at most {MAX_COMMAND_BYTES} in one argument: write "
                "the script with write_file and run it (bash script.sh)"
            )

        async def progress(elapsed: float, output: str) -> None:
            await ctx.report_progress(elapsed, None, f"{elapsed:.0f}s elapsed; {output}"[:PROGRESS_CHARS])

        if session.closing:
            raise ToolError(f"the session is closed ({session.close_reason or 'closing'}): nothing is run")
        rid, mark = ctx.request_context.request_id, object()
        session.commands[mark] = rid
        try:
            result = await session.runner.run(command, timeout_s, progress)
        except RunnerClosed as exc:
            raise ToolError(f"the session is closed ({session.close_reason or 'closing'}): {exc}") from None
        finally:
            await _record_command(session, rid, mark)
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
