"""A transcript read as steps: each `tools/call` request with its response (a step, counted from 1 in transcript
order, whatever the tool, refused calls included) and each file change placed at its step: 0 for session start,
END for the changes recorded when the session closed. What replay, the audit and its page read a session as.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from jg_mcp.record.transcript import (
    Close,
    FileChange,
    Header,
    Request,
    Response,
    blobs_dir,
    read_transcript,
    sha256_bytes,
)

END = -1
"""Step number meaning "the end of the session", session-end changes included."""


class ToolCall(BaseModel):
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


class Change(BaseModel):
    step: int
    """The step that made the change; 0 for session start, END for session end."""
    line: int
    event: FileChange


class Record(BaseModel):
    """A transcript read into the tool calls and file changes that replay and audit work on."""

    path: Path
    header: Header
    calls: list[ToolCall]
    changes: list[Change]
    close: Close | None
    events: list[Any]
    truncated: bool

    @property
    def blobs(self) -> Path:
        return blobs_dir(self.path)

    def last_step(self) -> int:
        return len(self.calls)


def load_record(path: str | Path) -> Record:
    """Read and verify a transcript (TranscriptError names the first bad line)."""
    path = Path(path)
    read = read_transcript(path, verify=True)
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    changes: list[Change] = []
    for event in read.events:
        line = event.seq + 1
        if isinstance(event, Request) and event.method == "tools/call":
            params = event.params or {}
            call = ToolCall(
                step=len(calls) + 1,
                line=line,
                request_id=event.request_id,
                tool=str(params.get("name", "")),
                arguments=params.get("arguments") or {},
            )
            calls.append(call)
            by_id[_key(event.request_id)] = call
        elif isinstance(event, Response) and event.method == "tools/call" and _key(event.request_id) in by_id:
            call = by_id[_key(event.request_id)]
            call.duration_ms, call.is_error = event.duration_ms, event.is_error
            call.result, call.error, call.cancelled = event.result, event.error, event.cancelled
        elif isinstance(event, FileChange):
            owner = by_id.get(_key(event.request_id)) if event.request_id is not None else None
            step = owner.step if owner else (0 if event.cause == "session start" else END)
            changes.append(Change(step=step, line=line, event=event))
    close = read.events[-1] if read.closed else None
    return Record(
        path=path,
        header=read.events[0],
        calls=calls,
        changes=changes,
        close=close,
        events=read.events,
        truncated=read.truncated,
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
    blob = record.blobs / change.sha256
    if not blob.is_file():
        raise BlobError(f"blob {change.sha256} for '{change.path}' is missing from {record.blobs}")
    data = blob.read_bytes()
    if sha256_bytes(data) != change.sha256:
        raise BlobError(f"blob {change.sha256} for '{change.path}' does not match its hash: it was changed")
    return data


class BlobError(Exception):
    """A stored blob is missing or its content does not match the hash it is stored under."""
