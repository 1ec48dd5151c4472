"""The transcript's byte budget: a ~120-byte read_file of a page of control characters wrote a ~1.3 MB line (the
answer recorded twice, each control character escaped to six bytes), and a loop of them grew a transcript by
134 MB/s with a clean audit. Past its budget the writer records large payloads by size and sha256 only, every
request and response still in order, and says so in an error notice the audit fails on."""

from __future__ import annotations

import hashlib
import json

from pydantic_core import to_json

from jg_mcp.record import audit, transcript
from jg_mcp.record.events import Close, FileChange, Notice, Request, Response
from jg_mcp.record.integrity import authenticity_problems, diagnose
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.steps import load_record
from jg_mcp.record.transcript import TranscriptWriter
from jg_mcp.scripted import call
from tests.support import scripted_session, transcript_header

WHEN = "2026-01-01T00:00:00+00:00"
PAGE = "\x01" * 100_000
"""What one read_file answers for a file of 100,000 control characters: 600 KB of JSON, recorded twice."""
BOUNDED_LINE_BYTES = 8 * 1024
"""More than any line past the budget may take (a few payload fields of KEPT_PAST_BUDGET_BYTES, hashes, an id)."""


def read_call(rid: int) -> list[Request | Response]:
    result = {"content": [{"type": "text", "text": json.dumps({"text": PAGE})}], "structuredContent": {"text": PAGE}}
    return [
        Request(request_id=rid, method="tools/call", params={"name": "read_file", "arguments": {"path": "ctl.txt"}}),
        Response(request_id=rid, method="tools/call", duration_ms=1.0, result=result),
    ]


def digest(value: object) -> dict[str, object]:
    data = to_json(value)
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def test_a_loop_of_small_reads_of_a_control_character_page_stops_growing_the_transcript_at_its_budget(
    tmp_path, monkeypatch
):
    """The attack through the MCP client and an in-process server: once the transcript passes its budget, each
    further read adds a bounded line, every call is still recorded with its answer, and the audit fails on the
    notice."""
    budget = 256 * 1024
    monkeypatch.setattr(transcript, "TRANSCRIPT_BUDGET_BYTES", budget)
    make = 'python3 -c "import sys; sys.stdout.write(chr(1)*99999+chr(10))" > ctl.txt'
    reads = 12
    steps = [call("run_command", command=make)] + [call("read_file", path="ctl.txt") for _ in range(reads)]
    path, _ = scripted_session(tmp_path, steps)

    size = path.stat().st_size
    assert size < budget + 64 * 1024, f"{size} bytes for {reads} reads of a page, over the {budget}-byte budget"
    lines = path.read_bytes().splitlines()
    assert max(len(line) for line in lines[1:-1]) < budget
    record = load_record(path)
    assert [c.tool for c in record.calls] == ["run_command"] + ["read_file"] * reads
    assert all(c.duration_ms is not None and not c.is_error for c in record.calls)
    [notice] = [e for e in record.events if isinstance(e, Notice) and "budget" in e.message]
    assert notice.level == "error" and f"{budget} bytes" in notice.message
    report = audit.audit(path)
    assert not report.ok
    assert not [f for f in report.findings if f.area == "integrity" and f.severity == "error"], report.findings
    assert [f for f in report.findings if f.kind == "notice" and f.severity == "error" and "budget" in f.message]


def test_past_its_budget_the_writer_keeps_the_chain_and_every_event_in_order_with_payloads_by_hash(tmp_path):
    """Unit: lines recorded whole stay within the budget; past it each request's params, response's result and
    error and notice's message over KEPT_PAST_BUDGET_BYTES are replaced by their size and sha256, small ones are
    kept, every event is still there, the chain and the MACs verify, and one error notice names the line from
    which payloads may be hashes; a refused request stays on the line before its refusal."""
    key = b"k" * 32
    budget = 1500_000
    w = TranscriptWriter.open(tmp_path / "run.jsonl", key=key, budget=budget)
    w.append(transcript_header(key))
    rid = 0
    while w.budget_passed_at is None:
        rid += 1
        w.append_all(read_call(rid))
    crossed, refused_id = rid, rid + 1
    long_error = "refused: " + "\x02" * 10_000
    big = {"name": "run_command", "arguments": {"command": PAGE}}
    w.append_all(
        [
            Request(request_id=refused_id, method="tools/call", params=big),
            Response(request_id=refused_id, method="tools/call", duration_ms=0.0, is_error=True, error=long_error),
        ]
    )
    for rid in range(refused_id + 1, refused_id + 20):
        w.append_all(read_call(rid))
    small = {"name": "run_command", "arguments": {"command": "curl http://x"}}
    w.append(Request(request_id="small", method="tools/call", params=small))
    w.append(Response(request_id="small", method="tools/call", duration_ms=1.0, result={"content": []}))
    w.append(FileChange(request_id="small", path="a.txt", op="write", sha256="0" * 64, size=1, cause="run_command"))
    w.append(Notice(level="info", message="m" * 50_000))
    w.append(Close(reason="test", ended_at=WHEN, manifest={"a.txt": {"sha256": "0" * 64, "size": 1}}))

    path = w.path
    events = read_transcript(path).events
    assert [p.kind for p in diagnose(path).problems] == [] and authenticity_problems(path, key) == []
    lines = path.read_bytes().splitlines()
    [notice] = [e for e in events if isinstance(e, Notice) and e.level == "error"]
    first = w.budget_passed_at
    assert first is not None and notice.seq > first
    assert f"line {first + 1}" in notice.message and f"{budget} bytes" in notice.message
    assert sum(len(line) + 1 for line in lines[:first]) <= budget
    assert all(len(line) < BOUNDED_LINE_BYTES for line in lines[first:]), [len(line) for line in lines[first:]]

    record = load_record(path)
    assert record.problems == [] and all(c.duration_ms is not None for c in record.calls)
    assert [c.request_id for c in record.calls] == [*range(1, refused_id + 20), "small"]
    assert [c.tool for c in record.calls] == ["read_file"] * crossed + ["run_command"] + ["read_file"] * 19 + [
        "run_command"
    ]
    refused = record.calls[crossed]
    assert refused.request_id == refused_id and refused.is_error and refused.arguments == {}
    assert events[refused.line].event == "response", "the refusal stays on the line after its request"
    assert events[refused.line - 1].params == {"name": "run_command", "omitted": digest(big)}
    assert refused.error is not None and digest(long_error)["sha256"] in refused.error
    late = record.calls[crossed + 1]
    assert late.arguments == {"path": "ctl.txt"}, "small params are kept whole"
    assert late.result == {"omitted": digest(read_call(0)[1].result)} and late.structured == {} and late.text == ""
    assert record.calls[-1].arguments == small["arguments"], "a small payload is kept whole"
    assert [c.event.path for c in record.changes] == ["a.txt"]
    [info] = [e for e in events if isinstance(e, Notice) and e.level == "info"]
    assert (
        info.message
        == f"(omitted past the transcript's budget: 50002 bytes of JSON, sha256 {digest('m' * 50_000)['sha256']})"
    )
    assert isinstance(events[-1], Close) and events[-1].manifest == {"a.txt": {"sha256": "0" * 64, "size": 1}}


def test_a_transcript_under_its_budget_is_written_whole_without_a_notice(tmp_path):
    w = TranscriptWriter.open(tmp_path / "run.jsonl", budget=10 * 1024 * 1024)
    w.append(transcript_header())
    for rid in range(3):
        w.append_all(read_call(rid))
    events = read_transcript(w.path).events
    assert w.budget_passed_at is None and not [e for e in events if isinstance(e, Notice)]
    assert [e.result for e in events if isinstance(e, Response)] == [read_call(0)[1].result] * 3


def test_the_budget_is_crossed_by_whole_events_so_a_refusal_pair_stays_adjacent_and_the_notice_precedes_close(
    tmp_path,
):
    """The budget passed inside an append_all: the notice comes after the batch; a close is never omitted and
    comes after the notice."""
    w = TranscriptWriter.open(tmp_path / "run.jsonl", budget=2000)
    w.append(transcript_header())
    w.append_all(
        [
            Request(request_id=1, method="tools/call", params={"name": "write_file", "arguments": {"c": PAGE}}),
            Response(request_id=1, method="tools/call", duration_ms=0.0, is_error=True, error="refused"),
            Close(reason="test", ended_at=WHEN, manifest={}),
        ]
    )
    events = read_transcript(w.path).events
    assert [e.event for e in events] == ["header", "request", "response", "notice", "close"]
    assert events[1].params["name"] == "write_file" and "omitted" in events[1].params
    assert events[3].level == "error" and "line 2" in events[3].message
    assert [f for f in audit.audit(w.path).findings if f.kind == "notice" and f.severity == "error"]
