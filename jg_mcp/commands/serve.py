"""`jg-mcp serve`: run the goal-only server over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import anyio

import jg_mcp
from jg_mcp import log
from jg_mcp.campaign import serving
from jg_mcp.errors import UsageError
from jg_mcp.goals import LoadedGoal, find_goal, load_goal
from jg_mcp.sandbox import MODES, Bwrap, NoSandbox, SandboxLimits, choose
from jg_mcp.session import Session, new_run_id
from jg_mcp.transcript import read_key

logger = log.get("jg_mcp.serve")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


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
    p.add_argument("--port", type=int, help=f"HTTP port [{DEFAULT_PORT}; http only]")
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
        help="isolate run_command with bubblewrap: "
        "auto (bwrap when it works, else none with a loud warning), bwrap (refuse to start "
        "without it), none",
    )
    p.add_argument(
        "--hide",
        type=Path,
        action="append",
        default=[],
        help="another directory the sandbox hides from commands (repeatable)",
    )
    p.add_argument(
        "--max-processes", type=int, default=SandboxLimits().max_processes, help="process/thread cap inside the sandbox"
    )
    p.add_argument(
        "--max-file-bytes",
        type=int,
        default=SandboxLimits().max_file_bytes,
        help="largest file a command may write inside the sandbox",
    )
    p.add_argument(
        "--max-tmp-bytes",
        type=int,
        default=SandboxLimits().max_tmp_bytes,
        help="size of each of the sandbox's tmpfs mounts (/tmp with HOME, /dev/shm)",
    )
    p.add_argument(
        "--max-workspace-bytes",
        type=int,
        default=SandboxLimits().max_workspace_bytes,
        help="workspace quota, checked after each command (its result carries a notice past it)",
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=32,
        help="HTTP: sessions served at once; a client asking for another gets 503",
    )
    p.add_argument(
        "--first-call-timeout",
        type=float,
        default=120,
        help="HTTP: seconds a session may go without its first tool call before it is ended",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=900,
        help="HTTP: seconds a session may go without a request in flight before it is ended",
    )
    p.add_argument("--max-connections", type=int, default=256, help="HTTP: open connections; more are closed on accept")
    p.add_argument(
        "--transcript-key-file",
        type=Path,
        metavar="F",
        help="a file (mode 600, 16+ bytes) holding "
        "the transcript key: every event then carries an HMAC, and `jg-mcp audit --key-file F` detects "
        "a transcript re-chained by anyone without the key; keep it where commands cannot read it",
    )
    serving.add_arguments(p)
    p.set_defaults(func=run)


def hidden_dirs(loaded: LoadedGoal, args: argparse.Namespace) -> list[Path]:
    """What commands must not see: goal files, transcripts, other runs, and jg-mcp itself (its whole
    source checkout, eval data included, when it runs from one; the environment is bound back)."""
    package = Path(jg_mcp.__file__).resolve().parent
    source = package.parent if (package.parent / "pyproject.toml").exists() else package
    dirs = [
        loaded.yaml_path.resolve().parent,
        Path(args.transcripts).resolve(),
        Path(args.runs).resolve(),
        source,
        *[Path(h).resolve() for h in args.hide],
    ]
    return list(dict.fromkeys(dirs))


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the MCP SDK is needed to serve, not to run the other commands.
    from jg_mcp.http import ConnectionPool, listen, read_token
    from jg_mcp.server import SingleSession, build_server

    if args.transport == "stdio" and (args.host is not None or args.port is not None):
        raise UsageError(
            "--host and --port apply to --transport http only; stdio serves the process that started this one"
        )
    host = args.host or DEFAULT_HOST
    token, generated = read_token(args.token_file, host) if args.transport == "http" else (None, False)
    listener = listen(host, DEFAULT_PORT if args.port is None else args.port) if args.transport == "http" else None
    loaded = load_goal(find_goal(args.goal))
    key = read_key(args.transcript_key_file) if args.transcript_key_file else None
    limits = SandboxLimits(
        max_processes=args.max_processes,
        max_file_bytes=args.max_file_bytes,
        max_tmp_bytes=args.max_tmp_bytes,
        max_workspace_bytes=args.max_workspace_bytes,
    )
    template = Bwrap(Path(args.runs), hidden_dirs(loaded, args), limits)
    probe_dir = args.workspace.parent if args.workspace and args.transport == "stdio" else args.runs
    mode, warning = choose(args.sandbox, template, Path(probe_dir))
    if generated:
        logger.warning("HTTP bearer token (send as 'Authorization: Bearer TOKEN')", token=token)

    def make_session(workspace: Path | None = None) -> tuple[Session, Callable[[], None]]:
        """A new session and what gives its sandbox's uid back."""
        run_id = new_run_id(loaded.name)
        ws = workspace or Path(args.runs) / run_id / "workspace"
        sandbox = template.for_workspace(ws) if mode == "bwrap" else NoSandbox()
        try:
            session = Session(
                loaded,
                workspace_dir=ws,
                transcripts_dir=args.transcripts,
                runs_dir=args.runs,
                transport=args.transport,
                run_id=run_id,
                sandbox=mode,
                condition=args.condition,
                wrap=sandbox,
                transcript_key=key,
            )
        except BaseException:
            sandbox.release()
            raise
        if warning:
            session.notice("warning", warning)
        return session, sandbox.release

    if args.transport == "stdio":
        session, _ = make_session(args.workspace)
        logger.info(
            "session started",
            run_id=session.run_id,
            workspace=str(session.workspace.root),
            transcript=str(session.transcript_path),
            sandbox=mode,
        )
        pool = SingleSession(session)
        close_all = session.close
    else:
        pool = ConnectionPool(make_session, args.max_sessions, args.first_call_timeout, args.idle_timeout)
        close_all = pool.close_all
        logger.info("serving over HTTP", url=f"http://{host}:{listener.getsockname()[1]}/mcp", sandbox=mode)
    server = serving.apply(build_server(loaded, pool, sandboxed=mode == "bwrap"), loaded, pool, args)
    reason = "client disconnected" if args.transport == "stdio" else "server stopped"
    try:
        reason = anyio.run(_serve, server, args, token, close_all, pool, listener) or reason
    except KeyboardInterrupt:
        reason = "SIGINT"
    finally:
        close_all(reason)
        logger.info("server stopped", reason=reason)
    return 0


async def _serve(
    server, args, token: str | None, close_all: Callable[[str], None], pool, listener: socket.socket | None
) -> str | None:
    """Serve until the client goes away or a signal arrives; returns the end reason. On a signal the
    sessions are closed (commands killed, close events written) before anything is cancelled."""
    reason: str | None = None
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            nonlocal reason
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                async for signum in signals:
                    reason = signal.Signals(signum).name
                    close_all(reason)
                    if args.transport == "stdio":
                        # The SDK reads stdin in a thread that no cancellation can interrupt.
                        logger.info("server stopped", reason=reason)
                        os._exit(0)
                    stop.set()
                    return

        async def serve() -> None:
            if args.transport == "stdio":
                await server.run_stdio_async()
            else:
                from jg_mcp.http import HttpLimits, serve_http

                limits = HttpLimits(
                    max_sessions=args.max_sessions,
                    first_call_s=args.first_call_timeout,
                    idle_s=args.idle_timeout,
                    max_connections=args.max_connections,
                )
                await serve_http(
                    server, listener, args.host or DEFAULT_HOST, token, stop, pool, args.allow_host, limits
                )
            tg.cancel_scope.cancel()

        tg.start_soon(watch_signals)
        tg.start_soon(serve)
    return reason
