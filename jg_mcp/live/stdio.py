"""The stdio transport with a limit on the size of a message, its own threads, and an answer to every request.

The SDK's stdio reader holds each line whole, however long. This one reads at most LINE_LIMIT_BYTES of
a line; a longer line is read through in chunks and dropped, and a small stand-in request takes its
place: method OVERSIZED, the original id, and the original method and size as params. The transcript
middleware records the stand-in as the refused request's method and size and answers it with an error.

A request the SDK's JSON parser refuses, though valid JSON with an id (a string holding a lone surrogate
escape such as `"\\udcff"`, which is no Unicode text), would be dropped unanswered: it is replaced by a
stand-in of method UNREADABLE naming the original method, the reason, and the params with the surrogates
escaped, which the transcript middleware records and answers with that reason.

stdin is read and stdout written in threads of their own (one each, never anyio's default limiter, whose
threads tool calls may all hold), so the server reads and answers whatever its tools are doing.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from typing import Any, BinaryIO

import anyio
import anyio.to_thread

from jg_mcp import log
from jg_mcp.record.transcript import WRITE_BLOB_CAP

logger = log.get("jg_mcp.live.stdio")
OVERSIZED = "jg/oversized"
"""Method of the stand-in for a message over the limit."""
LINE_LIMIT_BYTES = 4 * WRITE_BLOB_CAP + 1024 * 1024
"""Longest stdio message: room for the largest write_file (WRITE_BLOB_CAP) whose JSON escaping quadruples it."""
PEEK = 4096
ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')
METHOD = re.compile(rb'"method"\s*:\s*"([^"\\]{1,100})"')
UNREADABLE = "jg/unreadable"
"""Method of the stand-in for a request that is valid JSON but not text the JSON-RPC parser accepts."""
SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A surrogate escape in JSON text: paired, it is one character; alone, it is no character at all."""


def stand_in(head: bytes, tail: bytes, size: int) -> str | None:
    """The OVERSIZED request for a message whose first and last bytes are `head` and `tail`; None when it
    names no id (a notification, or not JSON-RPC), which is dropped."""
    found = ID.search(head) or ID.search(tail)
    if found is None:
        return None
    method = METHOD.search(head) or METHOD.search(tail)
    params: dict[str, Any] = {"method": method.group(1).decode() if method else "unknown", "size": size}
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(found.group(1)), "method": OVERSIZED, "params": params})


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
    """`value` with lone surrogates (valid in JSON, not in UTF-8) escaped, so the transcript can hold it."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def unreadable(line: str) -> str | None:
    """The UNREADABLE stand-in for a request (a message with an id) that the SDK's JSON-RPC parser refuses, and
    would drop unanswered; None for a line it reads, or one naming no id. A request whose strings hold a lone
    surrogate keeps its params, escaped; any other (nested deeper than the parser reads, say) keeps none."""
    from mcp import types

    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except Exception as exc:  # noqa: BLE001 (whatever the parser raises, the SDK's reader drops the request)
        error = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
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
    """The stand-in for a request whose strings hold a lone surrogate, its params escaped; else None."""
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
    params = {"method": storable(method) if isinstance(method, str) else "unknown", "reason": reason}
    params["params"] = storable(message.get("params"))
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": UNREADABLE, "params": params})


class BoundedLines:
    """Lines of a binary stream as text, for the SDK's stdio_server; lines over `limit` and requests the
    parser would drop become stand-ins. Read in a thread of its own (`limiter`)."""

    def __init__(self, stream: BinaryIO, limit: int = LINE_LIMIT_BYTES):
        self.stream = stream
        self.limit = limit
        self.limiter = anyio.CapacityLimiter(1)

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(
                self.stream.readline, self.limit + 1, abandon_on_cancel=True, limiter=self.limiter
            )
            if not line:
                raise StopAsyncIteration
            if len(line) <= self.limit or line.endswith(b"\n") and len(line) == self.limit + 1:
                text = line.decode("utf-8", errors="replace")
                return unreadable(text) or text
            head, tail, size = line[:PEEK], line[-PEEK:], len(line)
            del line
            while not tail.endswith(b"\n"):
                part = await anyio.to_thread.run_sync(
                    self.stream.readline, 1 << 20, abandon_on_cancel=True, limiter=self.limiter
                )
                if not part:
                    break
                size += len(part)
                tail = (tail + part)[-PEEK:]
            logger.warning("message over the stdio limit refused", size=size, limit=self.limit)
            replaced = stand_in(head, tail, size)
            if replaced is not None:
                return replaced


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


async def serve_stdio(lowlevel: Any) -> None:
    """Run a low-level MCP server over this process's stdin and stdout, with the line limit. While it runs,
    fd 0 reads /dev/null and fd 1 writes to stderr, so commands the server starts (and stray prints) can
    neither read the client's messages nor write into its stream."""
    from mcp.server.stdio import stdio_server

    wire_in = _claim(0, os.open(os.devnull, os.O_RDONLY))
    wire_out = _claim(1, os.dup(2))
    # Never closed: a worker thread may still be blocked reading it when the server returns.
    stream = os.fdopen(wire_in, "rb", closefd=False)
    answers = Answers(os.fdopen(wire_out, "wb", closefd=False))
    try:
        async with stdio_server(stdin=BoundedLines(stream), stdout=answers) as (read, write):  # type: ignore[arg-type]
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
