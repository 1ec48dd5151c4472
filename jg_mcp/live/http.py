"""Streamable HTTP: a bearer token, Host/Origin checks, and one Session per client connection.

Requests pass three gates before the MCP SDK sees them: Host and Origin must name this
server (DNS-rebinding protection; a foreign Origin gets 403, a foreign Host 421), the
`Authorization: Bearer` token must match (401 otherwise), and the request must use a
handshake protocol version: the 2026 stateless era has no connection to hang a
workspace on, so it is refused with a JSON-RPC error and clients fall back to the
`initialize` handshake.

Each session holds a workspace, a transcript and (as root) a sandbox uid, so sessions are
bounded: at most `max_sessions` live at once (a request for another gets 503 saying so); one
that makes no tool call within `first_call_s` of its start is ended, as is one with no request
in flight for `idle_s` (the SDK's idle timeout). Connections are bounded too: at most
`max_connections` open (more are closed on accept), and one that has no request in flight for
CONNECTION_IDLE_S, a fresh one whose request headers are incomplete included, is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import re
import secrets
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from jg_mcp import log
from jg_mcp.errors import JgError, UsageError
from jg_mcp.live.session import CLOSE_WAIT_S, Session
from jg_mcp.live.stdio import SURROGATE, unreadable

logger = log.get("jg_mcp.live.http")

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SHUTDOWN_GRACE_S = 3
CONNECTION_IDLE_S = 10
"""A connection with no request in flight for this long is closed (before its first request too)."""
MAX_HEADER_BYTES = 64 * 1024
SNIFF_BYTES = 4 * 1024 * 1024
"""A request body is read for its JSON-RPC method (to see a session's first tool call) up to this size."""
SESSION_ID = "mcp-session-id"
SURROGATE_BYTES = re.compile(SURROGATE.pattern.encode())


class HttpRefused(UsageError):
    """The HTTP options would expose the server unsafely (a usage error: exit 2)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(token_file: Path | None, host: str) -> tuple[str, bool]:
    """The bearer token and whether it was generated. A non-loopback bind needs an explicit one."""
    if token_file is not None:
        try:
            token = Path(token_file).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"--token-file {token_file}: {reason}") from None
        if len(token) < 16:
            raise HttpRefused(f"the token in {token_file} is shorter than 16 characters")
        return token, False
    if not is_loopback(host):
        raise HttpRefused(f"binding {host} (not loopback) needs an explicit token: pass --token-file")
    return secrets.token_urlsafe(32), True


def security_settings(host: str, allowed_hosts: list[str] | None = None) -> TransportSecuritySettings:
    """Host and Origin allow-lists: the loopback names, the bind address when it is not loopback or a
    wildcard, and the names clients use to reach a non-loopback bind (`--allow-host`)."""
    names = list(LOOPBACK_NAMES) + list(allowed_hosts or [])
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        names.append(f"[{host}]" if ":" in host else host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names] + names,
        allowed_origins=[f"http://{n}:*" for n in names] + [f"http://{n}" for n in names],
    )


def _jsonrpc_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


class Gate:
    """ASGI middleware in front of the SDK app: Host/Origin, then the bearer token, then the era; then the
    session cap for requests that would open a session, and a note of each session's first tool call."""

    def __init__(self, app: ASGIApp, token: str, settings: TransportSecuritySettings, pool: ConnectionPool):
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.security = TransportSecurityMiddleware(settings)
        self.pool = pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = await self.security.validate_request(request)
        if refusal is None and not secrets.compare_digest(
            request.headers.get("authorization", "").encode(), self.expected
        ):
            refusal = _jsonrpc_error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        version = request.headers.get("mcp-protocol-version")
        if refusal is None and version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            refusal = _jsonrpc_error(
                400,
                f"protocol version {version} is not served: use the initialize handshake "
                f"({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}); every connection gets its own workspace",
            )
        session_id = request.headers.get(SESSION_ID)
        if refusal is None:
            refusal = self.pool.admit(session_id, request.method)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if session_id is not None and request.method == "POST" and self.pool.awaits_first_call(session_id):
            receive = _sniffing(receive, lambda body: self.pool.note_request(session_id, body))
        if session_id is not None and request.method == "POST":
            receive = _answerable(receive)
        await self.app(scope, receive, send)


def _answerable(receive: Receive) -> Receive:
    """`receive` that hands the SDK a request it would refuse unrecorded and answer without its id (one whose
    strings hold a lone surrogate escape) as the stand-in that jg_mcp.live.stdio makes for it: recorded, and
    answered with its id and the reason. The body is read whole first (the SDK reads it whole anyway)."""
    done = False

    async def wrapped() -> Message:
        nonlocal done
        if done:
            return await receive()
        done = True
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if SURROGATE_BYTES.search(body) is not None:
            body = (unreadable(body.decode("utf-8", errors="replace")) or "").encode() or body
        return {"type": "http.request", "body": body, "more_body": False}

    return wrapped


def _sniffing(receive: Receive, on_body: Callable[[bytes], None]) -> Receive:
    """`receive` that also hands the request body (up to SNIFF_BYTES) to `on_body` once it is complete."""
    body = bytearray()

    async def wrapped() -> Message:
        message = await receive()
        if message["type"] == "http.request" and len(body) <= SNIFF_BYTES:
            body.extend(message.get("body", b""))
            if not message.get("more_body", False) and len(body) <= SNIFF_BYTES:
                on_body(bytes(body))
        return message

    return wrapped


def is_tool_call(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call"


def connection_of(request_session: ServerSession) -> Connection:
    """The client connection behind a request's ServerSession.

    mcp 2.3.0 builds a ServerSession per request and keeps the per-client Connection (whose `state`,
    `session_id` and `exit_stack` are public, documented for per-connection state and cleanup) in
    its private `_connection`, with no public accessor (python-sdk issue #2098; its own tests read
    it so). The public alternatives fall short: the `mcp-session-id` header of `request_context.request`
    is absent on `initialize`, which opens the session, and only the Connection's exit_stack learns
    every way a session ends (DELETE, idle timeout, a crash). tests/test_http.py checks this attribute,
    so an SDK upgrade that moves it fails there; then use the public accessor it brings."""
    connection = getattr(request_session, "_connection", None)
    if not isinstance(connection, Connection):
        raise RuntimeError(
            f"mcp {version('mcp')}: ServerSession._connection is {type(connection).__name__}, "
            "not a Connection; jg_mcp.live.http.connection_of needs the SDK's new accessor"
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
            return _jsonrpc_error(404, f"this session ended ({self.ended[session_id]}): initialize a new one")
        if (
            session_id is None
            and method == "POST"
            and self.max_sessions is not None
            and len(self.live) >= self.max_sessions
        ):
            return _jsonrpc_error(
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


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is announced; HttpRefused saying why it cannot be."""
    try:
        return socket.create_server(
            (host.strip("[]"), port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=128
        )
    except OSError as exc:
        raise JgError(f"cannot listen on {host}:{port}: {os.strerror(exc.errno) if exc.errno else exc}") from None


class HttpLimits(BaseModel):
    """How many sessions and connections the server holds, and for how long."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    max_sessions: int = 32
    """Sessions live at once; a request that would open another gets 503."""
    first_call_s: float = 120
    """A session that makes no tool call within this many seconds of its start is ended."""
    idle_s: float = 900
    """A session with no request in flight for this many seconds is ended (the SDK's idle timeout)."""
    max_connections: int = 256
    """Open connections; one past it is closed on accept."""


async def serve_http(
    server: MCPServer,
    listener: socket.socket,
    host: str,
    token: str,
    stop: anyio.Event,
    pool: ConnectionPool,
    allowed_hosts: list[str] | None = None,
    limits: HttpLimits | None = None,
) -> None:
    """Serve `server` over streamable HTTP on `listener` (http://host:port/mcp) until `stop` is set, then
    shut down within a few seconds (open streams are cut after SHUTDOWN_GRACE_S)."""
    limits = limits or HttpLimits()
    settings = security_settings(host, allowed_hosts)
    sdk = server.streamable_http_app(
        transport_security=settings, host=host, session_idle_timeout=limits.idle_s, max_sessions=limits.max_sessions
    )
    app = Gate(sdk, token, settings, pool)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        timeout_keep_alive=CONNECTION_IDLE_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=limits.max_connections + 1,
        http=_bounded_h11(limits.max_connections),
    )
    http = _Uvicorn(config)
    async with anyio.create_task_group() as tg:

        async def stop_on_request() -> None:
            await stop.wait()
            http.should_exit = True

        tg.start_soon(stop_on_request)
        tg.start_soon(end_without_first_call, pool, sdk, LOOPBACK_NAMES[0])
        await http.serve(sockets=[listener])
        tg.cancel_scope.cancel()


def _bounded_h11(max_connections: int) -> type[H11Protocol]:
    class BoundedH11(H11Protocol):
        """uvicorn's h11 protocol that closes a connection past `max_connections` at once, and one that has no
        request in flight CONNECTION_IDLE_S after it opened or its last response ended, incomplete headers
        included (uvicorn's own keep-alive timer stops at the first byte received)."""

        # uvicorn's own signature, which narrows asyncio's BaseTransport to Transport (and ignores the override)
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.close()
                return
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            self.idle_since = self.loop.time()
            self.loop.call_later(CONNECTION_IDLE_S, self._close_if_idle)

        def _close_if_idle(self) -> None:
            idle = self.cycle is None or self.cycle.response_complete
            if idle and not self.transport.is_closing() and self.loop.time() - self.idle_since >= CONNECTION_IDLE_S:
                self.transport.close()

    return BoundedH11


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: `jg-mcp serve` handles signals and closes sessions."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield
