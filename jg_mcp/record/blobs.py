"""A transcript's blob store: file contents kept content-addressed in `RUN.blobs/<sha256>`, within the transcript
writer's budgets of bytes and of blobs (jg_mcp.record.transcript: BLOB_BUDGET_BYTES, BLOB_FILES_BUDGET)."""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path

from jg_mcp.live.safefs import read_bounded
from jg_mcp.record.events import EventBase, Notice


class BlobStore:
    """The blob-storing half of a TranscriptWriter (which sets these attributes and records the notices)."""

    blobs: Path
    lock: threading.Lock
    blob_budget: int
    blob_bytes: int
    blob_budget_reached: bool
    blob_files_budget: int
    blob_files: int
    blob_files_reached: bool
    record: Callable[[EventBase], bool]
    """Append an event unless the transcript is closed (TranscriptWriter.record)."""

    def store_fd(self, fd: int, size: int, cap: int) -> tuple[str, int, bool]:
        """Hash the first `size` bytes of a file descriptor and, when they fit `cap` (COMMAND_BLOB_CAP or
        WRITE_BLOB_CAP) and the blob budgets, store them as a blob in the same pass; returns (sha256, bytes read,
        stored). Content already stored costs no budget; the first blob refused for each budget (bytes, blobs) adds
        a notice."""
        h, n = hashlib.sha256(), 0
        keep = size <= cap
        chunks: list[bytes] = []
        for chunk in read_bounded(fd, size):
            h.update(chunk)
            n += len(chunk)
            if keep:
                chunks.append(chunk)
        digest = h.hexdigest()
        if keep:
            keep = self._place(digest, chunks, n)
        return digest, n, keep

    def _place(self, digest: str, chunks: list[bytes], size: int) -> bool:
        """Write a blob under a temporary name unique to this call, then rename it into place, if it is not
        there already and fits the budgets; returns whether the blob is stored. A blob the file system refuses (a
        full disk) is not stored, and a warning notice says so: the scan still records the change, by hash, for
        the call that made it."""
        target = self.blobs / digest
        if target.exists():
            return True
        with self.lock:
            fits_bytes = self.blob_bytes + size <= self.blob_budget
            fits = fits_bytes and self.blob_files < self.blob_files_budget
            reached = None
            if fits:
                self.blob_bytes += size
                self.blob_files += 1
            elif fits_bytes and not self.blob_files_reached:
                self.blob_files_reached = True
                reached = f"{self.blob_files_budget} blobs: changed content"
            elif not fits_bytes and not self.blob_budget_reached:
                self.blob_budget_reached = True
                reached = f"{self.blob_budget} bytes: changed content that does not fit what is left"
        if reached:
            self.record(
                Notice(
                    level="warning",
                    message=f"the transcript's blob store has reached its budget of {reached} is recorded by hash "
                    "and size only (stored false), and a replay cannot rebuild it",
                )
            )
        if not fits:
            return False
        tmp = self.blobs / f".{digest}.{secrets.token_hex(6)}.tmp"
        try:
            with open(tmp, "xb") as fh:
                for chunk in chunks:
                    fh.write(chunk)
            os.replace(tmp, target)
        except OSError as exc:
            with self.lock:
                self.blob_bytes -= size
                self.blob_files -= 1
            self.record(
                Notice(
                    level="warning",
                    message=f"the blob {digest} ({size} bytes) could not be stored ({exc.strerror or exc}; as when the "
                    "disk is full): its change is recorded by hash and size only, and a replay cannot rebuild it",
                )
            )
            return False
        finally:
            tmp.unlink(missing_ok=True)
        return True
