"""read_file's pages: lines streamed from an open file, never holding more than a page.

Lines end at b"\\n". A page holds at most `limit` lines and MAX_READ_CHARS characters; a single line
longer than that is cut. Skipping to `offset` counts newlines a chunk at a time (`bytes.count`, never a line at a
time in Python) and reads at most SKIP_BYTES: an offset further into the file is refused with how far the skip got
(`SkipTooFar`). Between chunks the caller's `stop` is asked whether to go on (the call was cancelled, the session is
closing): `PageStopped`. The total is counted only for files up to COUNT_LIMIT_BYTES.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass

MAX_READ_CHARS = 100_000
"""Most characters one page returns."""
MAX_LINE_BYTES = 4 * MAX_READ_CHARS
"""Most bytes of one line read at once (a UTF-8 character is at most 4 bytes)."""
COUNT_LIMIT_BYTES = 64 * 1024 * 1024
"""Files up to this size have their lines counted for `total`."""
SKIP_BYTES = 1024 * 1024 * 1024
"""Most bytes one call reads to reach its `offset` (and past a cut line): about a second of counting newlines.
Lines that start further into the file are not reachable by read_file (`SkipTooFar` says how to read them)."""
SNIFF_BYTES = 8192
CHUNK = 1 << 20
"""Bytes read (and newlines counted) at once; `stop` is asked before each."""


class NotText(Exception):
    """The file holds a NUL byte in its head, or bytes that are not UTF-8 where the page was read."""


class PageStopped(Exception):
    """The caller's `stop` said to give up (the call was cancelled or the session is closing)."""


class SkipTooFar(Exception):
    """The skip to `offset` read SKIP_BYTES without reaching it: `lines` whole lines end in the first `position`
    bytes."""

    def __init__(self, offset: int, lines: int, position: int):
        self.offset, self.lines, self.position = offset, lines, position
        super().__init__(
            f"line {offset} was not reached: read_file reads at most {position} bytes to skip to a line, and they "
            f"hold {lines} lines. Read further with run_command, from that byte on (e.g. `tail -c +{position + 1} "
            "FILE | head -n 100`) or by line (`sed -n 'N,Mp' FILE`)"
        )


@dataclass
class Page:
    lines: list[str]
    more: bool
    """Lines follow the page."""
    total: int | None
    """Lines in the file, or None when it is over COUNT_LIMIT_BYTES."""
    cut: int | None = None
    """The number of a line cut at the page's character limit."""


def _never() -> bool:
    return False


class _Reader:
    """A buffered file read under a byte budget for skipping, asking `stop` before each chunk."""

    def __init__(self, f, skip_bytes: int, stop: Callable[[], bool]):
        self.f = f
        self.left = skip_bytes
        self.stop = stop
        self.skipped = 0
        """Bytes the skips have consumed."""
        self.open_line = False
        """The skips consumed part of a line whose end they have not reached."""

    def _chunk(self) -> bytes:
        if self.stop():
            raise PageStopped
        return self.f.peek(CHUNK)[: min(CHUNK, self.left)]

    def skip_lines(self, n: int) -> int:
        """Read past `n` line ends (fewer at the end of the file); returns how many were passed. Raises
        SkipTooFar (through `too_far`) when the budget ends first."""
        passed = 0
        while passed < n:
            chunk = self._chunk()
            if not chunk:
                if self.left <= 0 and self.f.peek(1)[:1]:
                    raise _OverBudget(passed)
                return passed + self.open_line  # a last line without its newline is a line too
            found = chunk.count(b"\n")
            if passed + found < n:
                take = len(chunk)
            else:
                take = _after_nth(chunk, n - passed)
                found = n - passed
            self._consume(take)
            self.open_line = chunk[take - 1 : take] != b"\n"
            passed += found
        return passed

    def skip_line(self) -> bool:
        """Read past the rest of the current line; False at the end of the file. Raises _OverBudget."""
        return self.skip_lines(1) == 1

    def _consume(self, n: int) -> None:
        self.f.read(n)
        self.left -= n
        self.skipped += n


class _OverBudget(Exception):
    def __init__(self, passed: int):
        self.passed = passed


def _after_nth(data: bytes, n: int) -> int:
    """The position just past the `n`th b"\\n" of `data`, which holds at least `n` (a bisection on counts, in C)."""
    lo, hi = 0, len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        if data.count(b"\n", 0, mid) >= n:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _count_rest(f, budget: int) -> int:
    """Lines from the current position to the end of the file."""
    lines, last = 0, b"\n"
    while budget > 0 and (chunk := f.read(min(CHUNK, budget))):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
        budget -= len(chunk)
    return lines + (last != b"\n")


def read_page(
    fd: int,
    size: int,
    offset: int,
    limit: int,
    skip_bytes: int | None = None,
    stop: Callable[[], bool] = _never,
) -> Page:
    """Lines `offset`.. (from 1) of the open file `fd` of `size` bytes, reading at most `skip_bytes` (default
    SKIP_BYTES) to get there. Raises NotText, SkipTooFar, or PageStopped once `stop()` is true."""
    with open(fd, "rb", buffering=CHUNK, closefd=False) as f:
        reader = _Reader(f, SKIP_BYTES if skip_bytes is None else skip_bytes, stop)
        try:
            return _page(reader, size, offset, limit)
        except _OverBudget as over:
            raise SkipTooFar(offset, over.passed, reader.skipped) from None


def _page(reader: _Reader, size: int, offset: int, limit: int) -> Page:
    f = reader.f
    if b"\0" in f.peek(SNIFF_BYTES)[:SNIFF_BYTES]:
        raise NotText
    skipped = reader.skip_lines(offset - 1)
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
                _skip_rest(reader)
            break
        lines.append(text[:MAX_READ_CHARS])
        cut = skipped + 1
        if not whole and not _skip_rest(reader):
            return Page(lines=lines, more=True, total=None, cut=cut)
        break
    more = bool(held_back) or bool(f.peek(1)[:1])
    total = None
    if size <= COUNT_LIMIT_BYTES:
        total = skipped + len(lines) + held_back + _count_rest(f, COUNT_LIMIT_BYTES)
    return Page(lines=lines, more=more, total=total, cut=cut)


def _skip_rest(reader: _Reader) -> bool:
    """Read past the rest of a cut line; False when the skip budget ended first (what follows is unknown)."""
    try:
        reader.skip_line()
    except _OverBudget:
        return False
    return True
