"""The server as a real stdio subprocess: sessions, signals and kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import anyio
import pytest
from mcp import StdioServerParameters

from jg_mcp.record.transcript import read_transcript
from jg_mcp.scripted import Step, call, run_script
from tests.support import GEMM_FP8

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


def test_stdout_carries_only_protocol_messages(tmp_path):
    proc = _start(tmp_path)
    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(timeout=30)
    assert all(line.startswith(b'{"jsonrpc"') for line in out.splitlines() if line)
    assert b"session started" in proc.stderr.read()
