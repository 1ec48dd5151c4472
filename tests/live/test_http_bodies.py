"""Request bodies over HTTP: the same size limit as a stdio message, and a body past it is refused while it is
read, never held whole (a `jg-mcp serve --transport http` subprocess spoken to over raw sockets)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from jg_mcp.live.stdio import LINE_LIMIT_BYTES
from tests.support import INIT, MCP_HEADERS, TOKEN, HttpServer, client, wait_until

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


def send_part(server: HttpServer, session_id: str, size: int) -> socket.socket:
    """A connection that sent `size` bytes of a body of MAX_BODY_BYTES and not its end, or less if the server
    refused it meanwhile."""
    from jg_mcp.live.bodies import MAX_BODY_BYTES

    part = b"A" * MIB
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.sendall(post_head(server, session_id, f"Content-Length: {MAX_BODY_BYTES}"))
        for start in range(0, size, MIB):
            conn.sendall(part[: min(MIB, size - start)])
    return conn


def refused(conns: list[socket.socket], seconds: float = 5) -> bytes:
    """What the server answered on the first of `conns` it refused, before it closed it (b"" if it reset it first).
    Which one it refuses depends on how far it has read into each, so all are looked at together; for no longer
    than CONNECTION_IDLE_S, after which the server closes a connection whose body has not arrived anyway."""
    ready, _, _ = select.select(conns, [], [], seconds)
    assert ready, f"no body refused in {seconds}s"
    answered = answer(ready[0])
    assert answered is not None, "the server answered, but kept the connection open"
    return answered


def test_bodies_held_at_once_over_all_connections_are_bounded(tmp_path):
    """One body is bounded by the limit, but every connection may send one: four sessions each part-way into a
    body at the limit hold all of MAX_BODIES_HELD_BYTES, and one of them or a fifth body, which would take the total
    past it, is refused as it is read (503); once those requests end, the server serves again."""
    from jg_mcp.live.bodies import MAX_BODIES_HELD_BYTES, MAX_BODY_BYTES

    with HttpServer(tmp_path, "--sandbox", "none") as server:
        sessions = [open_session(server) for _ in range(MAX_BODIES_HELD_BYTES // MAX_BODY_BYTES + 1)]
        before = memory_mib(server.proc.pid, "VmHWM")
        holding: list[socket.socket] = []
        try:
            for session_id in sessions[:-1]:
                holding.append(send_part(server, session_id, MAX_BODY_BYTES - 1))
            holding.append(send_part(server, sessions[-1], 8 * MIB))
            answered = refused(holding)
            assert answered == b"" or answered.startswith(b"HTTP/1.1 503 "), answered[:200]
            assert memory_mib(server.proc.pid, "VmHWM") - before < MAX_BODIES_HELD_BYTES // MIB + 200
        finally:
            for conn in holding:
                conn.close()
        assert httpx.post(server.url, json=INIT, headers=AUTH, timeout=30).status_code == 200


def messages(response: httpx.Response) -> list[dict]:
    """The JSON-RPC messages of a streamable HTTP answer, JSON or server-sent events."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:]]


class Pinger:
    """Pings a session over and over from a thread of its own, keeping each answer's latency: how long the server's
    event loop, which answers every session, was kept from it."""

    def __init__(self, server: HttpServer, session_id: str):
        self.server, self.session_id = server, session_id
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        headers = {**AUTH, "mcp-session-id": self.session_id}
        with httpx.Client(timeout=120) as http:
            while not self.stop.is_set():
                start = time.monotonic()
                http.post(self.server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
                self.latencies.append(time.monotonic() - start)
                self.stop.wait(0.05)

    def __enter__(self) -> Pinger:
        self.thread.start()
        wait_until(lambda: len(self.latencies) >= 3, 30)
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            seen = len(self.latencies)
            wait_until(lambda: len(self.latencies) >= seen + 3, 60)
        self.stop.set()
        self.thread.join(120)


def test_a_body_of_millions_of_empty_arrays_is_refused_unparsed_while_other_sessions_are_answered(tmp_path):
    """A body was bounded by its bytes only: 12 MB of `[],[],...` were parsed up to three times on the event loop
    (the first-call check, then the SDK) before any size check, growing the server by a GiB and keeping every
    session waiting for seconds. A body is measured as a stdio line is, in a worker thread: one holding more than
    MAX_REQUEST_VALUES values is refused before anything parses it, answered with the limit and recorded by its
    size (one that would open a session: 413), while another session's pings are answered."""
    from jg_mcp.live.measure import MAX_REQUEST_VALUES

    junk = b",".join([b"[]"] * 4_000_000)
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_command","arguments":'
    call += b'{"command":"touch parsed"},"junk":[' + junk + b"]}}"
    init = json.dumps(INIT).encode()[:-2] + b',"junk":[' + junk + b"]}}"
    limit = f"limit of {MAX_REQUEST_VALUES} JSON values"
    with HttpServer(tmp_path, "--sandbox", "none") as server, httpx.Client(timeout=120) as http:
        victim, attacker = open_session(server), open_session(server)
        before = memory_mib(server.proc.pid, "VmHWM")
        with Pinger(server, victim) as pinger:
            refused = http.post(server.url, content=call, headers={**AUTH, "mcp-session-id": attacker})
            opening = http.post(server.url, content=init, headers=AUTH)
        grown = memory_mib(server.proc.pid, "VmHWM") - before
        assert grown < 100, f"the server's peak memory grew by {grown} MiB for two bodies of {len(junk) >> 20} MiB"
        worst = max(pinger.latencies)
        assert worst < 2, f"another session's ping waited {worst:.2f} s"
        [error] = messages(refused)
        assert error["id"] == 7 and limit in error["error"]["message"], str(error)[:300]
        assert opening.status_code == 413 and limit in opening.json()["error"]["message"], opening.text[:300]
    [request] = [
        e
        for events in server.transcripts_by_run().values()
        for e in events.events
        if e.event == "request" and e.request_id == 7
    ]
    assert request.method == "tools/call" and request.params is None and request.params_size > len(junk)
    assert not list((tmp_path / "runs").glob("*/workspace/parsed"))


def padded_call(rid: str, command: str, size: int) -> Iterator[bytes]:
    """A run_command request of `size` bytes, nearly all of it JSON whitespace, sent a MiB at a time."""
    call = {"name": "run_command", "arguments": {"command": command, "timeout_s": 60}}
    text = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": call})
    yield text[:-1].encode()
    left, blank = size - len(text), b" " * MIB
    while left > 0:
        yield blank[:left]
        left -= MIB
    yield b"}"


def test_sessions_holding_long_calls_with_padded_bodies_keep_no_other_session_waiting(tmp_path):
    """The bytes of the bodies held at once are bounded; a body counted whole until its request was answered, so
    long commands whose bodies were padded with JSON whitespace (within the request limit) held the whole budget,
    and every other session got 503 for as long as they ran. A padded body is handed on compacted, and counts
    only what is left of it once read: two sessions sending half the budget each in such bodies hold next to
    nothing."""
    from jg_mcp.live.bodies import MAX_BODIES_HELD_BYTES
    from jg_mcp.live.stdio import MAX_REQUEST_BYTES

    lock = tmp_path / "lock"
    command = f"flock {lock} echo held"
    full, last = divmod(MAX_BODIES_HELD_BYTES // 2, MAX_REQUEST_BYTES - 1024)
    sizes = [MAX_REQUEST_BYTES - 1024] * full + [last] * (last > 1024)
    answers: dict[str, httpx.Response] = {}
    shares = ("--max-sessions", "4", "--max-session-calls", str(len(sizes)), "--max-session-connections", "16")
    with HttpServer(tmp_path, "--sandbox", "none", *shares) as server:  # every call within its session's share
        victim = open_session(server)

        def recorded(rid: str) -> bool:
            text = b"".join(p.read_bytes() for p in server.transcripts.glob("*.jsonl"))
            return b'"request_id":"%s"' % rid.encode() in text or rid in answers

        def hold(rid: str, session_id: str, size: int) -> None:
            with httpx.Client(timeout=120) as http:
                body = padded_call(rid, command, size)
                answers[rid] = http.post(server.url, content=body, headers={**AUTH, "mcp-session-id": session_id})

        def attack(name: str) -> None:
            """Send the padded calls one after another, each once the one before is running."""
            session_id = open_session(server)
            for n, size in enumerate(sizes):
                threading.Thread(target=hold, args=(f"{name}-{n}", session_id, size), daemon=True).start()
                wait_until(lambda n=n: recorded(f"{name}-{n}"), 60)

        attackers = [threading.Thread(target=attack, args=(name,)) for name in ("a", "b")]
        held = lock.open("w")
        fcntl.flock(held, fcntl.LOCK_EX)  # the commands wait for it, not polling
        try:
            for attacker in attackers:
                attacker.start()
            for attacker in attackers:
                attacker.join(120)
            with httpx.Client(timeout=60) as http:
                call = {"name": "run_command", "arguments": {"command": "echo served"}}
                body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}
                served = http.post(server.url, json=body, headers={**AUTH, "mcp-session-id": victim})
                assert served.status_code == 200, served.text[:300]
                assert messages(served)[0]["result"]["structuredContent"]["stdout"] == "served\n"
                assert http.post(server.url, json=INIT, headers=AUTH).status_code == 200
        finally:
            held.close()
        wait_until(lambda: len(answers) == 2 * len(sizes), 60)
        for answered in answers.values():
            [held] = messages(answered)
            assert held["result"]["structuredContent"]["stdout"] == "held\n", str(held)[:300]


def test_one_session_may_hold_no_more_than_its_share_of_the_bodies_held(tmp_path):
    """Bodies still arriving count whole: one session sending four bodies at the limit at once had held all of
    MAX_BODIES_HELD_BYTES, every other session refused. A session holds at most SESSION_BODIES_BYTES (two bodies at
    the limit): one of its bodies that would take it past that is refused as it is read (503), and another session
    is served meanwhile."""
    from jg_mcp.live.bodies import MAX_BODY_BYTES, SESSION_BODIES_BYTES

    with HttpServer(tmp_path, "--sandbox", "none") as server:
        victim, attacker = open_session(server), open_session(server)
        holding: list[socket.socket] = []
        try:
            for _ in range(SESSION_BODIES_BYTES // MAX_BODY_BYTES):
                holding.append(send_part(server, attacker, MAX_BODY_BYTES - 1))
            holding.append(send_part(server, attacker, 8 * MIB))
            answered = refused(holding)
            assert answered == b"" or answered.startswith(b"HTTP/1.1 503 "), answered[:200]
            with httpx.Client(timeout=60) as http:
                call = {"name": "run_command", "arguments": {"command": "echo served"}}
                body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}
                served = http.post(server.url, json=body, headers={**AUTH, "mcp-session-id": victim})
                assert served.status_code == 200, served.text[:300]
                assert http.post(server.url, json=INIT, headers=AUTH).status_code == 200
        finally:
            for conn in holding:
                conn.close()
