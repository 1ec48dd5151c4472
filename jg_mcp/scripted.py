"""A deterministic scripted MCP client: drives a whole session from a list of steps, no LLM.

It powers the demo and the end-to-end and replay tests. It talks to the server through the
real `mcp` client over whatever transport it is given (a stdio subprocess, a URL, in-process).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

import anyio
from mcp import Client
from mcp.types import TextContent, TextResourceContents

from jg_mcp.models import Strict


class Step(Strict):
    kind: Literal["list_tools", "call_tool", "read_resource", "get_prompt"]
    name: str = ""
    """Tool name, resource URI or prompt name."""
    arguments: dict[str, Any] = {}
    note: str = ""
    """What the step is for, printed by the demo."""


class StepResult(Strict):
    step: Step
    ok: bool
    """False when the server answered with an error."""
    text: str
    """The first text content, or the tool names for list_tools."""
    structured: dict[str, Any] | None = None
    duration_s: float


def call(name: str, note: str = "", **arguments: Any) -> Step:
    return Step(kind="call_tool", name=name, arguments=arguments, note=note)


def first_text(items: Sequence[object]) -> str:
    """The text of the first text item in a tool result's `content` or a resource's `contents`, else ""."""
    for item in items:
        if isinstance(item, TextContent | TextResourceContents):
            return item.text
    return ""


async def run_step(client: Client, step: Step) -> StepResult:
    """Run one step against a connected `client` and time it.

    A tool's error comes back as a result with `ok=False`, not as an exception, so a script can go on
    after a refusal the way an agent would; errors of the protocol itself (an unknown resource or
    prompt) are raised.
    """
    start = time.monotonic()
    if step.kind == "list_tools":
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        return StepResult(
            step=step, ok=True, text=", ".join(names), structured={"tools": names}, duration_s=time.monotonic() - start
        )
    if step.kind == "read_resource":
        resource = await client.read_resource(step.name)
        return StepResult(step=step, ok=True, text=first_text(resource.contents), duration_s=time.monotonic() - start)
    if step.kind == "get_prompt":
        prompt = await client.get_prompt(step.name, step.arguments or None)
        text = first_text([m.content for m in prompt.messages])
        return StepResult(step=step, ok=True, text=text, duration_s=time.monotonic() - start)
    result = await client.call_tool(step.name, step.arguments)
    return StepResult(
        step=step,
        ok=not result.is_error,
        text=first_text(result.content),
        structured=result.structured_content,
        duration_s=time.monotonic() - start,
    )


async def run_script(server: Any, steps: list[Step], timeout_s: float = 600) -> list[StepResult]:
    """Run `steps` in order against `server` (anything `mcp.Client` accepts)."""
    results = []
    with anyio.fail_after(timeout_s):
        async with Client(server) as client:
            for step in steps:
                results.append(await run_step(client, step))
    return results
