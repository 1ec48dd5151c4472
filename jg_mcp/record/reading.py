"""Reading a transcript back: each line validated as an event, and with `verify` the sequence numbers and the hash
chain checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jg_mcp.errors import TranscriptError
from jg_mcp.models import Strict
from jg_mcp.record.events import EVENT, FORMAT_VERSION, GENESIS, Close, Header, sha256_bytes


class ReadResult(Strict):
    events: list[Any]
    truncated: bool = False
    """The last line was cut mid-write (the server was killed)."""
    closed: bool = False


def newer_version(data: Any) -> int | None:
    """The format version of a header newer than this reader, else None (checked before validation,
    which a newer header's new fields would fail with a less useful message)."""
    if isinstance(data, dict) and data.get("event") == "header":
        version = data.get("format_version")
        if isinstance(version, int) and version > FORMAT_VERSION:
            return version
    return None


FIRST_LINES = 3
"""How many of a file's first lines `not_a_transcript` reads: a transcript whose header alone was damaged still has
events after it, and is audited line by line."""


def not_a_transcript(path: str | Path) -> str | None:
    """Why the file is plainly not a transcript (none of its first lines is a JSON object with an "event" field),
    or None. The audit names every bad line of a damaged transcript; a file that never was one (a README, a log)
    gets one sentence instead. An empty file is left to the reader, which names it."""
    seen = 0
    with Path(path).open("rb") as f:
        for _ in range(FIRST_LINES):
            line = f.readline(1 << 20).strip()
            if not line:
                continue
            seen += 1
            if line.startswith(b"{") and b'"event"' in line:
                return None
    if not seen:
        return None
    return (
        f"not a jg-mcp transcript: none of its first {FIRST_LINES} lines is a JSON event (a transcript is the "
        "RUN_ID.jsonl a session wrote under transcripts/)"
    )


def read_transcript(path: str | Path, verify: bool = True) -> ReadResult:
    """Parse a transcript; with `verify`, check sequence numbers and the hash chain.

    A final line without a newline is what a killed server leaves: it is reported as
    `truncated` and ignored. Any other problem raises TranscriptError naming the line.
    """
    path = Path(path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    truncated = lines[-1] != b""
    body = lines[:-1]
    events: list[Any] = []
    prev = GENESIS
    for i, line in enumerate(body, start=1):
        try:
            data = json.loads(line)
            if (newer := newer_version(data)) is not None:
                raise TranscriptError(path, i, f"format version {newer} is newer than {FORMAT_VERSION}")
            event = EVENT.validate_python(data)
        except (json.JSONDecodeError, ValidationError) as exc:
            raise TranscriptError(path, i, f"not a valid event: {str(exc).splitlines()[0]}") from None
        if verify:
            if event.seq != i - 1:
                raise TranscriptError(path, i, f"sequence number {event.seq}, expected {i - 1}")
            if event.prev != prev:
                raise TranscriptError(path, i, "hash chain broken: the previous line was changed or removed")
            if (i == 1) != isinstance(event, Header):
                raise TranscriptError(path, i, "the header must be the first line and only the first")
        prev = sha256_bytes(line)
        events.append(event)
    if not events and verify:
        raise TranscriptError(path, 1, "empty transcript: no header")
    closed = bool(events) and isinstance(events[-1], Close)
    return ReadResult(events=events, truncated=truncated, closed=closed)
