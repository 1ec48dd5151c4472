"""The budget middleware and the named conditions, through the real mcp Client in process."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from jg_mcp.campaign import budget, serving
from jg_mcp.commands.demo import SOLUTION
from jg_mcp.goals import load_goal
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from jg_mcp.record import audit, conditions
from jg_mcp.record.reading import read_transcript
from tests.support import DEMO_GOAL


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def axpy():
    return load_goal(DEMO_GOAL)


def make(axpy, tmp_path, condition="goal-only", **limits):
    session = Session.open(
        axpy, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "tr", condition=condition)
    )
    pool = SingleSession(session)
    server = serving.apply(build_server(axpy, pool), axpy, pool, condition, budget.Budget())
    return session, pool, server


def drive(server, fn, timeout_s=60):
    async def go():
        with anyio.fail_after(timeout_s):
            async with Client(server) as client:
                return await fn(client)

    return anyio.run(go)


def test_past_the_wall_clock_every_tool_call_is_refused_and_the_session_closes_with_the_reason(axpy, tmp_path):
    session, pool, server = make(axpy, tmp_path)
    clock = Clock()
    budget.install(server, pool, budget.Budget(wall_clock_minutes=1), clock)

    async def fn(c):
        first = await c.call_tool("query_gpu", {})
        clock.now += 61
        late = [
            await c.call_tool(name, args)
            for name, args in (("query_gpu", {}), ("write_file", {"path": "solution.py", "content": "x"}))
        ]
        return first, late

    first, late = drive(server, fn)
    assert not first.is_error
    assert all(r.is_error and r.content[0].text.startswith("budget spent: 1 minutes of wall clock") for r in late)
    assert not (tmp_path / "ws" / "solution.py").exists()
    read = read_transcript(session.transcript_path)
    assert read.closed and read.events[-1].reason == "budget spent: 1 minutes of wall clock"
    notices = [e.message for e in read.events if e.event == "notice"]
    assert notices[0] == 'budget clock started: {"wall_clock_minutes":1.0}'
    refused = [e for e in read.events if e.event == "response" and e.method == "tools/call" and e.is_error]
    assert len(refused) == 1, "the first refusal is recorded, then the session is closed"


def test_tool_call_cap_counts_calls_and_run_command_timeout_is_cut_to_what_is_left(axpy, tmp_path):
    session, pool, server = make(axpy, tmp_path)
    budget.install(server, pool, budget.Budget(max_tool_calls=2, max_command_seconds=1.5))

    async def fn(c):
        return [
            await c.call_tool("run_command", {"command": "sleep 5", "timeout_s": 600}),
            await c.call_tool("query_gpu", {}),
        ]

    slept, refused = drive(server, fn)
    assert slept.structured_content["timed_out"] is True and slept.structured_content["duration_s"] < 4
    assert refused.is_error and "budget spent" in refused.content[0].text
    assert read_transcript(session.transcript_path).events[-1].reason.startswith("budget spent")


@pytest.mark.slow
def test_eval_tool_condition_serves_an_evaluate_tool_that_runs_the_eval(axpy, tmp_path):
    session, _, server = make(axpy, tmp_path, "eval-tool")

    async def fn(c):
        names = [t.name for t in (await c.list_tools()).tools]
        missing = await c.call_tool("evaluate", {})
        await c.call_tool("write_file", {"path": "solution.py", "content": SOLUTION.read_text()})
        return names, missing, await c.call_tool("evaluate", {})

    names, missing, accepted = drive(server, fn, timeout_s=300)
    assert names == [*conditions.BASE_TOOLS, "evaluate"]
    assert missing.content[0].text.startswith("verdict: none\n\nthe eval reached no verdict (exit 1)")
    assert "no solution file" in missing.content[0].text
    assert accepted.content[0].text.startswith("verdict: ACCEPTED"), accepted.content[0].text
    session.close("test finished")
    assert read_transcript(session.transcript_path).events[0].condition == "eval-tool"
    assert conditions.check_transcript(session.transcript_path) == []


def test_knowledge_and_workflow_add_a_resource_and_a_prompt_and_the_check_flags_what_goal_only_lacks(axpy, tmp_path):
    _, _, knowledge = make(axpy, tmp_path / "k", "knowledge")
    _, _, workflow = make(axpy, tmp_path / "w", "workflow")
    session, _, goal_only = make(axpy, tmp_path / "g", "goal-only")

    async def read_notes(c):
        return (await c.read_resource(conditions.KNOWLEDGE_URI)).contents[0].text

    async def get_plan(c):
        return (await c.get_prompt("workflow")).messages[0].content.text

    async def stray(c):
        await c.call_tool("evaluate", {})
        await c.get_prompt("goal")
        return [r.uri for r in (await c.list_resources()).resources]

    assert "Roofline" in drive(knowledge, read_notes)
    assert "Work in this order" in drive(workflow, get_plan)
    assert conditions.KNOWLEDGE_URI not in [str(u) for u in drive(goal_only, stray)]
    session.close("test finished")
    problems = conditions.check_transcript(session.transcript_path)
    assert len(problems) == 1 and "tool 'evaluate' is not served under goal-only" in problems[0]
    assert conditions.check_transcript(session.transcript_path, "workflow")[0].startswith("the transcript header")
    found = [f for f in audit.audit(session.transcript_path).findings if f.kind == "condition"]
    assert len(found) == 1 and found[0].severity == "error" and "'evaluate'" in found[0].message
