"""Transcripts: hash-chained, flushed per event, readable after a kill."""

from __future__ import annotations

import pytest

from jg_mcp.errors import TranscriptError
from jg_mcp.transcript import GENESIS, Header, Notice, TranscriptWriter, read_transcript, sha256_bytes


def header() -> Header:
    return Header(
        jg_mcp_version="0", run_id="r", goal="g", goal_sha256="0" * 64, condition="goal-only",
        sandbox="none", workspace="/w", host={}, gpu={}, started_at="t",
    )


def write(tmp_path, n=3):
    w = TranscriptWriter(tmp_path / "run.jsonl")
    w.append(header())
    for i in range(n):
        w.append(Notice(level="info", message=f"m{i}"))
    return w


def test_chain_links_each_line_to_the_previous(tmp_path):
    write(tmp_path)
    lines = (tmp_path / "run.jsonl").read_bytes().splitlines()
    events = read_transcript(tmp_path / "run.jsonl").events
    assert [e.seq for e in events] == [0, 1, 2, 3]
    assert events[0].prev == GENESIS
    assert all(events[i].prev == sha256_bytes(lines[i - 1]) for i in range(1, 4))


def test_each_event_is_on_disk_before_the_next_call(tmp_path):
    w = write(tmp_path, n=1)
    assert len(read_transcript(w.path).events) == 2
    w.append(Notice(level="info", message="more"))
    assert len(read_transcript(w.path).events) == 3


def test_a_cut_last_line_is_reported_as_truncated(tmp_path):
    w = write(tmp_path)
    with open(w.path, "ab") as fh:
        fh.write(b'{"seq": 4, "prev": "ab')
    result = read_transcript(w.path)
    assert result.truncated and len(result.events) == 4 and not result.closed


@pytest.mark.parametrize("tamper", ["edit", "delete", "swap"])
def test_tampering_is_detected_with_the_line(tmp_path, tamper):
    w = write(tmp_path)
    lines = w.path.read_bytes().splitlines()
    if tamper == "edit":
        lines[2] = lines[2].replace(b"m1", b"m9")
    elif tamper == "delete":
        del lines[2]
    else:
        lines[1], lines[2] = lines[2], lines[1]
    w.path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(TranscriptError) as info:
        read_transcript(w.path)
    assert info.value.line in (2, 3, 4)


def test_blobs_are_content_addressed_and_capped(tmp_path):
    w = TranscriptWriter(tmp_path / "run.jsonl", blob_cap=10)
    digest, stored = w.store_blob(b"small")
    assert stored and (w.blobs / digest).read_bytes() == b"small"
    digest, stored = w.store_blob(b"x" * 11)
    assert not stored and not (w.blobs / digest).exists()


def test_a_transcript_is_never_overwritten(tmp_path):
    write(tmp_path)
    with pytest.raises(FileExistsError):
        TranscriptWriter(tmp_path / "run.jsonl")


def test_head_hash_is_the_hash_of_the_last_line(tmp_path):
    w = write(tmp_path)
    assert w.head_sha256 == sha256_bytes(w.path.read_bytes().splitlines()[-1])
