"""Text from a transcript (the agent's commands, file names, messages) made safe to print on a terminal."""

from __future__ import annotations

import re
from collections.abc import Iterable

STEERING = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
"""Control characters (escape sequences, carriage returns, newlines, C1 codes) and the Unicode marks that move
or reorder text (zero-width, line and paragraph separators, bidirectional overrides)."""


def printable(line: str) -> str:
    """`line` as one line that cannot move the cursor or reorder what is shown: each steering character is
    written out as its escape (`\\x1b`, `\\u202e`)."""
    return STEERING.sub(lambda m: m.group().encode("unicode_escape").decode(), line)


def lines(rows: Iterable[str]) -> str:
    """`rows` joined by newlines, each made printable: the only line breaks are between rows."""
    return "\n".join(printable(row) for row in rows)
