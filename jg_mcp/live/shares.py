"""Fair shares of the HTTP server: no client can take the connections, sessions or calls another needs.

A client is a token holder (the token file may hold several tokens, one a line, each a holder of its own) and, within
that, a session. Every cap below is a share of one of the server's own caps (`max_connections`, `max_sessions`), sized
so that while every other session and holder holds its whole share, what is left still lets a new client connect and
initialize, and every existing session make progress:

- a session has at most `session_connections` connections (its requests in flight, and the connections it used last
  and keeps open between requests) and at most `session_calls` tool calls in flight, fewer than its connections, so a
  session at its call cap can still list, cancel or end;
- a token holder has at most `token_sessions` sessions live or opening, its share of `max_sessions`; so at most
  `token_sessions * session_connections` connections and `token_sessions * session_calls` calls;
- `max_sessions * session_connections` is less than `max_connections`: when every session holds all it may, one
  connection is still free for a new client's `initialize`;
- a connection that has no request in flight (never sent one, still sending its headers or body, or idle between
  requests) holds nothing anyone needs: when the server is at `max_connections`, a new connection closes the oldest
  such one that names no session, else an idle one of the session holding the most, instead of being closed itself.

With one token (the default: one is generated, or the token file holds one line) every client is the same holder, so
the sessions and connections are shared per session only: a client that opens `max_sessions` sessions leaves no
session for another, who is told so at once (503), but every existing session keeps its connections and calls. Give
each client a token of its own (a line each in the token file) to reserve sessions for each.

A request past a cap is answered at once with 429 and a JSON-RPC error naming the cap and its option, and the
connection it came on is closed when that is what it would have held.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import Field
from starlette.responses import Response
from starlette.types import Message, Send

from jg_mcp.errors import UsageError
from jg_mcp.live.connections import SESSION_ID, ConnectionPool, jsonrpc_error
from jg_mcp.models import Strict

RETRY_AFTER_S = "2"
"""Seconds a client refused past its share is told to wait (Retry-After): a slot frees as one of its own calls ends."""


class ShareLimits(Strict):
    """How much of the server one session and one token holder may hold at once."""

    session_calls: int = Field(4, ge=1)
    """Tool calls one session has in flight; another gets 429. Each holds a connection and (run_command) processes
    until it ends; a session at this cap still has connections left to list, cancel or end."""
    session_connections: int = Field(6, ge=1)
    """Connections one session holds (requests in flight, and those kept open between its requests); a request that
    would take another gets 429 and its connection closed, once the session's idle ones are closed. Room for its
    calls, the SDK's GET stream and a request beside them."""
    token_sessions: int | None = Field(None, ge=1)
    """Sessions one token holder has live or opening; another gets 429. None: `max_sessions` divided among the
    tokens, so each holder's share is reserved for it."""


def check(limits: ShareLimits, max_sessions: int, max_connections: int, holders: int) -> int:
    """The sessions each token holder may hold; a UsageError (exit 2) when the caps leave a client no room."""
    if limits.session_calls >= limits.session_connections:
        raise UsageError(
            f"--max-session-calls {limits.session_calls} must be below --max-session-connections "
            f"{limits.session_connections}: a session at its call cap needs a connection to cancel or end"
        )
    if max_sessions * limits.session_connections >= max_connections:
        raise UsageError(
            f"--max-connections {max_connections} must exceed --max-sessions {max_sessions} x "
            f"--max-session-connections {limits.session_connections} = {max_sessions * limits.session_connections}, "
            "so a new client finds a connection while every session holds its share"
        )
    if holders > max_sessions:
        raise UsageError(f"{holders} tokens and --max-sessions {max_sessions}: each token needs a session of its own")
    token_sessions = limits.token_sessions or max_sessions // holders
    if holders * token_sessions > max_sessions:
        raise UsageError(
            f"{holders} tokens x --max-token-sessions {token_sessions} sessions exceeds --max-sessions {max_sessions}: "
            "each token's share would not be reserved for it"
        )
    return token_sessions


@dataclass
class Conn:
    """One open client connection: who its requests named last, and how to ask and end it."""

    busy: Callable[[], bool]
    """Whether a request is in flight on it (its body received whole, its response not yet ended)."""
    close: Callable[[], None]
    opened: float = field(default_factory=time.monotonic)
    session: str | None = None
    """The session its latest request named, when that session was live."""


@dataclass
class Over:
    """A request past a share: why (naming the cap and its option), and whether its connection is closed."""

    reason: str
    close: bool = False

    def answer(self) -> Response:
        """429 with a JSON-RPC error saying why, at once: the request holds nothing while it waits for a slot."""
        headers = {"Retry-After": RETRY_AFTER_S}
        if self.close:
            headers["Connection"] = "close"
        return jsonrpc_error(429, self.reason, headers)


@dataclass
class Owner:
    """The holder whose `initialize` opened a session, and when."""

    holder: int
    at: float


@dataclass
class Ticket:
    """One request's place in the shares, given back when it is answered."""

    holder: int
    session: str | None
    opening: bool = False
    call: bool = False


class Shares:
    """The connections open, by peer address, and what each session and holder holds. Used on the event loop only."""

    def __init__(
        self, limits: ShareLimits, pool: ConnectionPool, max_sessions: int, max_connections: int, holders: int
    ):
        self.limits = limits
        self.pool = pool
        self.max_connections = max_connections
        self.token_sessions = check(limits, max_sessions, max_connections, holders)
        self.conns: dict[object, Conn] = {}
        self.owner: dict[str, Owner] = {}
        """The holder of each session, from the token its `initialize` came with."""
        self.opening: dict[int, int] = {}
        """Requests in flight that may open a session (a POST naming none), by holder."""
        self.calls: dict[str, int] = {}
        """Tool calls in flight, by session."""

    def accept(self, peer: object, conn: Conn) -> bool:
        """Take a new connection, closing one that holds nothing when the server is at max_connections; False when
        every connection has a request in flight (the caller closes the new one)."""
        if len(self.conns) >= self.max_connections:
            spare = self._spare()
            if spare is None:
                return False
            self.conns.pop(spare).close()
        self.conns[peer] = conn
        return True

    def closed(self, peer: object, conn: Conn) -> None:
        if self.conns.get(peer) is conn:
            del self.conns[peer]

    def _spare(self, session: str | None = None, keep: Conn | None = None) -> object | None:
        """The connection to close for a new one: with `session`, an idle one of that session; else the oldest idle one
        naming no session, else an idle one of the session holding the most connections."""
        idle = [(peer, c) for peer, c in self.conns.items() if c is not keep and not c.busy()]
        if session is not None:
            idle = [(peer, c) for peer, c in idle if c.session == session]
            return min(idle, key=lambda pc: pc[1].opened)[0] if idle else None
        free = [(peer, c) for peer, c in idle if c.session is None or c.session not in self.pool.live]
        if free:
            return min(free, key=lambda pc: pc[1].opened)[0]
        held = self._held()
        return max(idle, key=lambda pc: held.get(pc[1].session, 0))[0] if idle else None

    def _held(self) -> dict[str | None, int]:
        held: dict[str | None, int] = {}
        for c in self.conns.values():
            held[c.session] = held.get(c.session, 0) + 1
        return held

    def enter(self, peer: object, holder: int, session: str | None, method: str) -> Ticket | Response | Over:
        """A request's ticket, or the refusal of one past its session's or holder's share. `session` is the live
        session it names (None when it names none that is live)."""
        owner = self.owner.get(session) if session is not None else None
        if owner is not None and owner.holder != holder:
            return jsonrpc_error(404, "no such session for this token: initialize a session of your own")
        conn = self.conns.get(peer)
        if session is None:
            if conn is not None:
                conn.session = None
            if method != "POST":
                return Ticket(holder, None)
            if self._sessions_of(holder) + self.opening.get(holder, 0) >= self.token_sessions:
                return _refused(
                    f"this token holds {self.token_sessions} sessions at once (--max-token-sessions): end one "
                    "(HTTP DELETE) first"
                )
            self.opening[holder] = self.opening.get(holder, 0) + 1
            return Ticket(holder, None, opening=True)
        if conn is not None and conn.session != session:
            if self._held().get(session, 0) >= self.limits.session_connections:
                spare = self._spare(session, keep=conn)
                if spare is None:
                    return _refused(
                        f"this session holds {self.limits.session_connections} connections at once "
                        "(--max-session-connections), each with a request in flight: send this one when one is "
                        "answered",
                        close=True,
                    )
                self.conns.pop(spare).close()
            conn.session = session
        return Ticket(holder, session)

    def call(self, ticket: Ticket) -> Over | None:
        """Count a tool call in flight for the ticket's session; the refusal past its share."""
        if ticket.session is None:
            return None
        if self.calls.get(ticket.session, 0) >= self.limits.session_calls:
            return _refused(
                f"this session has {self.limits.session_calls} tool calls in flight at once (--max-session-calls): "
                "call again when one has returned"
            )
        self.calls[ticket.session] = self.calls.get(ticket.session, 0) + 1
        ticket.call = True
        return None

    def leave(self, ticket: Ticket) -> None:
        """The ticket's request was answered (or its client went away)."""
        if ticket.opening:
            self.opening[ticket.holder] -= 1
        if ticket.call and ticket.session is not None:
            self.calls[ticket.session] -= 1
            if not self.calls[ticket.session]:
                del self.calls[ticket.session]

    def watch(self, ticket: Ticket, send: Send) -> Send:
        """`send` that notes the session a ticket's `initialize` opened as its holder's."""
        if not ticket.opening:
            return send

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.decode("latin-1").lower() == SESSION_ID:
                        self.owner[value.decode("latin-1")] = Owner(ticket.holder, time.monotonic())
            await send(message)

        return noting

    def _sessions_of(self, holder: int) -> int:
        """The sessions `holder` opened that are live or still starting (the SDK names a session before it has made
        it); the entries of the others are dropped here."""
        now = time.monotonic()
        self.owner = {
            s: o for s, o in self.owner.items() if s in self.pool.live or (s not in self.pool.ended and now - o.at < 60)
        }
        return sum(1 for o in self.owner.values() if o.holder == holder)


def _refused(message: str, close: bool = False) -> Over:
    return Over(message, close)
