"""A command's output as the runner keeps it: the head and tail of each stream (`CappedBuffer`), read from the
process as it comes (`pump`), and what progress reports may show of it while the command runs (`progress_text`,
`ticker`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import ByteReceiveStream

DEFAULT_CAP = 64 * 1024
LAST_LINE_BYTES = 200
"""The most of a command's last line of output a progress report shows (its end)."""
ProgressFn = Callable[[float, str], Awaitable[None]]


class CappedBuffer:
    """Keeps the first and last `cap/2` bytes of a stream and counts what fell between."""

    def __init__(self, cap: int):
        self.half = cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.done = anyio.Event()
        """Set when the stream reached its end."""

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[: max(0, len(self.tail) - self.half)]

    @property
    def whole(self) -> bool:
        """True while all of the stream so far is in the head, which the result always keeps."""
        return not self.tail

    @property
    def last_line(self) -> str:
        """The last non-blank line of what is kept (its last LAST_LINE_BYTES bytes), found when asked (each progress
        report), never per chunk: a flood of short lines made that a split of the whole tail on the event loop for
        every read, 16,000 lines a chunk, and slowed every session's calls by a hundred times."""
        return _last_line(self.tail) or _last_line(self.head)

    @property
    def elided(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode(errors="replace")
        if not self.elided:
            return head + self.tail.decode(errors="replace")
        return f"{head}\n[... {self.elided} bytes elided ...]\n{self.tail.decode(errors='replace')}"


def _last_line(data: bytearray) -> str:
    lines = [ln for ln in data.splitlines() if ln.strip()]
    return lines[-1][-LAST_LINE_BYTES:].decode(errors="replace") if lines else ""


async def pump(stream: ByteReceiveStream | None, buf: CappedBuffer) -> None:
    try:
        if stream is not None:
            async for chunk in stream:
                buf.add(chunk)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        buf.done.set()


def progress_text(out: CappedBuffer, err: CappedBuffer) -> str:
    """What a progress report may show of a command's output so far: only bytes its result is certain to keep.

    The head of each stream is never dropped, so while both streams are whole in their heads, the last line is
    shown. Once either has spilled past its head, a line of its tail may be cut from the result by later output,
    and a line shown in progress would then be seen by the agent and missing from the transcript: only the byte
    counts are shown, never text (a red team hid a line that way, between two floods of padding)."""
    if out.whole and err.whole:
        return out.last_line or err.last_line
    kept = f"the first {out.half} bytes of each"
    return f"{out.total} bytes of stdout and {err.total} bytes of stderr so far (lines are shown only within {kept})"


async def ticker(start: float, every: float, out: CappedBuffer, err: CappedBuffer, fn: ProgressFn) -> None:
    while True:
        await anyio.sleep(every)
        elapsed = time.monotonic() - start
        await fn(elapsed, progress_text(out, err))
