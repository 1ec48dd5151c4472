"""`jg-mcp serve --transport http` as a real subprocess: token, Host/Origin, sessions per client."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from jg_mcp.live.connections import connection_of
from jg_mcp.live.http import LOOPBACK_NAMES, HostNames, is_loopback, security_settings
from tests.support import (
    INIT,
    MCP_HEADERS,
    TOKEN,
    HttpServer,
    bwrap_missing,
    client,
    free_port,
    serve_argv,
    wait_until,
)

pytestmark = pytest.mark.slow
BWRAP_MISSING = bwrap_missing()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with HttpServer(tmp_path_factory.mktemp("http")) as running:
        yield running


def post(server: HttpServer, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(server.url, json=INIT, headers={**MCP_HEADERS, **headers}, timeout=10)


def test_requests_without_the_right_token_get_401(server):
    assert post(server, {}).status_code == 401
    assert post(server, {"Authorization": "Bearer wrong"}).status_code == 401
    assert post(server, {"Authorization": TOKEN}).status_code == 401
    ok = post(server, {"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "mcp-session-id" in ok.headers


def test_a_foreign_origin_gets_403_and_a_foreign_host_421_even_with_the_token(server):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert post(server, {**auth, "Origin": "http://evil.example.com"}).status_code == 403
    assert post(server, {**auth, "Host": "evil.example.com"}).status_code == 421
    assert post(server, {"Origin": "http://evil.example.com"}).status_code == 403
    assert post(server, {**auth, "Origin": f"http://localhost:{server.port}"}).status_code == 200


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [
        ("Host", "127.0.0.1:{port}.evil.com", 421),
        ("Host", "localhost:evil", 421),
        ("Host", "localhost:", 421),
        ("Host", "localhost:{port}:1", 421),
        ("Host", "localhost.evil.com", 421),
        ("Origin", "http://127.0.0.1:80.evil.com", 403),
        ("Origin", "http://localhost:1@evil.com", 403),
        ("Origin", "http://localhost:{port}/x", 403),
        ("Origin", "null", 403),
        ("Host", "localhost", 200),
        ("Host", "[::1]:{port}", 200),
        ("Origin", "http://127.0.0.1:{port}", 200),
        ("Origin", "http://localhost", 200),
    ],
)
def test_host_and_origin_name_an_allowed_host_exactly_with_at_most_a_port_of_digits(server, header, value, status):
    """The SDK's `name:*` patterns took any text after `name:` for a port, so Host `127.0.0.1:18765.evil.com` and
    Origin `http://127.0.0.1:80.evil.com` passed its DNS-rebinding check (a red-team finding)."""
    headers = {"Authorization": f"Bearer {TOKEN}", header: value.format(port=server.port)}
    assert post(server, headers).status_code == status


def test_a_port_is_ascii_digits_only():
    names = HostNames(list(LOOPBACK_NAMES))
    assert names.names_us("localhost:8000") and names.names_us("[::1]") and names.names_us("127.0.0.1:1")
    assert not any(names.names_us(f"localhost:{port}") for port in ("\u0661\u0662", "\u00b2", "+80", " 80", "123456"))


def test_binding_a_non_loopback_address_without_a_token_is_refused(tmp_path):
    done = subprocess.run(
        serve_argv(
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
            "--port",
            free_port(),
            "--runs",
            tmp_path / "runs",
            "--transcripts",
            tmp_path / "tr",
            "--sandbox",
            "none",
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "needs an explicit token" in done.stderr
    assert not list((tmp_path).glob("tr/*.jsonl"))


def test_two_clients_get_separate_sessions_and_cannot_see_each_other(server):
    async def both(server: HttpServer):
        with anyio.fail_after(90):
            async with client(server) as a, client(server) as b:
                await b.call_tool("write_file", {"path": "secret.txt", "content": "b's secret"})
                where_b = (await b.call_tool("run_command", {"command": "pwd"})).structured_content["stdout"]
                where_a = (await a.call_tool("run_command", {"command": "pwd"})).structured_content["stdout"]
                peek = await a.call_tool("run_command", {"command": f"cat {where_b.strip()}/secret.txt"})
                read = await a.call_tool("read_file", {"path": f"{where_b.strip()}/secret.txt"})
                return where_a.strip(), where_b.strip(), peek.structured_content, read

    where_a, where_b, peek, read = anyio.run(both, server)
    assert where_a != where_b
    assert "b's secret" not in peek["stdout"] and "No such file" in peek["stderr"]
    assert read.is_error and "outside the workspace" in read.content[0].text

    def closed_sessions() -> dict:
        return {t.events[0].workspace: t for t in server.transcripts_by_run().values() if t.closed}

    wait_until(lambda: {where_a, where_b} <= closed_sessions().keys(), 20)
    assert all(closed_sessions()[w].events[0].transport == "http" for w in (where_a, where_b))


def test_a_client_that_goes_away_mid_call_has_its_command_killed_and_recorded(server):
    marker = f"jg-midcall-{time.monotonic_ns()}"

    async def leave_mid_call(server: HttpServer) -> str:
        with anyio.fail_after(60):
            async with client(server) as c:
                where = (await c.call_tool("run_command", {"command": "pwd"})).structured_content["stdout"]
                with anyio.move_on_after(3):
                    await c.call_tool("run_command", {"command": f"exec -a {marker} sleep 600"})
                assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0
        return where.strip()

    where = anyio.run(leave_mid_call, server)
    wait_until(lambda: subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1, 20)

    def recorded():
        [found] = [t for t in server.transcripts_by_run().values() if t.events[0].workspace == where]
        return found

    wait_until(lambda: recorded().closed, 20)
    transcript = recorded()
    assert transcript.events[-1].reason == "client disconnected"
    calls = [e for e in transcript.events if e.event == "response" and e.method == "tools/call"]
    assert calls and calls[-1].is_error


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_generated_token_works_and_signals_close_every_session(tmp_path, sig):
    async def open_two(server: HttpServer, token: str) -> int | None:
        code = None
        with anyio.fail_after(60):
            try:
                async with client(server, token) as a, client(server, token) as b:
                    await a.call_tool("write_file", {"path": "a.py", "content": "a = 1\n"})
                    await b.call_tool("run_command", {"command": "echo b > b.txt"})
                    code = await anyio.to_thread.run_sync(server.stop, sig)
            except Exception:
                pass  # the clients' goodbye finds the server gone
        return code

    server = HttpServer(tmp_path, token=None).wait_ready()
    line = next(ln for ln in server.log().splitlines() if "bearer token" in ln)
    token = line.split("token=")[-1].strip()
    assert len(token) >= 32
    assert post(server, {}).status_code == 401
    assert anyio.run(open_two, server, token) == 0
    transcripts = list(server.transcripts_by_run().values())
    assert len(transcripts) == 2
    assert all(t.closed and t.events[-1].reason == sig.name for t in transcripts)
    assert {"a.py", "b.txt"} <= {p for t in transcripts for p in t.events[-1].manifest}


def test_a_non_loopback_bind_accepts_only_its_own_and_allowed_host_names():
    settings = security_settings("10.1.2.3", ["gpu-box.internal"])
    assert {"10.1.2.3:*", "gpu-box.internal:*", "127.0.0.1:*"} <= set(settings.allowed_hosts)
    assert "http://gpu-box.internal:*" in settings.allowed_origins
    assert not any("0.0.0.0" in h for h in security_settings("0.0.0.0").allowed_hosts)
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("10.1.2.3")


def test_the_sdk_still_keeps_each_clients_connection_where_connection_of_reads_it():
    """connection_of reads a private SDK attribute (mcp 2.3.0): this fails first when an upgrade moves it."""
    server = MCPServer("probe")
    closed: list[int] = []

    def count(ctx: Context) -> int:
        """Calls so far on this connection."""
        connection = connection_of(ctx.request_context.session)
        calls = connection.state["calls"] = connection.state.get("calls", 0) + 1
        if calls == 1:
            connection.exit_stack.callback(closed.append, 1)
        return calls

    server.add_tool(count)

    async def two_clients() -> list[int]:
        counts = []
        with anyio.fail_after(30):
            for _ in range(2):
                async with Client(server, mode="legacy") as c:  # the handshake era, as served over HTTP
                    for _ in range(2):
                        counts.append((await c.call_tool("count", {})).structured_content["result"])
        return counts

    assert anyio.run(two_clients) == [1, 2, 1, 2]
    assert closed == [1, 1]


FILL_PROCESS_CAP = """python - <<'EOF'
import pathlib, subprocess, time
sleeps = []
try:
    while True:
        sleeps.append(subprocess.Popen(["sleep", "300"]))
except OSError as exc:
    pathlib.Path("full").write_text(f"{len(sleeps)} {exc.errno}")
while not pathlib.Path("go").exists():
    time.sleep(0.05)
EOF"""


@pytest.mark.skipif(
    BWRAP_MISSING is not None or os.geteuid() != 0,
    reason=BWRAP_MISSING or "per-session process caps need a root server (one uid per session)",
)
def test_a_session_at_its_process_cap_leaves_the_other_sessions_free_to_fork(tmp_path):
    async def fill_a_then_fork_in_b(server: HttpServer):
        with anyio.fail_after(120):
            async with client(server) as a, client(server) as b:
                where_a, uid_a = (
                    (await a.call_tool("run_command", {"command": "pwd; id -u"})).structured_content["stdout"].split()
                )
                uid_b = (await b.call_tool("run_command", {"command": "id -u"})).structured_content["stdout"].strip()
                filled = {}
                async with anyio.create_task_group() as tg:

                    async def fill() -> None:
                        call = await a.call_tool("run_command", {"command": FILL_PROCESS_CAP, "timeout_s": 90})
                        filled.update(call.structured_content)

                    tg.start_soon(fill)
                    while not (Path(where_a) / "full").exists():
                        await anyio.sleep(0.05)
                    forked = await b.call_tool(
                        "run_command", {"command": "for i in $(seq 20); do sleep 1 & done; wait; echo forked"}
                    )
                    a_still_full = not filled
                    (Path(where_a) / "go").touch()
                full = (Path(where_a) / "full").read_text().split()
                return uid_a, uid_b, full, a_still_full, forked.structured_content, filled

    with HttpServer(tmp_path, "--sandbox", "bwrap", "--max-processes", "40") as server:
        uid_a, uid_b, full, a_still_full, forked, filled = anyio.run(fill_a_then_fork_in_b, server)
    sleeps, errno = map(int, full)
    assert errno == 11 and 30 <= sleeps < 40, full  # EAGAIN: a's own cap of 40 processes
    assert a_still_full and filled["exit_code"] == 0, filled
    assert forked["stdout"] == "forked\n" and "Resource temporarily unavailable" not in forked["stderr"], forked
    assert uid_a != uid_b
