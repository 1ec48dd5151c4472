"""read_file's pages: lines streamed from an open file, never holding more than a page.

Lines end at b"\\n". A page holds at most `limit` lines and MAX_READ_CHARS characters; a single line
longer than that is cut. Skipping to `offset` and counting the lines read through the file in bounded
chunks; the total is counted only for files up to COUNT_LIMIT_BYTES.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

MAX_READ_CHARS = 100_000
"""Most characters one page returns."""
MAX_LINE_BYTES = 4 * MAX_READ_CHARS
"""Most bytes of one line read at once (a UTF-8 character is at most 4 bytes)."""
COUNT_LIMIT_BYTES = 64 * 1024 * 1024
"""Files up to this size have their lines counted for `total`."""
SNIFF_BYTES = 8192
CHUNK = 1 << 16


class NotText(Exception):
    """The file holds a NUL byte in its head, or bytes that are not UTF-8 where the page was read."""


@dataclass
class Page:
    lines: list[str]
    more: bool
    """Lines follow the page."""
    total: int | None
    """Lines in the file, or None when it is over COUNT_LIMIT_BYTES."""
    cut: int | None = None
    """The number of a line cut at the page's character limit."""


def _skip_line(f) -> bool:
    """Read past the rest of the current line; False at the end of the file."""
    while True:
        part = f.readline(CHUNK)
        if not part:
            return False
        if part.endswith(b"\n"):
            return True


def _count_rest(f, budget: int) -> int:
    """Lines from the current position to the end of the file."""
    lines, last = 0, b"\n"
    while budget > 0 and (chunk := f.read(min(CHUNK, budget))):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
        budget -= len(chunk)
    return lines + (last != b"\n")


def read_page(fd: int, size: int, offset: int, limit: int) -> Page:
    """Lines `offset`.. (from 1) of the open file `fd` of `size` bytes. Raises NotText."""
    with open(fd, "rb", buffering=CHUNK, closefd=False) as f:
        return _page(f, size, offset, limit)


def _page(f, size: int, offset: int, limit: int) -> Page:
    if b"\0" in f.peek(SNIFF_BYTES)[:SNIFF_BYTES]:
        raise NotText
    skipped = 0
    while skipped < offset - 1 and _skip_line(f):
        skipped += 1
    lines: list[str] = []
    chars, cut, held_back = 0, None, 0
    while len(lines) < limit:
        raw = f.readline(MAX_LINE_BYTES)
        if not raw:
            break
        whole = raw.endswith(b"\n") or len(raw) < MAX_LINE_BYTES
        try:
            text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=whole)
        except UnicodeDecodeError:
            raise NotText from None
        if chars + len(text) <= MAX_READ_CHARS and whole:
            lines.append(text)
            chars += len(text)
            continue
        if lines:
            held_back = 1
            if not whole:
                _skip_line(f)
            break
        lines.append(text[:MAX_READ_CHARS])
        cut = skipped + 1
        if not whole:
            _skip_line(f)
        break
    more = bool(held_back) or bool(f.peek(1)[:1])
    total = None
    if size <= COUNT_LIMIT_BYTES:
        total = skipped + len(lines) + held_back + _count_rest(f, COUNT_LIMIT_BYTES)
    return Page(lines=lines, more=more, total=total, cut=cut)
