"""A slow workspace scan, a request the JSON parser refuses and parallel commands under a budget: the server
keeps answering, exits promptly when told to, records what happened, and keeps the budget."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client

from jg_mcp.campaign import budget
from jg_mcp.live import workspace
from jg_mcp.live.connections import ConnectionPool
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from jg_mcp.record.reading import read_transcript
from tests.support import GEMM_FP8, MCP_HEADERS, REPO, TOKEN, HttpServer, wait_until
from tests.support import INIT as HTTP_INIT

pytestmark = pytest.mark.slow

SLOW_MARK = "slow-scan"
"""A workspace holding a file of this name scans slowly (the scan blocks) in these tests."""
STUCK_MARK = "scan-stuck"
"""Made beside the workspace when a scan has started blocking."""
SLOW_SERVER = f"""
import sys, threading
from jg_mcp.live import workspace
real = workspace.Workspace.scan
def slow(self, *args, **kwargs):
    if (self.root / {SLOW_MARK!r}).exists():
        (self.root.parent / {STUCK_MARK!r}).touch()
        threading.Event().wait(120)
    return real(self, *args, **kwargs)
workspace.Workspace.scan = slow
from jg_mcp.cli import main
sys.exit(main(sys.argv[1:]))
"""
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


class Stdio:
    """A `jg-mcp serve` subprocess over stdio whose scans block while the workspace holds SLOW_MARK."""

    def __init__(self, tmp_path: Path, *extra: str):
        self.ws, self.tr = tmp_path / "ws", tmp_path / "tr"
        argv = [sys.executable, "-c", SLOW_SERVER, "serve", "--goal", str(GEMM_FP8), "--sandbox", "none"]
        argv += ["--workspace", str(self.ws), "--transcripts", str(self.tr), "--runs", str(tmp_path / "runs"), *extra]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO
        )
        self.answers: dict[object, queue.Queue] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.send(INIT)
        assert "result" in self.answer(0, 60)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _box(self, rid: object) -> queue.Queue:
        with self.lock:
            return self.answers.setdefault(rid, queue.Queue())

    def _read(self) -> None:
        for line in self.proc.stdout:
            message = json.loads(line)
            if "id" in message:
                self._box(message["id"]).put(message)

    def send(self, message: dict | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, rid: int, tool: str, **arguments: object) -> None:
        self.send(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        )

    def answer(self, rid: object, timeout_s: float) -> dict:
        try:
            return self._box(rid).get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"no answer to request {rid} within {timeout_s}s") from None

    def stick_a_scan(self) -> None:
        """Start a command whose scan blocks, and wait until it does."""
        self.call(1, "run_command", command=f"touch {SLOW_MARK}")
        wait_until((self.ws.parent / STUCK_MARK).exists, 20)

    def transcript(self):
        [path] = self.tr.glob("*.jsonl")
        return read_transcript(path)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def stdio(tmp_path):
    servers: list[Stdio] = []
    yield lambda *extra: servers.append(Stdio(tmp_path, *extra)) or servers[-1]
    for server in servers:
        server.kill()


def _ended_honestly(transcript, reason: str) -> None:
    """The transcript is closed with `reason`, and a notice says that the last scan did not finish."""
    assert transcript.closed and transcript.events[-1].reason == reason
    notices = [e.message for e in transcript.events if e.event == "notice" and e.level == "error"]
    assert any("scan did not finish" in n for n in notices), notices


def test_a_stuck_scan_with_many_writes_waiting_leaves_the_stdio_server_answering_and_eof_ends_it(stdio):
    server = stdio()
    server.stick_a_scan()
    for i in range(45):
        server.call(100 + i, "write_file", path=f"w{i}.txt", content="x")
    server.call(2, "query_gpu")
    server.call(3, "read_file", path="reference.py", limit=1)
    assert "result" in server.answer(2, 10)
    assert "result" in server.answer(3, 10)
    started = time.monotonic()
    server.proc.stdin.close()
    server.proc.wait(timeout=20)
    assert time.monotonic() - started < 12
    _ended_honestly(server.transcript(), "client disconnected")


def test_sigterm_ends_a_stdio_server_within_seconds_while_a_scan_is_stuck(stdio):
    server = stdio()
    server.stick_a_scan()
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)
    assert time.monotonic() - started < 10
    _ended_honestly(server.transcript(), "SIGTERM")


@pytest.fixture
def slow_scan(monkeypatch):
    """Scans of a workspace holding SLOW_MARK block until the test ends (at most 20 s)."""
    release = threading.Event()
    real = workspace.Workspace.scan

    def slow(self, *args, **kwargs):
        if (self.root / SLOW_MARK).exists():
            (self.root.parent / STUCK_MARK).touch()
            release.wait(20)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(workspace.Workspace, "scan", slow)
    yield
    release.set()


def _session(goal, root: Path) -> Session:
    return Session.open(goal, SessionConfig(workspace_dir=root / "ws", transcripts_dir=root / "tr"))


def test_one_sessions_stuck_scan_and_waiting_writes_do_not_delay_another_sessions_answers(
    gemm_goal, tmp_path, slow_scan
):
    slow, other = _session(gemm_goal, tmp_path / "a"), _session(gemm_goal, tmp_path / "b")
    slow_server, other_server = (
        build_server(gemm_goal, SingleSession(slow)),
        build_server(gemm_goal, SingleSession(other)),
    )
    took: list[float] = []

    async def go():
        with anyio.fail_after(40):
            async with Client(slow_server) as a, Client(other_server) as b, anyio.create_task_group() as tg:
                tg.start_soon(a.call_tool, "run_command", {"command": f"touch {SLOW_MARK}"})
                await anyio.to_thread.run_sync(wait_until, (slow.workspace.root.parent / STUCK_MARK).exists, 20)
                for i in range(45):
                    tg.start_soon(a.call_tool, "write_file", {"path": f"w{i}", "content": "x"})
                await anyio.sleep(0.5)  # let the writes start waiting
                started = time.monotonic()
                for name, args in (("read_file", {"path": "reference.py", "limit": 1}), ("query_gpu", {})):
                    assert not (await b.call_tool(name, args)).is_error
                    assert not (await a.call_tool(name, args)).is_error
                assert not (await b.call_tool("write_file", {"path": "b.txt", "content": "b"})).is_error
                took.append(time.monotonic() - started)
                tg.cancel_scope.cancel()

    anyio.run(go)
    other.close("test finished")
    slow.close("test finished", wait_s=1)
    assert took[0] < 5


def test_a_budget_close_while_a_scan_is_stuck_leaves_the_event_loop_free_and_says_so(gemm_goal, tmp_path, slow_scan):
    session = _session(gemm_goal, tmp_path)
    pool = SingleSession(session)
    server = build_server(gemm_goal, pool)
    budget.install(server, pool, budget.Budget(max_tool_calls=2))
    ticks: list[float] = []

    async def go():
        async def tick():
            while True:
                ticks.append(time.monotonic())
                await anyio.sleep(0.1)

        with anyio.fail_after(40):
            async with Client(server) as c, anyio.create_task_group() as tg:
                tg.start_soon(tick)
                tg.start_soon(c.call_tool, "run_command", {"command": f"touch {SLOW_MARK}"})
                await anyio.to_thread.run_sync(wait_until, (tmp_path / STUCK_MARK).exists, 20)
                await c.call_tool("query_gpu", {})
                refused = await c.call_tool("query_gpu", {})
                tg.cancel_scope.cancel()
                return refused

    started = time.monotonic()
    refused = anyio.run(go)
    assert refused.is_error and "budget spent" in refused.content[0].text
    assert time.monotonic() - started < 15
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    assert max(gaps) < 2, f"the event loop stalled for {max(gaps):.1f}s"
    _ended_honestly(read_transcript(session.transcript_path), "budget spent: 2 tool calls")


def test_releasing_an_http_session_whose_scan_is_stuck_returns_at_once(gemm_goal, tmp_path, slow_scan):
    session = _session(gemm_goal, tmp_path)
    session.workspace.write((SLOW_MARK,), b"")
    stuck = threading.Thread(target=session.record_changes, args=(None, "test"), daemon=True)
    stuck.start()
    wait_until((tmp_path / STUCK_MARK).exists, 20)
    freed = threading.Event()
    pool = ConnectionPool(lambda: (session, freed.set))
    pool.live["k"] = _live(session, freed.set)
    started = time.monotonic()
    pool.release("k", "client disconnected")
    assert time.monotonic() - started < 2, "a release that waited would take the close's 5 s or the scan's 20 s"
    pool.close_all("server stopped")  # waits for the closes, each bounded
    assert time.monotonic() - started < 15 and freed.is_set()
    _ended_honestly(read_transcript(session.transcript_path), "client disconnected")


def _live(session: Session, release):
    from jg_mcp.live.connections import Live

    return Live(session, release, time.monotonic(), time.monotonic())


def test_a_request_with_a_lone_surrogate_escape_is_answered_with_an_error_and_recorded(stdio):
    server = stdio()
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"path": "\udcff", "content": "x"}},
        }
    )
    assert "\\udcff" in line
    server.send(line)
    refused = server.answer(9, 10)
    assert "surrogate" in refused["error"]["message"]
    server.call(10, "run_command", command="echo alive")
    assert server.answer(10, 20)["result"]["structuredContent"]["stdout"] == "alive\n"
    server.proc.stdin.close()
    server.proc.wait(timeout=20)
    events = server.transcript().events
    [request] = [e for e in events if e.event == "request" and e.request_id == 9]
    assert request.method == "tools/call" and request.params["arguments"]["path"] == "\\udcff"
    [response] = [e for e in events if e.event == "response" and e.request_id == 9]
    assert response.is_error and "surrogate" in response.error


@pytest.mark.parametrize("depth", [300, 5000])
def test_a_request_the_json_rpc_parser_cannot_read_is_answered_with_its_id_and_recorded(stdio, depth):
    """Arguments nested deeper than the SDK's parser reads made it drop the request: no answer (the client waited
    forever) and no record. Any request with an id that the parser refuses is answered and recorded."""
    server = stdio()
    nested = "[" * depth + "]" * depth
    server.send(
        '{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "write_file", "arguments": '
        f'{{"path": "a.txt", "content": {nested}}}}}}}'
    )
    refused = server.answer(11, 10)
    assert "cannot read" in refused["error"]["message"], refused
    server.call(12, "run_command", command="echo alive")
    assert server.answer(12, 20)["result"]["structuredContent"]["stdout"] == "alive\n"
    server.proc.stdin.close()
    server.proc.wait(timeout=20)
    events = server.transcript().events
    [request] = [e for e in events if e.event == "request" and e.request_id == 11]
    [response] = [e for e in events if e.event == "response" and e.request_id == 11]
    assert request.method == "tools/call" and response.is_error and "cannot read" in response.error


def test_an_http_request_with_a_lone_surrogate_escape_is_answered_with_its_id_and_recorded(tmp_path):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    with HttpServer(tmp_path, "--sandbox", "none") as server:
        opened = httpx.post(server.url, json=HTTP_INIT, headers=headers, timeout=10)
        headers |= {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        httpx.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        bad = {"name": "write_file", "arguments": {"path": "\udcff", "content": "x"}}
        body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": bad})
        answer = httpx.post(server.url, content=body, headers=headers, timeout=10).text
        [transcript] = server.transcripts_by_run().values()
    refused = json.loads(answer.split("data: ", 1)[1].split("\n", 1)[0]) if "data: " in answer else json.loads(answer)
    assert refused["id"] == 9 and "surrogate" in refused["error"]["message"]
    [request] = [e for e in transcript.events if e.event == "request" and e.request_id == 9]
    assert request.params["arguments"]["path"] == "\\udcff"


def _budgeted(goal, tmp_path, **limits):
    session = _session(goal, tmp_path)
    pool = SingleSession(session)
    server = build_server(goal, pool)
    budget.install(server, pool, budget.Budget(**limits))
    return session, server


def test_a_timeout_sent_as_a_string_cannot_run_a_command_past_the_budget(gemm_goal, tmp_path):
    session, server = _budgeted(gemm_goal, tmp_path, max_command_seconds=2)

    async def go():
        with anyio.fail_after(30):
            async with Client(server) as c:
                return await c.call_tool("run_command", {"command": "sleep 6; echo late", "timeout_s": "60"})

    started = time.monotonic()
    result = anyio.run(go)
    session.close("test finished")
    assert time.monotonic() - started < 5
    assert result.is_error or result.structured_content["timed_out"]


def test_parallel_commands_together_stay_within_the_command_seconds_budget(gemm_goal, tmp_path):
    session, server = _budgeted(gemm_goal, tmp_path, max_command_seconds=3)
    results: list = []

    async def go():
        with anyio.fail_after(30):
            async with Client(server) as c, anyio.create_task_group() as tg:

                async def one(i: int) -> None:
                    results.append(await c.call_tool("run_command", {"command": f"sleep 5; echo {i}"}))

                for i in range(6):
                    tg.start_soon(one, i)

    anyio.run(go)
    session.close("test finished")
    ran = [r.structured_content["duration_s"] for r in results if not r.is_error]
    refused = [r.content[0].text for r in results if r.is_error]
    assert sum(ran) <= 3.5, ran
    assert refused and all("run_command" in text and "reserved" in text for text in refused), refused
