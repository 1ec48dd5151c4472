"""Transcripts: append-only, hash-chained JSONL of everything a session did; this module writes them.

Each line is one event (jg_mcp.record.events, a tagged union on `event`). Every event carries `seq` (0, 1, 2, ...)
and `prev`, the sha256 of the previous line's bytes (64 zeros for the header), so an edit,
deletion, reordering or truncation shows. File contents are stored content-addressed in
`RUN.blobs/<sha256>` next to `RUN.jsonl`, up to a cap per file (COMMAND_BLOB_CAP, WRITE_BLOB_CAP) and
budgets per transcript (BLOB_BUDGET_BYTES, BLOB_FILES_BUDGET); past any, content is recorded by hash and size only. Each
line is written whole with one positioned write as it is appended, so a killed server leaves a valid prefix. One
writer per transcript: appends and blob stores from the event loop and from worker threads are serialised by a
lock, so the order of lines is the order of completion.

Lines have a budget too (TRANSCRIPT_BUDGET_BYTES): a tiny request can make a huge line (a read of a page of
control characters is answered with megabytes of escapes). Past it, each further event keeps its place in the
chain, its kind and ids (every request and its response still pair), but its large payload fields (a request's
params, a response's result and error, a notice's message) are recorded by size and sha256 only, each line then
a few KiB at most, and a scan's file changes past the first CHANGES_PAST_BUDGET are summarised in one notice; one
error notice says from which line on, so an audit fails on the record being incomplete.

A write the file system refuses (a full disk: the agent's commands can fill the one the transcript shares with the
workspace) leaves nothing behind: the file is cut back to the end of the last whole line, and the event stays in
memory, numbered and chained, to be written in order by the next append (up to PENDING_LIMIT_BYTES; past it, later
events are counted, not kept). The server goes on answering. When the backlog is written, a notice says at which
seq the disk refused writes and for how long (a warning; an error when events were lost), so an audit reads a disk
that filled as that, never as tampering.

With a transcript key, every event also carries `mac`, an HMAC-SHA256 under the key of the line as
written with `"mac":null`; since that line holds `prev`, the hash of the line before, nobody without the
key can edit a line and re-chain the rest.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jg_mcp import log
from jg_mcp.errors import TranscriptError
from jg_mcp.live.safefs import read_bounded
from jg_mcp.record.blobs import BlobStore
from jg_mcp.record.events import (
    GENESIS,
    KEPT_PAST_BUDGET_BYTES,
    Close,
    EventBase,
    FileChange,
    Header,
    Notice,
    sha256_bytes,
    summarise_changes,
    without_large_payloads,
)
from jg_mcp.record.keys import mac_line

COMMAND_BLOB_CAP = 8 * 1024 * 1024
"""Largest file content stored as a blob when a scan finds it changed by run_command (or at session start
or end). Commands can make files of any size (build outputs, data), so past this only the hash and size are
recorded (`FileChange.stored` false) and replay lists the file as not reconstructible."""
WRITE_BLOB_CAP = 16 * 1024 * 1024
"""Largest content write_file accepts (the server refuses more), and the blob cap of the changes it records:
every file the agent wrote with write_file is stored whole, so replay can rebuild it. Larger than
COMMAND_BLOB_CAP because the agent's own source is what an audit reads; the stdio line limit
(jg_mcp.live.stdio.LINE_LIMIT_BYTES) and the server's request limit leave room for it."""
BLOB_BUDGET_BYTES = 2 * 1024 * 1024 * 1024
"""Most bytes one transcript's blob store takes. A command makes files for nothing (a sparse 8 MiB file takes 4
KiB of disk, and the workspace quota is checked only after the command), each stored densely: without a budget
one loop of `truncate` filled gigabytes of the transcripts' disk per command. A session's sources and artefacts
take far less. Content that does not fit what is left is recorded by hash and size only (`FileChange.stored`
false; smaller content, such as a source file, may still fit), and a warning notice says so once."""
TRANSCRIPT_BUDGET_BYTES = 1024 * 1024 * 1024
"""Most bytes of lines one transcript records whole. A ~120-byte read_file of a page of 100,000 control characters
was recorded as a 1.3 MB line (the answer's text and structuredContent, each character escaped to six bytes): a
loop of them grew a transcript by 134 MB/s, and every session's transcript shares one disk. An honest session's
transcript takes far less: its largest requests (write_file, at most WRITE_BLOB_CAP, whose escapes take at most
six times that) fit some ten times over. With BLOB_BUDGET_BYTES it bounds what a session's record takes of the
disk whole; past it, each event is still recorded in order, its large payload fields by size and sha256 only
(KEPT_PAST_BUDGET_BYTES), and an error notice says so once."""
CHANGES_PAST_BUDGET = 100
"""Most file changes one batch (one scan's) records one by one once the transcript has passed its budget: the rest
are summarised in one error notice (`summarise_changes`: their count, bytes and the sha256 of their list). Without
it a command rewriting 10,000 files under 30 KB paths added 300 MB of file_change lines each time, whatever the
budget. The walk sees a level's files before deeper ones, so the first recorded are the shallowest."""
BLOB_FILES_BUDGET = 100_000
"""Most blobs (files) one transcript's blob store holds: tiny unique files cost nothing of BLOB_BUDGET_BYTES but an
inode and a block each. Past it, content is recorded by hash and size only, and a warning notice says so once."""
PENDING_LIMIT_BYTES = 64 * 1024 * 1024
"""Most bytes of events kept in memory while the transcript's file system refuses writes (a full disk). Past it,
events are counted and dropped, not numbered (the chain stays whole), and the notice written when the disk takes
writes again says how many were lost, from when to when (an error the audit fails on)."""

logger = log.get("jg_mcp.record.transcript")


def blobs_dir(path: Path) -> Path:
    return path.with_suffix(".blobs")


def stored_blob(blobs: Path, digest: str) -> bytes | None:
    """The bytes stored under `digest` in a blob store; None where no regular file is there. A transcript names
    its blobs, and whoever wrote it chose the names and files: the file is opened without following a link and read
    up to one byte past the largest blob the writer stores, so a larger one shows as altered, never read whole."""
    try:
        fd = os.open(blobs / digest, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return b"".join(read_bounded(fd, max(COMMAND_BLOB_CAP, WRITE_BLOB_CAP) + 1))
    finally:
        os.close(fd)


@dataclass
class _Outage:
    """The file system refused the transcript's writes: from which seq, since when, why, and what was dropped."""

    seq: int
    since: float
    error: str
    lost: int = 0
    lost_from: float = 0.0
    lost_to: float = 0.0

    def notice(self, written: int, limit: int) -> Notice:
        message = (
            f"the transcript's file system refused writes from seq {self.seq} for {time.time() - self.since:.1f}s "
            f"({self.error}; as when the disk is full): the {written} events since were kept in memory and written "
            "when it took writes again, each with the time it happened"
        )
        if not self.lost:
            return Notice(level="warning", message=message)
        return Notice(
            level="error",
            message=f"{message}; {self.lost} more events, from ts {self.lost_from:.3f} to {self.lost_to:.3f}, did "
            f"not fit the {limit} bytes kept in memory and are not recorded",
        )


class TranscriptWriter(BlobStore):
    """Appends events, chaining hashes (and MACs, with a key), each line written whole. Thread-safe. A line the
    file system refuses is kept in memory and written, in order, by a later append; past its byte budget, events
    are recorded without their large payloads (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        fd: int,
        key: bytes | None = None,
        blob_budget: int | None = None,
        pending_limit: int = PENDING_LIMIT_BYTES,
        budget: int | None = None,
        blob_files_budget: int | None = None,
    ):
        self.path = path
        self.blobs = blobs_dir(self.path)
        self.key = key
        self.lock = threading.Lock()
        self._fd = fd
        """The transcript, open for writing (`open` made it)."""
        self._end = 0
        """Offset just past the last whole line written: the file is cut back to it when a write fails."""
        self._cut_failed = False
        self._seq = 0
        self._prev = GENESIS
        self._head = GENESIS
        self._pending: deque[bytes] = deque()
        """Lines numbered and chained but not yet written (the file system refused them), oldest first."""
        self._pending_bytes = 0
        self.pending_limit = pending_limit
        """Most bytes of unwritten lines kept (PENDING_LIMIT_BYTES unless given)."""
        self._outage: _Outage | None = None
        self.closed = False
        self.blob_budget = BLOB_BUDGET_BYTES if blob_budget is None else blob_budget
        """Most bytes this transcript's new blobs may take (BLOB_BUDGET_BYTES unless given)."""
        self.blob_bytes = 0
        """Bytes of the blobs this writer stored."""
        self.blob_budget_reached = False
        """A blob was not stored because the budget was spent (the transcript holds a notice saying so)."""
        self.blob_files_budget = BLOB_FILES_BUDGET if blob_files_budget is None else blob_files_budget
        """Most blobs this transcript may store (BLOB_FILES_BUDGET unless given)."""
        self.blob_files = 0
        self.blob_files_reached = False
        """A blob was not stored because the store holds `blob_files_budget` (a notice says so)."""
        self.budget = TRANSCRIPT_BUDGET_BYTES if budget is None else budget
        """Most bytes of lines recorded whole (TRANSCRIPT_BUDGET_BYTES unless given)."""
        self.line_bytes = 0
        """Bytes of the lines numbered so far, written or waiting to be."""
        self.budget_passed_at: int | None = None
        """seq of the first line past the budget, from which large payloads are recorded by size and sha256 only;
        None while under it."""
        self._budget_noted = False

    @classmethod
    def open(
        cls,
        path: Path,
        key: bytes | None = None,
        blob_budget: int | None = None,
        pending_limit: int = PENDING_LIMIT_BYTES,
        budget: int | None = None,
        blob_files_budget: int | None = None,
    ) -> TranscriptWriter:
        """A writer of a new transcript at `path` (an error if one is there), its directory and blob store made;
        `key` MACs every line; the budgets are the writer's, as its attributes say."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        blobs_dir(path).mkdir(exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        return cls(path, fd, key, blob_budget, pending_limit, budget, blob_files_budget)

    def append(self, event: EventBase) -> EventBase:
        with self.lock:
            event = self._append(event)
            self._note_budget()
            return event

    def append_all(self, events: Sequence[EventBase]) -> None:
        """Append `events` with no other event between them, unless the transcript is closed. Past the budget, the
        file changes after the first CHANGES_PAST_BUDGET are summarised in one notice, in place of the first."""
        with self.lock:
            kept, summarised = 0, list[FileChange]()
            for event in events:
                if isinstance(event, FileChange) and self.budget_passed_at is not None:
                    if kept >= CHANGES_PAST_BUDGET:
                        summarised.append(event)
                        continue
                    kept += 1
                elif summarised and not self.closed:
                    self._append(summarise_changes(summarised))
                    summarised = []
                if not self.closed:
                    self._append(event)
            if summarised and not self.closed:
                self._append(summarise_changes(summarised))
            self._note_budget()

    def record(self, event: EventBase) -> bool:
        """Append `event` unless the transcript is closed (checked under the lock); returns whether it was."""
        with self.lock:
            if self.closed:
                return False
            self._append(event)
            self._note_budget()
            return True

    def _append(self, event: EventBase) -> EventBase:
        """Number, chain and write `event`, after any line still unwritten. When the file system refuses, the
        line is kept for the next append; past `pending_limit` bytes kept, the event is counted as lost instead
        (a close event is always kept). Never raises for a refused write."""
        if self.closed:
            raise TranscriptError(self.path, self._seq, "append after close")
        self._write_pending()
        if self._outage is not None and self._pending_bytes >= self.pending_limit and not isinstance(event, Close):
            now = time.time()
            self._outage.lost_from = self._outage.lost_from or now
            self._outage.lost_to, self._outage.lost = now, self._outage.lost + 1
            return event
        if isinstance(event, Close):
            self._note_budget()
        event = self._stamp(event)
        self._write_pending()
        if isinstance(event, Close):
            self.closed = True
            self._release()
            if self._pending:
                logger.error(
                    "the transcript's file system refuses writes: its last events are not written",
                    transcript=str(self.path),
                    unwritten=len(self._pending),
                    first_unwritten_seq=self._seq - len(self._pending),
                )
        return event

    def _stamp(self, event: EventBase) -> EventBase:
        """`event` numbered, chained and timed, its line queued to be written. The first event (but a header or a
        close, recorded whole) whose line would take the transcript past its budget, and every event after it, is
        recorded without its large payloads (`without_large_payloads`)."""
        event = event.model_copy(update={"seq": self._seq, "prev": self._prev, "ts": time.time(), "mac": None})
        if self.budget_passed_at is not None:
            event = without_large_payloads(event)
        line = self._line(event)
        whole = isinstance(event, Header | Close)
        if self.budget_passed_at is None and not whole and self.line_bytes + len(line) + 1 > self.budget:
            self.budget_passed_at = self._seq
            event = without_large_payloads(event)
            line = self._line(event)
        self._prev = sha256_bytes(line)
        self._seq += 1
        self._pending.append(line + b"\n")
        self._pending_bytes += len(line) + 1
        self.line_bytes += len(line) + 1
        return event

    def _line(self, event: EventBase) -> bytes:
        line = event.model_dump_json().encode()
        return line if self.key is None else mac_line(line, self.key)

    def _note_budget(self) -> None:
        """Once the budget is passed, record the error notice that says so: after the events of the call that
        passed it (a refused request stays on the line before its refusal), before a close. Never counted lost."""
        if self.budget_passed_at is None or self._budget_noted or self.closed:
            return
        self._budget_noted = True
        line = self.budget_passed_at + 1
        logger.error(
            "the transcript passed its budget: large payloads are recorded by size and sha256 only",
            transcript=str(self.path),
            budget=self.budget,
            line=line,
        )
        self._stamp(
            Notice(
                level="error",
                message=f"the transcript passed its budget of {self.budget} bytes at line {line}: from that line on, "
                f"each request's params, response's result and error and notice's message over "
                f"{KEPT_PAST_BUDGET_BYTES} bytes of JSON is recorded by its size and sha256 only (`omitted`), and "
                f"a scan's file changes past the first {CHANGES_PAST_BUDGET} are summarised in one notice, so what "
                "those calls were given and answered, and what they changed, cannot be read back: the record is "
                "incomplete",
            )
        )
        self._write_pending()

    def _write_pending(self) -> None:
        """Write the queued lines in order until one is refused; once the backlog of a refusal is written, queue
        (and write) the notice that says so."""
        while self._pending:
            data = self._pending[0]
            try:
                self._write_line(data)
            except OSError as exc:
                if self._outage is None:
                    why = f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, exc.errno)})"
                    self._outage = _Outage(seq=self._seq - len(self._pending), since=time.time(), error=why)
                    logger.error(
                        "the transcript's file system refuses writes: events are kept in memory until it takes them",
                        transcript=str(self.path),
                        seq=self._outage.seq,
                        error=why,
                    )
                return
            self._pending.popleft()
            self._pending_bytes -= len(data)
            self._head = sha256_bytes(data[:-1])
            if not self._pending and self._outage is not None:
                outage, self._outage = self._outage, None
                self._stamp(outage.notice(self._seq - outage.seq, self.pending_limit))
        self._release()

    def _release(self) -> None:
        """Close the file once the close event and every line before it are written."""
        if self.closed and not self._pending and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _write_line(self, data: bytes) -> None:
        """Write one whole line at the end of the last one; on failure, cut the file back to that end and raise."""
        view, done = memoryview(data), 0
        try:
            while done < len(data):
                n = os.pwrite(self._fd, view[done:], self._end + done)
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                done += n
        except OSError:
            self._cut()
            raise
        self._end += len(data)
        if self._cut_failed:
            self._cut()

    def _cut(self) -> None:
        """Cut the file back to the end of the last whole line (a failed cut is tried again after the next write)."""
        try:
            os.ftruncate(self._fd, self._end)
            self._cut_failed = False
        except OSError:
            self._cut_failed = True

    @property
    def head_sha256(self) -> str:
        """sha256 of the last line written: no later line vouches for it, so publish it elsewhere."""
        return self._head
