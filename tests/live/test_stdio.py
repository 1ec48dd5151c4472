"""The server as a real stdio subprocess: sessions, signals and kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import anyio
import pytest
from mcp import StdioServerParameters

from jg_mcp.live.workspace_fs import WorkspaceFs, mount_points
from jg_mcp.record.reading import read_transcript
from jg_mcp.scripted import Step, call, run_script
from tests.support import GEMM_FP8, Wire

pytestmark = pytest.mark.slow


def serve_args(tmp_path):
    return [
        "-m",
        "jg_mcp",
        "serve",
        "--goal",
        str(GEMM_FP8),
        "--workspace",
        str(tmp_path / "ws"),
        "--transcripts",
        str(tmp_path / "tr"),
    ]


def only_transcript(tmp_path):
    files = list((tmp_path / "tr").glob("*.jsonl"))
    assert len(files) == 1
    return files[0]


def test_scripted_session_over_stdio_is_recorded_and_closed(tmp_path):
    steps = [
        Step(kind="list_tools"),
        call("write_file", path="solution.py", content="print('hi')\n"),
        call("run_command", command="python solution.py"),
        call("read_file", path="../escape"),
        call("run_command", command="echo still serving"),
    ]
    params = StdioServerParameters(command=sys.executable, args=serve_args(tmp_path))
    results = anyio.run(run_script, params, steps, 120)
    assert results[0].text == "read_file, write_file, run_command, query_gpu"
    assert results[2].structured["stdout"] == "hi\n"
    assert not results[3].ok and "outside the workspace" in results[3].text
    assert results[4].structured["stdout"] == "still serving\n"
    transcript = read_transcript(only_transcript(tmp_path))
    assert transcript.closed and transcript.events[-1].reason == "client disconnected"
    assert transcript.events[0].goal == "gemm_fp8" and transcript.events[0].condition == "goal-only"


def _start(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, *serve_args(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    init = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
    )
    proc.stdin.write(init.encode())
    proc.stdin.flush()
    assert b'"result"' in proc.stdout.readline()
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.write(
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file",'
        b'"arguments":{"path":"s.py","content":"x=1"}}}\n'
    )
    proc.stdin.flush()
    assert b'"result"' in proc.stdout.readline()
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_close_the_session_cleanly(tmp_path, sig):
    proc = _start(tmp_path)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    transcript = read_transcript(only_transcript(tmp_path))
    assert transcript.closed and transcript.events[-1].reason == sig.name
    assert "s.py" in transcript.events[-1].manifest


def test_sigkill_leaves_a_readable_prefix(tmp_path):
    proc = _start(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    transcript = read_transcript(only_transcript(tmp_path))
    assert not transcript.closed
    kinds = [e.event for e in transcript.events]
    assert kinds[0] == "header" and "file_change" in kinds and kinds[-1] == "response"
    _take_up_the_killed_workspace(tmp_path / "ws")


def _take_up_the_killed_workspace(ws):
    """What the next server does with the workspace of one killed mid-session: its file system, left mounted, is
    taken up with the file the session wrote, and taken down to a plain directory again (which also leaves no
    mount behind the test)."""
    fs = WorkspaceFs(ws, ws.parent / f".{ws.name}.cache")
    if not fs.home.exists():
        return  # no file system of its own here (not root): the workspace is a plain directory already
    assert str(ws) in mount_points()
    fs.open(size=0)
    assert (ws / "s.py").read_text() == "x=1"
    assert fs.close() == []
    assert (ws / "s.py").read_text() == "x=1"
    assert not [m for m in mount_points() if m.startswith(str(ws.parent))]


def test_stdout_carries_only_protocol_messages(tmp_path):
    proc = _start(tmp_path)
    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(timeout=30)
    assert all(line.startswith(b'{"jsonrpc"') for line in out.splitlines() if line)
    assert b"session started" in proc.stderr.read()


def test_a_request_whose_id_is_in_flight_is_refused_and_the_audit_credits_files_to_the_right_call(tmp_path):
    """The agent sends a second tools/call with the id of one still running: it is refused with an error naming
    the id (and recorded so), the first one completes, and the audit credits the first one's file to it."""
    from jg_mcp.record import audit
    from jg_mcp.record.steps import load_record

    proc = _start(tmp_path)
    wire = Wire(proc)
    wire.call(7, "run_command", command="while [ ! -e go ]; do sleep 0.05; done; echo EVIL > evil.txt; echo did-evil")
    wire.call(7, "run_command", command="echo benign > benign.txt")
    second = wire.answer()
    assert second["id"] == 7 and "error" in second, second
    assert "id 7" in second["error"]["message"] and "in flight" in second["error"]["message"], second
    wire.call(8, "write_file", path="go", content="")
    answers = {a["id"]: a for a in (wire.answer(), wire.answer())}
    assert "did-evil" in answers[7]["result"]["structuredContent"]["stdout"], answers
    wire.end()
    record = load_record(only_transcript(tmp_path))
    evil, refused = [c for c in record.calls if c.request_id == 7]
    assert "EVIL" in evil.arguments["command"] and not evil.is_error and evil.duration_ms is not None
    assert refused.is_error and "in flight" in (refused.error or ""), refused
    changes = {c.event.path: c.step for c in record.changes if c.step > 0}
    assert changes == {"s.py": 1, "evil.txt": evil.step, "go": evil.step + 2}
    assert not (tmp_path / "ws" / "benign.txt").exists()
    report = audit.audit(only_transcript(tmp_path), goal_path=GEMM_FP8)
    assert [f for f in report.findings if f.area == "integrity" and f.severity == "error"] == [], report.findings


def test_a_transcript_disk_that_refuses_writes_for_a_while_loses_nothing_and_the_server_keeps_answering(tmp_path):
    """The file system the transcript is on refuses its writes for a while (as when a command fills the disk
    it shares with the workspace; here the file size limit set on the server, EFBIG after a short write):
    every call is still answered, and once writes succeed again the transcript holds every request and
    response exactly once, its chain intact, and a notice saying when the disk refused them."""
    import resource

    from jg_mcp.record import audit
    from jg_mcp.record.events import Notice
    from jg_mcp.record.reading import read_transcript

    proc = _start(tmp_path)
    wire = Wire(proc)
    transcript = only_transcript(tmp_path)
    soft, hard = resource.prlimit(proc.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (transcript.stat().st_size + 200, hard))
    for rid in range(3, 7):
        wire.call(rid, "write_file", path=f"w{rid}.txt", content=f"content {rid}\n")
        answer = wire.answer()
        assert answer["id"] == rid and "result" in answer and not answer["result"]["isError"], answer
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (soft, hard))
    wire.call(7, "run_command", command="echo done > done.txt")
    assert "result" in wire.answer()
    wire.end()
    report = audit.audit(transcript, goal_path=GEMM_FP8)
    assert [f for f in report.findings if f.area == "integrity" and f.severity == "error"] == [], report.findings
    assert report.summary is not None
    events = read_transcript(transcript).events
    pairs = [(e.event, e.request_id) for e in events if e.event in ("request", "response") and e.request_id]
    assert sorted(pairs, key=str) == sorted({(k, i) for k in ("request", "response") for i in range(1, 8)}, key=str)
    written = {w.path: w.step for w in report.summary.files_written if w.step > 0}
    assert written == {"s.py": 1, **{f"w{rid}.txt": rid - 1 for rid in range(3, 7)}, "done.txt": 6}
    assert any(isinstance(e, Notice) and "refused" in e.message for e in events)


def peak_memory_kib(pid: int) -> int:
    """The most memory the process has held at once (VmHWM): a peak no polling can miss."""
    status = open(f"/proc/{pid}/status").read()
    return int(status.split("VmHWM:", 1)[1].split()[0])


def test_a_request_whose_id_is_not_a_plain_short_id_is_refused_unrun_and_recorded_in_bounded_size(tmp_path):
    """The transcript records a call's id on its request, its response and every file change it made: one command
    with a 4 MiB id that made 300 files wrote 1.2 GiB. A string id over MAX_ID_CHARS, or an integer past JSON's
    safe range, is refused before the call runs, with an error naming the limit, and recorded by a short stand-in
    for the id; the server keeps serving."""
    from jg_mcp.live.stdio import MAX_ID_CHARS, MAX_SAFE_ID

    proc = _start(tmp_path)
    wire = Wire(proc)
    for rid, limit in (("x" * (4 << 20), f"limit of {MAX_ID_CHARS} characters"), (MAX_SAFE_ID + 1, str(MAX_SAFE_ID))):
        wire.call(rid, "run_command", command="touch a b c")
        refused = wire.answer()
        assert refused["id"] == rid and "error" in refused, str(refused)[:300]
        assert "request refused: its id" in refused["error"]["message"] and limit in refused["error"]["message"]
    wire.call(9, "run_command", command="echo alive")
    assert wire.answer()["result"]["structuredContent"]["stdout"] == "alive\n"
    wire.end()
    transcript = only_transcript(tmp_path)
    assert transcript.stat().st_size < 1 << 20
    assert not (tmp_path / "ws" / "a").exists()
    events = read_transcript(transcript).events
    refusals = [e for e in events if e.event == "response" and e.is_error]
    assert len(refusals) == 2 and all("request refused: its id" in e.error for e in refusals)
    assert all(len(json.dumps(e.request_id)) < 200 for e in events if hasattr(e, "request_id"))


def test_a_stdio_line_over_the_request_limit_is_refused_as_it_is_read_never_parsed(tmp_path):
    """A 60 MB line (under the stdio line limit) of tiny JSON values, `{}` after `{}`, was parsed whole twice
    before the size refusal: 4.5 GiB and 21 s. A line whose text is over MAX_REQUEST_BYTES is refused while it is
    read, holding no more than that, answered with the limit and recorded by its size."""
    from jg_mcp.live.recording import MAX_REQUEST_BYTES

    proc = _start(tmp_path)
    wire = Wire(proc)
    before = peak_memory_kib(proc.pid)
    values = b",".join([b"{}"] * ((24 << 20) // 3))
    head = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_command","arguments":'
    wire.raw(head + b'{"command":"touch parsed","x":[' + values + b"]}}}")
    refused = wire.answer(120)
    grown_mib = (peak_memory_kib(proc.pid) - before) >> 10
    assert refused["id"] == 9 and f"over the limit of {MAX_REQUEST_BYTES}" in refused["error"]["message"]
    assert grown_mib < 256, f"the server's peak memory grew by {grown_mib} MiB for a {len(values) >> 20} MiB line"
    request, response = _alive_then_recorded(wire, tmp_path)
    assert request.method == "tools/call" and request.params is None and request.params_size > MAX_REQUEST_BYTES
    assert response.is_error and "over the limit" in response.error
    assert not (tmp_path / "ws" / "parsed").exists()


def _alive_then_recorded(wire, tmp_path):
    """After a refused request 9: the server still runs a command; the transcript's request and response of 9."""
    wire.call(10, "run_command", command="echo alive")
    assert wire.answer()["result"]["structuredContent"]["stdout"] == "alive\n"
    wire.end()
    events = read_transcript(only_transcript(tmp_path)).events
    [request] = [e for e in events if e.event == "request" and e.request_id == 9]
    [response] = [e for e in events if e.event == "response" and e.request_id == 9]
    return request, response


def test_a_write_whose_json_escaping_takes_its_line_past_the_request_limit_is_still_served(tmp_path):
    """The request limit counts what the request holds, not how its JSON spells it: 3 MiB of control characters
    take 18 MiB of `\\u0001` escapes on the wire, and are written."""
    from jg_mcp.live.recording import MAX_REQUEST_BYTES

    content = "\x01" * (3 << 20)
    assert len(json.dumps(content)) > MAX_REQUEST_BYTES
    _write_served(tmp_path, content)


def _write_served(tmp_path, content: str) -> None:
    """write_file of `content` over real stdio is answered without error and writes it."""
    proc = _start(tmp_path)
    wire = Wire(proc)
    wire.call(3, "write_file", path="controls.txt", content=content)
    answer = wire.answer(120)
    assert "result" in answer and not answer["result"]["isError"], str(answer)[:300]
    wire.end()
    assert (tmp_path / "ws" / "controls.txt").read_text() == content


def test_a_client_cannot_send_a_request_that_passes_for_the_transports_stand_ins(tmp_path):
    """The stdio reader stands in for a line over the limit, or one the parser refuses, with a request of its own
    method, which the transcript middleware records from its params. A client sending that method itself had its
    made-up size recorded, a non-integer size crashed the middleware unrecorded, and an 'unreadable' stand-in's
    params were recorded past the size limit. Stand-ins carry a mark only this process knows; a client's
    look-alike is an unknown method, answered and recorded as one."""
    proc = _start(tmp_path)
    wire = Wire(proc)
    wire.send(1, "jg/oversized", {"method": "tools/call", "size": "many", "limit": None})
    wire.send(2, "jg/unreadable", {"method": "tools/call", "reason": "forged", "params": {"pad": "x" * (20 << 20)}})
    answers = [wire.answer(), wire.answer()]
    assert all("error" in a and "forged" not in a["error"]["message"] for a in answers), str(answers)[:500]
    wire.call(3, "run_command", command="echo alive")
    assert wire.answer()["result"]["structuredContent"]["stdout"] == "alive\n"
    wire.end()
    transcript = only_transcript(tmp_path)
    assert transcript.stat().st_size < 1 << 20
    requests = [e for e in read_transcript(transcript).events if e.event == "request"]
    assert [e.method for e in requests][-3:] == ["jg/oversized", "jg/unreadable", "tools/call"]


def test_a_request_of_a_million_empty_arrays_is_refused_as_it_is_read_and_never_parsed(tmp_path):
    """Bytes do not bound what a parse makes: 6 MB of `[],[],...` within every byte limit parse to two million
    lists (~150 MB, then copied for the transcript), and 64 such calls may be in flight. A message holding more
    JSON values than MAX_REQUEST_VALUES is refused while it is read, answered with that limit and recorded by its
    size, its call never run."""
    from jg_mcp.live.measure import MAX_REQUEST_VALUES

    proc = _start(tmp_path)
    wire = Wire(proc)
    before = peak_memory_kib(proc.pid)
    junk = b",".join([b"[]"] * 2_000_000)
    head = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_command","arguments":'
    wire.raw(head + b'{"command":"touch parsed"},"junk":[' + junk + b"]}}")
    refused = wire.answer(120)
    grown_mib = (peak_memory_kib(proc.pid) - before) >> 10
    assert grown_mib < 64, f"the server's peak memory grew by {grown_mib} MiB for a {len(junk) >> 20} MiB line"
    assert refused["id"] == 9 and "error" in refused, str(refused)[:300]
    assert f"limit of {MAX_REQUEST_VALUES} JSON values" in refused["error"]["message"], refused
    request, response = _alive_then_recorded(wire, tmp_path)
    assert request.method == "tools/call" and request.params is None and request.params_size > len(junk)
    assert response.is_error and f"limit of {MAX_REQUEST_VALUES} JSON values" in response.error
    assert not (tmp_path / "ws" / "parsed").exists()


def test_an_honest_write_of_control_characters_up_to_the_write_cap_is_served(tmp_path):
    """JSON escapes a control character in six bytes (`\\u0001`): 12 MiB of them, under WRITE_BLOB_CAP, take a
    72 MiB line, which the line limit (four bytes a character) had refused."""
    from jg_mcp.record.transcript import WRITE_BLOB_CAP

    content = "\x01" * (12 << 20)
    assert len(content) < WRITE_BLOB_CAP < len(json.dumps(content)) // 4
    _write_served(tmp_path, content)


def test_a_request_the_parser_refuses_is_recorded_by_its_size_when_its_escaped_params_are_over_the_limit(tmp_path):
    """A request whose strings hold lone surrogate escapes (`\\udcff`, no Unicode character) is refused and recorded
    with its params escaped: each counts one toward the request limit, but is recorded in six characters, and
    3.5 million of them had made a 25 MB transcript line. Escaped params over MAX_REQUEST_BYTES are recorded by
    their size, as any request over the limit."""
    from jg_mcp.live.stdio import MAX_REQUEST_BYTES

    proc = _start(tmp_path)
    wire = Wire(proc)
    lone = "\\udcff" * 3_500_000
    head = '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":'
    wire.raw((head + '{"path":"x","content":"' + lone + '"}}}').encode())
    refused = wire.answer(120)
    assert refused["id"] == 4 and "lone surrogate" in refused["error"]["message"], str(refused)[:300]
    wire.call(5, "run_command", command="echo alive")
    assert wire.answer()["result"]["structuredContent"]["stdout"] == "alive\n"
    wire.end()
    transcript = only_transcript(tmp_path)
    assert transcript.stat().st_size < 1 << 20, f"a transcript of {transcript.stat().st_size} bytes"
    [request] = [e for e in read_transcript(transcript).events if e.event == "request" and e.request_id == 4]
    assert request.method == "tools/call" and request.params is None and request.params_size > MAX_REQUEST_BYTES
    assert not (tmp_path / "ws" / "x").exists()
