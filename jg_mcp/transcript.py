"""Transcripts: append-only, hash-chained JSONL of everything a session did.

Each line is one event (a tagged union on `event`). Every event carries `seq` (0, 1, 2, ...)
and `prev`, the sha256 of the previous line's bytes (64 zeros for the header), so an edit,
deletion, reordering or truncation shows. File contents are stored content-addressed in
`RUN.blobs/<sha256>` next to `RUN.jsonl`. Each line is flushed as it is written, so a killed
server leaves a valid prefix.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from jg_mcp.errors import TranscriptError

FORMAT_VERSION = 2
"""1: the first format. 2: the header records the commands' environment and the sandbox limits."""
GENESIS = "0" * 64


class EventBase(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    seq: int = -1
    """Position in the transcript, from 0."""
    prev: str = GENESIS
    """sha256 of the previous line's bytes (without its newline)."""
    ts: float = 0.0
    """Unix time the event was written."""


class Header(EventBase):
    event: Literal["header"] = "header"
    format_version: int = FORMAT_VERSION
    """Transcript format version; readers accept every version up to theirs."""
    jg_mcp_version: str
    run_id: str
    goal: str
    """Goal name."""
    goal_sha256: str
    """Hash of the goal YAML and module as served."""
    condition: str
    """The experimental condition; `goal-only` unless an ablation was named."""
    sandbox: str
    """How run_command was isolated: `bwrap` or `none`."""
    sandbox_limits: dict[str, int] | None = None
    """bwrap's limits on commands (jg_mcp.sandbox.SandboxLimits); None unsandboxed or before format 2."""
    env: dict[str, str] | None = None
    """The environment variables run_command's commands saw, except those in `env_redacted`: under bwrap
    the sandbox's allow-list, unsandboxed the server's own. None before format 2 (not recorded)."""
    env_redacted: list[str] = []
    """Variables the commands saw whose values were not recorded because they look like secrets."""
    workspace: str
    host: dict[str, Any]
    gpu: dict[str, Any]
    """query_gpu's answer at start."""
    started_at: str
    """ISO 8601 UTC."""
    transport: str = "stdio"


class Request(EventBase):
    event: Literal["request"] = "request"
    request_id: str | int | None
    method: str
    """The JSON-RPC method, e.g. `tools/call`."""
    params: dict[str, Any] | None = None


class Response(EventBase):
    event: Literal["response"] = "response"
    request_id: str | int | None
    method: str
    duration_ms: float
    is_error: bool = False
    result: dict[str, Any] | None = None
    error: str | None = None
    """The protocol error's message, when the request failed before any tool ran."""


class FileChange(EventBase):
    event: Literal["file_change"] = "file_change"
    request_id: str | int | None
    path: str
    """Workspace-relative path."""
    op: Literal["write", "delete"]
    sha256: str | None = None
    size: int | None = None
    stored: bool = True
    """False when the content exceeded the blob cap and only its hash was kept."""
    cause: str
    """The tool that changed it: `write_file` or `run_command`."""


class Notice(EventBase):
    event: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"]
    message: str


class Close(EventBase):
    event: Literal["close"] = "close"
    reason: str
    """Why the session ended: `client disconnected`, `SIGTERM`, ..."""
    ended_at: str
    manifest: dict[str, dict[str, Any]]
    """Final workspace: path -> {sha256, size}."""


Event = Annotated[Header | Request | Response | FileChange | Notice | Close, Field(discriminator="event")]
EVENT = TypeAdapter(Event)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blobs_dir(path: Path) -> Path:
    return path.with_suffix(".blobs")


class TranscriptWriter:
    """Appends events, chaining hashes and flushing each line."""

    def __init__(self, path: Path, blob_cap: int = 64 * 1024 * 1024):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.blobs = blobs_dir(self.path)
        self.blobs.mkdir(exist_ok=True)
        self.blob_cap = blob_cap
        self._fh = open(self.path, "xb")
        self._seq = 0
        self._prev = GENESIS
        self.closed = False

    def append(self, event: EventBase) -> EventBase:
        if self.closed:
            raise TranscriptError(self.path, self._seq, "append after close")
        event = event.model_copy(update={"seq": self._seq, "prev": self._prev, "ts": time.time()})
        line = event.model_dump_json().encode()
        self._fh.write(line + b"\n")
        self._fh.flush()
        self._prev = sha256_bytes(line)
        self._seq += 1
        if isinstance(event, Close):
            self.closed = True
            self._fh.close()
        return event

    @property
    def head_sha256(self) -> str:
        """sha256 of the last line written: no later line vouches for it, so publish it elsewhere."""
        return self._prev

    def store_blob(self, data: bytes) -> tuple[str, bool]:
        """Store content by hash; returns (sha256, stored). Content over the cap is hashed only."""
        digest = sha256_bytes(data)
        if len(data) > self.blob_cap:
            return digest, False
        target = self.blobs / digest
        if not target.exists():
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        return digest, True


class ReadResult(BaseModel):
    events: list[Any]
    truncated: bool = False
    """The last line was cut mid-write (the server was killed)."""
    closed: bool = False


def _newer_version(data: Any) -> int | None:
    """The format version of a header newer than this reader, else None (checked before validation,
    which a newer header's new fields would fail with a less useful message)."""
    if isinstance(data, dict) and data.get("event") == "header":
        version = data.get("format_version")
        if isinstance(version, int) and version > FORMAT_VERSION:
            return version
    return None


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
            if (newer := _newer_version(data)) is not None:
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


class LineProblem(BaseModel):
    line: int
    """The line (from 1) the problem is on or before."""
    kind: str
    """invalid line, edited, deleted, reordered, duplicated, truncated, cut short or header."""
    message: str


class Diagnosis(BaseModel):
    problems: list[LineProblem]
    lines: int
    """Complete lines."""
    head_sha256: str
    """sha256 of the last complete line, which no later line vouches for: keep it elsewhere."""
    closed: bool


def diagnose(path: str | Path) -> Diagnosis:
    """Every integrity problem of a transcript, each named with its line, trusting nothing in the file
    (read_transcript stops at the first): edits, deletions, reorderings, duplicates, cuts, headers."""
    raw = Path(path).read_bytes()
    body, rest = raw.split(b"\n")[:-1], raw.split(b"\n")[-1]
    out: list[LineProblem] = []

    def bad(line: int, kind: str, message: str) -> None:
        out.append(LineProblem(line=line, kind=kind, message=message))

    events: list[Any] = []
    for i, line in enumerate(body, start=1):
        events.append(None)
        try:
            data = json.loads(line)
            if (newer := _newer_version(data)) is not None:
                bad(i, "header", f"format version {newer} is newer than this reader's {FORMAT_VERSION}")
                continue
            events[-1] = EVENT.validate_python(data)
        except (json.JSONDecodeError, ValidationError, UnicodeDecodeError) as exc:
            bad(i, "invalid line", f"line {i} is not a valid event (edited or corrupted): {str(exc).splitlines()[0]}")
    if rest:
        bad(len(body) + 1, "truncated", f"line {len(body) + 1} is incomplete (no newline at its end): the "
            "transcript was truncated mid-line")
    seqs = [e.seq if e is not None else i for i, e in enumerate(events)]
    missing = sorted(set(range(max(seqs, default=-1) + 1)) - set(seqs))
    for m in missing:
        after = next((i for i, s in enumerate(seqs, start=1) if s > m), len(seqs) + 1)
        bad(after, "deleted", f"seq {m} is missing: a line was deleted before line {after}")
    misplaced: set[int] = set()
    first_line: dict[int, int] = {}
    for i, s in enumerate(seqs, start=1):
        if s in first_line:
            bad(i, "duplicated", f"line {i} repeats seq {s} of line {first_line[s]}: a line was duplicated")
            misplaced.add(i)
        first_line.setdefault(s, i)
        if s != i - 1 and s - (i - 1) != sum(m < s for m in missing):
            bad(i, "reordered", f"line {i} holds seq {s} where seq {i - 1} belongs: lines were reordered")
        if s != i - 1:
            misplaced.add(i)
    for i, event in enumerate(events, start=1):
        if event is None or i in misplaced or i - 1 in misplaced or (i > 1 and events[i - 2] is None):
            continue
        if i == 1 and event.prev != GENESIS:
            bad(1, "edited", "line 1's prev is not the genesis hash")
        elif i > 1 and event.prev != sha256_bytes(body[i - 2]):
            bad(i - 1, "edited", f"line {i - 1} was altered after it was written: its sha256 no longer matches "
                f"the prev hash on line {i}")
    for i, event in enumerate(events, start=1):
        if (i == 1) != isinstance(event, Header) and event is not None:
            bad(i, "header", "the header must be the first line" if i == 1 else f"line {i} is a second header")
        if isinstance(event, Close) and i != len(events):
            bad(i, "reordered", f"the close event on line {i} is followed by {len(events) - i} more lines")
    if not body:
        bad(1, "header", "empty transcript: no header")
    closed = bool(events) and isinstance(events[-1], Close)
    if not closed:
        bad(len(body), "cut short", f"cut short: no close event; the record ends at line {len(body)} (the server "
            "was killed, or the end was removed)")
    return Diagnosis(problems=out, lines=len(body), head_sha256=sha256_bytes(body[-1]) if body else GENESIS,
                     closed=closed)
