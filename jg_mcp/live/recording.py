"""Recording every request of a session: the transcript middleware, which writes each request and its response
with timing, and refuses what cannot be recorded or served (an id that is not a plain short one, params over
MAX_REQUEST_BYTES, a number that is not finite, an id already in flight, more than MAX_CALLS_IN_FLIGHT tool calls
at once)."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from typing import Any, Protocol
from weakref import WeakKeyDictionary

import anyio
import anyio.to_thread
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, CallToolResult, TextContent
from pydantic import BaseModel

from jg_mcp.live.measure import value_size
from jg_mcp.live.session import Session
from jg_mcp.live.stdio import (
    MAX_ID_CHARS,
    MAX_REQUEST_BYTES,
    MAX_SAFE_ID,
    METHOD_CHARS,
    OVERSIZED,
    REFUSED,
    UNREADABLE,
    Refused,
    storable,
)
from jg_mcp.record.events import Notice, Request, Response
from jg_mcp.record.transcript import WRITE_BLOB_CAP

MAX_CALLS_IN_FLIGHT = 64
"""Tool calls one session may have unanswered at once; more are answered at once with an error saying so."""
CANCELLED = "cancelled: the client cancelled the call or disconnected before it finished"
"""The recorded error of a call cancelled mid-way (its response has `cancelled` set)."""


class SessionPool(Protocol):
    """Finds the Session behind a request's ServerSession (one for stdio, one per client over HTTP)."""

    def get(self, request_session: Any) -> Session: ...


def _dump(result: Any) -> dict[str, Any] | None:
    if result is None:
        return None
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(result)


def _id_over_limit(rid: Any) -> str | None:
    """What is wrong with a request id that is not a plain short one (a string of at most MAX_ID_CHARS characters,
    or an integer within ±MAX_SAFE_ID); None for one that is."""
    if isinstance(rid, str) and len(rid) > MAX_ID_CHARS:
        return f"is a string of {len(rid)} characters, over the limit of {MAX_ID_CHARS} characters"
    if isinstance(rid, int) and not -MAX_SAFE_ID <= rid <= MAX_SAFE_ID:
        return f"is an integer beyond the limit of ±{MAX_SAFE_ID}"
    return None


def _shown(rid: str | int) -> str:
    """What the transcript records for an id over the limits, in place of it: its start, its size and a hash."""
    text = rid if isinstance(rid, str) else str(rid) if rid.bit_length() < 10_000 else hex(rid)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return storable(f"{text[:32]}... ({len(text)} characters, sha256 {digest}...)")


def note_refused(session: Session, refused: Refused) -> None:
    """Record a message refused unread for its id, which is no JSON-RPC id (jg_mcp.live.stdio): as a notice, never
    as a request, since no call was made, and an id that cannot be recorded as sent names none."""
    message = f"a {refused.method} message was refused unread and answered with an error of id null: {refused.reason}"
    session.writer.record(Notice(level="warning", message=message))


def note_dropped(session: Session, method: str) -> None:
    """Record a message that named a request's method but had no id, as a notice: the SDK takes it for a
    notification, runs nothing and answers nothing, so it is neither a call nor a response."""
    message = (
        f"a {storable(method[:METHOD_CHARS])} message without an id was dropped unanswered: a request needs an id, a "
        "message without one is a notification (`notifications/...`); nothing ran"
    )
    session.writer.record(Notice(level="warning", message=message))


def non_finite(value: Any) -> list[str | int] | None:
    """The path (keys and indexes) to the first number in `value` that is not finite, else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = non_finite(item)
        if found is not None:
            return [key, *found]
    return None


def _finite(value: Any) -> Any:
    """`value` with each number that is not finite written as the string naming it ("NaN", "Infinity", ...)."""
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _field(path: list[str | int]) -> str:
    return "params" + "".join(f"[{p}]" if isinstance(p, int) else f".{storable(p[:64])}" for p in path)


def _id_keys(rid: Any) -> frozenset[str]:
    """What a request id collides on: the SDK takes 7 and "7" for one id (its table of requests in flight coerces
    a numeric string, its HTTP transport routes answers by the id as text)."""
    if rid is None:
        return frozenset()
    return frozenset({str(rid), str(coerce_request_id(rid))})


class TranscriptMiddleware:
    """Records every inbound request and its response, with timing, in the session's transcript.

    At most one request per id is in flight in a session: one whose id (see `_id_keys`) a request of the same
    session still holds is refused at once with an error naming the id, the refusal recorded on the line after
    the request. Otherwise two calls would share an id, and the transcript, whose responses and file changes name
    their request by id, could not tell which did what (jg_mcp.record.steps). An id is held from the request's
    arrival until its answer, and, when the call ended in an error or was cancelled, until the workspace jobs
    queued before then have finished, since a cancelled call's changes may still be recorded under its id.

    Every line the transcript writes for a call repeats its id (its request, its response, each file change), so
    a request whose id is not a plain short one (see `_id_over_limit`) is refused before anything else, and
    recorded under a short stand-in for its id: one command with a 4 MiB id that made 300 files had written
    1.2 GiB.

    A message without an id is a notification: nothing answers it, and for a request's method (anything not
    `notifications/...`) nothing runs, so it is recorded as a notice of a dropped message, never as a request and
    its response: the transcript had shown made-up tool calls, with a success, that never ran.

    A number in a request that is not finite (NaN, Infinity, -Infinity, or one past a double's range such as
    1e400, which reads as Infinity) is refused, the error naming its field: JSON has no such number, the
    transcript had written null in its place, so the recorded request differed from the one served. Refused, it
    is recorded with the number as the string naming it, and nothing is served from it."""

    def __init__(self, pool: SessionPool):
        self.pool = pool
        self._held: WeakKeyDictionary[Session, set[str]] = WeakKeyDictionary()
        self._lock = threading.Lock()

    async def __call__(self, ctx, call_next):
        session = self.pool.get(ctx.session)
        rid = ctx.request_id
        raw = dict(ctx.params) if ctx.params is not None else None
        if rid is None and ctx.method == REFUSED:  # the transport's stand-in: answered already
            note_refused(session, Refused(str((raw or {}).get("method")), str((raw or {}).get("reason"))))
            return None
        if rid is None and not ctx.method.startswith("notifications/"):
            note_dropped(session, ctx.method)
            return None
        over = _id_over_limit(rid)
        if over is not None:
            self._refuse_id(session, rid, ctx.method, raw or {}, over)
        if ctx.method == UNREADABLE:
            self._refuse_unreadable(session, rid, raw or {})
        if ctx.method == OVERSIZED or value_size(raw, MAX_REQUEST_BYTES) > MAX_REQUEST_BYTES:
            self._refuse(session, rid, ctx.method, raw or {})
        if (path := non_finite(raw)) is not None:
            self._refuse_non_finite(session, rid, ctx.method, raw, _field(path))
        params = storable(raw)
        keys = _id_keys(rid)
        if not self._hold(session, keys):
            self._refuse_in_flight(session, rid, ctx.method, params)
        try:
            result = await self._serve(session, ctx, call_next, params)
        except BaseException:
            if keys:
                session.submit(lambda: self._free(session, keys))
            raise
        self._free(session, keys)
        return result

    def _hold(self, session: Session, keys: frozenset[str]) -> bool:
        """Take `keys` for a request of `session`; False when a request in flight holds one of them."""
        with self._lock:
            held = self._held.setdefault(session, set())
            if held & keys:
                return False
            held |= keys
            return True

    def _free(self, session: Session, keys: frozenset[str]) -> None:
        with self._lock:
            self._held.get(session, set()).difference_update(keys)

    @staticmethod
    async def _serve(session: Session, ctx: Any, call_next: Any, params: Any) -> Any:
        rid = ctx.request_id
        session.writer.record(Request(request_id=rid, method=ctx.method, params=params))
        start = time.monotonic()
        is_call = ctx.method == "tools/call"
        try:
            if is_call and session.calls_in_flight >= MAX_CALLS_IN_FLIGHT:
                result: Any = _busy()
            else:
                session.calls_in_flight += is_call
                try:
                    result = await call_next(ctx)
                finally:
                    session.calls_in_flight -= is_call
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            session.writer.record(
                Response(
                    request_id=rid,
                    method=ctx.method,
                    duration_ms=(time.monotonic() - start) * 1000,
                    is_error=True,
                    error=CANCELLED if cancelled else storable(f"{type(exc).__name__}: {exc}"),
                    cancelled=cancelled,
                )
            )
            raise
        dumped = storable(_dump(result))
        session.writer.record(
            Response(
                request_id=rid,
                method=ctx.method,
                duration_ms=(time.monotonic() - start) * 1000,
                is_error=bool(dumped and dumped.get("isError")),
                result=dumped,
            )
        )
        return result

    @staticmethod
    def _refuse_in_flight(session: Session, rid: Any, method: str, params: Any) -> None:
        """Record a request whose id a request in flight holds, and its refusal on the next line; refuse it."""
        message = (
            f"request refused: id {json.dumps(rid)} is the id of a request of this session still in flight "
            "(unanswered); every request needs an id of its own: send it again with a new id"
        )
        session.writer.append_all(
            [
                Request(request_id=rid, method=method, params=params),
                Response(request_id=rid, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_REQUEST, message)

    @staticmethod
    def _refuse_id(session: Session, rid: str | int, method: str, params: dict[str, Any], over: str) -> None:
        """Record a request whose id is over the limits, by its method (and tool name, when short) and a short
        stand-in for the id, and its refusal on the next line; refuse it."""
        name = params.get("name")
        kept = {"name": storable(name)} if isinstance(name, str) and len(name) <= MAX_ID_CHARS else None
        message = (
            f"request refused: its id {over}; a request id is a string of at most {MAX_ID_CHARS} characters or an "
            f"integer within ±{MAX_SAFE_ID} (2^53 - 1, the largest JSON keeps exact): send it again with such an id"
        )
        shown = _shown(rid)
        session.writer.append_all(
            [
                Request(request_id=shown, method=method, params=kept),
                Response(request_id=shown, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_REQUEST, message)

    @staticmethod
    def _refuse_unreadable(session: Session, rid: Any, params: dict[str, Any]) -> None:
        """Record a request the JSON-RPC parser refused (stood in for by the stdio reader) and its refusal on the
        next line, and refuse it. Its params (escaped) are recorded within MAX_REQUEST_BYTES, as any request's;
        past it, only their size."""
        method, message = str(params.get("method", "unknown")), str(params.get("reason", "unreadable request"))
        escaped = params.get("params")
        kept = escaped if isinstance(escaped, dict) else None
        size = params.get("size") if kept is None else value_size(kept, MAX_REQUEST_BYTES)
        if not isinstance(size, int) or size <= MAX_REQUEST_BYTES:
            size = None
        session.writer.append_all(
            [
                Request(request_id=rid, method=method, params=None if size else kept, params_size=size),
                Response(request_id=rid, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_PARAMS, message)

    @staticmethod
    def _refuse_non_finite(session: Session, rid: Any, method: str, params: Any, field: str) -> None:
        """Record a request holding a number that is not finite at `field`, with the number as the string naming
        it, and its refusal on the next line; refuse it."""
        message = (
            f"request refused: {field} is not a finite number (NaN, Infinity, or one past a double's range such as "
            "1e400), which JSON cannot hold (recorded as the string naming it): send a finite number"
        )
        session.writer.append_all(
            [
                Request(request_id=rid, method=method, params=storable(_finite(params))),
                Response(request_id=rid, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_PARAMS, message)

    @staticmethod
    def _refuse(session: Session, rid: Any, method: str, params: dict[str, Any]) -> None:
        """Record a request too large to keep as its method and size only, its refusal on the next line, and
        refuse it."""
        content = f"write_file content may be at most {WRITE_BLOB_CAP} bytes"
        if method == OVERSIZED:  # the transport's stand-in (jg_mcp.live.stdio) for a message over a limit
            method, limit = str(params.get("method", "unknown")), int(params.get("limit", 0))
            size = int(params.get("size", 0))
            if params.get("unit") == "values":
                held = f"its message holds more JSON values than the limit of {limit} JSON values"
                content = "arrays, objects, strings and their items count one each; a tool call holds a few dozen"
            else:
                held = f"its message holds {size} bytes, over the limit of {limit}"
        else:
            size = value_size(params, MAX_REQUEST_BYTES)
            held = f"its params hold {size} bytes or more, over the limit of {MAX_REQUEST_BYTES}"
        message = f"request refused: {held} ({content})"
        session.writer.append_all(
            [
                Request(request_id=rid, method=method, params=None, params_size=size),
                Response(request_id=rid, method=method, duration_ms=0.0, is_error=True, error=message),
            ]
        )
        raise MCPError(INVALID_PARAMS, message)


def _busy() -> CallToolResult:
    message = (
        f"refused: this session already has {MAX_CALLS_IN_FLIGHT} tool calls unanswered (the limit); wait for "
        "some of their answers before sending more"
    )
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
