"""Streamable HTTP: bearer tokens, Host/Origin checks, and one Session per client connection (the pool of
those is `jg_mcp.live.connections`), shared fairly among sessions and token holders (`jg_mcp.live.shares`).

Requests pass three gates before the MCP SDK sees them: Host and Origin must name this
server exactly, with at most a port of digits (DNS-rebinding protection, `HostNames`; a foreign
Origin gets 403, a foreign Host 421), the
`Authorization: Bearer` token must be one of the server's (401 otherwise; each line of the token file is the token
of one holder), and the request must use a
handshake protocol version: the 2026 stateless era has no connection to hang a
workspace on, so it is refused with a JSON-RPC error and clients fall back to the
`initialize` handshake.

A request's body is read whole before the SDK sees it, within its limits, and examined off the event loop
(`jg_mcp.live.bodies`); one declared larger than MAX_BODY_BYTES is refused here at once.

Each session holds a workspace, a transcript and (as root) a sandbox uid, so sessions are
bounded: at most `max_sessions` live at once (a request for another gets 503 saying so); one
that makes no tool call within `first_call_s` of its start is ended, as is one with no request
in flight for `idle_s` (the SDK's idle timeout). Connections are bounded too: at most
`max_connections` open (past it, a new one closes one that holds nothing, `jg_mcp.live.shares`), and one whose next
request has not arrived whole (headers and body) CONNECTION_IDLE_S after it opened or its last response ended, plus a
second for each RECEIVE_RATE bytes it sent meanwhile, is closed, whatever state that request is in. What one session
and one token holder may hold of these (connections, tool calls in flight, sessions) is capped in
`jg_mcp.live.shares`, so no client starves another.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import secrets
import socket
from collections.abc import Generator
from pathlib import Path

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import model_validator
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from jg_mcp.errors import JgError, UsageError
from jg_mcp.live.bodies import MAX_BODY_BYTES, BodyReader, too_large
from jg_mcp.live.connections import SESSION_ID, ConnectionPool, Hold, end_without_first_call, jsonrpc_error
from jg_mcp.live.recording import note_refused
from jg_mcp.live.shares import Conn, Over, ShareLimits, Shares, Ticket, check
from jg_mcp.live.stdio import Refused
from jg_mcp.models import Strict

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
PORT = re.compile(r"[0-9]{1,5}")
"""A port as Host and Origin write it: ASCII digits only (`\\d` and str.isdigit take other scripts' digits too)."""
SHUTDOWN_GRACE_S = 3
CONNECTION_IDLE_S = 10
"""A connection whose next request has not arrived whole this long after it opened or its last response
ended (plus a second per RECEIVE_RATE bytes received) is closed."""
RECEIVE_RATE = 1024 * 1024
"""Bytes a second a client sending a large body is granted beyond CONNECTION_IDLE_S: one that trickles its
body in gives its connection back after CONNECTION_IDLE_S, one that uploads MAX_BODY_BYTES over a slow link
is not cut off."""
MAX_HEADER_BYTES = 64 * 1024


class HttpRefused(UsageError):
    """The HTTP options would expose the server unsafely (a usage error: exit 2)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_tokens(token_file: Path | None, host: str) -> tuple[list[str], bool]:
    """The bearer tokens, one a line of `token_file` (each the token of a holder of its own, who gets a share of
    the server: `jg_mcp.live.shares`), and whether the one token was generated. A non-loopback bind needs a file."""
    if token_file is not None:
        try:
            tokens = [line.strip() for line in Path(token_file).read_text().splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"--token-file {token_file}: {reason}") from None
        if not tokens:
            raise HttpRefused(f"{token_file} holds no token")
        if any(len(token) < 16 for token in tokens):
            raise HttpRefused(f"a token in {token_file} is shorter than 16 characters")
        if len(set(tokens)) < len(tokens):
            raise HttpRefused(f"{token_file} holds a token twice: each line is the token of one holder")
        return tokens, False
    if not is_loopback(host):
        raise HttpRefused(f"binding {host} (not loopback) needs an explicit token: pass --token-file")
    return [secrets.token_urlsafe(32)], True


def host_names(host: str, allowed_hosts: list[str] | None = None) -> list[str]:
    """The names Host and Origin may give this server: the loopback names, the bind address when it is not
    loopback or a wildcard, and the names clients use to reach a non-loopback bind (`--allow-host`)."""
    names = list(LOOPBACK_NAMES) + list(allowed_hosts or [])
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        names.append(f"[{host}]" if ":" in host else host)
    return names


def security_settings(host: str, allowed_hosts: list[str] | None = None) -> TransportSecuritySettings:
    """The SDK's Host and Origin allow-lists for `host_names`, which its app checks after the HttpGate's `HostNames`
    (stricter: the SDK's `name:*` takes any text after `name:` for a port)."""
    names = host_names(host, allowed_hosts)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names] + names,
        allowed_origins=[f"http://{n}:*" for n in names] + [f"http://{n}" for n in names],
    )


class HostNames:
    """The Host and Origin headers that name this server: one of `names` exactly, alone or with a port of digits
    (Origin: after `http://`, and nothing after the port). The SDK's own check takes `name:*` for `name:` and any
    text, so Host `127.0.0.1:18765.evil.com`, `localhost:evil` and Origin `http://127.0.0.1:80.evil.com` (a
    red-team finding; the first two are what a rebinding page's host may look like) had passed."""

    def __init__(self, names: list[str]):
        self.names = names

    def names_us(self, authority: str) -> bool:
        """Whether `authority` (a Host header, or an origin without its scheme) is a name, or a name and a port."""
        return any(
            authority == name or (authority.startswith(f"{name}:") and PORT.fullmatch(authority[len(name) + 1 :]))
            for name in self.names
        )

    def refusal(self, request: Request) -> Response | None:
        """421 for a Host that names no name of ours, 403 for an Origin (when there is one) that does not; else
        None."""
        if not self.names_us(request.headers.get("host", "")):
            return jsonrpc_error(421, "the Host header names no host this server answers to")
        origin = request.headers.get("origin")
        if origin and not (origin.startswith("http://") and self.names_us(origin[len("http://") :])):
            return jsonrpc_error(403, "the Origin header names no origin this server answers to")
        return None


class HttpGate:
    """ASGI middleware in front of the SDK app: Host/Origin, then the bearer token (which names its holder), then
    the era; then the session cap for requests that would open a session, and the session's and holder's shares
    (`jg_mcp.live.shares`); then the body, read within its budget and examined, and a note of each session's first
    tool call; then the session's share of tool calls in flight."""

    def __init__(self, app: ASGIApp, tokens: list[str], names: HostNames, pool: ConnectionPool, shares: Shares):
        self.app = app
        self.expected = [f"Bearer {token}".encode() for token in tokens]
        self.names = names
        self.pool = pool
        self.shares = shares
        self.bodies = BodyReader(pool)

    def holder(self, request: Request) -> int | None:
        """The index of the token the request carries, None for none of them. Every token is compared, so the time
        taken says nothing of which one came closest."""
        given = request.headers.get("authorization", "").encode()
        matches = [secrets.compare_digest(given, expected) for expected in self.expected]
        return matches.index(True) if any(matches) else None

    def screen(self, request: Request) -> Response | int:
        """The refusal of a request from the wrong name, without a token, of another era or declared too large; else
        the holder of its token."""
        refusal = self.names.refusal(request)
        if refusal is not None:
            return refusal
        holder = self.holder(request)
        if holder is None:
            return jsonrpc_error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return jsonrpc_error(
                400,
                f"protocol version {version} is not served: use the initialize handshake "
                f"({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}); every connection gets its own workspace",
            )
        declared = request.headers.get("content-length", "")
        if declared.isdecimal() and int(declared) > MAX_BODY_BYTES:
            return too_large()
        return holder

    def admit(self, request: Request, live: str | None) -> Ticket | Response:
        """The request's ticket in the shares, or its refusal: by `screen`, by the pool (an ended session, one past
        max_sessions) or by the shares. `live` is the live session it names."""
        screened = self.screen(request)
        if isinstance(screened, Response):
            return screened
        refusal = self.pool.admit(request.headers.get(SESSION_ID), request.method)
        if refusal is not None:
            return refusal
        entered = self.shares.enter(request.scope.get("client"), screened, live, request.method)
        return self.over(live, request.method, entered) if isinstance(entered, Over) else entered

    def over(self, live: str | None, what: str, over: Over) -> Response:
        """The answer to a request past a share; recorded as a notice in its session's transcript, where the agent's
        client shows it an error for a request that never reached the server."""
        if live is not None and live in self.pool.live:
            note_refused(self.pool.live[live].session, Refused(what, over.reason))
        return over.answer()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        session_id = request.headers.get(SESSION_ID)
        live = session_id if session_id is not None and session_id in self.pool.live else None
        ticket = self.admit(request, live)
        if isinstance(ticket, Response):
            await ticket(scope, receive, send)
            return
        hold = Hold(live)
        try:
            replay = await self.bodies.read(request.method, live, receive, hold)
            if isinstance(replay, Response):
                await replay(scope, receive, send)
                return
            over = self.shares.call(ticket) if hold.call else None
            if over is not None:
                await self.over(live, "tools/call", over)(scope, receive, send)
                return
            await self.app(scope, replay, self.shares.watch(ticket, send))
        finally:
            self.bodies.budget.give_back(hold, hold.bytes)
            self.shares.leave(ticket)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is announced; HttpRefused saying why it cannot be."""
    try:
        return socket.create_server(
            (host.strip("[]"), port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=128
        )
    except OSError as exc:
        raise JgError(f"cannot listen on {host}:{port}: {os.strerror(exc.errno) if exc.errno else exc}") from None


class HttpLimits(Strict):
    """How many sessions and connections the server holds, for how long, and how they are shared."""

    max_sessions: int = 32
    """Sessions live at once; a request that would open another gets 503."""
    first_call_s: float = 120
    """A session that makes no tool call within this many seconds of its start is ended."""
    idle_s: float = 900
    """A session with no request in flight for this many seconds is ended (the SDK's idle timeout)."""
    max_connections: int = 256
    """Open connections; past it, one with no request in flight is closed for a new one (`jg_mcp.live.shares`), and
    the new one is closed when there is none."""
    shares: ShareLimits = ShareLimits()
    """What one session and one token holder may hold of the above."""
    tokens: int = 1
    """The bearer tokens the server takes, each its holder's: the sessions are shared among them."""

    @model_validator(mode="after")
    def _room_for_everyone(self) -> HttpLimits:
        """Refuse caps that leave a client no room while the others hold their shares (a UsageError: exit 2)."""
        check(self.shares, self.max_sessions, self.max_connections, self.tokens)
        return self


async def serve_http(
    server: MCPServer,
    listener: socket.socket,
    host: str,
    tokens: list[str],
    stop: anyio.Event,
    pool: ConnectionPool,
    allowed_hosts: list[str] | None = None,
    limits: HttpLimits | None = None,
) -> None:
    """Serve `server` over streamable HTTP on `listener` (http://host:port/mcp) to the holders of `tokens` until
    `stop` is set, then shut down within a few seconds (open streams are cut after SHUTDOWN_GRACE_S)."""
    limits = limits or HttpLimits(tokens=len(tokens))
    settings = security_settings(host, allowed_hosts)
    sdk = server.streamable_http_app(
        transport_security=settings,
        host=host,
        max_request_body_size=MAX_BODY_BYTES,
        session_idle_timeout=limits.idle_s,
        max_sessions=limits.max_sessions,
    )
    shares = Shares(limits.shares, pool, limits.max_sessions, limits.max_connections, len(tokens))
    app = HttpGate(sdk, tokens, HostNames(host_names(host, allowed_hosts)), pool, shares)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        timeout_keep_alive=CONNECTION_IDLE_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=limits.max_connections + 1,
        http=_bounded_h11(shares),
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


def _bounded_h11(shares: Shares) -> type[H11Protocol]:
    class BoundedH11(H11Protocol):
        """uvicorn's h11 protocol that takes a connection only where `shares` has room for it (closing one that
        holds nothing to make that room, `Shares.accept`), and closes one whose next request has not arrived whole
        (headers and body) CONNECTION_IDLE_S after it opened or its last response ended, plus a second per
        RECEIVE_RATE bytes received since. uvicorn's own keep-alive timer stops at the first byte received, so
        without this a request whose headers or body never end would hold its connection for good. A request is in
        flight, and its connection kept, once its body is complete and until its response ends."""

        armed = 0.0
        received = 0
        deadline: asyncio.TimerHandle | None = None
        share: Conn | None = None

        # uvicorn's own signature, which narrows asyncio's BaseTransport to Transport (and ignores the override)
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            share = Conn(busy=self._in_flight, close=transport.close)
            if not shares.accept(self.client, share):
                transport.close()
                return
            self.share = share
            self._arm()

        def data_received(self, data: bytes) -> None:
            self.received += len(data)
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
            if self.share is not None:
                shares.closed(self.client, self.share)
            super().connection_lost(exc)

        def _in_flight(self) -> bool:
            return self.cycle is not None and not self.cycle.more_body and not self.cycle.response_complete

        def _arm(self) -> None:
            self.armed, self.received = self.loop.time(), 0
            self._check_in(CONNECTION_IDLE_S)

        def _check_in(self, seconds: float) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
            self.deadline = self.loop.call_later(seconds, self._close_if_late)

        def _close_if_late(self) -> None:
            if self._in_flight() or self.transport.is_closing():
                return
            left = self.armed + CONNECTION_IDLE_S + self.received / RECEIVE_RATE - self.loop.time()
            if left > 0:
                self._check_in(left)
            else:
                self.transport.close()

    return BoundedH11


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: `jg-mcp serve` handles signals and closes sessions."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield
