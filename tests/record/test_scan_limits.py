"""What one scan may read, what a transcript's blob store may hold, and names that are not UTF-8: no file set a
command can make turns the scan after it into a long read, fills the transcripts' disk, or stops the other
changes of its scan from being recorded."""

from __future__ import annotations

import hashlib
import os

import pytest

from jg_mcp.errors import PathRefused
from jg_mcp.live import workspace_scan
from jg_mcp.live.workspace import Workspace
from jg_mcp.record import transcript
from jg_mcp.record.events import FileChange, Notice
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.transcript import TranscriptWriter
from jg_mcp.scripted import call
from tests.support import scripted_session

GIB = 1 << 30
BAD = b"a\xff"
"""A file name that is not UTF-8 (`touch $'a\\xff'`)."""


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace.open(root)


class Counting:
    """A hasher that reads nothing and counts what it was asked to read (so a test can make terabytes of sparse
    files and still see what a scan would have read)."""

    def __init__(self):
        self.calls: list[int] = []

    def __call__(self, fd: int, size: int) -> tuple[str, int]:
        self.calls.append(size)
        return hashlib.sha256(f"{os.fstat(fd).st_ino}:{size}".encode()).hexdigest(), size


def sparse(root, name: str, size: int) -> None:
    with open(root / name, "wb") as fh:
        fh.write(name.encode())
    os.truncate(root / name, size)


def test_sparse_files_of_gigabytes_are_not_read_by_the_scan_and_are_named(ws):
    for i in range(40):
        sparse(ws.root, f"big{i}", 8 * GIB)
    (ws.root / "solution.py").write_text("x = 1\n")
    hasher = Counting()
    changed, deleted, scan = ws.changes(hasher)
    assert max(hasher.calls) < GIB and sum(hasher.calls) < GIB, "the scan would have read the sparse files"
    assert set(changed) == {"solution.py"} and deleted == []
    assert (
        sum(hasher.calls) <= workspace_scan.SCAN_READ_BYTES
        and workspace_scan.SCAN_FILE_BYTES <= workspace_scan.SCAN_READ_BYTES
    )
    assert len(scan.skipped) == 1 and "(40 in all)" in scan.skipped[0] and "'big0'" in scan.skipped[0]


def test_a_scan_stops_reading_at_its_byte_budget_and_a_later_scan_records_the_rest(ws):
    for name in "abcde":
        (ws.root / name).write_bytes(name.encode() * 100)
    changed, _, scan = ws.changes(read_bytes=250)
    assert set(changed) == {"a", "b"} and scan.bytes_read == 200
    assert scan.skipped and "read its 250 bytes" in scan.skipped[0] and "'c'" in scan.skipped[0]
    changed, _, scan = ws.changes(read_bytes=250)
    assert set(changed) == {"c", "d"}, "unchanged files cost nothing; the next ones are read"
    changed, _, scan = ws.changes(read_bytes=250)
    assert set(changed) == {"e"} and not scan.skipped


def test_files_a_scan_did_not_read_keep_their_state_and_deletions_are_still_reported(ws):
    (ws.root / "data.bin").write_bytes(b"x" * 10)
    (ws.root / "gone.txt").write_text("bye")
    ws.changes()
    (ws.root / "gone.txt").unlink()
    os.truncate(ws.root / "data.bin", 1000)
    changed, deleted, scan = ws.changes(file_bytes=100)
    assert changed == {} and deleted == ["gone.txt"], "a file seen but not read is not a deletion; others are"
    assert ws.manifest()["data.bin"]["size"] == 10 and "data.bin" in scan.unread
    assert scan.skipped and "larger than the 100 bytes" in scan.skipped[0]


def test_an_io_error_on_one_file_is_named_and_the_other_files_are_recorded(ws):
    for name in ("a.txt", "b.txt", "c.txt"):
        (ws.root / name).write_text(name)

    def hasher(fd: int, size: int) -> tuple[str, int]:
        if os.fstat(fd).st_ino == (ws.root / "b.txt").stat().st_ino:
            raise OSError(5, "Input/output error")
        return workspace_scan.file_sha256(fd, size)

    changed, deleted, scan = ws.changes(hasher)
    assert set(changed) == {"a.txt", "c.txt"} and deleted == [] and scan.unread == ["b.txt"]
    assert scan.skipped == ["files that could not be read were not recorded: 'b.txt' (Input/output error) (1 in all)"]
    assert set(ws.changes()[0]) == {"b.txt"}, "the next scan reads it"


def test_the_blob_store_stops_at_its_budget_and_says_so_once(tmp_path):
    w = TranscriptWriter.open(tmp_path / "run.jsonl", blob_budget=1000)
    src = tmp_path / "src"

    def store(data: bytes) -> tuple[str, int, bool]:
        src.write_bytes(data)
        fd = os.open(src, os.O_RDONLY)
        try:
            return w.store_fd(fd, len(data), cap=10_000)
        finally:
            os.close(fd)

    results = [store(bytes([i]) * 400) for i in range(4)]
    assert [r[2] for r in results] == [True, True, False, False]
    assert all(r[:2] == (hashlib.sha256(bytes([i]) * 400).hexdigest(), 400) for i, r in enumerate(results))
    assert store(bytes([0]) * 400)[2], "content already stored costs nothing and stays stored"
    assert store(b"s" * 150)[2], "smaller content (a source file) still fits what is left"
    assert sum(p.stat().st_size for p in w.blobs.iterdir()) <= 1000 and w.blob_bytes == 950
    notices = [e for e in read_transcript(w.path, verify=False).events if isinstance(e, Notice)]
    assert len(notices) == 1 and "1000 bytes" in notices[0].message and w.blob_budget_reached


def test_sparse_files_made_by_a_command_cannot_fill_the_transcripts_disk(tmp_path, monkeypatch):
    budget = (4 << 20) + (64 << 10)
    """Four of the files, and reference.py (stored at the start)."""
    monkeypatch.setattr(transcript, "BLOB_BUDGET_BYTES", budget)
    command = "for i in $(seq 20); do truncate -s 1M f$i; printf $i | dd of=f$i conv=notrunc status=none; done"
    path, _ = scripted_session(tmp_path, [call("run_command", command=command)])
    blobs = transcript.blobs_dir(path)
    assert sum(p.stat().st_size for p in blobs.iterdir()) <= budget
    events = read_transcript(path).events
    made = {e.path: e for e in events if isinstance(e, FileChange) and e.path.startswith("f")}
    assert len(made) == 20 and sum(e.stored for e in made.values()) == 4, "every file is recorded, four stored"
    assert sum(isinstance(e, Notice) and "blob" in e.message for e in events) == 1


def test_a_name_that_is_not_utf8_is_named_escaped_and_the_other_changes_are_recorded(ws):
    open(os.path.join(os.fsencode(ws.root), BAD), "w").close()
    os.makedirs(os.path.join(os.fsencode(ws.root), b"d\xfe", b"__pycache__"))
    open(os.path.join(os.fsencode(ws.root), b"d\xfe", b"__pycache__", b"m.pyc"), "w").close()
    (ws.root / "solution.py").write_text("x = 1\n")
    changed, deleted, scan = ws.changes()
    for rel in [*changed, *scan.unrecorded, *scan.skipped, *ws.manifest()]:
        FileChange(request_id=None, path=rel, op="write", cause="run_command").model_dump_json()
    assert set(changed) == {"solution.py"} and deleted == [] and scan.unrecorded == []
    assert len(scan.skipped) == 1 and r"'a\xff'" in scan.skipped[0] and r"'d\xfe/'" in scan.skipped[0]
    os.unlink(os.path.join(os.fsencode(ws.root), BAD))
    assert ws.changes()[:2] == ({}, []), "its deletion is no change either"


def test_the_file_tools_refuse_a_path_that_is_not_utf8_and_list_such_names_escaped(ws):
    open(os.path.join(os.fsencode(ws.root), BAD), "w").close()
    with pytest.raises(PathRefused, match="not valid UTF-8") as refused:
        ws.parts(os.fsdecode(BAD))
    str(refused.value).encode()
    listed, _ = ws.listing(())
    assert listed == [r"a\xff (name not UTF-8)"] and all(n.encode() for n in listed)


def test_a_command_that_makes_a_name_not_utf8_loses_no_change_and_the_session_closes(tmp_path):
    steps = [
        call("run_command", command="printf 'x = 1\\n' > solution.py; touch $'a\\xff'"),
        call("run_command", command="rm -f $'a\\xff'; echo cleaned"),
        call("run_command", command="touch $'z\\xff'"),
    ]
    path, _ = scripted_session(tmp_path, steps)
    read = read_transcript(path)
    assert read.closed and "solution.py" in read.events[-1].manifest
    assert any(isinstance(e, FileChange) and e.path == "solution.py" for e in read.events)
    noted = [e.message for e in read.events if isinstance(e, Notice) and e.level == "error"]
    assert any(r"'a\xff'" in m for m in noted) and any(r"'z\xff'" in m for m in noted), noted
