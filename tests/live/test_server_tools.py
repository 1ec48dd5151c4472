"""The goal-only server, in process through the real mcp Client."""

from __future__ import annotations

import hashlib
import os

import anyio
import pytest
from mcp import Client

from jg_mcp.record.conditions import CONDITIONS
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.transcript import COMMAND_BLOB_CAP, WRITE_BLOB_CAP


def session_run(server, fn, timeout_s=120):
    async def go():
        with anyio.fail_after(timeout_s):
            async with Client(server) as client:
                return await fn(client)

    return anyio.run(go)


def test_exactly_the_four_tools_with_annotations_and_output_schemas(server):
    async def fn(c):
        return (await c.list_tools()).tools

    tools = {t.name: t for t in session_run(server, fn)}
    assert tuple(tools) == CONDITIONS["goal-only"].tools
    assert tools["read_file"].annotations.read_only_hint is True
    assert tools["query_gpu"].annotations.read_only_hint is True
    assert tools["write_file"].annotations.destructive_hint is True
    assert tools["run_command"].annotations.idempotent_hint is False
    assert all(t.output_schema for t in tools.values())
    assert all(t.description and not t.description.startswith(" ") for t in tools.values())


def test_write_then_read_round_trips_with_size_and_hash(server, session):
    content = "héllo\nworld\n"

    async def fn(c):
        w = await c.call_tool("write_file", {"path": "deep/dir/a.txt", "content": content})
        r = await c.call_tool("read_file", {"path": "deep/dir/a.txt"})
        return w, r

    w, r = session_run(server, fn)
    data = content.encode()
    assert w.structured_content == {
        "path": "deep/dir/a.txt",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "created": True,
    }
    assert r.structured_content["content"] == content
    assert (session.workspace.root / "deep/dir/a.txt").read_bytes() == data


def test_read_file_pages_large_files(server, session):
    (session.workspace.root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 251)))

    async def fn(c):
        pages, offset = [], 1
        while offset:
            r = (await c.call_tool("read_file", {"path": "big.txt", "offset": offset, "limit": 100})).structured_content
            pages.append(r)
            offset = r["next_offset"]
        return pages

    pages = session_run(server, fn)
    assert [(p["start_line"], p["end_line"]) for p in pages] == [(1, 100), (101, 200), (201, 250)]
    assert pages[-1]["content"].endswith("line 250\n") and pages[0]["total_lines"] == 250


def test_binary_file_gets_a_clear_error(server, session):
    (session.workspace.root / "blob.bin").write_bytes(bytes(range(256)))

    async def fn(c):
        return await c.call_tool("read_file", {"path": "blob.bin"})

    r = session_run(server, fn)
    assert r.is_error and "binary file (256 bytes)" in r.content[0].text


@pytest.mark.parametrize(
    "tool, args, message",
    [
        ("read_file", {"path": "/etc/passwd"}, "outside the workspace"),
        ("read_file", {"path": "../../etc/passwd"}, "outside the workspace"),
        ("read_file", {"path": "a\u0000b"}, "NUL byte"),
        ("read_file", {"path": "missing.py"}, "does not exist"),
        ("write_file", {"path": "/tmp/evil.py", "content": "x"}, "outside the workspace"),
        ("write_file", {"path": "reference.py", "content": "x"}, "read-only"),
        ("read_file", {"path": 5}, "valid string"),
        ("run_command", {"command": "true", "timeout_s": -1}, "greater than or equal to 1"),
        ("run_command", {}, "command"),
        ("run_command", {"command": "echo " + "x" * 140_000}, "write the script with write_file"),
        ("no_such_tool", {}, "no_such_tool"),
    ],
)
def test_bad_requests_get_clear_errors_and_the_server_keeps_serving(server, tool, args, message):
    async def fn(c):
        bad = await c.call_tool(tool, args)
        good = await c.call_tool("run_command", {"command": "echo alive"})
        return bad, good

    bad, good = session_run(server, fn)
    assert bad.is_error and message in bad.content[0].text
    assert good.structured_content["stdout"] == "alive\n"


def test_symlink_escape_via_command_is_refused_by_file_tools(server, tmp_path):
    (tmp_path / "outside.txt").write_text("secret")

    async def fn(c):
        await c.call_tool("run_command", {"command": f"ln -s {tmp_path / 'outside.txt'} link.txt"})
        return await c.call_tool("read_file", {"path": "link.txt"})

    r = session_run(server, fn)
    assert r.is_error and "symbolic link" in r.content[0].text


def test_run_command_timeout_reports_and_kills(server):
    async def fn(c):
        return await c.call_tool("run_command", {"command": "sleep 100", "timeout_s": 1})

    r = session_run(server, fn).structured_content
    assert r["timed_out"] is True and r["exit_code"] is None


def test_long_commands_send_progress_with_elapsed_and_last_line(server, session):
    session.runner.progress_every_s = 0.3
    seen = []

    async def progress(value, total, message):
        seen.append((value, message))

    async def fn(c):
        return await c.call_tool(
            "run_command", {"command": "for i in 1 2 3 4; do echo tick$i; sleep 0.3; done"}, progress_callback=progress
        )

    r = session_run(server, fn)
    assert r.structured_content["exit_code"] == 0
    assert len(seen) >= 2 and seen[-1][0] > seen[0][0]
    assert any("elapsed" in m and "tick" in m for _, m in seen)


def test_progress_never_shows_a_line_that_the_recorded_result_cuts(server, session):
    """The red team's attack: a line printed between two floods of output, shown in progress while it was the
    last, then cut from the middle of the result; the agent saw it, the transcript never had it."""
    session.runner.progress_every_s = 0.3
    session.runner.cap = 1000
    seen = []

    async def progress(value, total, message):
        seen.append(message)

    command = "head -c 2000 /dev/zero | tr '\\0' a; echo; echo HIDDEN-$((6*7)); sleep 1.5; head -c 2000 /dev/zero"

    async def fn(c):
        return await c.call_tool("run_command", {"command": command}, progress_callback=progress)

    r = session_run(server, fn).structured_content
    assert r["exit_code"] == 0 and r["stdout_elided_bytes"] > 0
    assert len(seen) >= 2 and not [m for m in seen if "HIDDEN-42" in m]
    assert any("bytes of stdout" in m for m in seen)
    assert "HIDDEN-42" not in session.transcript_path.read_text()


def test_query_gpu_answers_structured_without_gpu(server):
    async def fn(c):
        return await c.call_tool("query_gpu", {})

    r = session_run(server, fn)
    assert not r.is_error
    s = r.structured_content
    if os.path.exists("/dev/nvidiactl"):
        assert s["available"] is True and s["devices"][0]["memory_total_mib"] > 0
    else:
        assert s["available"] is False and "NVML" in s["reason"]


def test_goal_resources_and_prompt(server, gemm_goal):
    async def fn(c):
        listed = [str(r.uri) for r in (await c.list_resources()).resources]
        goal = (await c.read_resource("goal://gemm_fp8")).contents[0].text
        ref = (await c.read_resource("goal://gemm_fp8/reference.py")).contents[0].text
        prompt = (await c.get_prompt("goal")).messages
        prompts = [p.name for p in (await c.list_prompts()).prompts]
        return listed, goal, ref, prompt, prompts

    listed, goal, ref, prompt, prompts = session_run(server, fn)
    assert listed == ["goal://gemm_fp8", "goal://gemm_fp8/reference.py"]
    for part in (
        "## Objective",
        "## Constraints",
        "## Solution contract",
        "## Tolerance",
        "## Timed shapes",
        "## Hardware",
        "## Budget",
        "kernel(a, b, scale_a, scale_b)",
        "llama3_8b_prefill_qkv",
    ):
        assert part in goal
    assert ref == gemm_goal.module_path.read_text()
    assert prompts == ["goal"] and len(prompt) == 1 and prompt[0].content.text == goal


def test_every_request_and_file_change_is_recorded(server, session):
    async def fn(c):
        await c.call_tool("write_file", {"path": "solution.py", "content": "x = 1\n"})
        await c.call_tool("run_command", {"command": "echo made > made.txt; rm -f solution.py"})
        await c.call_tool("read_file", {"path": "/etc/passwd"})

    session_run(server, fn)
    session.close("done")
    events = read_transcript(session.transcript_path).events
    calls = [e.params["name"] for e in events if e.event == "request" and e.method == "tools/call"]
    assert calls == ["write_file", "run_command", "read_file"]
    responses = [e for e in events if e.event == "response" and e.method == "tools/call"]
    assert [r.is_error for r in responses] == [False, False, True]
    assert all(r.duration_ms >= 0 for r in responses)
    changes = [(e.path, e.op, e.cause) for e in events if e.event == "file_change"]
    write_id = next(e.request_id for e in events if e.event == "request" and e.params.get("name") == "write_file")
    assert [e.request_id for e in events if e.event == "file_change" and e.cause == "write_file"] == [write_id]
    assert ("solution.py", "write", "write_file") in changes
    assert ("made.txt", "write", "run_command") in changes
    assert ("solution.py", "delete", "run_command") in changes
    blob = session.writer.blobs / hashlib.sha256(b"x = 1\n").hexdigest()
    assert blob.read_bytes() == b"x = 1\n"
    close = events[-1]
    assert close.event == "close" and "made.txt" in close.manifest and "solution.py" not in close.manifest


def test_whatever_write_file_accepts_is_stored_whole_while_a_command_made_file_that_size_is_only_hashed(
    server, session
):
    content = "w" * (COMMAND_BLOB_CAP + 1)

    async def fn(c):
        await c.call_tool("write_file", {"path": "written.txt", "content": content})
        await c.call_tool("run_command", {"command": f"head -c {COMMAND_BLOB_CAP + 1} /dev/zero > made.bin"})
        too_big = await c.call_tool("write_file", {"path": "x.txt", "content": "w" * (WRITE_BLOB_CAP + 1)})
        return too_big

    too_big = session_run(server, fn)
    session.close("done")
    assert too_big.is_error and f"the limit is {WRITE_BLOB_CAP}" in too_big.content[0].text
    changes = {e.path: e for e in read_transcript(session.transcript_path).events if e.event == "file_change"}
    assert changes["written.txt"].stored and (session.writer.blobs / changes["written.txt"].sha256).is_file()
    assert not changes["made.bin"].stored and not (session.writer.blobs / changes["made.bin"].sha256).exists()


def test_request_params_are_limited_in_bytes_as_the_transcript_holds_them(server, session):
    """The limit on what a request's params may hold counts UTF-8 bytes (what the transcript writes), not
    characters: params of 4-byte characters had passed at four times the limit, 60 MB a call."""
    from jg_mcp.live.recording import MAX_REQUEST_BYTES

    wide = "\U0001f600" * (MAX_REQUEST_BYTES // 4 + 1024)
    assert len(wide) < MAX_REQUEST_BYTES < len(wide.encode())

    async def fn(c):
        return await c.call_tool("query_gpu", {"pad": wide})

    with pytest.raises(Exception, match="unhandled errors"):  # the refusal is a JSON-RPC error the client raises
        session_run(server, fn)
    session.close("done")
    events = read_transcript(session.transcript_path).events
    [request] = [e for e in events if e.event == "request" and e.params_size]
    [response] = [e for e in events if e.event == "response" and e.request_id == request.request_id]
    assert request.params is None and request.params_size > MAX_REQUEST_BYTES
    assert response.is_error and "bytes or more, over the limit" in response.error
