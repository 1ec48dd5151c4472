"""The stdio transport with a limit on the size of a message.

The SDK's stdio reader holds each line whole, however long. This one reads at most LINE_LIMIT_BYTES of
a line; a longer line is read through in chunks and dropped, and a small stand-in request takes its
place: method OVERSIZED, the original id, and the original method and size as params. The transcript
middleware records the stand-in as the refused request's method and size and answers it with an error.
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


def stand_in(head: bytes, tail: bytes, size: int) -> str | None:
    """The OVERSIZED request for a message whose first and last bytes are `head` and `tail`; None when it
    names no id (a notification, or not JSON-RPC), which is dropped."""
    found = ID.search(head) or ID.search(tail)
    if found is None:
        return None
    method = METHOD.search(head) or METHOD.search(tail)
    params: dict[str, Any] = {"method": method.group(1).decode() if method else "unknown", "size": size}
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(found.group(1)), "method": OVERSIZED, "params": params})


class BoundedLines:
    """Lines of a binary stream as text, for the SDK's stdio_server; lines over `limit` become stand-ins."""

    def __init__(self, stream: BinaryIO, limit: int = LINE_LIMIT_BYTES):
        self.stream = stream
        self.limit = limit

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(self.stream.readline, self.limit + 1, abandon_on_cancel=True)
            if not line:
                raise StopAsyncIteration
            if len(line) <= self.limit or line.endswith(b"\n") and len(line) == self.limit + 1:
                return line.decode("utf-8", errors="replace")
            head, tail, size = line[:PEEK], line[-PEEK:], len(line)
            del line
            while not tail.endswith(b"\n"):
                part = await anyio.to_thread.run_sync(self.stream.readline, 1 << 20, abandon_on_cancel=True)
                if not part:
                    break
                size += len(part)
                tail = (tail + part)[-PEEK:]
            logger.warning("message over the stdio limit refused", size=size, limit=self.limit)
            replaced = stand_in(head, tail, size)
            if replaced is not None:
                return replaced


async def serve_stdio(lowlevel: Any) -> None:
    """Run a low-level MCP server over this process's stdin and stdout, with the line limit. While it runs,
    fd 0 reads /dev/null, so commands the server starts cannot read the client's messages."""
    from mcp.server.stdio import stdio_server

    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # Never closed: a worker thread may still be blocked reading it when the server returns.
    stream = os.fdopen(wire, "rb", closefd=False)
    try:
        async with stdio_server(stdin=BoundedLines(stream)) as (read_stream, write_stream):  # type: ignore[arg-type]
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        os.dup2(wire, 0)
