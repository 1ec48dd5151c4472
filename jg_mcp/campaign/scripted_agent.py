"""The deterministic scripted client as an agent process, for campaigns without an LLM.

    python -m jg_mcp.campaign.scripted_agent --mcp-config MCP.json --prompt-file PROMPT.md --behaviour solve

It starts the server named in the MCP config over stdio, like any MCP client would, and prints one JSON line
per step on stdout (its log), the first its `init` line (the tools the server lists). `solve` reads the goal and
writes that goal's known-good solution (every file of eval/solutions/GOAL/ in the checkout; the demo's for axpy),
or exits 1 saying there is none; `idle` looks around
and leaves no solution; `overrun` keeps calling tools after the budget refuses them, until it is stopped;
`stall` looks around, then makes no call for ten minutes (like a long thought), until it is stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio

import jg_mcp
from jg_mcp.goals import DEMO_GOALS

SOLUTIONS = Path(jg_mcp.__file__).resolve().parent.parent / "eval" / "solutions"
"""Known-good solutions, one directory per goal name."""
LOGGED_TEXT_CHARS = 200
"""How much of each answer's text a step's line in the agent's log keeps."""
OVERRUN_MAX_CALLS = 3000
"""A bound on the overrun agent's calls, so it ends even when nothing stops it."""
STALL_S = 600
"""How long the stalling agent waits after looking around without calling anything (like a long thought)."""


def known_good(goal_name: str) -> dict[str, str]:
    """The goal's known-good solution as workspace path -> content; empty when there is none."""
    if goal_name == "axpy":
        return {"solution.py": (DEMO_GOALS / "axpy_solution.py").read_text()}
    folder = SOLUTIONS / goal_name
    if not folder.is_dir():
        return {}
    return {str(f.relative_to(folder)): f.read_text() for f in sorted(folder.rglob("*")) if f.is_file()}


def steps(behaviour: str, goal_name: str):
    from jg_mcp.scripted import Step, call

    look = [
        Step(kind="list_tools"),
        Step(kind="read_resource", name=f"goal://{goal_name}"),
        call("query_gpu"),
        call("read_file", path="reference.py", limit=40),
    ]
    if behaviour == "solve":
        return [
            *look,
            *[call("write_file", path=path, content=content) for path, content in known_good(goal_name).items()],
            call("run_command", command="python -c 'import ast; ast.parse(open(\"solution.py\").read())'"),
        ]
    return look


async def drive(params, behaviour: str) -> int:
    from mcp import Client

    from jg_mcp.scripted import first_text, run_step

    def emit(**record) -> None:
        print(json.dumps(record), flush=True)

    async with Client(params) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        emit(step="init", tools=tools, version=f"jg-mcp {jg_mcp.__version__} scripted")
        goal = next(r for r in (await client.list_resources()).resources if r.name == "goal")
        goal_name = str(goal.uri).removeprefix("goal://")
        if behaviour == "solve" and not known_good(goal_name):
            print(f"scripted agent: no known-good solution for goal '{goal_name}' in {SOLUTIONS}", file=sys.stderr)
            return 1
        for step in steps(behaviour, goal_name):
            r = await run_step(client, step)
            emit(
                step=step.kind,
                name=step.name,
                ok=r.ok,
                text=r.text[:LOGGED_TEXT_CHARS],
                duration_s=round(r.duration_s, 3),
            )
        if behaviour == "stall":
            await anyio.sleep(STALL_S)
        if behaviour == "overrun":
            for i in range(OVERRUN_MAX_CALLS):
                res = await client.call_tool("run_command", {"command": "sleep 0.2", "timeout_s": 30})
                text = first_text(res.content)
                emit(step="call_tool", name="run_command", call=i, ok=not res.is_error, text=text[:LOGGED_TEXT_CHARS])
    return 0


def main(argv: list[str] | None = None) -> int:
    from mcp import StdioServerParameters

    p = argparse.ArgumentParser(prog="scripted_agent", description=__doc__.splitlines()[0])
    p.add_argument("--mcp-config", type=Path, required=True)
    p.add_argument("--prompt-file", type=Path, required=True)
    p.add_argument("--behaviour", choices=["solve", "idle", "overrun", "stall"], default="solve")
    p.add_argument("--timeout", type=float, default=1800, help="seconds before the agent gives up")
    args = p.parse_args(argv)
    server = json.loads(args.mcp_config.read_text())["mcpServers"]["jg"]
    args.prompt_file.read_text()
    env = {**os.environ, **(server.get("env") or {})}  # like agents that pass theirs on (Claude Code does)
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env)

    async def bounded() -> int:
        with anyio.fail_after(args.timeout):
            return await drive(params, args.behaviour)

    return anyio.run(bounded)


if __name__ == "__main__":
    sys.exit(main())
