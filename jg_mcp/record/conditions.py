"""Named conditions: what an agent gets besides the goal, and the check that a session used only that.

goal-only  the four generic tools, the goal as resources and a prompt (the default; nothing added)
eval-tool  plus an `evaluate` tool that runs `jg-mcp eval` on the current solution and returns its report
knowledge  plus a read-only resource of short factual kernel-optimisation notes (jg_mcp/knowledge/)
workflow   plus a prompt that prescribes a plan, also appended to the agent's instruction

The condition is recorded in the transcript header; `check_transcript` reads a transcript and names every
tool call, resource read or prompt outside what its condition serves. Both the audit and a campaign's run
check it, so it sits below both; a server gets a condition's extras from `jg_mcp.campaign.conditions`.
"""

from __future__ import annotations

from pathlib import Path

from jg_mcp.errors import JgError
from jg_mcp.models import Strict
from jg_mcp.record.events import Request
from jg_mcp.record.reading import read_transcript

BASE_TOOLS = ("read_file", "write_file", "run_command", "query_gpu")
KNOWLEDGE_URI = "knowledge://kernel-notes"
WORKFLOW = """\
Work in this order, and do not skip a step:
1. Read the goal and reference.py; state the arithmetic intensity of the timed shapes (flops / bytes)
   and whether the kernel is compute- or memory-bound on the stated hardware.
2. Query the GPU. Write a straightforward correct Triton kernel in solution.py first.
3. Write a check script that compares solution.py with the reference on the smoke shapes and on the timed
   shapes, and run it. Fix it until it passes.
4. Write a benchmark script that times the kernel and the baselines with triton.testing.do_bench on the
   timed shapes. Record the numbers.
5. Optimise one thing at a time (tiling, vectorised loads, autotuned block sizes, fused epilogue),
   re-running the check and the benchmark after each change; keep a change only when it is correct and faster.
6. Stop when the kernel is near the roofline or the budget is nearly spent; leave the best correct
   version in solution.py.
"""


class Condition(Strict):
    name: str
    """The condition's name, as recorded in the transcript header."""
    tools: tuple[str, ...]
    """Tools the server offers under it."""
    resource_prefixes: tuple[str, ...]
    """URI prefixes of the resources it serves."""
    prompts: tuple[str, ...]
    """Prompt names it serves."""
    addendum: str = ""
    """Text appended to the goal instruction the agent is given."""


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition(name="goal-only", tools=BASE_TOOLS, resource_prefixes=("goal://",), prompts=("goal",)),
        Condition(
            name="eval-tool",
            tools=(*BASE_TOOLS, "evaluate"),
            resource_prefixes=("goal://",),
            prompts=("goal",),
            addendum="An `evaluate` tool re-verifies your current solution with the official harness and "
            "returns its report.",
        ),
        Condition(
            name="knowledge",
            tools=BASE_TOOLS,
            resource_prefixes=("goal://", KNOWLEDGE_URI),
            prompts=("goal",),
            addendum=f"A read-only resource, {KNOWLEDGE_URI}, holds short notes on GPU kernel optimisation.",
        ),
        Condition(
            name="workflow",
            tools=BASE_TOOLS,
            resource_prefixes=("goal://",),
            prompts=("goal", "workflow"),
            addendum="## Workflow\n" + WORKFLOW,
        ),
    )
}
NAMES = tuple(CONDITIONS)


def agent_instruction(instruction: str, condition: str) -> str:
    """The prompt an agent is started with: the goal instruction plus the condition's addendum."""
    addendum = CONDITIONS[condition].addendum
    return instruction + ("\n" + addendum if addendum else "")


def check_transcript(path: Path, condition: str | None = None) -> list[str]:
    """Every request in the transcript outside what `condition` (default: the header's) serves, as messages."""
    try:
        events = read_transcript(path, verify=False).events
    except JgError as exc:
        return [f"the transcript cannot be read: {exc}"]
    header = events[0] if events and events[0].event == "header" else None
    name = condition or (header.condition if header else "goal-only")
    if header is not None and condition is not None and header.condition != condition:
        return [f"the transcript header names condition '{header.condition}', the run was '{condition}'"]
    allowed = CONDITIONS.get(name)
    if allowed is None:
        return [f"unknown condition '{name}'"]
    problems = []
    for event in events:
        if not isinstance(event, Request) or not event.params:
            continue
        params = event.params
        if event.method == "tools/call" and params.get("name") not in allowed.tools:
            problems.append(f"seq {event.seq}: tool '{params.get('name')}' is not served under {name}")
        elif event.method == "resources/read" and not str(params.get("uri", "")).startswith(allowed.resource_prefixes):
            problems.append(f"seq {event.seq}: resource '{params.get('uri')}' is not served under {name}")
        elif event.method == "prompts/get" and params.get("name") not in allowed.prompts:
            problems.append(f"seq {event.seq}: prompt '{params.get('name')}' is not served under {name}")
    return problems
