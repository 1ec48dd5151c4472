"""The server answers every call, whatever the arguments and whatever the command does, and keeps serving."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from jg_mcp.live import lifeline, workspace_fs
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from jg_mcp.record.reading import read_transcript
from tests.support import GEMM_FP8, bwrap_missing, serve_argv

pytestmark = pytest.mark.slow

BWRAP_MISSING = bwrap_missing()
CALL_LIMIT_S = 60
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
odd_text = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=300),
    st.just("\0"),
    st.just("a\0b"),
    st.just("\udcff\ud800"),
    st.just("x" * 200_000),
    st.builds(lambda n: "d/" * n + "f", st.integers(1, 400)),
    st.just("d/" * 3000 + "f"),
    st.sampled_from(["/", "..", "../../etc/passwd", "/etc/shadow", "~", "reference.py", ".", ""]),
)
wrong_or_odd = st.one_of(json_values, odd_text)


@pytest.fixture(scope="module")
def robust(gemm_goal, tmp_path_factory):
    """A server on a sandboxed session where bwrap works (random commands run there), else unsandboxed."""
    root = tmp_path_factory.mktemp("robust")
    ws = root / "ws"
    mode = "none" if BWRAP_MISSING else "bwrap"
    wrap = Bwrap(ws, [root / "tr"]).wrap if mode == "bwrap" else None
    session = Session.open(
        gemm_goal, SessionConfig(workspace_dir=ws, transcripts_dir=root / "tr", sandbox=mode), wrap=wrap
    )
    yield build_server(gemm_goal, SingleSession(session)), session
    session.close("test finished")
    subprocess.run(["rm", "-rf", str(root)], check=True)  # deep trees from the fuzzing defeat shutil.rmtree


def call(server, name: str, arguments: dict, timeout_s: float = CALL_LIMIT_S):
    async def go():
        with anyio.fail_after(timeout_s):
            async with Client(server) as client:
                result = await client.call_tool(name, arguments)
                alive = await client.call_tool("run_command", {"command": "echo alive"})
                assert alive.structured_content["stdout"] == "alive\n"
                return result

    return anyio.run(go)


def answered(result) -> None:
    """An answer is a result; an error result carries a message for the agent."""
    if result.is_error:
        assert result.content and result.content[0].text.strip()


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(path=wrong_or_odd, offset=wrong_or_odd, limit=wrong_or_odd)
def test_read_file_answers_any_arguments(robust, path, offset, limit):
    answered(call(robust[0], "read_file", {"path": path, "offset": offset, "limit": limit}))


@SETTINGS
@given(path=wrong_or_odd, content=wrong_or_odd)
def test_write_file_answers_any_arguments(robust, path, content):
    answered(call(robust[0], "write_file", {"path": path, "content": content}))


@SETTINGS
@given(command=json_values, timeout_s=wrong_or_odd)
def test_run_command_answers_arguments_of_any_type(robust, command, timeout_s):
    answered(call(robust[0], "run_command", {"command": command, "timeout_s": timeout_s}))


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"random shell text runs only inside bwrap: {BWRAP_MISSING}")
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(command=odd_text)
def test_run_command_answers_any_shell_text_inside_the_sandbox(robust, command):
    answered(call(robust[0], "run_command", {"command": command, "timeout_s": 5}))


@SETTINGS
@given(extra=st.dictionaries(st.text(max_size=10), json_values, max_size=3))
def test_query_gpu_and_unknown_arguments_are_answered(robust, extra):
    answered(call(robust[0], "query_gpu", extra))


def test_a_gigabyte_of_output_is_capped_with_head_and_tail(robust):
    result = call(robust[0], "run_command", {"command": "head -c 1G /dev/zero; echo END"})
    out = result.structured_content
    assert out["exit_code"] == 0 and out["stdout"].endswith("END\n")
    assert out["stdout_elided_bytes"] > 1_000_000_000 - 100_000
    assert len(out["stdout"]) < 100_000


def test_a_never_ending_command_times_out_and_its_output_is_capped(robust):
    out = call(robust[0], "run_command", {"command": "yes", "timeout_s": 1}).structured_content
    assert out["timed_out"] and out["exit_code"] is None and out["stdout_elided_bytes"] > 0


def test_a_command_that_closes_stdout_early_is_still_awaited(robust):
    out = call(robust[0], "run_command", {"command": "exec >&- 2>&-; sleep 1; echo done > closed.txt"})
    assert out.structured_content["exit_code"] == 0
    assert (robust[1].workspace.root / "closed.txt").read_text() == "done\n"


def test_invalid_utf8_and_nul_bytes_are_refused_with_a_message(robust):
    call(robust[0], "run_command", {"command": "printf 'ok\\xff\\xfe' > bad.txt; printf 'a\\0b' > nul.txt"})
    for name in ("bad.txt", "nul.txt"):
        result = call(robust[0], "read_file", {"path": name})
        assert result.is_error and "binary" in result.content[0].text
    assert "NUL" in call(robust[0], "run_command", {"command": "echo \0"}).content[0].text


def _stdio_server(tmp_path: Path, sandbox: str) -> subprocess.Popen:
    args = serve_argv("--workspace", tmp_path / "ws", "--transcripts", tmp_path / "tr", "--sandbox", sandbox)
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for m in messages:
        proc.stdin.write(json.dumps(m).encode() + b"\n")
    proc.stdin.flush()
    assert b'"result"' in proc.stdout.readline()
    return proc


def _start_command(proc: subprocess.Popen, command: str) -> None:
    call_msg = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"command": command}},
    }
    proc.stdin.write(json.dumps(call_msg).encode() + b"\n")
    proc.stdin.flush()


def _running(marker: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def _wait_for(predicate, seconds: float) -> None:
    """Poll (process start and exit have no event to wait on) until true, or fail."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"not true after {seconds}s"
        time.sleep(0.05)


def test_a_stdio_client_that_disconnects_mid_call_has_its_command_killed_and_recorded(tmp_path):
    """`pgrep -f` finds the marker on bwrap's own command line as soon as it starts, so the client often goes while
    the sandbox is still starting: the kill must take it down from any point of its start (held there for as long as
    need be: tests/live/test_command_lifetime.py)."""
    marker = f"jg-disconnect-{uuid.uuid4().hex}"
    proc = _stdio_server(tmp_path, "auto")
    _start_command(proc, f"exec -a {marker} sleep 600")
    _wait_for(lambda: _running(marker), 30)
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    _wait_for(lambda: not _running(marker), 30)
    [path] = (tmp_path / "tr").glob("*.jsonl")
    transcript = read_transcript(path)
    assert transcript.closed and transcript.events[-1].reason == "client disconnected"
    assert transcript.events[0].sandbox == ("none" if BWRAP_MISSING else "bwrap")
    [killed] = [e for e in transcript.events if e.event == "response" and e.method == "tools/call"]
    assert killed.is_error and killed.cancelled
    assert killed.error == "cancelled: the client cancelled the call or disconnected before it finished"
    from jg_mcp.record import audit

    [command] = audit.audit(path, goal_path=GEMM_FP8).summary.commands
    assert command.cancelled and command.exit_code is None


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_sigkill_mid_command_leaves_a_readable_prefix_and_only_bwrap_takes_the_command_down(tmp_path, sandbox):
    if sandbox == "bwrap" and BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    marker = f"jg-sigkill-{uuid.uuid4().hex}"
    proc = _stdio_server(tmp_path, sandbox)
    _start_command(proc, f"exec -a {marker} sleep 600")
    _wait_for(lambda: _running(f"^{marker}"), 30)  # the command itself (argv[0]), not bwrap naming it
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if sandbox == "bwrap":
        _wait_for(lambda: not _running(marker), 30)
    else:
        survivors = _running(marker)
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        assert survivors, "unsandboxed, a command outlives a SIGKILLed server: bwrap's --die-with-parent matters"
    [path] = (tmp_path / "tr").glob("*.jsonl")
    transcript = read_transcript(path)
    assert not transcript.closed and transcript.events[0].sandbox == sandbox
    assert transcript.events[-1].event == "request"
    ws = tmp_path / "ws"  # the killed server left its workspace's own file system mounted: taken down, files kept
    workspace_fs.take_down_left(ws, ws.parent / ".ws.cache")
    assert (ws / ".." / ".ws.fs" / "image").exists() == (sandbox == "bwrap")


SPAWN_THEN_WAIT = """
import subprocess, sys, time
from pathlib import Path
from jg_mcp.eval.processes.isolation import bwrap_argv, prepare
from jg_mcp.live import lifeline
from jg_mcp.live.bwrap import Bwrap
ws, command = Path(sys.argv[1]), ["/bin/bash", "-c", sys.argv[2]]
if sys.argv[3] == "live":
    argv = Bwrap(ws).wrap(command)
    fds = argv.pass_fds
else:
    (ws / "solution").mkdir(), (ws / "cache").mkdir()
    prepare(ws / "solution", ws / "cache")
    argv, fds = bwrap_argv(ws / "solution", ws / "cache", {"PATH": "/usr/bin:/bin"}) + command, (lifeline.read_end(),)
subprocess.Popen(argv, pass_fds=fds, start_new_session=True)
print("spawned", flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(bool(BWRAP_MISSING), reason=BWRAP_MISSING or "")
@pytest.mark.parametrize("sandbox", ["live", "eval"])
def test_a_parent_killed_while_bwrap_starts_leaves_no_sandbox_running(tmp_path, sandbox):
    """SIGKILL lands on the spawning process (the server, the eval's harness) right after the spawn, while bwrap
    is still setting up (before its own --die-with-parent takes hold): the command must never run on, orphaned. The
    agent's sandbox leaves no process at all (the marker is on bwrap's own command line): not even bwrap's child
    waiting, forever, for its dead outer process to let it go on."""
    markers = [f"jg-orphan-{uuid.uuid4().hex}" for _ in range(12)]
    for i, marker in enumerate(markers):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        parent = subprocess.Popen(
            [sys.executable, "-c", SPAWN_THEN_WAIT, str(ws), f"exec -a {marker} sleep 600", sandbox],
            stdout=subprocess.PIPE,
        )
        assert parent.stdout.readline() == b"spawned\n"
        time.sleep(i * 0.004)  # from before bwrap's clone to after its mounts
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
    time.sleep(3)
    survivors = [pid for m in markers for pid in _running(m if sandbox == "live" else f"^{m}")]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"{len(survivors)} processes of {len(markers)} sandboxes outlived their killed parent"


@pytest.mark.parametrize("server_alive", [True, False])
def test_the_lifeline_guard_runs_the_command_only_while_the_server_lives(tmp_path, server_alive):
    read, write = os.pipe()
    if not server_alive:
        os.close(write)
    argv = ["/bin/bash", "-c", lifeline.GUARD, "jg-lifeline", str(read), "sh", "-c", "ls /proc/self/fd > fds"]
    done = subprocess.run(argv, cwd=tmp_path, pass_fds=(read,), capture_output=True, text=True, timeout=30)
    os.close(read)
    if server_alive:
        os.close(write)
        assert done.returncode == 0
        assert str(read) not in (tmp_path / "fds").read_text().split(), "the command must not hold the lifeline"
    else:
        assert done.returncode == lifeline.GONE_EXIT and "process that started this command is gone" in done.stderr
        assert not (tmp_path / "fds").exists()


def test_a_lifeline_the_caller_did_not_pass_stops_the_command_instead_of_being_skipped(tmp_path):
    """`inner(argv)` needs `read_end()` passed to the process: a caller that forgets it must find out at once, not
    get a guard that reads a closed descriptor as a live server."""
    read, write = os.pipe()
    argv = ["/bin/bash", "-c", lifeline.GUARD, "jg-lifeline", str(read), "sh", "-c", "touch ran"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    os.close(read)
    os.close(write)
    assert done.returncode == lifeline.GONE_EXIT and f"no lifeline on descriptor {read}" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_an_oversized_request_is_recorded_by_its_size_and_refused(gemm_goal, tmp_path):
    session = Session.open(gemm_goal, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "tr"))
    server = build_server(gemm_goal, SingleSession(session))

    async def go():
        refused = []
        with anyio.fail_after(CALL_LIMIT_S):
            async with Client(server) as client:
                for _ in range(2):
                    with pytest.raises(MCPError) as caught:
                        await client.call_tool("write_file", {"path": "a", "content": "x" * (40 << 20)})
                    refused.append(str(caught.value))
                alive = await client.call_tool("run_command", {"command": "echo alive"})
                return refused, alive

    refused, alive = anyio.run(go)
    session.close("test finished")
    assert all("request refused" in r and "limit" in r for r in refused), refused
    assert alive.structured_content["stdout"] == "alive\n"
    events = read_transcript(session.transcript_path).events
    big = [e for e in events if e.event == "request" and e.params_size]
    assert big and all(e.params is None and e.params_size > 40 << 20 and e.method == "tools/call" for e in big)
    assert session.transcript_path.stat().st_size < 1 << 20, "the content was not recorded"


def test_a_stdio_message_over_the_limit_is_refused_unread_and_the_server_keeps_serving(tmp_path):
    from jg_mcp.live.stdio import LINE_LIMIT_BYTES

    proc = _stdio_server(tmp_path, "none")
    try:
        huge = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"path": "a", "content": "x" * (LINE_LIMIT_BYTES + 10)}},
        }
        proc.stdin.write(json.dumps(huge).encode() + b"\n")
        _start_command(proc, "echo alive")
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    finally:
        proc.stdin.close()
        proc.wait(60)
    assert answers[0]["id"] == 7 and "request refused" in answers[0]["error"]["message"]
    assert answers[1]["result"]["structuredContent"]["stdout"] == "alive\n"
    transcript = next((tmp_path / "tr").glob("*.jsonl"))
    assert transcript.stat().st_size < 1 << 20
    big = [e for e in read_transcript(transcript).events if e.event == "request" and e.params_size]
    assert len(big) == 1 and big[0].method == "tools/call" and big[0].params_size > LINE_LIMIT_BYTES


def test_a_call_the_client_abandons_is_recorded_as_cancelled_and_the_audit_says_so(gemm_goal, tmp_path):
    from jg_mcp.commands.audit import render_text
    from jg_mcp.record import audit

    session = Session.open(gemm_goal, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "tr"))
    server = build_server(gemm_goal, SingleSession(session))

    async def go():
        with anyio.fail_after(CALL_LIMIT_S):
            async with Client(server) as client:
                with pytest.raises(MCPError, match="[Tt]imed out"):
                    await client.call_tool("run_command", {"command": "sleep 600"}, read_timeout_seconds=1)
                return await client.call_tool("run_command", {"command": "echo alive"})

    alive = anyio.run(go)
    session.close("test finished")
    assert alive.structured_content["stdout"] == "alive\n"
    responses = [e for e in read_transcript(session.transcript_path).events if e.event == "response"]
    [abandoned] = [e for e in responses if e.is_error]
    assert abandoned.cancelled and abandoned.error.startswith("cancelled: ") and "Task" not in abandoned.error
    report = audit.audit(session.transcript_path, goal_path=GEMM_FP8)
    assert [(c.command, c.cancelled) for c in report.summary.commands] == [("sleep 600", True), ("echo alive", False)]
    assert [f.kind for f in report.findings if f.kind in ("refused", "cancelled")] == ["cancelled"]
    text = render_text(report)
    assert "CANCELLED" in text and "exit None" not in text and "refused" not in text
