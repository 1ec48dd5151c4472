"""Request bodies over HTTP: read whole before the MCP SDK sees them, within their limits, and examined.

At most MAX_BODY_BYTES of a body is read (the stdio transport's message limit): one that passes the limit while it
is read is refused there (413, and the connection closed); a body is never held past the limit, nor past the
bodies' budget (in all, MAX_BODIES_HELD_BYTES, and for one session, SESSION_BODIES_BYTES). A body read whole is
measured as a stdio line is, in a worker thread, before the SDK parses it on the event loop (`examine`): one over
the request limits is never parsed, one padded with whitespace is handed on compacted, and one whose id is no
JSON-RPC id is refused by its outline (400, an error of id null), as on stdio (jg_mcp.live.stdio), since the SDK
would take it for a notification; a live session's transcript records it as a notice.
"""

from __future__ import annotations

import json
import re

import anyio
from starlette.responses import Response
from starlette.types import Message, Receive

from jg_mcp.live.connections import BodyBudget, ConnectionPool, Hold, jsonrpc_error
from jg_mcp.live.measure import MAX_REQUEST_VALUES, STEP, Measure, measured
from jg_mcp.live.recording import note_refused
from jg_mcp.live.stdio import (
    LINE_LIMIT_BYTES,
    MAX_REQUEST_BYTES,
    PEEK,
    SURROGATE,
    Refused,
    id_refusal,
    stand_in,
    unreadable,
)
from jg_mcp.record.transcript import WRITE_BLOB_CAP

MAX_BODY_BYTES = LINE_LIMIT_BYTES
"""Largest request body, the same as the largest stdio message: room for the largest write_file
(WRITE_BLOB_CAP) of control characters, six bytes each once escaped. The SDK is given it too, so its own limit
never refuses less."""
MAX_BODIES_HELD_BYTES = 4 * MAX_BODY_BYTES
"""Bytes of request bodies the server holds at once, over all connections, from a body's first byte until its
request is answered (the SDK keeps the body, and what it parsed from it, that long; a padded body counts only what
is left once compacted): a request whose body would take it past this is refused (503) as it is read. Without it,
max_connections bodies at the limit (24 GiB by default) would be held by one client."""
SESSION_BODIES_BYTES = MAX_BODIES_HELD_BYTES // 2
"""Bytes of request bodies one session may hold at once, counted as MAX_BODIES_HELD_BYTES is (the requests of no
live session count together as one): a session holding long calls with large bodies leaves the other half to the
others, and can still write two files at the limit at once."""
PADDING_BYTES = 64 * 1024
"""Whitespace outside strings a body may hold and be handed on as it came; one with more (an honest client's
JSON holds a few bytes a value) is compacted first, so its padding is neither held nor parsed."""
SURROGATE_BYTES = re.compile(SURROGATE.pattern.encode())


class BodyReader:
    """Reads each request's body within the bodies' budget and examines it off the event loop."""

    def __init__(self, pool: ConnectionPool):
        self.pool = pool
        self.budget = BodyBudget(MAX_BODIES_HELD_BYTES, SESSION_BODIES_BYTES)
        self.examiners = anyio.CapacityLimiter(2)
        """The worker threads examining bodies over STEP bytes: never anyio's default limiter, whose threads tool
        calls may all hold."""
        self.quick = anyio.CapacityLimiter(2)
        """The worker threads examining smaller bodies, which so never wait behind large ones."""

    async def read(self, method: str, session: str | None, receive: Receive, hold: Hold) -> Receive | Response:
        """`receive` that replays the request body, read whole and examined (for a POST of `session`, a live
        session, also looked at for its first tool call); the refusal when the body is over MAX_BODY_BYTES, would
        take the bodies held past the budget, or the client went away. The bytes held are counted in `hold`, which
        the caller gives back once the request is answered. Here, not in the caller, so the body is not held for
        the rest of the request once the app has read it."""
        chunks = await self._read_body(receive, hold)
        if isinstance(chunks, Response):
            return chunks
        post = method == "POST"
        live = post and session is not None
        limiter = self.examiners if hold.bytes > STEP else self.quick
        body = await anyio.to_thread.run_sync(examine, chunks, post, live, hold, limiter=limiter)
        if isinstance(body, Refused):
            if live and session in self.pool.live:
                note_refused(self.pool.live[session].session, body)
            return jsonrpc_error(400, body.reason)
        if isinstance(body, Response):
            return body
        self.budget.give_back(hold, hold.bytes - len(body))
        if live and session is not None and self.pool.awaits_first_call(session):
            self.pool.note_request(session, body)
        return _replay(body, receive)

    async def _read_body(self, receive: Receive, hold: Hold) -> list[bytes] | Response:
        """The request body's chunks, read whole; the refusal as soon as it passes MAX_BODY_BYTES or the bodies held
        pass the budget (the rest is not read, and at most one chunk past it was held), or when the client went
        away before it ended (an answer to it is dropped)."""
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return too_large()
            chunk = message.get("body", b"")
            over = self.budget.take(hold, len(chunk))
            if hold.bytes > MAX_BODY_BYTES:
                return too_large()
            if over is not None:
                return busy(over)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks


def examine(chunks: list[bytes], post: bool, live: bool, hold: Hold) -> bytes | Response | Refused:
    """The body of `chunks` (emptied: the body as it came is not held past this) as the SDK is to have it; run in a
    worker thread, never on the event loop. A POST's body is measured: over MAX_REQUEST_BYTES or MAX_REQUEST_VALUES,
    it is refused unparsed (a `live` session's request by the stand-in that is recorded and answered with the
    limit; any other with 413); with an id that is no JSON-RPC id, refused (the caller answers and records it);
    with more than PADDING_BYTES of whitespace, compacted; for a `live` session, made answerable. Whether it is a
    tool call is noted in `hold.call`."""
    body = b"".join(chunks)
    chunks.clear()
    if not post:
        return body
    measure = measured(body, outline=True)
    if measure.size > MAX_REQUEST_BYTES or measure.too_many:
        return _refusal(body, measure, live)
    refused = id_refusal(measure.outline)
    if refused is not None:
        return refused
    hold.call = is_call(measure.outline)
    if measure.blank > PADDING_BYTES:
        body = b"".join(measured(body, compact=True).compacted or [])
    return _answerable(body) if live else body


def is_call(outline: list[bytes] | None) -> bool:
    """Whether a message is a tool call, by the method its outline names (every key and short string as the SDK
    reads them, so no placement of the method passes a call for another request); one without an outline (megabytes
    of digits) counts as a call, so a session's share of calls in flight cannot be passed that way."""
    if outline is None:
        return True
    try:
        message = json.loads(b"".join(outline).decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call"


def _refusal(body: bytes, measure: Measure, live: bool) -> bytes | Response:
    """For a body over MAX_REQUEST_BYTES or MAX_REQUEST_VALUES: a live session's request's stand-in, which the
    transcript middleware records and refuses; else 413 naming the limit."""
    if measure.size > MAX_REQUEST_BYTES:
        limit, unit, held = MAX_REQUEST_BYTES, "bytes", f"{measure.size} bytes, over the limit of {MAX_REQUEST_BYTES}"
    else:
        limit, unit, held = MAX_REQUEST_VALUES, "values", f"more than the limit of {MAX_REQUEST_VALUES} JSON values"
    replaced = stand_in(body[:PEEK], body[-PEEK:], measure.size, limit, unit) if live else None
    if replaced is not None:
        return replaced.encode()
    return jsonrpc_error(413, f"request refused: its message holds {held}")


def busy(why: str) -> Response:
    """The answer to a body that would take the bodies held past a limit (`why`); it closes the connection."""
    return jsonrpc_error(
        503,
        f"{why}, and this body would take it past that: retry once other requests are answered",
        {"Connection": "close", "Retry-After": "5"},
    )


def too_large() -> Response:
    """The answer to a body over MAX_BODY_BYTES; it closes the connection, so the rest of the body is not read."""
    return jsonrpc_error(
        413,
        f"request body over the limit of {MAX_BODY_BYTES} bytes (the same as a stdio message's; "
        f"write_file content may be at most {WRITE_BLOB_CAP} bytes)",
        {"Connection": "close"},
    )


def _answerable(body: bytes) -> bytes:
    """`body`, or for a request the SDK would refuse unrecorded and answer without its id (one whose strings
    hold a lone surrogate escape) the stand-in that jg_mcp.live.stdio makes for it: recorded, and answered with
    its id and the reason."""
    if SURROGATE_BYTES.search(body) is None:
        return body
    return (unreadable(body.decode("utf-8", errors="replace")) or "").encode() or body


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` that gives the app the body read already, as one message, then what the connection says next."""
    held: bytes | None = body

    async def wrapped() -> Message:
        nonlocal held
        if held is None:
            return await receive()
        message: Message = {"type": "http.request", "body": held, "more_body": False}
        held = None
        return message

    return wrapped
