"""`jg-mcp serve`: run the goal-only server over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import anyio

from jg_mcp import log
from jg_mcp.goals import find_goal, load_goal
from jg_mcp.server import SingleSession, build_server
from jg_mcp.session import Session

logger = log.get("jg_mcp.serve")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a goal to an MCP client (stdio or HTTP)",
        description="Serve one goal under the goal-only condition: four tools (read_file, write_file, "
        "run_command, query_gpu), the goal as a resource and a prompt. Every request is recorded in a "
        "hash-chained transcript. In stdio mode stdout is the MCP stream; logs go to stderr.",
    )
    p.add_argument("--goal", required=True, help="goal name (gemm_fp8) or path to its YAML")
    p.add_argument("--workspace", type=Path, help="workspace directory (default: runs/RUN_ID/workspace)")
    p.add_argument("--transcripts", type=Path, default=Path("transcripts"), help="where RUN.jsonl goes")
    p.add_argument("--runs", type=Path, default=Path("runs"), help="parent of per-run workspaces")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    p.add_argument("--port", type=int, default=8765, help="HTTP port")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_goal(find_goal(args.goal))
    session = Session(
        loaded,
        workspace_dir=args.workspace,
        transcripts_dir=args.transcripts,
        runs_dir=args.runs,
        transport=args.transport,
    )
    logger.info("session started", run_id=session.run_id, workspace=str(session.workspace.root),
                transcript=str(session.transcript_path))
    server = build_server(loaded, SingleSession(session))
    reason = "client disconnected"
    try:
        reason = anyio.run(_serve, server, args) or reason
    except KeyboardInterrupt:
        reason = "SIGINT"
    finally:
        session.close(reason)
        logger.info("session closed", reason=reason, transcript=str(session.transcript_path))
    return 0


async def _serve(server, args) -> str | None:
    """Serve until the client goes away or a signal arrives; returns the end reason."""
    reason: str | None = None
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            nonlocal reason
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                async for signum in signals:
                    reason = signal.Signals(signum).name
                    tg.cancel_scope.cancel()
                    return

        async def serve() -> None:
            if args.transport == "stdio":
                await server.run_stdio_async()
            else:
                await server.run_streamable_http_async(host=args.host, port=args.port)
            tg.cancel_scope.cancel()

        tg.start_soon(watch_signals)
        tg.start_soon(serve)
    return reason
