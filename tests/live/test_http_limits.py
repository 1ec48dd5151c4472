"""What an HTTP client cannot hold on to: sessions past the cap, sessions without a tool call, half-open,
slow-bodied and surplus connections; and how `serve` refuses a taken port or HTTP options under stdio."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest

from jg_mcp.live.http import CONNECTION_IDLE_S
from jg_mcp.live.uids import LOCK_DIR
from tests.support import (
    INIT,
    MCP_HEADERS,
    TOKEN,
    HttpServer,
    bwrap_missing,
    client,
    free_port,
    serve_argv,
    wait_until,
)

pytestmark = pytest.mark.slow
BWRAP_MISSING = bwrap_missing()
AUTH = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
THREE_CONNECTIONS = (
    *("--max-connections", "3", "--max-sessions", "1"),
    *("--max-session-calls", "1", "--max-session-connections", "2"),
)
"""Three connections, and shares that fit them (jg_mcp.live.shares)."""


def initialize(server: HttpServer) -> httpx.Response:
    return httpx.post(server.url, json=INIT, headers=AUTH, timeout=10)


def closed_reasons(server: HttpServer) -> list[str]:
    return [t.events[-1].reason for t in server.transcripts_by_run().values() if t.closed]


def test_sessions_past_the_cap_are_refused_with_a_reason_until_one_ends(tmp_path):
    with HttpServer(tmp_path, "--sandbox", "none", "--max-sessions", "2") as server:
        first, second = initialize(server), initialize(server)
        assert first.status_code == second.status_code == 200
        refused = initialize(server)
        assert refused.status_code == 503
        assert "at most 2 sessions at once (--max-sessions)" in refused.json()["error"]["message"]
        ended = httpx.delete(
            server.url, headers={**AUTH, "mcp-session-id": first.headers["mcp-session-id"]}, timeout=10
        )
        assert ended.status_code < 300
        wait_until(lambda: closed_reasons(server) == ["client disconnected"], 20)
        assert initialize(server).status_code == 200


def test_a_session_without_a_tool_call_is_ended_and_one_with_a_call_is_kept(tmp_path):
    async def one_call(server: HttpServer) -> None:
        with anyio.fail_after(60):
            async with client(server) as c:
                await c.call_tool("run_command", {"command": "true"})
                await anyio.sleep(4)  # past --first-call-timeout, within the idle timeout
                assert (await c.call_tool("run_command", {"command": "echo kept"})).structured_content[
                    "stdout"
                ] == "kept\n"

    with HttpServer(tmp_path, "--sandbox", "none", "--first-call-timeout", "2", "--max-sessions", "2") as server:
        idle = initialize(server)
        anyio.run(one_call, server)
        wait_until(lambda: any("no tool call within 2.0s" in r for r in closed_reasons(server)), 20)
        again = httpx.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**AUTH, "mcp-session-id": idle.headers["mcp-session-id"]},
            timeout=10,
        )
        assert again.status_code == 404 and "no tool call within" in again.json()["error"]["message"]
        # the ended session freed its place, in the SDK too (which also caps at --max-sessions)
        assert [initialize(server).status_code for _ in range(2)] == [200, 200]


def test_past_the_connection_cap_a_new_connection_closes_the_oldest_that_holds_nothing(tmp_path):
    """A connection with no request in flight holds nothing a client needs: past --max-connections the oldest such
    one (here, one whose headers never end) is closed for the new one, which had been closed itself, so idle
    connections kept every new client out; the rest are closed once idle for CONNECTION_IDLE_S."""

    def closed_within(conn: socket.socket, seconds: float) -> bool:
        conn.settimeout(seconds)
        try:
            return conn.recv(1024) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    with HttpServer(tmp_path, "--sandbox", "none", *THREE_CONNECTIONS) as server:
        half_open = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        half_open.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
        silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(2)]
        newest = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        try:
            assert closed_within(half_open, 5)
            assert not closed_within(newest, 1)
            start = time.monotonic()
            assert all(closed_within(s, CONNECTION_IDLE_S + 10) for s in [*silent, newest])
            assert time.monotonic() - start < CONNECTION_IDLE_S + 10
        finally:
            for s in [half_open, *silent, newest]:
                s.close()
        assert initialize(server).status_code == 200


def test_connections_whose_request_body_trickles_in_are_closed_and_free_their_places(tmp_path):
    def slow_post(server: HttpServer) -> socket.socket:
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        headers = {**AUTH, "Host": f"127.0.0.1:{server.port}", "Content-Length": "1000000"}
        conn.sendall(
            ("POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n{").encode()
        )
        return conn

    with HttpServer(tmp_path, "--sandbox", "none", *THREE_CONNECTIONS) as server:
        session_id = initialize(server).headers["mcp-session-id"]
        slow = [slow_post(server) for _ in range(3)]
        trickling, start = set(slow), time.monotonic()
        try:
            while trickling and time.monotonic() - start < CONNECTION_IDLE_S + 10:
                readable, _, _ = select.select(list(trickling), [], [], 1)
                for conn in readable:
                    try:
                        closed = conn.recv(1024) == b""
                    except OSError:
                        closed = True
                    if closed:
                        trickling.discard(conn)
                for conn in list(trickling):
                    try:
                        conn.sendall(b" ")  # a byte a second: the body never ends
                    except OSError:
                        trickling.discard(conn)
            assert not trickling, f"{len(trickling)} slow connections still open after {CONNECTION_IDLE_S + 10}s"
        finally:
            for conn in slow:
                conn.close()
        tools = httpx.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**AUTH, "mcp-session-id": session_id, "mcp-protocol-version": INIT["params"]["protocolVersion"]},
            timeout=10,
        )
        assert tools.status_code == 200 and "run_command" in tools.text


def serve(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        serve_argv("--runs", tmp_path / "runs", "--transcripts", tmp_path / "tr", "--sandbox", "none", *extra),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_taken_port_is_one_clear_line_and_exit_1_before_any_token_is_printed(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = serve(tmp_path, "--transport", "http", "--port", str(port))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"jg-mcp serve: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    assert not list(tmp_path.glob("tr/*.jsonl"))


def test_http_options_under_stdio_are_refused_and_help_shows_defaults(tmp_path):
    done = serve(tmp_path, "--port", str(free_port()))
    assert done.returncode == 2 and "--host and --port apply to --transport http only" in done.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "jg_mcp", "serve", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    flat = " ".join(shown.split())
    assert "streamable HTTP at http://HOST:PORT/mcp" in flat and "(default: stdio)" in flat
    assert "(default: 32)" in flat and "(default: 120)" in flat and "[8765; http only]" in flat
    assert "tool calls in flight a session (default: 4)" in flat and "a session holds (default: 6)" in flat
    assert "sessions a token holds [--max-sessions/tokens]" in flat


@pytest.mark.skipif(
    BWRAP_MISSING is not None or os.geteuid() != 0,
    reason=BWRAP_MISSING or "sandbox uids are used only by a root server",
)
def test_an_idle_session_is_ended_and_gives_its_sandbox_uid_back(tmp_path):
    def rpc(server: HttpServer, session_id: str, message: dict) -> str:
        headers = {**AUTH, "mcp-session-id": session_id, "mcp-protocol-version": INIT["params"]["protocolVersion"]}
        return httpx.post(server.url, json={"jsonrpc": "2.0", **message}, headers=headers, timeout=30).text

    with HttpServer(tmp_path, "--sandbox", "bwrap", "--idle-timeout", "2") as server:
        session_id = initialize(server).headers["mcp-session-id"]
        rpc(server, session_id, {"method": "notifications/initialized"})
        answer = rpc(
            server,
            session_id,
            {"id": 2, "method": "tools/call", "params": {"name": "run_command", "arguments": {"command": "id -u"}}},
        )
        uid = int(json.loads(answer.split("data: ", 1)[1].split("\n", 1)[0])["result"]["structuredContent"]["stdout"])
        lock = LOCK_DIR / str(uid)
        assert lock in open_files(server.proc.pid)  # the live session holds its uid's lock
        wait_until(lambda: any(r.startswith("idle: no request for 2.0s") for r in closed_reasons(server)), 20)
        # given back by the running server; another test's server may take the uid next, so its lock is not the test
        wait_until(lambda: lock not in open_files(server.proc.pid), 20)


def open_files(pid: int) -> set[Path]:
    """The files process `pid` has open now (a descriptor closed while read is left out)."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.add(Path(os.readlink(fd)))
        except FileNotFoundError:
            continue
    return found
