"""The wire between harness and worker: length-prefixed JSON messages on a socket or pipe, with deadlines.

No pickle: the harness never deserialises objects from a worker, only JSON, which it then validates against
the typed messages of `jg_mcp.eval.messages`.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_LEN = struct.Struct("<Q")
MAX_MESSAGE = 1 << 24


class ChannelClosed(Exception):
    """The other end closed the channel (the process exited)."""


class ChannelTimeout(Exception):
    """Nothing arrived before the deadline."""


class Malformed(ValueError):
    """Bytes that are not a message (too long, not JSON, not an object)."""


def send(fd: int, message: dict[str, Any]) -> None:
    """Write one message: its length, then its JSON."""
    body = json.dumps(message).encode()
    view = memoryview(_LEN.pack(len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


class Reader:
    """Reads messages from a file descriptor with a deadline per message."""

    def __init__(self, fd: int):
        self.fd = fd

    def _read(self, n: int, deadline: float) -> bytes:
        parts, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise ChannelTimeout()
            try:
                chunk = os.read(self.fd, min(n - got, 1 << 22))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ChannelClosed()
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def recv(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        (size,) = _LEN.unpack(self._read(_LEN.size, deadline))
        if size > MAX_MESSAGE:
            raise Malformed(f"a message of {size} bytes (the limit is {MAX_MESSAGE})")
        try:
            message = json.loads(self._read(size, deadline))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise Malformed(f"not JSON: {exc}") from None
        if not isinstance(message, dict):
            raise Malformed("not a JSON object")
        return message
