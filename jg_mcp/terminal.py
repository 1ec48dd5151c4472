"""Text from a transcript (the agent's commands, file names, messages) made safe to print on a terminal.

Two depths. `printable` and `lines` escape a value where a command prints it, newlines included, so agent text
cannot even start a line of its own. `guarded` is the net under every command at once (the CLI runs each
command inside it): whatever reaches sys.stdout or sys.stderr through Python, a print that forgot `printable`
included, has its steering characters written out, line breaks and tabs kept. The MCP stdio stream is not
touched: it is written to the stream's binary buffer, which passes through."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

STEERING = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
"""Control characters (escape sequences, carriage returns, newlines, C1 codes) and the Unicode marks that move
or reorder text (zero-width, line and paragraph separators, bidirectional overrides)."""

STEERING_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
"""STEERING but for the line feed and the tab, which end a line or move right and can neither hide nor rewrite
what is already shown: what `guarded` streams let through."""

SHOWN_COMMAND_CHARS = 100
"""How much of a recorded command a one-line row (the audit's and the replay's) shows."""


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode()


def printable(line: str) -> str:
    """`line` as one line that cannot move the cursor or reorder what is shown: each steering character is
    written out as its escape (`\\x1b`, `\\u202e`)."""
    return STEERING.sub(_escape, line)


def lines(rows: Iterable[str]) -> str:
    """`rows` joined by newlines, each made printable: the only line breaks are between rows."""
    return "\n".join(printable(row) for row in rows)


class SteeringGuard:
    """A text stream that writes out every steering character but line feeds and tabs (STEERING_IN_TEXT) before
    passing the text on; everything else (buffer, fileno, isatty, encoding) is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(STEERING_IN_TEXT.sub(_escape, text))
        return len(text)

    def writelines(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def unguarded(stream: TextIO) -> TextIO:
    """The stream under a SteeringGuard, for output the program composes itself and means to steer (a progress bar
    redrawn with carriage returns); any other stream as it is."""
    return stream.stream if isinstance(stream, SteeringGuard) else stream


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """sys.stdout and sys.stderr wrapped in a SteeringGuard for the duration (once: an inner call changes nothing), put
    back as they were after."""
    saved = sys.stdout, sys.stderr
    sys.stdout = saved[0] if isinstance(saved[0], SteeringGuard) else SteeringGuard(saved[0])
    sys.stderr = saved[1] if isinstance(saved[1], SteeringGuard) else SteeringGuard(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
