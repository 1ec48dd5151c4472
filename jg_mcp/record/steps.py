"""A transcript read as steps: each `tools/call` request with its response (a step, counted from 1 in transcript
order, whatever the tool, refused calls included) and each file change placed at its step: 0 for session start,
END for the changes recorded when the session closed. What replay, the audit and its page read a session as.

Responses and file changes name their request by JSON-RPC id only, so a call is found by id: a response pairs with
the unanswered call of its id, a file change goes to that call (or, once answered, to the last call of its id: a
cancelled call's changes may be recorded after its response). The server answers at once, with an error on the next
line, a request whose id is already in flight (jg_mcp.live.recording), so at most one call per id is ever unanswered
and that refusal pairs with the request before it. A transcript with two unanswered calls of one id (forged, or from
an older server that served both) cannot say which response or change is whose: its record names each such request
in `problems` (the audit reports them as integrity errors) and pairs by order, the earliest unanswered first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jg_mcp.models import Strict
from jg_mcp.record.events import Close, FileChange, Header, Request, Response, sha256_bytes
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.transcript import blobs_dir, stored_blob

END = -1
"""Step number meaning "the end of the session", session-end changes included."""


class ToolCall(Strict):
    step: int
    """1 for the first tools/call in the transcript, 2 for the next, ..."""
    line: int
    """Transcript line of the request."""
    request_id: str | int | None
    tool: str
    arguments: dict[str, Any]
    duration_ms: float | None = None
    """None when no response was recorded (the session was cut short)."""
    is_error: bool = False
    result: dict[str, Any] | None = None
    error: str | None = None
    cancelled: bool = False
    """The call was cancelled before it finished (the client cancelled it or disconnected)."""

    @property
    def text(self) -> str:
        """The result's first text content, or the protocol error."""
        content = (self.result or {}).get("content") or []
        if content and isinstance(content[0], dict) and "text" in content[0]:
            return str(content[0]["text"])
        return self.error or ""

    @property
    def structured(self) -> dict[str, Any]:
        return (self.result or {}).get("structuredContent") or {}


class Change(Strict):
    step: int
    """The step that made the change; 0 for session start, END for session end."""
    line: int
    event: FileChange


class IdProblem(Strict):
    line: int
    """Transcript line of the request that reused an id still in flight."""
    message: str


class Record(Strict):
    """A transcript read into the tool calls and file changes that replay and audit work on."""

    path: Path
    header: Header
    calls: list[ToolCall]
    changes: list[Change]
    close: Close | None
    events: list[Any]
    truncated: bool
    problems: list[IdProblem] = []
    """Requests that reused the id of a call still unanswered (and were not refused at once): what follows
    under that id is paired by order, which may credit one call with what another did."""

    @property
    def blobs(self) -> Path:
        return blobs_dir(self.path)

    def last_step(self) -> int:
        return len(self.calls)


class _Calls:
    """The calls read so far, by id: the unanswered ones in order, and the last one of each id."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.unanswered: dict[str, list[ToolCall]] = {}
        self.last: dict[str, ToolCall] = {}
        self.problems: list[IdProblem] = []

    def add(self, event: Request, line: int, refusal: Response | None) -> None:
        """A tools/call request; `refusal` is the response on the next line when it reuses a live id."""
        params = event.params or {}
        call = ToolCall(
            step=len(self.calls) + 1,
            line=line,
            request_id=event.request_id,
            tool=str(params.get("name", "")),
            arguments=params.get("arguments") or {},
        )
        self.calls.append(call)
        key, waiting = _key(event.request_id), self.unanswered.setdefault(_key(event.request_id), [])
        if waiting and refusal is not None:
            _answer(call, refusal)
            return
        if waiting:
            self.problems.append(
                IdProblem(
                    line=line,
                    message=f"line {line} reuses request id {key} while the call on line {waiting[0].line} with that "
                    "id is unanswered: which response and file changes belong to which of them cannot be told (they "
                    "are credited by order, the earliest unanswered first)",
                )
            )
        waiting.append(call)
        self.last[key] = call

    def answer(self, event: Response) -> None:
        key = _key(event.request_id)
        waiting = self.unanswered.get(key)
        call = waiting.pop(0) if waiting else self.last.get(key)
        if call is not None:
            _answer(call, event)

    def owner(self, request_id: str | int | None) -> ToolCall | None:
        """The call a file change recorded under `request_id` belongs to."""
        if request_id is None:
            return None
        key = _key(request_id)
        waiting = self.unanswered.get(key)
        return waiting[0] if waiting else self.last.get(key)


def _answer(call: ToolCall, event: Response) -> None:
    call.duration_ms, call.is_error = event.duration_ms, event.is_error
    call.result, call.error, call.cancelled = event.result, event.error, event.cancelled


def _refusal(events: list[Any], i: int, request: Request) -> Response | None:
    """The error response on the line after `request` (events[i]) with its id, if there is one."""
    following = events[i + 1] if i + 1 < len(events) else None
    if (
        isinstance(following, Response)
        and following.is_error
        and following.method == request.method
        and _key(following.request_id) == _key(request.request_id)
    ):
        return following
    return None


def load_record(path: str | Path) -> Record:
    """Read and verify a transcript (TranscriptError names the first bad line)."""
    path = Path(path)
    read = read_transcript(path, verify=True)
    calls = _Calls()
    changes: list[Change] = []
    skip: set[int] = set()
    for i, event in enumerate(read.events):
        line = event.seq + 1
        if i in skip:
            continue
        if isinstance(event, Request) and event.method == "tools/call":
            live = bool(calls.unanswered.get(_key(event.request_id)))
            refusal = _refusal(read.events, i, event) if live else None
            if refusal is not None:
                skip.add(i + 1)
            calls.add(event, line, refusal)
        elif isinstance(event, Response) and event.method == "tools/call":
            calls.answer(event)
        elif isinstance(event, FileChange):
            owner = calls.owner(event.request_id)
            step = owner.step if owner else (0 if event.cause == "session start" else END)
            changes.append(Change(step=step, line=line, event=event))
    close = read.events[-1] if read.closed else None
    return Record(
        path=path,
        header=read.events[0],
        calls=calls.calls,
        changes=changes,
        close=close,
        events=read.events,
        truncated=read.truncated,
        problems=calls.problems,
    )


def _key(request_id: str | int | None) -> str:
    """A request id as JSON: 500 and "500" are two requests."""
    return json.dumps(request_id)


def _included(change: Change, step: int) -> bool:
    return step == END or change.step != END and change.step <= step


def state_at(record: Record, step: int) -> dict[str, FileChange]:
    """The workspace's files after `step` (END: the end): path -> the FileChange that last wrote it."""
    files: dict[str, FileChange] = {}
    for change in record.changes:
        if not _included(change, step):
            continue
        if change.event.op == "delete":
            files.pop(change.event.path, None)
        else:
            files[change.event.path] = change.event
    return files


def read_blob(record: Record, change: FileChange) -> bytes | None:
    """The stored content of a write, checked against its hash; None when it was not stored."""
    if not change.stored or change.sha256 is None:
        return None
    data = stored_blob(record.blobs, change.sha256)
    if data is None:
        raise BlobError(f"blob {change.sha256} for '{change.path}' is missing from {record.blobs}")
    if sha256_bytes(data) != change.sha256:
        raise BlobError(f"blob {change.sha256} for '{change.path}' does not match its hash: it was changed")
    return data


class BlobError(Exception):
    """A stored blob is missing or its content does not match the hash it is stored under."""
