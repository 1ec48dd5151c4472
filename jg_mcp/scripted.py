"""A deterministic scripted MCP client: drives a whole session from a list of steps, no LLM.

It powers the demo and the end-to-end and replay tests. It talks to the server through the
real `mcp` client over whatever transport it is given (a stdio subprocess, a URL, in-process).
"""

from __future__ import annotations

import time
from typing import Any, Literal

import anyio
from mcp import Client
from pydantic import BaseModel, ConfigDict


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["list_tools", "call_tool", "read_resource", "get_prompt"]
    name: str = ""
    """Tool name, resource URI or prompt name."""
    arguments: dict[str, Any] = {}
    note: str = ""
    """What the step is for, printed by the demo."""


class StepResult(BaseModel):
    step: Step
    ok: bool
    """False when the server answered with an error."""
    text: str
    """The first text content, or the tool names for list_tools."""
    structured: dict[str, Any] | None = None
    duration_s: float


def call(name: str, note: str = "", **arguments: Any) -> Step:
    return Step(kind="call_tool", name=name, arguments=arguments, note=note)


async def _one(client: Client, step: Step) -> StepResult:
    start = time.monotonic()
    if step.kind == "list_tools":
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        return StepResult(
            step=step, ok=True, text=", ".join(names), structured={"tools": names}, duration_s=time.monotonic() - start
        )
    if step.kind == "read_resource":
        res = await client.read_resource(step.name)
        return StepResult(step=step, ok=True, text=res.contents[0].text, duration_s=time.monotonic() - start)
    if step.kind == "get_prompt":
        res = await client.get_prompt(step.name, step.arguments or None)
        return StepResult(step=step, ok=True, text=res.messages[0].content.text, duration_s=time.monotonic() - start)
    res = await client.call_tool(step.name, step.arguments)
    text = res.content[0].text if res.content else ""
    return StepResult(
        step=step,
        ok=not res.is_error,
        text=text,
        structured=res.structured_content,
        duration_s=time.monotonic() - start,
    )


async def run_script(server: Any, steps: list[Step], timeout_s: float = 600) -> list[StepResult]:
    """Run `steps` in order against `server` (anything `mcp.Client` accepts)."""
    results = []
    with anyio.fail_after(timeout_s):
        async with Client(server) as client:
            for step in steps:
                results.append(await _one(client, step))
    return results
