"""Measuring a JSON message from its bytes as they arrive, never parsing it: what it holds in bytes, how many
values a parse would make of it, (for a body padded with whitespace) the same message without the padding, and
its outline: the message with its long strings emptied, small enough to parse for its envelope (its id).

A limit on bytes does not bound what a parse makes: 3 MB of `[],[],...` parse to a million lists, 150 MB of
Python objects, and a session may have 64 calls in flight. So the transports refuse a message holding more than
MAX_REQUEST_VALUES values before anything parses it (jg_mcp.live.stdio for a line, jg_mcp.live.http for a body).
"""

from __future__ import annotations

import re
from typing import Any

MAX_REQUEST_VALUES = 10_000
"""Most values a request may hold, as `Measure` counts them. An MCP request holds a few dozen (a tool call's
arguments are a few strings and numbers); at this limit a parse makes at most about a megabyte of objects besides
its strings, which MAX_REQUEST_BYTES bounds."""
MARKS = b"[{,:"
"""Outside strings, one of these comes before every value but the outermost: a container's first item follows
its bracket, every other item a comma, an object's value its colon."""
BLANK = b" \t\r\n"
"""JSON's whitespace."""
BLANK_RUN = re.compile(rb"[ \t\r\n]+")
STEP = 1 << 20
"""Bytes of a message read whole measured at once (`measured`)."""
OUTLINE_STRING_BYTES = 64
"""Longest string (in bytes, escapes as written, quotes excluded) an outline keeps; longer ones are emptied. Keys
such as `id` and `method` are far shorter, even spelt in escapes."""
OUTLINE_LIMIT = 1 << 20
"""Most bytes an outline holds: MAX_REQUEST_VALUES short strings take less. A message whose outline would be
larger (megabytes of digits) has none."""


class Measure:
    """A message's size as MAX_REQUEST_BYTES counts it, and its values, from its bytes as they arrive.

    Size: a byte counts one, except that an escape (`\\n`, `\\\\`, `\\u00e9`) counts one in all. JSON's escaping,
    up to six bytes a character, so never counts against a write_file's content.

    Values: each string, and each `[`, `{`, `,` and `:` outside strings, so every value a parse makes is counted
    at least once (a string by its quote, a container by its bracket, a number by the mark before it). A quote
    ends a string unless an escape's backslash comes before it, which is how a parser reads it; past the first
    place the message is not JSON, no parser reads on, so what is counted there does not matter. Counting stops
    once past `value_limit` (the message is refused then), so it costs at most a few steps a value.

    With `compact`, `compacted` collects the message with each run of whitespace outside strings made one space:
    the same tokens, so the same message (or the same error) to any parser, without padding.

    With `outline`, `outline` collects the compacted message with every string over OUTLINE_STRING_BYTES emptied:
    the same keys, numbers and structure, a string still a string, so its envelope (which keys it has, of what
    type) reads as the message's own does, from a parse of at most OUTLINE_LIMIT bytes, never of the whole message.
    None once it would pass that limit."""

    def __init__(self, value_limit: int = MAX_REQUEST_VALUES, compact: bool = False, outline: bool = False) -> None:
        self.raw = 0
        """Bytes read."""
        self.size = 0
        """Bytes counted."""
        self.values = 0
        """Values counted, until past value_limit."""
        self.blank = 0
        """Bytes of whitespace outside strings, until values passed value_limit."""
        self.value_limit = value_limit
        self.compacted: list[bytes] | None = [] if compact else None
        self.outline: list[bytes] | None = [] if outline else None
        self.outline_bytes = 0
        self.string = bytearray()
        """The string being read, kept while within OUTLINE_STRING_BYTES (and its closing quote)."""
        self.string_bytes = 0
        self.open = False
        """The bytes so far end in an escape's backslash, the character it escapes still to come."""
        self.inside = False
        """The bytes so far end inside a string."""

    @property
    def too_many(self) -> bool:
        return self.values > self.value_limit

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.raw += len(chunk)
        self.size += len(chunk)
        skip = 0
        if self.open:
            self.size -= 5 if chunk.startswith(b"u") else 1
            skip = 1
        rest = chunk[skip:]
        quotes = rest
        self.open = False
        if b"\\" in rest:  # most chunks hold no escape: the three copies below are for those that do
            plain = rest.replace(b"\\\\", b"")  # the rest of a run of backslashes starts an escape, or nothing
            escapes, unicode = plain.count(b"\\"), plain.count(b"\\u")
            self.open = plain.endswith(b"\\")
            self.size -= (len(rest) - len(plain)) // 2 + escapes - unicode - self.open + 5 * unicode
            quotes = rest.replace(b"\\\\", b"__").replace(b'\\"', b"__")
        if not self.too_many:
            self._scan(chunk, b"_" * skip + quotes)

    def _scan(self, chunk: bytes, quotes: bytes) -> None:
        """Count the values of `chunk`, whose copy `quotes` has every escape's backslash and escaped quote
        overwritten (the same length: its quotes are where strings start and end)."""
        kept = self.compacted
        pos = 0
        while pos < len(chunk) and not self.too_many:
            quote = quotes.find(b'"', pos)
            end = len(chunk) if quote < 0 else quote + 1
            if self.inside:
                if kept is not None:
                    kept.append(chunk[pos:end])
                if self.outline is not None:
                    self._outline_string(chunk[pos:end], closed=quote >= 0)
            else:
                piece = chunk[pos:end]
                blank = len(piece) - len(piece.translate(None, BLANK))
                self.blank += blank
                self.values += len(piece) - len(piece.translate(None, MARKS)) + (quote >= 0)
                if kept is not None or self.outline is not None:
                    piece = BLANK_RUN.sub(b" ", piece) if blank else piece
                if kept is not None:
                    kept.append(piece)
                self._outline_add(piece)
            self.inside ^= quote >= 0
            pos = end

    def _outline_string(self, piece: bytes, closed: bool) -> None:
        """Add a piece of a string (its end, with the closing quote, when `closed`) to the outline: once closed,
        the string whole when it is short, else its closing quote alone, after the opening one: an empty string."""
        self.string_bytes += len(piece)
        short = self.string_bytes <= OUTLINE_STRING_BYTES + 1
        if short:
            self.string += piece
        if closed:
            self._outline_add(bytes(self.string) if short else b'"')
            self.string.clear()
            self.string_bytes = 0

    def _outline_add(self, piece: bytes) -> None:
        if self.outline is None:
            return
        self.outline_bytes += len(piece)
        if self.outline_bytes > OUTLINE_LIMIT:
            self.outline = None
        else:
            self.outline.append(piece)


def measured(
    message: bytes, value_limit: int = MAX_REQUEST_VALUES, compact: bool = False, outline: bool = False
) -> Measure:
    """The measure of a message read whole, taken STEP bytes at a time: each step holds Python's lock for a moment
    only, so a worker thread measuring it never keeps the event loop waiting for longer than a step."""
    measure = Measure(value_limit, compact, outline)
    for start in range(0, len(message), STEP):
        measure.add(message[start : start + STEP])
    return measure


def value_size(value: Any, limit: int) -> int:
    """UTF-8 bytes of a JSON-like value's strings (plus a few per item), counted until past `limit`."""
    if isinstance(value, str):
        return len(value) if len(value) > limit else len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, dict):
        items: Any = (x for kv in value.items() for x in kv)
    elif isinstance(value, (list, tuple)):
        items = iter(value)
    else:
        return 8
    total = 2
    for item in items:
        total += value_size(item, limit) + 2
        if total > limit:
            break
    return total
