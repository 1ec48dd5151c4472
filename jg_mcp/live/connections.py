"""One Session per MCP connection over streamable HTTP: the pool that opens a client's Session at its first
request, notes its activity, refuses requests past `max_sessions` or for an ended session, and releases the
Session when the connection ends (a DELETE, the SDK's idle timeout, no tool call within `first_call_s`, shutdown).
`jg_mcp.live.http` puts the pool behind its gates and runs the server."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version

import anyio
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from starlette.responses import Response
from starlette.types import ASGIApp, Message

from jg_mcp import log
from jg_mcp.live.session import CLOSE_WAIT_S, Session
from jg_mcp.live.stdio import PEEK, method_of

logger = log.get("jg_mcp.live.connections")

SESSION_ID = "mcp-session-id"


@dataclass
class Hold:
    """The bytes of one request's body the server holds, the session they count for (None: no live one), and
    whether the request is a tool call."""

    session: str | None
    bytes: int = 0
    call: bool = False


class BodyBudget:
    """The bytes of request bodies held now, in all (at most `total`) and by session (at most `per_session`, the
    requests of no live session counting as one): a session holding long calls with large bodies leaves the rest of
    the budget to the others. Used on the event loop only."""

    def __init__(self, total: int, per_session: int):
        self.total, self.per_session = total, per_session
        self.held = 0
        self.by_session: dict[str | None, int] = {}

    def take(self, hold: Hold, size: int) -> str | None:
        """Count `size` more bytes for `hold`; which limit is passed, if one is."""
        hold.bytes += size
        self.held += size
        self.by_session[hold.session] = self.by_session.get(hold.session, 0) + size
        if self.by_session[hold.session] > self.per_session:
            return f"this session holds {self.per_session} bytes of request bodies at once (its share)"
        if self.held > self.total:
            return f"the server holds {self.total} bytes of request bodies at once, over all sessions"
        return None

    def give_back(self, hold: Hold, size: int) -> None:
        """Count `size` bytes fewer for `hold`: the server no longer holds them."""
        hold.bytes -= size
        self.held -= size
        left = self.by_session.pop(hold.session, 0) - size
        if left:
            self.by_session[hold.session] = left


def jsonrpc_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def is_tool_call(body: bytes) -> bool:
    """Whether a request body is a tool call, by the method it names in its first or last bytes (where clients write
    it): a bounded look, since this runs on the event loop, where parsing a large body kept every session waiting.
    A client can mislead it only about its own session's first call."""
    return method_of(body[:PEEK], body[-PEEK:]) == "tools/call"


def connection_of(request_session: ServerSession) -> Connection:
    """The client connection behind a request's ServerSession.

    mcp 2.3.0 builds a ServerSession per request and keeps the per-client Connection (whose `state`,
    `session_id` and `exit_stack` are public, documented for per-connection state and cleanup) in
    its private `_connection`, with no public accessor (python-sdk issue #2098; its own tests read
    it so). The public alternatives fall short: the `mcp-session-id` header of `request_context.request`
    is absent on `initialize`, which opens the session, and only the Connection's exit_stack learns
    every way a session ends (DELETE, idle timeout, a crash). tests/live/test_http.py checks this attribute,
    so an SDK upgrade that moves it fails there; then use the public accessor it brings."""
    connection = getattr(request_session, "_connection", None)
    if not isinstance(connection, Connection):
        raise RuntimeError(
            f"mcp {version('mcp')}: ServerSession._connection is {type(connection).__name__}, "
            "not a Connection; jg_mcp.live.connections.connection_of needs the SDK's new accessor"
        )
    return connection


@dataclass
class Live:
    """A live session, when it was opened and last asked anything, and whether it made a tool call."""

    session: Session
    release: Callable[[], None]
    opened: float
    seen: float
    called: bool = False


class ConnectionPool:
    """One Session per MCP connection (streamable HTTP session), closed when the connection ends, when it
    makes no tool call within `first_call_s`, or at shutdown; at most `max_sessions` live at once.
    `make_session` returns the Session and what frees its sandbox (its uid).

    Releasing a session never blocks the event loop: its commands are killed at once, and its last scan
    and close event are left to a thread of its own (which then frees the uid); `close_all` waits for
    those threads, each close bounded by CLOSE_WAIT_S."""

    def __init__(
        self,
        make_session: Callable[[], tuple[Session, Callable[[], None]]],
        max_sessions: int | None = None,
        first_call_s: float | None = None,
        idle_s: float | None = None,
    ):
        self.make_session = make_session
        self.max_sessions = max_sessions
        self.first_call_s = first_call_s
        self.idle_s = idle_s
        self.live: dict[str, Live] = {}
        self.ended: OrderedDict[str, str] = OrderedDict()
        """Why recently ended sessions ended, by session id (the latest 1024), to answer their stragglers."""
        self.closing: list[threading.Thread] = []
        """The threads closing released sessions."""

    @property
    def open(self) -> list[Session]:
        return [live.session for live in self.live.values()]

    def get(self, request_session: ServerSession) -> Session:
        conn = connection_of(request_session)
        session = conn.state.get("jg_mcp.live.session")
        if session is None:
            session, release = self.make_session()
            key = conn.session_id or f"local-{id(conn)}"
            conn.state["jg_mcp.live.session"] = session
            self.live[key] = Live(session, release, time.monotonic(), time.monotonic())
            conn.exit_stack.callback(conn.state.pop, "jg_mcp.live.session", None)  # runs last: frees the Session
            conn.exit_stack.callback(self.connection_ended, key)
            logger.info("session started", run_id=session.run_id, workspace=str(session.workspace.root))
        return session

    def admit(self, session_id: str | None, method: str) -> Response | None:
        """Note a request's session as active; returns the answer to a request the SDK need not see (one for
        an ended session, one that would open a session past the cap), else None."""
        if session_id in self.live:
            self.live[session_id].seen = time.monotonic()
        if session_id is not None and session_id in self.ended:
            return jsonrpc_error(404, f"this session ended ({self.ended[session_id]}): initialize a new one")
        if (
            session_id is None
            and method == "POST"
            and self.max_sessions is not None
            and len(self.live) >= self.max_sessions
        ):
            return jsonrpc_error(
                503,
                f"jg-mcp serves at most {self.max_sessions} sessions at once (--max-sessions) and all are "
                f"open: end one (HTTP DELETE) or retry later; a session without a tool call ends after "
                f"{self.first_call_s}s, an idle one after {self.idle_s}s",
                {"Retry-After": "10"},
            )
        return None

    def awaits_first_call(self, session_id: str) -> bool:
        live = self.live.get(session_id)
        return live is not None and not live.called

    def note_request(self, session_id: str, body: bytes) -> None:
        live = self.live.get(session_id)
        if live is not None and is_tool_call(body):
            live.called = True

    def without_first_call(self, now: float) -> list[str]:
        """The sessions that made no tool call within first_call_s of their start."""
        if self.first_call_s is None:
            return []
        return [key for key, live in self.live.items() if not live.called and now - live.opened > self.first_call_s]

    def connection_ended(self, key: str) -> None:
        """The SDK ended the connection: the client's DELETE or going away, or its idle timeout."""
        live = self.live.get(key)
        idle = live is not None and self.idle_s is not None and time.monotonic() - live.seen >= self.idle_s
        self.release(key, f"idle: no request for {self.idle_s}s" if idle else "client disconnected")

    def release(self, key: str, reason: str) -> None:
        """End a session without waiting: kill its commands now, close it and free its uid in a thread."""
        live = self.live.pop(key, None)
        if live is None:
            return
        self.ended[key] = reason
        while len(self.ended) > 1024:
            self.ended.popitem(last=False)
        live.session.runner.kill_all()
        closer = threading.Thread(
            target=self._close, args=(live, reason), name=f"jg-close-{live.session.run_id}", daemon=True
        )
        self.closing = [t for t in self.closing if t.is_alive()] + [closer]
        closer.start()

    @staticmethod
    def _close(live: Live, reason: str) -> None:
        try:
            live.session.close(reason, wait_s=CLOSE_WAIT_S)
        finally:
            live.release()
        logger.info("session closed", run_id=live.session.run_id, reason=reason)

    def close_all(self, reason: str) -> None:
        """Release every session and wait for their closes (each bounded by CLOSE_WAIT_S). Blocks: call it off
        the event loop."""
        for key in list(self.live):
            self.release(key, reason)
        deadline = time.monotonic() + CLOSE_WAIT_S + 2
        for closer in list(self.closing):
            closer.join(max(0.0, deadline - time.monotonic()))


async def end_without_first_call(pool: ConnectionPool, app: ASGIApp, host: str, every_s: float = 1.0) -> None:
    """Every `every_s`, end the sessions that made no tool call in time: close the Session (transcript,
    commands, uid), then end the SDK's session with the DELETE a client would send."""
    while True:
        await anyio.sleep(every_s)
        for key in pool.without_first_call(time.monotonic()):
            pool.release(key, f"no tool call within {pool.first_call_s}s of the session's start")
            await _delete_session(app, key, host)


async def _delete_session(app: ASGIApp, session_id: str, host: str) -> None:
    """Send the SDK app the `DELETE /mcp` that ends `session_id` (its transport, its connection's exit stack)."""
    headers = [(b"host", host.encode()), (SESSION_ID.encode(), session_id.encode())]
    scope = {
        "type": "http",
        "method": "DELETE",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": headers,
        "http_version": "1.1",
        "scheme": "http",
        "server": None,
        "client": None,
        "root_path": "",
        "asgi": {"version": "3.0"},
    }
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        pass

    with anyio.move_on_after(5):
        await app(scope, receive, send)
