"""A transcript's integrity, checked without trusting anything in the file: every edited, deleted,
reordered, duplicated or cut line named (read_transcript stops at the first problem), every stored blob against
its hash, and with the transcript key every line's MAC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from jg_mcp.models import Strict
from jg_mcp.record.events import EVENT, FORMAT_VERSION, GENESIS, Close, FileChange, Header, sha256_bytes
from jg_mcp.record.keys import key_id, mac_ok
from jg_mcp.record.reading import newer_version
from jg_mcp.record.transcript import blobs_dir, stored_blob


class LineProblem(Strict):
    line: int | None = None
    """The line (from 1) the problem is on or before; None for the whole file."""
    kind: str
    """invalid line, edited, deleted, reordered, duplicated, truncated, cut short, header, blob or authenticity."""
    message: str
    severity: Literal["error", "warning"] = "error"
    """A warning says what could not be checked (authenticity without the key)."""


class Diagnosis(Strict):
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
    events, out = _parse(body)
    if rest:
        n = len(body) + 1
        message = f"line {n} is incomplete (no newline at its end): the transcript was truncated mid-line"
        out.append(_problem(n, "truncated", message))
    seqs = [e.seq if e is not None else i for i, e in enumerate(events)]
    order, misplaced = _order_problems(seqs)
    out += order
    out += _chain_problems(events, body, misplaced)
    out += _placement_problems(events)
    if not body:
        out.append(_problem(1, "header", "empty transcript: no header"))
    closed = bool(events) and isinstance(events[-1], Close)
    if not closed:
        message = (
            f"cut short: no close event; the record ends at line {len(body)} (the server was killed, or the end "
            "was removed)"
        )
        out.append(_problem(len(body), "cut short", message))
    return Diagnosis(
        problems=out, lines=len(body), head_sha256=sha256_bytes(body[-1]) if body else GENESIS, closed=closed
    )


def _problem(line: int, kind: str, message: str) -> LineProblem:
    return LineProblem(line=line, kind=kind, message=message)


def _parse(body: list[bytes]) -> tuple[list[Any], list[LineProblem]]:
    """Each complete line as an event (None where it is not a valid one), and the problems of those that are not."""
    events: list[Any] = []
    out: list[LineProblem] = []
    for i, line in enumerate(body, start=1):
        events.append(None)
        try:
            data = json.loads(line)
            if (newer := newer_version(data)) is not None:
                out.append(
                    _problem(i, "header", f"format version {newer} is newer than this reader's {FORMAT_VERSION}")
                )
                continue
            events[-1] = EVENT.validate_python(data)
        except (json.JSONDecodeError, ValidationError, UnicodeDecodeError) as exc:
            message = f"line {i} is not a valid event (edited or corrupted): {str(exc).splitlines()[0]}"
            out.append(_problem(i, "invalid line", message))
    return events, out


def _order_problems(seqs: list[int]) -> tuple[list[LineProblem], set[int]]:
    """Deleted, duplicated and reordered lines, from each line's seq (an invalid line counts as in place);
    and the lines out of place, whose prev hashes say nothing about their neighbours."""
    out: list[LineProblem] = []
    missing = sorted(set(range(max(seqs, default=-1) + 1)) - set(seqs))
    for m in missing:
        after = next((i for i, s in enumerate(seqs, start=1) if s > m), len(seqs) + 1)
        out.append(_problem(after, "deleted", f"seq {m} is missing: a line was deleted before line {after}"))
    misplaced: set[int] = set()
    first_line: dict[int, int] = {}
    for i, s in enumerate(seqs, start=1):
        if s in first_line:
            message = f"line {i} repeats seq {s} of line {first_line[s]}: a line was duplicated"
            out.append(_problem(i, "duplicated", message))
            misplaced.add(i)
        first_line.setdefault(s, i)
        if s != i - 1 and s - (i - 1) != sum(m < s for m in missing):
            message = f"line {i} holds seq {s} where seq {i - 1} belongs: lines were reordered"
            out.append(_problem(i, "reordered", message))
        if s != i - 1:
            misplaced.add(i)
    return out, misplaced


def _chain_problems(events: list[Any], body: list[bytes], misplaced: set[int]) -> list[LineProblem]:
    """Edited lines: a valid line in place whose prev hash does not match the line before it."""
    out: list[LineProblem] = []
    for i, event in enumerate(events, start=1):
        if event is None or i in misplaced or i - 1 in misplaced or (i > 1 and events[i - 2] is None):
            continue
        if i == 1 and event.prev != GENESIS:
            out.append(_problem(1, "edited", "line 1's prev is not the genesis hash"))
        elif i > 1 and event.prev != sha256_bytes(body[i - 2]):
            message = (
                f"line {i - 1} was altered after it was written: its sha256 no longer matches the prev hash on line {i}"
            )
            out.append(_problem(i - 1, "edited", message))
    return out


def _placement_problems(events: list[Any]) -> list[LineProblem]:
    """A header anywhere but first (or none first), a close event anywhere but last."""
    out: list[LineProblem] = []
    for i, event in enumerate(events, start=1):
        if (i == 1) != isinstance(event, Header) and event is not None:
            message = "the header must be the first line" if i == 1 else f"line {i} is a second header"
            out.append(_problem(i, "header", message))
        if isinstance(event, Close) and i != len(events):
            message = f"the close event on line {i} is followed by {len(events) - i} more lines"
            out.append(_problem(i, "reordered", message))
    return out


def blob_problems(path: Path) -> list[LineProblem]:
    """Every stored blob a file change names exists and hashes to its name."""
    out = []
    for i, line in enumerate(path.read_bytes().split(b"\n")[:-1], start=1):
        try:
            event = EVENT.validate_python(json.loads(line))
        except (json.JSONDecodeError, ValidationError, UnicodeDecodeError):
            continue
        if isinstance(event, FileChange) and event.op == "write" and event.stored:
            data = stored_blob(blobs_dir(path), str(event.sha256))
            if data is None:
                problem = "is missing"
            elif sha256_bytes(data) != event.sha256:
                problem = "was altered: its content no longer matches its hash"
            else:
                continue
            message = f"blob {event.sha256} of '{event.path}' (line {i}) {problem}"
            out.append(LineProblem(kind="blob", line=i, message=message))
    return out


def authenticity_problems(path: Path, key: bytes | None) -> list[LineProblem]:
    """With the transcript key, every line must carry a valid HMAC under it: a line without one was written,
    or the chain re-made, by someone without the key. Without the key, a warning that this was not checked."""
    if key is None:
        return [
            LineProblem(
                kind="authenticity",
                severity="warning",
                message="authenticity not checked (no key given): the hash chain shows edits, but anyone "
                "able to write the file could have re-chained it; audit with the transcript key to check",
            )
        ]
    lines = path.read_bytes().split(b"\n")[:-1]
    out: list[LineProblem] = []
    try:
        head = json.loads(lines[0]) if lines else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        head = {}
    recorded_id = head.get("key_id") if isinstance(head, dict) else None
    if recorded_id != key_id(key):
        out.append(
            LineProblem(
                kind="authenticity",
                line=1,
                message=(
                    "the transcript was not keyed"
                    if recorded_id is None
                    else "the transcript was keyed with another key "
                    f"(key id {recorded_id}, this key's is {key_id(key)})"
                ),
            )
        )
    bad = []
    for i, line in enumerate(lines, start=1):
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        if not isinstance(data, dict) or not mac_ok(line, data.get("mac"), key):
            bad.append(i)
    out += [
        LineProblem(
            kind="authenticity",
            line=i,
            message=f"line {i} carries no valid MAC under the key: it was written or re-chained without it",
        )
        for i in bad[:20]
    ]
    if len(bad) > 20:
        out.append(
            LineProblem(
                kind="authenticity",
                line=bad[20],
                message=f"{len(bad) - 20} more lines carry no valid MAC under the key",
            )
        )
    return out
