"""The wire between harness and candidate process: length-prefixed JSON headers, each followed by raw blobs.

No pickle: the harness never deserialises objects from the candidate process, only JSON and bytes.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_LEN = struct.Struct("<Q")
MAX_HEADER = 1 << 24
MAX_BLOB = 1 << 36


class ChannelClosed(Exception):
    """The other end closed the channel (the process exited)."""


class ChannelTimeout(Exception):
    """Nothing arrived before the deadline."""


def send(fd: int, header: dict[str, Any], blobs: list[bytes] = (), write: Any = os.write) -> None:
    """Write one message: the header (with the blob sizes added) then each blob."""
    header = {**header, "blobs": [len(b) for b in blobs]}
    body = json.dumps(header).encode()
    for chunk in (_LEN.pack(len(body)), body, *blobs):
        view = memoryview(chunk)
        while view:
            view = view[write(fd, view) :]


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
            chunk = os.read(self.fd, min(n - got, 1 << 22))
            if not chunk:
                raise ChannelClosed()
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def recv(self, timeout_s: float) -> tuple[dict[str, Any], list[bytes]]:
        deadline = time.monotonic() + timeout_s
        (size,) = _LEN.unpack(self._read(_LEN.size, deadline))
        if size > MAX_HEADER:
            raise ChannelClosed()
        header = json.loads(self._read(size, deadline))
        sizes = header.get("blobs", []) if isinstance(header, dict) else None
        if not isinstance(sizes, list) or not all(isinstance(n, int) and 0 <= n <= MAX_BLOB for n in sizes):
            raise ValueError("malformed message header")
        blobs = [self._read(n, deadline + 60) for n in sizes]
        return header, blobs
