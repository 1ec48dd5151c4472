"""A named condition's extras on a built server: the `evaluate` tool (eval-tool), the notes resource (knowledge),
the plan prompt (workflow). The conditions themselves, and the check that a session used only its own, are
`jg_mcp.record.conditions`. The MCP SDK is imported only by `install`, when a server is built.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from jg_mcp.record.conditions import KNOWLEDGE_URI, WORKFLOW

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from jg_mcp.goals import LoadedGoal
    from jg_mcp.live.recording import SessionPool

KNOWLEDGE_FILE = Path(__file__).resolve().parent.parent / "knowledge" / "kernel_notes.md"
EVALUATE_TIMEOUT_S = 1800
STDERR_TAIL_CHARS = 4000
"""How much of the end of an eval's stderr the `evaluate` tool returns when the eval reached no verdict."""


def run_eval(goal_yaml: Path, workspace: Path, timeout_s: float = EVALUATE_TIMEOUT_S) -> tuple[int | None, str]:
    """`jg-mcp eval` on a workspace as a subprocess; returns (exit status, Markdown report), or (None, what went
    wrong) when it wrote no report: then there is no verdict, whatever its exit status (a missing solution, a goal
    the harness cannot use, a harness that failed)."""
    with tempfile.TemporaryDirectory(prefix="jg-evaluate-") as tmp:
        md = Path(tmp) / "eval.md"
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "jg_mcp",
                    "--log-level",
                    "WARNING",
                    "eval",
                    "--goal",
                    str(goal_yaml),
                    "--workspace",
                    str(workspace),
                    "--markdown",
                    str(md),
                ],
                check=False,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return None, f"the eval did not finish within {timeout_s:.0f}s"
        if md.is_file():
            return proc.returncode, md.read_text()
        return None, f"the eval reached no verdict (exit {proc.returncode}):\n{proc.stderr[-STDERR_TAIL_CHARS:]}"


def install(server: MCPServer, loaded: LoadedGoal, pool: SessionPool, condition: str) -> None:
    """Add the condition's extras to a built server (nothing for goal-only)."""
    if condition == "eval-tool":
        _install_evaluate(server, loaded, pool)
    elif condition == "knowledge":

        @server.resource(
            KNOWLEDGE_URI, name="kernel-notes", title="Kernel optimisation notes", mime_type="text/markdown"
        )
        def kernel_notes() -> str:
            """Short factual notes on GPU kernel optimisation (read-only)."""
            return KNOWLEDGE_FILE.read_text()
    elif condition == "workflow":

        @server.prompt(name="workflow", title="A prescribed plan")
        def workflow_prompt() -> str:
            """The plan to follow, step by step."""
            return WORKFLOW


def _install_evaluate(server: MCPServer, loaded: LoadedGoal, pool: SessionPool) -> None:
    import anyio
    from mcp.server.mcpserver import Context
    from mcp.types import ToolAnnotations

    async def evaluate(ctx: Context) -> str:
        """Re-verify the solution now in the workspace with the official eval harness (`jg-mcp eval`): correctness
        on fresh secret inputs at every shape, anti-cheat checks, and on a GPU timing against the baselines.
        Returns the eval's Markdown report; the verdict line says ACCEPTED or REJECTED with the reasons, or none
        with what kept the eval from a verdict (no solution file, say)."""
        session = pool.get(ctx.request_context.session)
        status, report = await anyio.to_thread.run_sync(run_eval, loaded.yaml_path, session.workspace.root)
        verdict = {0: "ACCEPTED", 1: "REJECTED"}.get(status, "none") if status is not None else "none"
        return f"verdict: {verdict}\n\n{report}"

    evaluate.__annotations__ = {"ctx": Context, "return": str}  # resolved here: the SDK is imported lazily
    server.add_tool(
        evaluate,
        description=(evaluate.__doc__ or "").replace("\n        ", "\n"),
        annotations=ToolAnnotations(
            title="Evaluate the current solution", read_only_hint=True, idempotent_hint=False, open_world_hint=False
        ),
    )
