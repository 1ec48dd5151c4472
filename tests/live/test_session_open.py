"""A Session is made in two steps: `Session.open` does the I/O (run directory, workspace, transcript, header, first
scan) and the constructor only holds the parts it is given."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jg_mcp.live.runner import Runner
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import Place, SessionConfig
from jg_mcp.live.workspace import Workspace
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.transcript import TranscriptWriter


def test_a_session_made_from_its_parts_touches_nothing_on_disk(gemm_goal, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text("x = 1\n")
    writer = TranscriptWriter.open(tmp_path / "tr" / "r1.jsonl")
    before = sorted((p, p.stat().st_size) for p in tmp_path.rglob("*"))
    session = Session(gemm_goal, "r1", Place(ws, None, []), Workspace.open(ws), writer, Runner(ws))
    assert sorted((p, p.stat().st_size) for p in tmp_path.rglob("*")) == before
    assert session.transcript_path == writer.path and session.workspace.root == ws


def test_open_makes_the_workspace_and_records_the_header_and_the_first_scan(gemm_goal, tmp_path):
    config = SessionConfig(runs_dir=tmp_path / "runs", transcripts_dir=tmp_path / "tr", run_id="r1", condition="x")
    session = Session.open(gemm_goal, config)
    session.close("test finished")
    events = read_transcript(tmp_path / "tr" / "r1.jsonl").events
    assert session.workspace.root == tmp_path / "runs" / "r1" / "workspace"
    assert (events[0].event, events[0].run_id, events[0].condition) == ("header", "r1", "x")
    assert [e.path for e in events if e.event == "file_change"] == ["reference.py"]


def test_a_misspelt_session_setting_is_refused():
    with pytest.raises(ValidationError, match="transcript_dir"):
        SessionConfig(transcript_dir="tr")
