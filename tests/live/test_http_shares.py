"""Fair shares over HTTP: a client holding all it may (sessions, slow calls, idle connections) beside a victim that
must still connect, initialize, list and call promptly, its existing session kept; and the caps' refusals."""

from __future__ import annotations

import secrets
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support import INIT, MCP_HEADERS, TOKEN, HttpServer, client, serve_argv

pytestmark = pytest.mark.slow
VERSION = INIT["params"]["protocolVersion"]
SESSIONS = 6
CONNECTIONS = 40
"""Six sessions of six connections each (the default share) leave four for a new client; the hog asks for more."""
CAPS = ("--sandbox", "none", "--max-sessions", str(SESSIONS), "--max-connections", str(CONNECTIONS))
CALLS_EACH = 16
"""Slow calls the hog sends at once on each of its sessions: more than the connections it may hold."""
CAP_NAMES = ("(--max-session-calls)", "(--max-session-connections)")


@dataclass
class Hog:
    """A client that opens what it may and holds it: sessions, slow calls on each, then idle connections."""

    server: HttpServer
    token: str
    marker: str = field(default_factory=lambda: f"{60 + secrets.randbelow(1000) / 1000:.3f}")
    """The slow command's seconds, unique to this test so its processes can be counted."""
    answers: list[httpx.Response] = field(default_factory=list)
    failures: list[Exception] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    idle: list[socket.socket] = field(default_factory=list)
    peak: int = 0
    """The hog's slow commands running once its calls settled."""

    def headers(self, session: str | None = None) -> dict[str, str]:
        extra = {"mcp-session-id": session, "mcp-protocol-version": VERSION} if session else {}
        return {**MCP_HEADERS, "Authorization": f"Bearer {self.token}", **extra}

    async def open(self, http: httpx.AsyncClient, most: int) -> httpx.Response | None:
        """Open sessions until `most` are open or one is refused; the refusal, if one was."""
        while len(self.sessions) < most:
            opened = await http.post(self.server.url, json=INIT, headers=self.headers())
            if opened.status_code != 200:
                return opened
            session = opened.headers["mcp-session-id"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(self.server.url, json=note, headers=self.headers(session))
            self.sessions.append(session)
        return None

    async def call(self, http: httpx.AsyncClient, session: str, rid: int) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"command": f"sleep {self.marker}"}},
        }
        try:
            self.answers.append(await http.post(self.server.url, json=body, headers=self.headers(session)))
        except httpx.HTTPError as exc:
            self.failures.append(exc)

    def running(self) -> int:
        """The hog's slow commands running now."""
        count = 0
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                count += cmdline.read_bytes() == f"sleep\0{self.marker}\0".encode()
            except OSError:
                continue
        return count

    def fill(self) -> None:
        """Open as many idle connections as the server takes connections at all."""
        self.idle = [socket.create_connection(("127.0.0.1", self.server.port), timeout=5) for _ in range(CONNECTIONS)]

    def close(self) -> None:
        for s in self.idle:
            s.close()


async def hog_then(hog: Hog, most_sessions: int, victim) -> httpx.Response | None:
    """Open the hog's sessions, send its calls and fill the connections, then run `victim` (bounded) beside them;
    the hog's refusal of one more session, if it got one."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(90, connect=5)) as http:
        with anyio.fail_after(30):
            refused = await hog.open(http, most_sessions)
        async with anyio.create_task_group() as tg:
            fired = 0
            for session in hog.sessions:
                for _ in range(CALLS_EACH):
                    fired += 1
                    tg.start_soon(hog.call, http, session, fired)
            with anyio.move_on_after(30):  # until every call is answered, failed or running
                while len(hog.answers) + len(hog.failures) + hog.running() < fired:
                    await anyio.sleep(0.1)
            hog.peak = hog.running()
            await anyio.to_thread.run_sync(hog.fill)
            await victim()
            tg.cancel_scope.cancel()
    return refused


async def victim_calls(server: HttpServer, token: str, existing) -> None:
    """A new session that connects, initializes, lists and calls within 20 s, and a call of the `existing` one; no
    session was closed meanwhile."""
    with anyio.fail_after(20):
        assert (await existing.call_tool("run_command", {"command": "echo still here"})).structured_content[
            "stdout"
        ] == "still here\n"
        async with client(server, token) as fresh:
            assert "run_command" in {t.name for t in (await fresh.list_tools()).tools}
            done = await fresh.call_tool("run_command", {"command": "echo served"})
            assert done.structured_content["stdout"] == "served\n"
            closed = [t.events[-1].reason for t in server.transcripts_by_run().values() if t.closed]
            assert closed == [], f"sessions closed while the hog held its share: {closed}"


def test_a_hog_with_many_sessions_and_slow_calls_leaves_a_new_and_an_existing_session_served(tmp_path):
    with HttpServer(tmp_path, *CAPS) as server:
        hog = Hog(server, TOKEN)

        async def scenario() -> None:
            async with client(server) as existing:
                await existing.call_tool("run_command", {"command": "true"})

                async def victim() -> None:
                    await victim_calls(server, TOKEN, existing)

                await hog_then(hog, SESSIONS - 2, victim)

        try:
            anyio.run(scenario)
        finally:
            hog.close()
        caps = {cap for a in hog.answers for cap in CAP_NAMES if cap in a.json()["error"]["message"]}
        assert caps == set(CAP_NAMES)  # each refusal names its cap
        assert {a.status_code for a in hog.answers} == {429}  # the calls let in are still running
        assert hog.peak == 4 * len(hog.sessions)  # the default share of calls in flight, each session's
        notices = [e.message for t in server.transcripts_by_run().values() for e in t.events if e.event == "notice"]
        assert {cap for cap in CAP_NAMES for n in notices if cap in n} == set(CAP_NAMES)  # refusals are recorded


def test_a_token_holder_keeps_its_share_of_sessions_while_another_holds_all_of_its_own(tmp_path):
    hog_token, victim_token = TOKEN, "victim-" + secrets.token_urlsafe(24)
    with HttpServer(tmp_path, *CAPS, token=f"{hog_token}\n{victim_token}") as server:
        hog = Hog(server, hog_token)

        async def scenario() -> httpx.Response | None:
            async with client(server, victim_token) as existing:
                await existing.call_tool("run_command", {"command": "true"})

                async def victim() -> None:
                    await victim_calls(server, victim_token, existing)
                    foreign = httpx.post(
                        server.url,
                        json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                        headers=hog.headers(hog.sessions[0]) | {"Authorization": f"Bearer {victim_token}"},
                        timeout=10,
                    )
                    assert foreign.status_code == 404 and "for this token" in foreign.json()["error"]["message"]

                return await hog_then(hog, SESSIONS, victim)

        try:
            refused = anyio.run(scenario)
        finally:
            hog.close()
        assert len(hog.sessions) == SESSIONS // 2
        assert refused is not None and refused.status_code == 429
        assert "this token holds 3 sessions at once (--max-token-sessions)" in refused.json()["error"]["message"]
        assert {a.status_code for a in hog.answers} == {429} and hog.peak == 4 * len(hog.sessions)


@pytest.mark.parametrize(
    ("caps", "reason"),
    [
        (
            ("--max-sessions", "8", "--max-connections", "48"),
            "--max-connections 48 must exceed --max-sessions 8 x --max-session-connections 6 = 48",
        ),
        (
            ("--max-session-calls", "6", "--max-session-connections", "6"),
            "--max-session-calls 6 must be below --max-session-connections 6",
        ),
        (("--max-session-connections", "1"), "--max-session-calls 4 must be below --max-session-connections 1"),
        (("--max-sessions", "1"), "2 tokens and --max-sessions 1: each token needs a session of its own"),
        (
            ("--max-sessions", "4", "--max-token-sessions", "3"),
            "2 tokens x --max-token-sessions 3 sessions exceeds --max-sessions 4",
        ),
    ],
)
def test_caps_that_leave_a_client_no_room_are_refused_before_the_port_is_taken(tmp_path, caps, reason):
    (tmp_path / "tokens").write_text(f"{TOKEN}\n{TOKEN[::-1]}\n")
    done = subprocess.run(
        serve_argv(
            *("--transport", "http", "--runs", tmp_path / "runs", "--transcripts", tmp_path / "tr"),
            *("--sandbox", "none", "--token-file", tmp_path / "tokens", *caps),
        ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert reason in done.stderr and "serving over HTTP" not in done.stderr


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        (f"{TOKEN}\n\n{TOKEN}\n", "holds a token twice"),
        (f"{TOKEN}\nshort\n", "a token in"),
        ("\n \n", "holds no token"),
    ],
)
def test_a_token_file_holds_one_distinct_token_a_line(tmp_path, text, refusal):
    from jg_mcp.live.http import HttpRefused, read_tokens

    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(HttpRefused, match=refusal):
        read_tokens(path, "127.0.0.1")
    path.write_text(f"  {TOKEN}\n\n{TOKEN[::-1]}  \n")
    assert read_tokens(path, "127.0.0.1") == ([TOKEN, TOKEN[::-1]], False)
