"""`jg-mcp serve`: run the goal-only server over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from jg_mcp import log
from jg_mcp.campaign import serving
from jg_mcp.commands.arguments import dir_to_fill, port, positive_float, positive_int
from jg_mcp.commands.serve_config import DEFAULT_HOST, DEFAULT_PORT, HttpConfig, ServeConfig, from_args
from jg_mcp.commands.serve_sessions import Sessions
from jg_mcp.live import workspace_fs
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.sandbox import MODES, SandboxLimits
from jg_mcp.live.session import CLOSE_WAIT_S
from jg_mcp.record.conditions import NAMES

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from jg_mcp.live.recording import SessionPool

logger = log.get("jg_mcp.serve")


class DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, but none where there is none to show (None, an empty list, False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, [], False):
            return action.help
        return super()._get_help_string(action)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a goal to an MCP client (stdio or HTTP)",
        description="Serve one goal under the goal-only condition: four tools (read_file, write_file, "
        "run_command, query_gpu), the goal as a resource and a prompt. Every request is recorded in a "
        "hash-chained transcript. In stdio mode stdout is the MCP stream; logs go to stderr. Over HTTP "
        "every client connection gets its own workspace and transcript.",
        formatter_class=DefaultsShown,
    )
    p.add_argument("--goal", required=True, help="goal name (gemm_fp8) or path to its YAML")
    p.add_argument("--workspace", type=Path, help="workspace directory (default: runs/RUN_ID/workspace; stdio only)")
    p.add_argument("--transcripts", type=Path, default=Path("transcripts"), help="where RUN.jsonl goes")
    p.add_argument("--runs", type=Path, default=Path("runs"), help="parent of per-run workspaces")
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio: one client, the "
        "process that started this one; http: streamable HTTP at http://HOST:PORT/mcp, one session "
        "per client connection",
    )
    p.add_argument("--host", help=f"HTTP bind address (non-loopback needs --token-file) [{DEFAULT_HOST}; http only]")
    p.add_argument("--port", type=port, help=f"HTTP port [{DEFAULT_PORT}; http only]")
    p.add_argument(
        "--token-file", type=Path, help="file holding the HTTP bearer token (default: a fresh token, printed to stderr)"
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="a host name clients use to reach a non-loopback bind; accepted in Host and Origin (repeatable)",
    )
    p.add_argument(
        "--sandbox",
        choices=MODES,
        default="auto",
        help="isolate run_command with bubblewrap: auto (bwrap; none only where bubblewrap is not installed and "
        "the server is not root, with a loud warning, and the audit then fails the session), bwrap (refuse to "
        "start without it), none (unsandboxed, with this server's privileges). A sandbox that cannot run refuses "
        "the start, never falls back",
    )
    p.add_argument(
        "--no-seccomp",
        action="store_true",
        help="sandbox commands without the seccomp filter (where bwrap cannot load it): they may then make user "
        "namespaces, use kernel keyrings and lower their core limit. Without it, a filter that cannot load refuses "
        "the start",
    )
    p.add_argument(
        "--hide",
        type=Path,
        action="append",
        default=[],
        help="another directory the sandbox hides from commands (repeatable)",
    )
    p.add_argument(
        "--max-processes",
        type=positive_int,
        default=SandboxLimits().max_processes,
        help="process/thread cap inside the sandbox",
    )
    p.add_argument(
        "--max-file-bytes",
        type=positive_int,
        default=SandboxLimits().max_file_bytes,
        help="largest file a command may write inside the sandbox",
    )
    p.add_argument(
        "--max-tmp-bytes",
        type=positive_int,
        default=SandboxLimits().max_tmp_bytes,
        help="size of each of the sandbox's tmpfs mounts (/tmp with HOME, /dev/shm)",
    )
    p.add_argument(
        "--max-workspace-bytes",
        type=positive_int,
        default=SandboxLimits().max_workspace_bytes,
        help="workspace quota: the size of the file system of its own the workspace and compile cache lie on "
        "(reserved on the disk of --runs when a session starts)",
    )
    p.add_argument(
        "--unbounded-workspace",
        action="store_true",
        help="keep sandboxed workspaces on the host's file system (where the server is not root or has no loop "
        "devices): commands may then fill the disk that holds them; the transcript header records it",
    )
    p.add_argument(
        "--max-sessions",
        type=positive_int,
        default=HttpConfig().max_sessions,
        help="HTTP: sessions served at once; a client asking for another gets 503",
    )
    p.add_argument(
        "--first-call-timeout",
        type=positive_float,
        default=HttpConfig().first_call_s,
        help="HTTP: seconds a session may go without its first tool call before it is ended",
    )
    p.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=HttpConfig().idle_s,
        help="HTTP: seconds a session may go without a request in flight before it is ended",
    )
    p.add_argument(
        "--max-connections",
        type=positive_int,
        default=HttpConfig().max_connections,
        help="HTTP: open connections; past it an idle one closes",
    )
    p.add_argument(
        "--max-session-calls",
        type=positive_int,
        default=HttpConfig().session_calls,
        help="HTTP: tool calls in flight a session",
    )
    p.add_argument(
        "--max-session-connections",
        type=positive_int,
        default=HttpConfig().session_connections,
        help="HTTP: connections a session holds",
    )
    p.add_argument(
        "--max-token-sessions", type=positive_int, help="HTTP: sessions a token holds [--max-sessions/tokens]"
    )
    p.add_argument(
        "--transcript-key-file",
        type=Path,
        metavar="F",
        help="a file (mode 600, 16+ bytes) holding "
        "the transcript key: every event then carries an HMAC, and `jg-mcp audit --key-file F` detects "
        "a transcript re-chained by anyone without the key; keep it where commands cannot read it",
    )
    campaign_arguments(p)
    p.set_defaults(func=run)


def campaign_arguments(p: argparse.ArgumentParser) -> None:
    """The --condition and budget flags (ServeConfig's `condition` and `budget`, which the server applies)."""
    p.add_argument(
        "--condition",
        choices=NAMES,
        default="goal-only",
        help="the named condition: goal-only "
        "(default), eval-tool (an `evaluate` tool), knowledge (a notes resource), workflow (a plan "
        "prompt); recorded in the transcript header",
    )
    p.add_argument(
        "--budget-minutes",
        type=positive_float,
        metavar="M",
        help="wall-clock budget from the first request; "
        "after it every tool call is refused and the session closes (default: none)",
    )
    p.add_argument("--max-tool-calls", type=positive_int, metavar="N", help="most tool calls answered (default: none)")
    p.add_argument(
        "--max-command-seconds",
        type=positive_float,
        metavar="S",
        help="most seconds spent in run_command, summed (default: none)",
    )


Serve = Callable[["MCPServer", anyio.Event], Awaitable[None]]
"""Serves a built server until the client goes away or the event is set."""


def run(args: argparse.Namespace) -> int:
    config = from_args(args)
    dir_to_fill(config.transcripts, "--transcripts")
    dir_to_fill(config.runs, "--runs")
    if config.transport == "stdio":
        if config.workspace is not None:  # a killed server's mounts, which its sandbox uid owns, taken down first
            workspace_fs.take_down_left(config.workspace, Bwrap._cache_path(config.workspace.absolute()))
        dir_to_fill(config.workspace, "--workspace")
        return run_stdio(config)
    return run_http(config)


def run_stdio(config: ServeConfig) -> int:
    """Serve one session to the process that started this one."""
    # Imported here, not at the top: the MCP SDK is needed to serve, not to run the other commands.
    from jg_mcp.live.server import SingleSession

    sessions = Sessions.open(config, config.workspace.parent if config.workspace else config.runs)
    session, _ = sessions.make(config.workspace)
    logger.info(
        "session started",
        run_id=session.run_id,
        workspace=str(session.workspace.root),
        transcript=str(session.transcript_path),
        sandbox=sessions.mode,
    )

    async def serve(server: MCPServer, stop: anyio.Event) -> None:
        await server.run_stdio_async()

    def close(reason: str) -> None:
        session.close(reason, wait_s=CLOSE_WAIT_S)

    return serve_until_stopped(sessions, SingleSession(session), close, serve, "client disconnected")


def run_http(config: ServeConfig) -> int:
    """Serve streamable HTTP, one session per client connection."""
    from jg_mcp.live.connections import ConnectionPool
    from jg_mcp.live.http import HttpLimits, listen, read_tokens, serve_http
    from jg_mcp.live.shares import ShareLimits

    http = config.http
    host = http.host
    tokens, generated = read_tokens(http.token_file, host)
    limits = HttpLimits(
        max_sessions=http.max_sessions,
        first_call_s=http.first_call_s,
        idle_s=http.idle_s,
        max_connections=http.max_connections,
        shares=ShareLimits(
            session_calls=http.session_calls,
            session_connections=http.session_connections,
            token_sessions=http.token_sessions,
        ),
        tokens=len(tokens),
    )
    listener = listen(host, http.port)
    sessions = Sessions.open(config, config.runs)
    if generated:
        logger.warning("HTTP bearer token (send as 'Authorization: Bearer TOKEN')", token=tokens[0])
    pool = ConnectionPool(sessions.make, http.max_sessions, http.first_call_s, http.idle_s)
    logger.info("serving over HTTP", url=f"http://{host}:{listener.getsockname()[1]}/mcp", sandbox=sessions.mode)

    async def serve(server: MCPServer, stop: anyio.Event) -> None:
        await serve_http(server, listener, host, tokens, stop, pool, http.allowed_hosts, limits)

    return serve_until_stopped(sessions, pool, pool.close_all, serve, "server stopped")


def serve_until_stopped(
    sessions: Sessions, pool: SessionPool, close_all: Callable[[str], None], serve: Serve, default_reason: str
) -> int:
    """Build the server on `pool`, serve it, and close every session at the end, whatever ended it.
    `close_all` blocks at most a few seconds (each session's last scan is given CLOSE_WAIT_S)."""
    from jg_mcp.live.server import build_server

    config, loaded = sessions.config, sessions.loaded
    server = build_server(loaded, pool, sandboxed=sessions.mode == "bwrap")
    serving.apply(server, loaded, pool, config.condition, config.budget)
    reason = default_reason
    try:
        reason = anyio.run(_serve, server, config.transport == "stdio", close_all, serve) or reason
    except KeyboardInterrupt:
        reason = "SIGINT"
    finally:
        close_all(reason)
        logger.info("server stopped", reason=reason)
    return 0


async def _serve(server: MCPServer, stdio: bool, close_all: Callable[[str], None], serve: Serve) -> str | None:
    """Serve until the client goes away or a signal arrives; returns the end reason. On a signal the
    sessions are closed (commands killed, close events written) before anything is cancelled, in a thread
    of its own: the event loop goes on answering while they close."""
    reason: str | None = None
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            nonlocal reason
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                async for signum in signals:
                    reason = signal.Signals(signum).name
                    await anyio.to_thread.run_sync(close_all, reason, limiter=anyio.CapacityLimiter(1))
                    if stdio:
                        # The SDK reads stdin in a thread that no cancellation can interrupt.
                        logger.info("server stopped", reason=reason)
                        os._exit(0)
                    stop.set()
                    return

        async def serve_then_cancel() -> None:
            await serve(server, stop)
            tg.cancel_scope.cancel()

        tg.start_soon(watch_signals)
        tg.start_soon(serve_then_cancel)
    return reason
