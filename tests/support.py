"""Helpers shared by test modules: paths, the command line, node tools, bubblewrap, the demo run, scripted
sessions, transcript chains and the HTTP server subprocess.

Test modules import these from here, never from one another (importing a test module runs its
module-level code again under a second name and couples unrelated tests).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp import Client

    from jg_mcp.record.events import Header

REPO = Path(__file__).resolve().parent.parent
GEMM_FP8 = REPO / "goals" / "gemm_fp8.yaml"
DEMO_GOAL = REPO / "jg_mcp" / "demo_goal" / "axpy.yaml"
TOOLS_BIN = REPO / ".tools" / "node_modules" / ".bin"
SECRET_VAR = "JG_TEST_API_TOKEN"
"""A secret-looking environment variable that the sandbox must drop."""


@functools.cache
def can_set_oom_floor() -> bool:
    """Whether this process holds CAP_SYS_RESOURCE (capability 24), without which its write of an OOM score
    adjustment sets no floor that a less privileged process could not go below (containers often drop it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)
    return False


def bwrap_missing() -> str | None:
    """Why bubblewrap cannot run at all here (not installed, or namespaces forbidden), else None."""
    if not shutil.which("bwrap"):
        return "bwrap is not installed (Debian package `bubblewrap`)"
    done = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return f"bwrap cannot create namespaces here: {done.stderr.strip()}" if done.returncode else None


def serve_argv(*args: object, goal: Path = GEMM_FP8) -> list[str]:
    """`python -m jg_mcp serve --goal GOAL ARGS...`, the server as the tests start it in a subprocess."""
    return [sys.executable, "-m", "jg_mcp", "serve", "--goal", str(goal), *map(str, args)]


def jg(*args: object, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The command line, as a user runs it, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "jg_mcp", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def node_tool(name: str) -> Path:
    """A tool installed by .ci/setup into .tools/ (npm); tests that need it skip with the reason."""
    path = TOOLS_BIN / name
    if not path.exists():
        pytest.skip(f"{name} not installed: run bash .ci/setup --tests (npm install into .tools/)")
    return path


def copy_goal(tmp_path: Path, name: str = "gemm_fp8") -> Path:
    """A writable copy of a goal pair, for tests that corrupt it."""
    for suffix in (".yaml", ".py"):
        shutil.copy(REPO / "goals" / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    return tmp_path / f"{name}.yaml"


@dataclass(frozen=True)
class DemoRun:
    """One `jg-mcp demo` run as a user runs it (a real stdio server subprocess), what it printed and where."""

    out: Path
    code: int
    lines: tuple[str, ...]
    """stdout, line by line."""
    stderr: str
    live: bool
    """Whether the first numbered step was printed while the process was still running."""


@functools.cache
def demo() -> DemoRun:
    """`jg-mcp demo` run once per test process and shared: test_demo asserts on what it printed, the replay,
    audit and page tests read the transcript and workspace it left (they copy before they tamper). Its --out is a
    folder two levels below one of ours that the demo makes itself, as a user's first run does."""
    root = Path(tempfile.mkdtemp(prefix="jg-mcp-test-demo-"))
    atexit.register(shutil.rmtree, root, True)
    out = root / "new" / "demo"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jg_mcp", "demo", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
    )
    lines: list[str] = []
    live = False
    deadline = time.monotonic() + 600
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if not live and line.startswith(" 1. "):
                live = proc.poll() is None
            assert time.monotonic() < deadline, "the demo took more than 600 s"
        stderr = proc.stderr.read()
        return DemoRun(out, proc.wait(timeout=60), tuple(lines), stderr, live)
    finally:
        proc.kill()
        proc.wait()


def demo_dir() -> Path:
    """The shared demo run's output folder (transcripts/, workspace/, eval.json, session.html)."""
    run = demo()
    assert run.code == 0, "\n".join(run.lines) + run.stderr
    return run.out


def demo_run() -> Path:
    """The demo's transcript."""
    return next((demo_dir() / "transcripts").glob("*.jsonl"))


def copy_transcript(src: Path, dest_dir: Path) -> Path:
    """A transcript and its blobs copied, for tests that tamper with them."""
    from jg_mcp.record.transcript import blobs_dir

    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / src.name
    shutil.copyfile(src, dest)
    shutil.copytree(blobs_dir(src), blobs_dir(dest))
    return dest


def scripted_session(
    tmp_path: Path, steps: list, goal: Path = DEMO_GOAL, sandbox: str = "none", key: bytes | None = None
) -> tuple[Path, Path]:
    """An in-process session on the demo goal driven by the scripted client, its commands run unsandboxed or
    (`sandbox="bwrap"`) in bubblewrap, its transcript keyed with `key`; returns (transcript, workspace)."""
    import anyio

    from jg_mcp.goals import load_goal
    from jg_mcp.live.bwrap import Bwrap
    from jg_mcp.live.server import SingleSession, build_server
    from jg_mcp.live.session import Session
    from jg_mcp.live.session_place import SessionConfig
    from jg_mcp.scripted import run_script

    loaded = load_goal(goal)
    ws, transcripts = tmp_path / "ws", tmp_path / "transcripts"
    wrap = Bwrap(ws, [transcripts]).wrap if sandbox == "bwrap" else None
    session = Session.open(
        loaded,
        SessionConfig(workspace_dir=ws, transcripts_dir=transcripts, sandbox=sandbox),
        wrap=wrap,
        transcript_key=key,
    )
    try:
        anyio.run(run_script, build_server(loaded, SingleSession(session), sandboxed=sandbox == "bwrap"), steps, 120)
    finally:
        session.close("test finished")
    return session.transcript_path, session.workspace.root


def rechain(lines: list[bytes]) -> bytes:
    """Re-link a list of event lines into a valid chain (what a writer of that content would have written)."""
    from jg_mcp.record.events import GENESIS, sha256_bytes

    out, prev = [], GENESIS
    for seq, line in enumerate(lines):
        event = json.loads(line)
        event["seq"], event["prev"] = seq, prev
        raw = json.dumps(event).encode()
        out.append(raw)
        prev = sha256_bytes(raw)
    return b"\n".join(out) + b"\n"


CPU_ENVIRONMENT = {
    "device": "cpu",
    "gpu": None,
    "driver": None,
    "torch": "2",
    "triton": "3",
    "python": "3.11",
    "jg_mcp": "0.1.0",
    "host": "test",
    "interpreter": True,
}
"""An eval report's environment on a machine without a GPU, for reports the tests write by hand."""


def eval_report(solution_sha256: str, goal_sha256: str, speedup: float = 1.25) -> dict:
    """A minimal valid `jg-mcp eval` report (jg_mcp.eval.EvalReport) as its JSON file holds it: one timed shape."""
    return {
        "version": 4,
        "goal": "axpy",
        "goal_sha256": goal_sha256,
        "solution_sha256": solution_sha256,
        "solution_file": "solution.py",
        "accepted": True,
        "reasons": [],
        "findings": [],
        "shapes": [
            {
                "name": "n16m",
                "kind": "timed",
                "dims": {"N": 16777216},
                "trials": 3,
                "correct": True,
                "speedup": {"torch_add": speedup},
            }
        ],
        "geomean_speedup": speedup,
        "seed": 1,
        "environment": dict(CPU_ENVIRONMENT),
    }


TOKEN = "test-token-" + "x" * 32
"""The bearer token of `HttpServer`s started with the default."""
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
"""A raw MCP initialize request, for tests that speak HTTP below the client."""
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """A `jg-mcp serve --transport http` subprocess on a free loopback port."""

    def __init__(self, root: Path, *extra: str, token: str | None = TOKEN):
        self.root, self.port = root, free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.transcripts = root / "tr"
        args = serve_argv(
            "--transport",
            "http",
            "--port",
            self.port,
            "--runs",
            root / "runs",
            "--transcripts",
            self.transcripts,
            *extra,
        )
        if token is not None:
            (root / "token").write_text(token + "\n")
            args += ["--token-file", str(root / "token")]
        self.stderr = open(root / "stderr.txt", "w+")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr)

    def wait_ready(self, timeout_s: float = 60) -> HttpServer:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # the port listens before the server says so: wait for the word
            assert self.proc.poll() is None, self.log()
            if "serving over HTTP" in self.log():
                return self
            time.sleep(0.1)
        raise TimeoutError(f"server not ready after {timeout_s}s: {self.log()}")

    def log(self) -> str:
        self.stderr.flush()
        return (self.root / "stderr.txt").read_text()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def transcripts_by_run(self) -> dict:
        from jg_mcp.record.reading import read_transcript

        return {p.stem: read_transcript(p) for p in self.transcripts.glob("*.jsonl")}

    def __enter__(self) -> HttpServer:
        return self.wait_ready()

    def __exit__(self, *exc) -> None:
        self.stop(signal.SIGKILL if exc[0] else signal.SIGTERM)


def client(server: HttpServer, token: str = TOKEN) -> Client:
    """An MCP client of `server` over streamable HTTP, with a bearer token."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(server.url, http_client=http))


def wait_until(predicate: Callable[[], object], seconds: float) -> None:
    """Poll `predicate` (a process ending has no event to wait on) until true, or fail the test."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"not true after {seconds}s"
        time.sleep(0.05)


def transcript_header(key: bytes | None = None) -> Header:
    """A minimal transcript header; with `key`, a keyed transcript's (its key_id)."""
    from jg_mcp.record.events import Header
    from jg_mcp.record.keys import key_id

    return Header(
        key_id=None if key is None else key_id(key),
        jg_mcp_version="0",
        run_id="r",
        goal="g",
        goal_sha256="0" * 64,
        condition="goal-only",
        sandbox="none",
        workspace="/w",
        host={},
        gpu={},
        started_at="2026-01-01T00:00:00+00:00",
    )


class Wire:
    """The raw stdio stream of a `jg-mcp serve` subprocess: JSON-RPC lines out, answers in, every wait bounded."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.buf = proc, b""

    def raw(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, rid: int | str, method: str, params: dict) -> None:
        self.raw(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode())

    def call(self, rid: int | str, tool: str, **arguments: object) -> None:
        self.send(rid, "tools/call", {"name": tool, "arguments": arguments})

    def answer(self, seconds: float = 60) -> dict:
        """The next answer (a message with a result or an error), skipping notifications."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + seconds
        while True:
            while b"\n" not in self.buf:
                ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
                assert ready, "no answer in time"
                data = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert data, "the server closed its stdout"
                self.buf += data
            line, self.buf = self.buf.split(b"\n", 1)
            message = json.loads(line)
            if "result" in message or "error" in message:
                return message

    def end(self) -> None:
        """Close stdin (the session ends) and wait for the server to exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class StdioWire(Wire):
    """A `jg-mcp serve` stdio subprocess (its workspace and transcripts under `root`), initialized, spoken to in
    raw JSON-RPC lines: for tests of what a client may send that the SDK's client never does."""

    def __init__(self, root: Path):
        self.root = root
        argv = serve_argv("--workspace", root / "ws", "--transcripts", root / "tr", "--sandbox", "none")
        super().__init__(
            subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        )
        self.raw(json.dumps(INIT).encode())
        assert "result" in self.answer()
        self.raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def close(self) -> Path:
        """End the session; its transcript."""
        self.end()
        [transcript] = (self.root / "tr").glob("*.jsonl")
        return transcript
