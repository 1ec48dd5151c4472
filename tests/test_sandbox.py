"""`--sandbox auto|bwrap|none` and the sandbox's environment, through the real CLI and bwrap."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import pytest

from jg_mcp.runner import Runner
from jg_mcp.sandbox import Bwrap, is_secret, sandbox_env
from jg_mcp.transcript import read_transcript
from tests.conftest import GEMM_FP8
from tests.test_sandbox_escapes import BWRAP_MISSING

pytestmark = pytest.mark.slow


def serve_stdio(tmp_path, sandbox: str, path: str | None = None) -> subprocess.CompletedProcess:
    """A stdio server whose client leaves at once (stdin closed): it starts, records, closes."""
    env = {**os.environ, "PATH": path} if path is not None else None
    return subprocess.run(
        [sys.executable, "-m", "jg_mcp", "serve", "--goal", str(GEMM_FP8), "--workspace", str(tmp_path / "ws"),
         "--transcripts", str(tmp_path / "tr"), "--sandbox", sandbox],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env,
    )


def only_transcript(tmp_path):
    [path] = (tmp_path / "tr").glob("*.jsonl")
    return read_transcript(path)


def test_secret_variables_are_dropped_and_a_minimal_environment_is_kept():
    environ = {"PATH": "/x", "HOME": "/root", "AWS_ACCESS_KEY_ID": "a", "GITHUB_TOKEN": "b", "HF_HOME": "c",
               "CUDA_VISIBLE_DEVICES": "0", "TRITON_CACHE_DIR": "/t", "CUDA_API_KEY": "d", "LANG": "en_US.UTF-8",
               "DB_PASSWORD": "e", "RANDOM_APP_SETTING": "f", "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    env = sandbox_env(environ)
    assert {"CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "LANG", "LD_LIBRARY_PATH"} <= env.keys()
    assert not {"AWS_ACCESS_KEY_ID", "GITHUB_TOKEN", "HF_HOME", "CUDA_API_KEY", "DB_PASSWORD",
                "RANDOM_APP_SETTING"} & env.keys()
    assert env["HOME"] == "/tmp/home" and env["PATH"].startswith(os.path.dirname(sys.executable))
    assert all(is_secret(n) for n in ("OPENAI_API_KEY", "MY_SECRET", "SSH_AUTH_SOCK", "ANTHROPIC_BASE_URL"))


def test_auto_without_bwrap_runs_unsandboxed_with_a_loud_warning_and_a_notice(tmp_path):
    done = serve_stdio(tmp_path, "auto", path="/nonexistent")
    assert done.returncode == 0, done.stderr
    assert "SANDBOX OFF" in done.stderr and "bubblewrap not found" in done.stderr
    transcript = only_transcript(tmp_path)
    assert transcript.events[0].sandbox == "none"
    notices = [e for e in transcript.events if e.event == "notice"]
    assert notices and notices[0].level == "warning" and "SANDBOX OFF" in notices[0].message


def test_bwrap_mode_refuses_to_start_when_it_cannot_sandbox(tmp_path):
    done = serve_stdio(tmp_path, "bwrap", path="/nonexistent")
    assert done.returncode == 1 and "--sandbox bwrap: bubblewrap not found" in done.stderr
    assert not (tmp_path / "tr").exists() or not list((tmp_path / "tr").glob("*.jsonl"))


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")
@pytest.mark.parametrize("mode", ["auto", "none"])
def test_the_header_records_the_mode_that_ran(tmp_path, mode):
    done = serve_stdio(tmp_path, mode)
    assert done.returncode == 0, done.stderr
    transcript = only_transcript(tmp_path)
    assert transcript.events[0].sandbox == ("none" if mode == "none" else "bwrap")
    assert not [e for e in transcript.events if e.event == "notice"]


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")
def test_home_and_tmp_are_private_but_the_compile_cache_survives_between_commands(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    runner = Runner(ws, wrap=Bwrap(ws).wrap)

    async def two_commands():
        with anyio.fail_after(60):
            first = await runner.run("echo kept > $TRITON_CACHE_DIR.txt; echo gone > /tmp/t; echo gone > ~/h", 30)
            second = await runner.run("cat $XDG_CACHE_HOME/triton.txt; ls /tmp/t ~/h", 30)
            return first, second

    first, second = anyio.run(two_commands)
    assert first.exit_code == 0, first.stderr
    assert second.stdout == "kept\n"
    assert "'/tmp/t': No such file" in second.stderr and "'/tmp/home/h': No such file" in second.stderr
    assert sorted(p.name for p in ws.iterdir()) == []
