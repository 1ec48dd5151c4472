"""Request ids over HTTP (stdio: tests/live/test_stdio.py): one request per id in flight, a request reusing the id of
one still unanswered is refused, and the transcript credits each call with what it did; an id over the length
limit is refused before its call runs.

The refusal comes from the server's transcript middleware; the SDK's HTTP transport routes answers by id, so the
refused request's POST takes the route of the first one, whose own answer, recorded in the transcript, may then
never reach its POST: the client that reused its id loses that answer, and nobody else anything."""

from __future__ import annotations

import contextlib
import json
import threading

import httpx
import pytest

from jg_mcp.record.steps import load_record
from tests.support import INIT, MCP_HEADERS, TOKEN, HttpServer, wait_until

pytestmark = pytest.mark.slow


def wait_for(predicate, seconds: float = 30):
    """`predicate`'s first true value, polled (what the server writes has no event to wait on)."""
    found = []
    wait_until(lambda: found.append(predicate()) or found[-1], seconds)
    return found[-1]


def messages(response: httpx.Response) -> list[dict]:
    """The JSON-RPC messages of a streamable HTTP answer, JSON or server-sent events."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]


def caller(http: httpx.Client, url: str):
    """Open an MCP session at `url`; a function that sends it one tool call and returns the messages answered."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    init = http.post(url, json=INIT, headers=headers)
    headers |= {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)

    def call(rid: int | str, tool: str, **arguments) -> list[dict]:
        body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        return messages(http.post(url, json=body, headers=headers))

    return call


def test_over_http_a_request_whose_id_is_in_flight_is_refused_and_the_first_call_keeps_its_file(tmp_path):
    with HttpServer(tmp_path) as server, httpx.Client(timeout=60) as http:
        call = caller(http, server.url)

        def first_call() -> None:
            with contextlib.suppress(httpx.HTTPError):  # its answer may never come: see the module docstring
                call(7, "run_command", command="while [ ! -e go ]; do sleep 0.05; done; echo EVIL > evil.txt")

        threading.Thread(target=first_call, daemon=True).start()
        [transcript] = wait_for(lambda: list(server.transcripts.glob("*.jsonl")))
        wait_for(lambda: b'"request_id":7' in transcript.read_bytes())
        [second] = call(7, "run_command", command="echo benign > benign.txt")
        assert "error" in second and "in flight" in second["error"]["message"], second
        call(8, "write_file", path="go", content="")
        wait_for(
            lambda: [c for c in load_record(transcript).calls if c.request_id == 7 and c.duration_ms and not c.is_error]
        )
    [transcript] = server.transcripts.glob("*.jsonl")
    record = load_record(transcript)
    evil, refused = [c for c in record.calls if c.request_id == 7]
    assert "EVIL" in evil.arguments["command"] and not evil.is_error and refused.is_error
    assert {c.event.path: c.step for c in record.changes if c.step > 0} == {"evil.txt": evil.step, "go": evil.step + 2}
    assert record.problems == []


def test_over_http_a_request_whose_id_is_too_long_is_refused_unrun_and_recorded_in_bounded_size(tmp_path):
    """Every line the transcript writes for a call repeats its id: a long id on a command that makes files had
    the server write the id once a file. It is refused before the call runs and recorded by a short stand-in."""
    from jg_mcp.live.stdio import MAX_ID_CHARS

    with HttpServer(tmp_path) as server, httpx.Client(timeout=60) as http:
        call = caller(http, server.url)
        rid = "x" * (1 << 20)
        [refused] = call(rid, "run_command", command="touch a b c")
        assert refused["id"] == rid and "error" in refused, str(refused)[:300]
        assert f"limit of {MAX_ID_CHARS} characters" in refused["error"]["message"]
        [alive] = call(8, "run_command", command="echo alive")
        assert alive["result"]["structuredContent"]["stdout"] == "alive\n"
    [transcript] = server.transcripts.glob("*.jsonl")
    assert transcript.stat().st_size < 256 << 10
    assert not list((tmp_path / "runs").glob("*/workspace/a"))
    [response] = [c for c in load_record(transcript).calls if c.is_error]
    assert "request refused: its id" in (response.error or "") and len(str(response.request_id)) < 200
