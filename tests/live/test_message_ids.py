"""Messages whose id is no JSON-RPC id, requests without an id, and numbers JSON cannot hold, over real stdio and
HTTP: none of them is recorded as a call that did not happen, or with params other than those sent.

The SDK takes a request whose id is not a string or an integer (`true`, `1.5`, `null`, `[1]`, `{}`) for a
notification: nothing runs and nothing answers it. The transcript had recorded it as a tools/call with a
successful response, which the audit listed as a step (a red-team attack); a timeout of NaN had been recorded as
null."""

from __future__ import annotations

import json

import httpx
import pytest

from jg_mcp.live.measure import measured
from jg_mcp.live.stdio import id_refusal
from jg_mcp.record import audit
from jg_mcp.record.events import Notice
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.steps import load_record
from tests.support import GEMM_FP8, INIT, MCP_HEADERS, TOKEN, HttpServer, StdioWire

pytestmark = pytest.mark.slow

BAD_IDS = ["true", "1.5", "null", "[1]", "{}", "NaN", "1e400"]


def touch(rid: str, name: str) -> bytes:
    """A raw tools/call line, its id written as `rid`, that would make the file `name`."""
    arguments = json.dumps({"command": f"touch {name}"})
    return (
        f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"run_command","arguments":{arguments}}}}}'
    ).encode()


def audited_calls(transcript) -> dict[str, int]:
    """The calls per tool `jg-mcp audit` counts in `transcript`, its chain checked first."""
    report = audit.audit(transcript, goal_path=GEMM_FP8)
    assert [f for f in report.findings if f.area == "integrity" and f.severity == "error"] == [], report.findings
    assert report.summary is not None
    return report.summary.calls_per_tool


def test_the_id_is_judged_from_an_outline_of_the_message_that_stays_small_whatever_its_size():
    content = json.dumps("\x01" * (4 << 20))
    for rid, refused in (("true", True), ("5", False), ('"x"', False), ("1.0", True)):
        body = f'{{"method":"tools/call","params":{{"arguments":{{"content":{content}}}}},"\\u0069d":{rid}}}'
        measure = measured(body.encode(), outline=True)
        assert measure.outline is not None and sum(map(len, measure.outline)) < 200
        assert (id_refusal(measure.outline) is not None) == refused, rid
    digits = measured(b'{"id":true,"method":"x","n":' + b"1" * (2 << 20) + b"}", outline=True)
    assert digits.outline is None and id_refusal(digits.outline) is None


def test_over_stdio_a_request_whose_id_is_no_jsonrpc_id_is_refused_with_id_null_and_never_recorded_as_a_call(
    tmp_path,
):
    wire = StdioWire(tmp_path)
    for n, rid in enumerate(BAD_IDS):
        wire.raw(touch(rid, f"pwned{n}"))
        refused = wire.answer()
        assert refused["id"] is None and "not a string or an integer" in refused["error"]["message"], refused
    wire.call(9, "run_command", command="echo alive")
    assert wire.answer()["result"]["structuredContent"]["stdout"] == "alive\n"
    transcript = wire.close()
    assert not list((tmp_path / "ws").glob("pwned*"))
    events = read_transcript(transcript).events
    assert [e.request_id for e in events if e.event == "request" and e.method == "tools/call"] == [9]
    notices = [e for e in events if isinstance(e, Notice) and "refused unread" in e.message]
    assert len(notices) == len(BAD_IDS) and all(n.level == "warning" for n in notices)
    assert [c.request_id for c in load_record(transcript).calls] == [9]
    assert audited_calls(transcript) == {"run_command": 1}


def test_over_stdio_a_request_method_without_an_id_is_recorded_as_a_dropped_message_not_a_call(tmp_path):
    wire = StdioWire(tmp_path)
    wire.raw(
        b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"run_command","arguments":{"command":"touch x"}}}'
    )
    wire.call(9, "run_command", command="echo alive")
    assert wire.answer()["result"]["structuredContent"]["stdout"] == "alive\n"
    transcript = wire.close()
    assert not (tmp_path / "ws" / "x").exists()
    events = read_transcript(transcript).events
    assert [e.request_id for e in events if e.event in ("request", "response") and e.method == "tools/call"] == [9, 9]
    assert any(isinstance(e, Notice) and "tools/call message without an id" in e.message for e in events)
    assert audited_calls(transcript) == {"run_command": 1}


@pytest.mark.parametrize(
    ("arguments", "meta", "field", "recorded"),
    [
        ('{"command":"touch x","timeout_s":NaN}', "{}", "params.arguments.timeout_s", "NaN"),
        ('{"command":"touch x","timeout_s":-Infinity}', "{}", "params.arguments.timeout_s", "-Infinity"),
        ('{"command":"touch x"}', '{"progressToken":1e400}', "params._meta.progressToken", "Infinity"),
    ],
)
def test_over_stdio_a_number_that_is_not_finite_is_refused_naming_its_field_and_recorded_as_named(
    tmp_path, arguments, meta, field, recorded
):
    wire = StdioWire(tmp_path)
    params = f'{{"name":"run_command","arguments":{arguments},"_meta":{meta}}}'
    wire.raw(f'{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{params}}}'.encode())
    refused = wire.answer()
    assert refused["id"] == 5 and field in refused["error"]["message"] and "not a finite" in refused["error"]["message"]
    transcript = wire.close()
    assert not (tmp_path / "ws" / "x").exists()
    [request] = [e for e in read_transcript(transcript).events if e.event == "request" and e.request_id == 5]
    assert recorded in json.dumps(request.params) and "null" not in json.dumps(request.params)
    [call] = load_record(transcript).calls
    assert call.is_error and field in (call.error or "")


def test_over_http_a_request_whose_id_is_no_jsonrpc_id_is_refused_with_id_null_and_never_recorded_as_a_call(
    tmp_path,
):
    with HttpServer(tmp_path, "--sandbox", "none") as server, httpx.Client(timeout=60) as http:
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
        init = http.post(server.url, json=INIT, headers=headers)
        headers |= {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        for n, rid in enumerate(BAD_IDS):
            refused = http.post(server.url, content=touch(rid, f"pwned{n}"), headers=headers)
            assert refused.status_code == 400 and refused.json()["id"] is None, refused.text
            assert "not a string or an integer" in refused.json()["error"]["message"]
        no_id = touch("0", "dropped").replace(b'"id":0,', b"")
        assert http.post(server.url, content=no_id, headers=headers).status_code == 202
        alive = http.post(server.url, content=touch("9", "alive"), headers=headers)
        assert alive.status_code == 200 and '"id":9,"result"' in alive.text, alive.text
    [transcript] = server.transcripts.glob("*.jsonl")
    assert not list((tmp_path / "runs").glob("*/workspace/pwned*"))
    assert not list((tmp_path / "runs").glob("*/workspace/dropped"))
    assert list((tmp_path / "runs").glob("*/workspace/alive"))
    events = read_transcript(transcript).events
    assert [e.request_id for e in events if e.event == "request" and e.method == "tools/call"] == [9]
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len([m for m in notices if "refused unread" in m]) == len(BAD_IDS)
    assert len([m for m in notices if "without an id" in m]) == 1
    assert audited_calls(transcript) == {"run_command": 1}
