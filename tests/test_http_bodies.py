"""Request bodies over HTTP: the same size limit as a stdio message, and a body past it is refused while it is
read, never held whole (a `jg-mcp serve --transport http` subprocess spoken to over raw sockets)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import anyio
import httpx
import pytest

from jg_mcp.live.stdio import LINE_LIMIT_BYTES
from tests.support import INIT, MCP_HEADERS, TOKEN, HttpServer, client

pytestmark = pytest.mark.slow
MIB = 1024 * 1024
AUTH = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
TOOL_CALL_HEAD = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"write_file","arguments":{"content":"'


def open_session(server: HttpServer) -> str:
    session_id = httpx.post(server.url, json=INIT, headers=AUTH, timeout=30).headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx.post(server.url, json=initialized, headers={**AUTH, "mcp-session-id": session_id}, timeout=30)
    return session_id


def memory_mib(pid: int, field: str) -> int:
    """`field` (VmHWM: the peak resident size, VmRSS: the current one) of process `pid`, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def post_head(server: HttpServer, session_id: str, framing: str) -> bytes:
    headers = {**AUTH, "Host": f"127.0.0.1:{server.port}", "mcp-session-id": session_id}
    lines = ["POST /mcp HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items()), framing]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(conn: socket.socket, timeout_s: float = 20) -> bytes | None:
    """What the server sent before it closed the connection (b"" if it reset it first); None if it kept the
    connection open for `timeout_s`."""
    conn.settimeout(timeout_s)
    received = b""
    try:
        while chunk := conn.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        return None
    return received


def test_a_declared_body_over_the_limit_is_refused_at_once_with_the_limit_and_the_connection_closed(tmp_path):
    with HttpServer(tmp_path, "--sandbox", "none") as server:
        session_id = open_session(server)
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as conn:
            conn.sendall(post_head(server, session_id, f"Content-Length: {2 * 1024 * MIB}"))
            reply = answer(conn)
        assert reply is not None, "no answer and no close within 20s"
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), head
        message = json.loads(body)["error"]["message"]
        assert f"{LINE_LIMIT_BYTES} bytes" in message


def stream_chunked(server: HttpServer, session_id: str, total: int, baseline_rss: int) -> tuple[int, bytes | None]:
    """POST a chunked tool call of `total` bytes until the server stops reading; returns the bytes sent and its
    answer. Stops early once the server holds 400 MiB more than `baseline_rss` (the body is being buffered)."""
    sent = 0
    filler = b"A" * MIB
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MIB)
        try:
            conn.sendall(post_head(server, session_id, "Transfer-Encoding: chunked"))
            conn.sendall(b"%x\r\n%s\r\n" % (len(TOOL_CALL_HEAD), TOOL_CALL_HEAD))
            while sent < total and memory_mib(server.proc.pid, "VmRSS") - baseline_rss < 400:
                conn.sendall(b"%x\r\n%s\r\n" % (len(filler), filler))
                sent += len(filler)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return sent, answer(conn)


@pytest.mark.parametrize("session", ["live", "made up"])
def test_a_chunked_body_past_the_limit_is_cut_off_without_being_held(tmp_path, session):
    with HttpServer(tmp_path, "--sandbox", "none") as server:
        session_id = open_session(server) if session == "live" else "0123456789abcdef0123456789abcdef"
        before = memory_mib(server.proc.pid, "VmHWM")
        sent, answered = stream_chunked(server, session_id, 1024 * MIB, memory_mib(server.proc.pid, "VmRSS"))
        assert sent < LINE_LIMIT_BYTES + 64 * MIB, "the server read on past the limit"
        assert memory_mib(server.proc.pid, "VmHWM") - before < 200
        assert answered is not None, "the server neither answered nor closed the connection"
        assert answered == b"" or answered.startswith(b"HTTP/1.1 413 "), answered[:200]
        assert httpx.post(server.url, json=INIT, headers=AUTH, timeout=30).status_code == 200


def test_a_write_file_over_the_sdk_default_of_4_mib_is_accepted_over_http_as_over_stdio(tmp_path):
    content = "x" * (6 * MIB)

    async def write() -> dict:
        with anyio.fail_after(120):
            async with client(server) as c:
                result = await c.call_tool("write_file", {"path": "big.txt", "content": content})
                return result.structured_content or {}

    with HttpServer(tmp_path, "--sandbox", "none") as server:
        assert anyio.run(write)["size"] == len(content)


def test_bodies_held_at_once_over_all_connections_are_bounded(tmp_path):
    """One body is bounded by the limit, but every connection may send one: four connections each part-way into a
    body of 60 MiB hold 240 MiB, and a fifth body that would take the total past MAX_BODIES_HELD_BYTES is refused
    as it is read (503); once those requests end, the server serves again."""
    part = b"A" * MIB
    with HttpServer(tmp_path, "--sandbox", "none") as server:
        session_id = open_session(server)
        before = memory_mib(server.proc.pid, "VmHWM")
        holding = []
        try:
            for _ in range(4):
                conn = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                holding.append(conn)
                conn.sendall(post_head(server, session_id, "Transfer-Encoding: chunked"))
                for _ in range(60):
                    conn.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as fifth:
                fifth.sendall(post_head(server, session_id, "Transfer-Encoding: chunked"))
                try:
                    for _ in range(60):
                        fifth.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                except (BrokenPipeError, ConnectionResetError):
                    pass
                refused = answer(fifth)
            assert refused is not None, "the fifth body was neither refused nor cut off"
            assert refused == b"" or refused.startswith(b"HTTP/1.1 503 "), refused[:200]
            assert memory_mib(server.proc.pid, "VmHWM") - before < 4 * LINE_LIMIT_BYTES // MIB + 200
        finally:
            for conn in holding:
                conn.close()
        assert httpx.post(server.url, json=INIT, headers=AUTH, timeout=30).status_code == 200
