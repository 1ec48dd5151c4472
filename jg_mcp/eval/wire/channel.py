"""The wire between harness and worker: length-prefixed JSON messages on a socket or pipe, with deadlines.

No pickle: the harness never deserialises objects from a worker, only JSON, which it then validates against
the typed messages of `jg_mcp.eval.wire.messages`.
"""

from __future__ import annotations

import json
import math
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
    """Write one message: its length, then its JSON (text that is not valid Unicode, such as a lone surrogate in an
    exception's message, sent as `?`: the reader refuses it)."""
    body = json.dumps(message, ensure_ascii=False, allow_nan=False).encode("utf-8", "replace")
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
        return decode(self._read(size, deadline))


def decode(body: bytes) -> dict[str, Any]:
    """One frame's bytes as a JSON object. The bytes may be the candidate's, so any failure to decode them is
    `Malformed`, whatever it is: not UTF-8, not JSON, nested past the recursion limit, an integer past Python's
    digit limit, NaN or an infinite number, a lone surrogate (which no report could be written with), not an
    object."""
    try:
        message = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite)
        json.dumps(message, ensure_ascii=False).encode()
    except Exception as exc:  # the boundary of untrusted bytes: every failure is the frame's
        raise Malformed(f"not a JSON message ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(message, dict):
        raise Malformed("not a JSON object")
    return message


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a message may hold")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} overflows a float")
    return value
