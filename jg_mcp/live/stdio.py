"""The stdio transport with a limit on the size of a message, its own threads, and an answer to every request.

The SDK's stdio reader holds each line whole, however long, and parses it on the event loop. This one
reads a line in chunks, measuring it as it comes (jg_mcp.live.measure): a line over MAX_REQUEST_BYTES or
MAX_REQUEST_VALUES so measured, or over LINE_LIMIT_BYTES of bytes, is read through and dropped, never parsed,
and a small stand-in request takes its place: method OVERSIZED, the original id, and the original method,
size and the limit it passed as params. The transcript middleware records the stand-in as the refused
request's method and size and answers it with an error. (A line of 60 MB made of `{}` had been parsed whole
twice before its refusal: 4.5 GiB; one of 3 MB made of `[]`, within the byte limits, parsed to 150 MB.)

A line within the limits is parsed once, in the reader's thread. A request the JSON-RPC parser refuses,
though it has an id (a string holding a lone surrogate escape such as `"\\udcff"`, which is no Unicode
text; nesting deeper than the parser reads), would be dropped unanswered: it is replaced by a stand-in of
method UNREADABLE naming the original method, the reason, and (for surrogates) the params escaped, or
only their size when escaped they are over MAX_REQUEST_BYTES, which the transcript middleware records and
answers with that reason.

A message with a method whose `id` is no JSON-RPC id (not a string or an integer: `true`, `1.5`, `null`, `[1]`,
`{}`, NaN) is refused as it is read, by its outline (jg_mcp.live.measure), never parsed: the SDK takes it for a
notification (nothing runs, nothing is answered), and the transcript had recorded a tools/call and its success
that never happened. It cannot be answered by its id, so the transport answers it itself, with an error of id
null naming what is wrong, and hands the SDK a notification of method REFUSED in its place, which the transcript
middleware records as a notice (never as a request: no call was made).

stdin is read and stdout written in threads of their own (one each, never anyio's default limiter, whose
threads tool calls may all hold), so the server reads and answers whatever its tools are doing.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, JSONRPCNotification

from jg_mcp import log
from jg_mcp.live.measure import MAX_REQUEST_VALUES, Measure, value_size
from jg_mcp.record.transcript import WRITE_BLOB_CAP

logger = log.get("jg_mcp.live.stdio")
STAND_IN_MARK = secrets.token_hex(8)
"""Part of the stand-ins' method names, known to this process only: a client cannot send a request that passes for
a stand-in (whose params the transcript middleware records as the transport's own account of a refused request)."""
OVERSIZED = f"jg/oversized/{STAND_IN_MARK}"
"""Method of the stand-in for a message over the limit."""
LINE_LIMIT_BYTES = 6 * WRITE_BLOB_CAP + 1024 * 1024
"""Longest stdio message in bytes: room for the largest write_file (WRITE_BLOB_CAP) of control characters, which
JSON escapes in six bytes each (`\\u0001`)."""
MAX_REQUEST_BYTES = WRITE_BLOB_CAP + 1024 * 1024
"""Largest request served and recorded whole: its params, counted as UTF-8 bytes of their strings (plus a few per
item) by the transcript middleware (`value_size`), and a stdio line or an HTTP body as `Measure` counts it. Larger
ones are recorded by size and refused."""
METHOD_CHARS = 100
"""How much of a refused or dropped message's method name the transcript's notice names."""
PARSE_ERROR_CHARS = 200
"""How much of the parser's first line of error an unreadable request's stand-in keeps."""
MAX_ID_CHARS = 200
"""Longest string id a request may have; an integer id must be within ±MAX_SAFE_ID. The transcript repeats a call's
id on its request, its response and every file change it made, so longer ones are refused (see
jg_mcp.live.recording)."""
MAX_SAFE_ID = 2**53 - 1
"""Largest integer id (in magnitude): the largest integer JSON readers keep exactly."""
PEEK = 4096
CHUNK = 1 << 20
"""Bytes of a line read at once."""
ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,%d}"|-?\d{1,16}(?![\d.eE]))' % MAX_ID_CHARS)
METHOD = re.compile(rb'"method"\s*:\s*"([^"\\]{1,100})"')
UNREADABLE = f"jg/unreadable/{STAND_IN_MARK}"
"""Method of the stand-in for a request that is valid JSON but not text the JSON-RPC parser accepts."""
REFUSED = f"jg/refused/{STAND_IN_MARK}"
"""Method of the stand-in (a notification) for a message refused with no id to answer it by (`Refused`)."""
SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A surrogate escape in JSON text: paired, it is one character; alone, it is no character at all."""


def stand_in(head: bytes, tail: bytes, size: int, limit: int, unit: str = "bytes") -> str | None:
    """The OVERSIZED request for a message whose first and last bytes are `head` and `tail`, of `size` bytes, over
    `limit` (of `unit`: "bytes", or "values" as jg_mcp.live.measure counts them); None when it names no id (a
    notification, or not JSON-RPC), which is dropped."""
    found = ID.search(head) or ID.search(tail)
    if found is None:
        return None
    params: dict[str, Any] = {"method": method_of(head, tail), "size": size, "limit": limit, "unit": unit}
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(found.group(1)), "method": OVERSIZED, "params": params})


@dataclass(frozen=True)
class Refused:
    """A message refused unread whose id is no JSON-RPC id, so that no answer can name it: `answer`, the error of
    id null the transport sends itself (the SDK sends none such), and `stand_in`, the notification the transcript
    middleware records it by. `method` is the method it named, `reason` what is wrong."""

    method: str
    reason: str

    @property
    def answer(self) -> str:
        error = {"code": INVALID_REQUEST, "message": self.reason}
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": error})

    @property
    def stand_in(self) -> SessionMessage:
        params = {"method": self.method, "reason": self.reason}
        return SessionMessage(JSONRPCNotification(jsonrpc="2.0", method=REFUSED, params=params))


def id_refusal(outline: list[bytes] | None) -> Refused | None:
    """The refusal of a message that names a method and has an `id` that is not a string or an integer, read from
    its outline (jg_mcp.live.measure: parsing it costs little, whatever the message's size); None for any other
    message, or one with no outline (megabytes of digits), which the SDK's parser judges alone. Bytes that are not
    UTF-8 read as U+FFFD, as the stdio reader hands the line to the parser."""
    try:
        message = json.loads(b"".join(outline).decode("utf-8", "replace")) if outline is not None else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    rid, method = message["id"], message["method"]
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return None
    named = storable(method[:METHOD_CHARS]) if isinstance(method, str) and method else "unknown"
    reason = (
        f"request refused: its id is {_kind(rid)}, not a string or an integer, so it can be neither answered by "
        "its id nor told from a notification; nothing ran: send it again with a string or integer id"
    )
    return Refused(named, reason)


def _kind(rid: Any) -> str:
    if rid is None or isinstance(rid, bool):
        return json.dumps(rid)
    if isinstance(rid, float):
        return f"the number {rid!r}" if math.isfinite(rid) else "a number that is not finite (NaN, Infinity, 1e400)"
    return "an array" if isinstance(rid, list) else "an object"


def method_of(head: bytes, tail: bytes) -> str:
    """The method a message names in its first bytes, `head`, else in its last, `tail` (where clients write it:
    a bounded look, never a parse); "unknown" when neither names one."""
    found = METHOD.search(head) or METHOD.search(tail)
    return found.group(1).decode() if found else "unknown"


def _lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def storable(value: Any) -> Any:
    """`value` with lone surrogates (valid in JSON, not in UTF-8) escaped, so the transcript can hold it; `value`
    itself, not a copy, when it holds none (a parsed request's params are kept for the whole call already)."""
    return _escaped(value) if _lone_surrogate(value) else value


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


def unreadable(line: str) -> str | None:
    """The UNREADABLE stand-in for a request (a message with an id) that the SDK's JSON-RPC parser refuses, and
    would drop unanswered; None for a line it reads, or one naming no id."""
    from mcp import types

    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except Exception as exc:  # noqa: BLE001 (whatever the parser raises, the SDK's reader drops the request)
        return refusal(line, exc)


def refusal(line: str, exc: Exception) -> str | None:
    """The UNREADABLE stand-in for a request the JSON-RPC parser refused with `exc`; None when it names no id. A
    request whose strings hold a lone surrogate keeps its params, escaped, within the size limit; any other
    (nested deeper than the parser reads, say) keeps none."""
    error = str(exc).splitlines()[0][:PARSE_ERROR_CHARS] if str(exc) else type(exc).__name__
    return _surrogates(line) or _refused(line, error)


def _refused(line: str, error: str) -> str | None:
    found = ID.search(line[:PEEK].encode()) or ID.search(line[-PEEK:].encode())
    if found is None:
        return None
    method = METHOD.search(line[:PEEK].encode())
    reason = f"request refused: the server cannot read it as a JSON-RPC message ({error})"
    params = {"method": method.group(1).decode() if method else "unknown", "reason": reason}
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(found.group(1)), "method": UNREADABLE, "params": params})


def _surrogates(line: str) -> str | None:
    """The stand-in for a request whose strings hold a lone surrogate, its params escaped (only their size when
    that is over MAX_REQUEST_BYTES: an escape counts one in a line's size and takes six characters in the
    transcript); else None."""
    if SURROGATE.search(line) is None:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "id" not in message or not _lone_surrogate(message):
        return None
    rid = message["id"]
    if not isinstance(rid, (str, int)) or isinstance(rid, bool) or _lone_surrogate(rid):
        return None
    method = message.get("method")
    reason = (
        "request refused: its JSON holds a lone surrogate escape (such as \\udcff), which is not a Unicode "
        "character; send text that is valid UTF-8 (shown escaped in the transcript)"
    )
    params: dict[str, Any] = {"method": storable(method) if isinstance(method, str) else "unknown", "reason": reason}
    escaped = storable(message.get("params"))
    size = value_size(escaped, MAX_REQUEST_BYTES)
    params |= {"size": size} if size > MAX_REQUEST_BYTES else {"params": escaped}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": UNREADABLE, "params": params})


def parse(text: str, replace: bool = True) -> SessionMessage | Exception:
    """`text` parsed as a JSON-RPC message; what the parser raised when it refuses it, or with `replace`, the
    UNREADABLE stand-in for it parsed instead (when it names an id)."""
    from mcp import types

    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except Exception as exc:  # noqa: BLE001 (whatever the parser raises, the server is told, as by the SDK's reader)
        replaced = refusal(text, exc) if replace else None
        return exc if replaced is None else parse(replaced, replace=False)


class Messages:
    """The JSON-RPC messages of a binary stream of lines, each read, measured and parsed in a thread of its own
    (`limiter`); lines over the limits and requests the parser would drop become stand-ins."""

    def __init__(
        self,
        stream: BinaryIO,
        limit: int = LINE_LIMIT_BYTES,
        request_limit: int = MAX_REQUEST_BYTES,
        value_limit: int = MAX_REQUEST_VALUES,
    ):
        self.stream = stream
        self.limit = limit
        self.request_limit = request_limit
        self.value_limit = value_limit
        self.limiter = anyio.CapacityLimiter(1)

    def __aiter__(self) -> Messages:
        return self

    async def __anext__(self) -> SessionMessage | Exception | Refused:
        read = await anyio.to_thread.run_sync(self._next, abandon_on_cancel=True, limiter=self.limiter)
        if read is None:
            raise StopAsyncIteration
        return read

    def _next(self) -> SessionMessage | Exception | Refused | None:
        """The next message; None at the end of the stream."""
        while True:
            measure, line = Measure(self.value_limit, outline=True), bytearray()
            while not line.endswith(b"\n") and not self._over(measure):
                part = self.stream.readline(CHUNK)
                if not part:
                    break
                measure.add(part)
                line += part
            if not line:
                return None
            if not self._over(measure):
                refused = id_refusal(measure.outline)
                if refused is not None:
                    return refused
                text = line.decode("utf-8", errors="replace")
                line.clear()
                return parse(text)
            replaced = self._drop(line, measure)
            if replaced is not None:
                return parse(replaced, replace=False)

    def _over(self, measure: Measure) -> bool:
        return measure.size > self.request_limit or measure.too_many or measure.raw > self.limit

    def _drop(self, line: bytearray, measure: Measure) -> str | None:
        """Read the rest of `line`, which is over a limit, through without keeping it; its OVERSIZED stand-in."""
        head, tail = bytes(line[:PEEK]), bytes(line[-PEEK:])
        line.clear()
        while not tail.endswith(b"\n"):
            part = self.stream.readline(CHUNK)
            if not part:
                break
            measure.add(part)
            tail = (tail + part)[-PEEK:]
        if measure.size > self.request_limit:
            size, limit, unit = measure.size, self.request_limit, "bytes"
        elif measure.too_many:
            size, limit, unit = measure.size, self.value_limit, "values"
        else:
            size, limit, unit = measure.raw, self.limit, "bytes"
        logger.warning("message over the stdio limit refused", size=size, limit=limit, unit=unit)
        return stand_in(head, tail, size, limit, unit)


class Answers:
    """The text stream the SDK's stdio_server writes answers to, written in a thread of its own."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.limiter = anyio.CapacityLimiter(1)

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self.stream.write, text.encode("utf-8"), limiter=self.limiter)

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self.stream.flush, limiter=self.limiter)


def _claim(fd: int, diversion: int) -> int:
    """Move `fd` (the wire) to a private descriptor, point `fd` at `diversion`, and return the private one."""
    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    os.close(diversion)
    return wire


@asynccontextmanager
async def _streams(messages: Messages, answers: Answers) -> AsyncIterator[tuple[Any, Any]]:
    """The server's read and write streams, fed from `messages` and written to `answers`: what the SDK's
    stdio_server does, without its reader's second parse of every line (on the event loop)."""
    read_in, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        try:
            async with read_in:
                async for received in messages:
                    if isinstance(received, Refused):
                        await answers.write(received.answer + "\n")
                        await answers.flush()
                    await read_in.send(received.stand_in if isinstance(received, Refused) else received)
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async def pump_out() -> None:
        try:
            async with write_out:
                async for answer in write_out:
                    await answers.write(answer.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
                    await answers.flush()
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump_in)
        tasks.start_soon(pump_out)
        yield read, write


async def serve_stdio(lowlevel: Any) -> None:
    """Run a low-level MCP server over this process's stdin and stdout, with the limits. While it runs,
    fd 0 reads /dev/null and fd 1 writes to stderr, so commands the server starts (and stray prints) can
    neither read the client's messages nor write into its stream."""
    wire_in = _claim(0, os.open(os.devnull, os.O_RDONLY))
    wire_out = _claim(1, os.dup(2))
    # Never closed: a worker thread may still be blocked reading it when the server returns.
    messages = Messages(os.fdopen(wire_in, "rb", closefd=False))
    answers = Answers(os.fdopen(wire_out, "wb", closefd=False))
    try:
        async with _streams(messages, answers) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
