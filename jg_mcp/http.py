"""Streamable HTTP: a bearer token, Host/Origin checks, and one Session per client connection.

Requests pass three gates before the MCP SDK sees them: Host and Origin must name this
server (DNS-rebinding protection; a foreign Origin gets 403, a foreign Host 421), the
`Authorization: Bearer` token must match (401 otherwise), and the request must use a
handshake protocol version: the 2026 stateless era has no connection to hang a
workspace on, so it is refused with a JSON-RPC error and clients fall back to the
`initialize` handshake.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import secrets
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from jg_mcp import log
from jg_mcp.errors import JgError
from jg_mcp.session import Session

logger = log.get("jg_mcp.http")

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SHUTDOWN_GRACE_S = 3


class HttpRefused(JgError):
    """The HTTP options would expose the server unsafely."""


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
        token = Path(token_file).read_text().strip()
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
    """ASGI middleware in front of the SDK app: Host/Origin, then the bearer token, then the era."""

    def __init__(self, app: ASGIApp, token: str, settings: TransportSecuritySettings):
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.security = TransportSecurityMiddleware(settings)

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
                400, f"protocol version {version} is not served: use the initialize handshake "
                f"({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}); every connection gets its own workspace",
            )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


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
        raise RuntimeError(f"mcp {version('mcp')}: ServerSession._connection is {type(connection).__name__}, "
                           "not a Connection; jg_mcp.http.connection_of needs the SDK's new accessor")
    return connection


class ConnectionPool:
    """One Session per MCP connection (streamable HTTP session), closed when the connection ends."""

    def __init__(self, make_session: Callable[[], Session]):
        self.make_session = make_session
        self.open: list[Session] = []

    def get(self, request_session: ServerSession) -> Session:
        conn = connection_of(request_session)
        session = conn.state.get("jg_mcp.session")
        if session is None:
            session = self.make_session()
            conn.state["jg_mcp.session"] = session
            self.open.append(session)
            conn.exit_stack.callback(conn.state.pop, "jg_mcp.session", None)  # runs last: frees the Session
            conn.exit_stack.callback(self.release, session, "client disconnected")
            logger.info("session started", run_id=session.run_id, workspace=str(session.workspace.root))
        return session

    def release(self, session: Session, reason: str) -> None:
        session.close(reason)
        if session in self.open:
            self.open.remove(session)
        logger.info("session closed", run_id=session.run_id, reason=reason)

    def close_all(self, reason: str) -> None:
        for session in list(self.open):
            self.release(session, reason)


async def serve_http(
    server: MCPServer, host: str, port: int, token: str, stop: anyio.Event, allowed_hosts: list[str] | None = None
) -> None:
    """Serve `server` over streamable HTTP at http://host:port/mcp until `stop` is set, then shut
    down within a few seconds (open streams are cut after SHUTDOWN_GRACE_S)."""
    settings = security_settings(host, allowed_hosts)
    app = Gate(server.streamable_http_app(transport_security=settings, host=host), token, settings)
    config = uvicorn.Config(
        app, host=host.strip("[]"), port=port, log_level="warning", lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    http = _Uvicorn(config)
    async with anyio.create_task_group() as tg:

        async def stop_on_request() -> None:
            await stop.wait()
            http.should_exit = True

        tg.start_soon(stop_on_request)
        await http.serve()
        tg.cancel_scope.cancel()


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: `jg-mcp serve` handles signals and closes sessions."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()
