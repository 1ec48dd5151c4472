"""What a deep tree of long names cannot do to the record: every walk stops at SCAN_PATH_CHARS (memory per recorded
file, the size of each file_change line and of the manifest), sees a level's files before its subdirectories (so
the solution is recorded before a deep tree takes the walk's bounds), and past the transcript's budget a scan's
file changes take a bounded number of lines, its blobs a bounded number of files."""

from __future__ import annotations

import os
import time
from contextlib import closing

import pytest
from pydantic_core import to_json

from jg_mcp.errors import PathRefused
from jg_mcp.live import session, workspace_scan
from jg_mcp.live.walk import SCAN_PATH_CHARS, Walk
from jg_mcp.live.workspace import Workspace
from jg_mcp.record import audit, replay, transcript
from jg_mcp.record.events import KEPT_PAST_BUDGET_BYTES, SUMMARISED, Close, FileChange, Notice, sha256_bytes
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.steps import load_record
from jg_mcp.record.transcript import CHANGES_PAST_BUDGET, TranscriptWriter
from jg_mcp.scripted import call
from tests.support import scripted_session, transcript_header

WHEN = "2026-01-01T00:00:00+00:00"


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace.open(root)


def deep(root, levels: int, files: int, letter: str = "D") -> str:
    """`levels` nested directories of 250-character names, `files` files at the bottom; returns the bottom's path."""
    rel = "/".join(f"{letter}{i:03d}" + "d" * 246 for i in range(levels))
    os.makedirs(root / rel)
    for i in range(files):
        (root / rel / (f"f{i:05d}" + "y" * 240)).write_text(str(i))
    return rel


def walked(root) -> list[str]:
    w = Walk(os.open(root, os.O_RDONLY | os.O_DIRECTORY))
    with closing(w.entries()) as entries:
        return [rel for _, _, rel, _ in entries]


def test_a_walk_neither_yields_nor_enters_a_path_longer_than_its_bound_and_says_so(ws):
    bottom = deep(ws.root, 6, 3)
    (ws.root / "solution.py").write_text("x = 1\n")
    w = Walk(os.open(ws.root, os.O_RDONLY | os.O_DIRECTORY))
    with closing(w.entries()) as entries:
        seen = [rel for _, _, rel, _ in entries]
    assert seen and max(len(rel) for rel in seen) <= SCAN_PATH_CHARS
    assert "solution.py" in seen and not any(rel.startswith(bottom) for rel in seen)
    assert w.missed and f"longer than {SCAN_PATH_CHARS} characters" in w.missed[0]
    assert all(len(sentence) < 600 for sentence in w.missed), "a sentence names a long path shortened"


def test_a_scan_records_no_path_over_the_bound_and_keeps_the_others(ws):
    deep(ws.root, 6, 3)
    near = deep(ws.root, 3, 2, letter="E")
    (ws.root / "solution.py").write_text("x = 1\n")
    changed, deleted, scan = ws.changes()
    assert {p for p in changed if p.startswith(near)} and "solution.py" in changed
    assert max(len(p) for p in changed) <= SCAN_PATH_CHARS and max(len(p) for p in ws.manifest()) <= SCAN_PATH_CHARS
    assert scan.partial and any(f"longer than {SCAN_PATH_CHARS}" in s for s in scan.skipped)


def test_write_file_refuses_a_path_the_scan_would_not_record(ws):
    with pytest.raises(PathRefused, match=f"longer than the {SCAN_PATH_CHARS} characters"):
        ws.parts("a/" * SCAN_PATH_CHARS + "x.py", for_write=True)
    assert ws.parts("a/" * 100 + "x.py", for_write=True)


def test_a_walk_yields_a_levels_files_before_anything_under_its_directories(tmp_path):
    for d in ("A/B", "Z"):
        os.makedirs(tmp_path / d)
    for f in ("A/a.txt", "A/B/b.txt", "A/z.txt", "Z/z.txt", "m.py", "solution.py", "zz.py"):
        (tmp_path / f).write_text(f)
    assert walked(tmp_path) == [
        "m.py",
        "solution.py",
        "zz.py",  # fmt: skip
        "A",
        "A/a.txt",
        "A/z.txt",
        "A/B",
        "A/B/b.txt",
        "Z",
        "Z/z.txt",
    ]


def test_top_level_files_are_recorded_when_uppercase_decoy_directories_fill_the_file_limit(ws, monkeypatch):
    monkeypatch.setattr(workspace_scan, "SCAN_LIMIT", 50)
    for d in ("AAA", "BBB"):
        os.makedirs(ws.root / d)
        for i in range(60):
            (ws.root / d / f"f{i}").write_text(f"{d}{i}")
    (ws.root / "reference.py").write_text("ref\n")
    (ws.root / "solution.py").write_text("x = 1\n")
    changed, _, scan = ws.changes()
    assert {"reference.py", "solution.py"} <= set(changed) and len(changed) == 50
    assert scan.partial


def change(i: int, op: str = "write") -> FileChange:
    if op == "delete":
        return FileChange(request_id=7, path=f"gone{i}", op="delete", cause="run_command")
    data = f"c{i}".encode()
    return FileChange(
        request_id=7, path=f"d/f{i:04d}", op="write", sha256=sha256_bytes(data), size=len(data), cause="run_command"
    )


def test_past_its_budget_a_batch_records_its_first_file_changes_and_summarises_the_rest_in_one_notice(tmp_path):
    w = TranscriptWriter.open(tmp_path / "run.jsonl", budget=4096)
    w.append(transcript_header())
    w.append_all([change(i) for i in range(CHANGES_PAST_BUDGET + 50)])
    assert w.budget_passed_at is not None
    before = w.line_bytes
    batch = [change(i) for i in range(1000, 1300)] + [change(i, "delete") for i in range(20)]
    w.append_all([*batch, Notice(level="error", message="workspace scan incomplete: x")])
    w.append(Close(reason="done", ended_at=WHEN, manifest={}))
    assert w.line_bytes - before < 400 * (CHANGES_PAST_BUDGET + 4), "the batch took a bounded number of lines"
    events = read_transcript(w.path, verify=True).events
    tail = events[events.index(next(e for e in events if isinstance(e, FileChange) and e.path == "d/f1000")) :]
    assert [e.path for e in tail[:CHANGES_PAST_BUDGET]] == [c.path for c in batch[:CHANGES_PAST_BUDGET]]
    summary, scan_notice = tail[CHANGES_PAST_BUDGET : CHANGES_PAST_BUDGET + 2]
    rest = batch[CHANGES_PAST_BUDGET:]
    listing = sorted([c.path, c.sha256, c.size] for c in rest if c.op == "write")
    listing += sorted([c.path, None, None] for c in rest if c.op == "delete")  # the deletions' paths sort last
    assert isinstance(summary, Notice) and summary.level == "error" and summary.message.startswith(SUMMARISED)
    assert f"{len(rest)} more changes" in summary.message and "200 writes of" in summary.message
    assert sha256_bytes(to_json(listing)) in summary.message, "the summary names the sha256 of their list"
    assert len(to_json(summary.message)) <= KEPT_PAST_BUDGET_BYTES, "recorded whole past the budget"
    assert isinstance(scan_notice, Notice) and scan_notice.message.endswith(": x")
    budget_notices = [e for e in events if isinstance(e, Notice) and "passed its budget" in e.message]
    assert len(budget_notices) == 1 and f"first {CHANGES_PAST_BUDGET}" in budget_notices[0].message


def test_under_its_budget_every_file_change_of_a_batch_is_recorded(tmp_path):
    w = TranscriptWriter.open(tmp_path / "run.jsonl")
    w.append(transcript_header())
    w.append_all([change(i) for i in range(3 * CHANGES_PAST_BUDGET)])
    events = read_transcript(w.path, verify=True).events
    assert sum(isinstance(e, FileChange) for e in events) == 3 * CHANGES_PAST_BUDGET
    assert not any(isinstance(e, Notice) for e in events)


def test_the_blob_store_stops_at_its_budget_of_blobs_and_says_so_once(tmp_path):
    w = TranscriptWriter.open(tmp_path / "run.jsonl", blob_files_budget=3)
    src = tmp_path / "src"

    def store(data: bytes) -> bool:
        src.write_bytes(data)
        fd = os.open(src, os.O_RDONLY)
        try:
            return w.store_fd(fd, len(data), cap=10_000)[2]
        finally:
            os.close(fd)

    assert [store(b"x%d" % i) for i in range(6)] == [True, True, True, False, False, False]
    assert store(b"x0"), "content already stored stays stored"
    assert len(list(w.blobs.iterdir())) == 3 and w.blob_files_reached
    notices = [e for e in read_transcript(w.path, verify=False).events if isinstance(e, Notice)]
    assert len(notices) == 1 and "3 blobs" in notices[0].message


@pytest.mark.slow
def test_a_session_past_its_budget_records_a_bounded_number_of_changes_per_command_and_audits_and_replays(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(transcript, "TRANSCRIPT_BUDGET_BYTES", 64 * 1024)
    monkeypatch.setattr(transcript, "CHANGES_PAST_BUDGET", 5)

    def many(step: int) -> str:  # each step writes every file anew: a repeated content is no change to count
        return f"mkdir -p D && for i in $(seq 400); do echo {step}-$i > D/f$i; done"

    steps = [call("run_command", command=many(step)) for step in range(3)]
    steps.append(call("run_command", command="echo 'x = 1' > solution.py && " + many(3)))
    path, _ = scripted_session(tmp_path, steps)
    record = load_record(path)
    last = record.calls[-1]
    mine = [c for c in record.changes if c.step == last.step]
    assert len(mine) == 5 and mine[0].event.path == "solution.py", "files first: the solution is recorded"
    summaries = [e for e in record.events if isinstance(e, Notice) and e.message.startswith(SUMMARISED)]
    assert summaries and "400 more" not in summaries[-1].message and "396 more changes" in summaries[-1].message
    assert record.close is not None and len(record.close.manifest) == 402
    report = audit.audit(path)
    integrity = [f for f in report.findings if f.area == "integrity" and f.severity == "error"]
    assert [f.kind for f in integrity] == ["manifest"] and "summarised" in integrity[0].message, integrity
    assert len(integrity[0].message) < 2000, "names a few paths, then a count"
    assert not report.ok
    rebuilt = replay.rebuild(record, tmp_path / "rebuilt")
    assert "solution.py" in rebuilt.written and any("differs from the close manifest" in p for p in rebuilt.problems)


def test_a_scan_past_its_deadline_stops_says_so_and_reports_no_deletion(ws):
    (ws.root / "a.py").write_text("a\n")
    assert set(ws.changes()[0]) == {"a.py"}
    (ws.root / "b.py").write_text("b\n")
    changed, deleted, scan = ws.changes(deadline=time.monotonic() - 1)
    assert changed == {} and deleted == [] and scan.partial and "time bound" in scan.skipped[0]
    assert set(ws.manifest()) == {"a.py"}, "what it did not see keeps its recorded state"


def test_the_sessions_last_scan_is_bounded_in_time_and_the_close_event_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "CLOSE_SCAN_S", 0.0)
    path, _ = scripted_session(tmp_path, [call("run_command", command="echo x > late.py")])
    read = read_transcript(path)
    assert read.closed and "late.py" in read.events[-1].manifest, "recorded by the command's own scan"
    assert any(isinstance(e, Notice) and "time bound" in e.message for e in read.events[-3:])
