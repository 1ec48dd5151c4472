"""The file tools and the workspace scan under attack from a command: links swapped in mid-call, FIFOs
and devices, huge sparse files, and many calls at once. Every call is bounded with anyio.fail_after."""

from __future__ import annotations

import ctypes
import os
import threading
import time
import tracemalloc

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from jg_mcp.live import safefs
from jg_mcp.live.sandbox import NoSandbox
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from jg_mcp.record import audit, replay, steps

RENAME_EXCHANGE = 2
AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)
RACE_S = 2.0
"""Each race runs at least this long,"""
RACE_MAX_S = 60.0
"""and past RACE_S until it has seen what it asserts on (a busy host gives the racers fewer turns), at most this."""
CALL_LIMIT_S = 10


@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    """Run with openat2 (where the kernel has it) and with the component-by-component O_NOFOLLOW walk."""
    if request.param == "openat2" and not safefs.HAVE_OPENAT2:
        pytest.skip("this kernel has no openat2")
    monkeypatch.setattr(safefs, "HAVE_OPENAT2", request.param == "openat2")
    return request.param


def exchange(a: str, b: str) -> None:
    if _libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def racing(start: float, enough: bool) -> bool:
    """Whether a race begun at `start` goes on: for RACE_S, then until it has seen `enough`, up to RACE_MAX_S."""
    elapsed = time.monotonic() - start
    return elapsed < RACE_S or (elapsed < RACE_MAX_S and not enough)


class Swapper(threading.Thread):
    """Exchanges two paths (renameat2 RENAME_EXCHANGE) in a loop until stopped, counting the swaps."""

    def __init__(self, a, b):
        super().__init__(daemon=True)
        self.a, self.b, self.swaps = str(a), str(b), 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            exchange(self.a, self.b)
            self.swaps += 1

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join(5)


def client_run(server, fn, timeout_s: float = 120):
    async def go():
        with anyio.fail_after(timeout_s):
            async with Client(server) as client:
                return await fn(client)

    return anyio.run(go)


async def bounded(c, tool: str, args: dict):
    with anyio.fail_after(CALL_LIMIT_S):
        return await c.call_tool(tool, args)


@pytest.fixture
def race(tmp_path, session, server, resolver):
    """In the workspace, `d` is a directory holding f = 'inside'; `s` links to an outside directory holding
    f = 'SECRET'. The test swaps `d` and `s`."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("SECRET")
    root = session.workspace.root
    (root / "d").mkdir()
    (root / "d" / "f").write_text("inside")
    os.symlink(outside, root / "s")
    return server, root, outside


@pytest.mark.slow
def test_a_directory_swapped_for_a_link_never_lets_read_file_read_outside(race):
    server, root, _ = race

    async def fn(c):
        seen, outcomes, start = [], set(), time.monotonic()
        while racing(start, swapper.swaps > 100 and len(seen) > 20 and {"inside", "link"} <= outcomes):
            r = await bounded(c, "read_file", {"path": "d/f"})
            seen.append(r.content[0].text if r.is_error else r.structured_content["content"])
            outcomes.add("link" if "symbolic link" in seen[-1] else seen[-1])
        return seen

    with Swapper(root / "d", root / "s") as swapper:
        seen = client_run(server, fn)
    assert swapper.swaps > 100 and len(seen) > 20
    assert not [s for s in seen if "SECRET" in s], "a byte from outside the workspace was read"
    assert "inside" in seen and any("symbolic link" in s for s in seen), "both outcomes happened: the race ran"


@pytest.mark.slow
def test_a_directory_swapped_for_a_link_never_lets_write_file_write_outside(race):
    server, root, outside = race

    async def fn(c):
        n, start = 0, time.monotonic()
        while racing(start, swapper.swaps > 100 and n > 20):
            await bounded(c, "write_file", {"path": f"d/new{n}.txt", "content": "x"})
            n += 1
        return n

    with Swapper(root / "d", root / "s") as swapper:
        calls = client_run(server, fn)
    assert swapper.swaps > 100 and calls > 20
    assert sorted(os.listdir(outside)) == ["f"], "nothing was written outside the workspace"
    assert (outside / "f").read_text() == "SECRET"


def test_fifos_devices_and_links_to_them_are_refused_without_hanging(server, session, resolver):
    root = session.workspace.root
    os.mkfifo(root / "pipe")
    os.symlink("/dev/zero", root / "zero")
    try:
        os.mknod(root / "null", 0o600 | 0o020000, os.makedev(1, 3))
        device = ["null"]
    except PermissionError:
        device = []

    async def fn(c):
        out = [await bounded(c, "read_file", {"path": p}) for p in ["pipe", "zero", *device]]
        out.append(await bounded(c, "write_file", {"path": "pipe", "content": "x"}))
        out.append(await bounded(c, "run_command", {"command": "true"}))
        return out

    *refused, command = client_run(server, fn)
    texts = [r.content[0].text for r in refused]
    assert all(r.is_error for r in refused), texts
    assert "a FIFO, not a regular file" in texts[0] and "symbolic link" in texts[1]
    assert all("a character device" in t for t in texts[2:-1])
    assert "a FIFO" in texts[-1]
    assert command.structured_content["exit_code"] == 0, "the scan after the command passed the FIFO by"


@pytest.mark.slow
def test_the_workspace_scan_passes_a_fifo_swapped_in_for_a_file(server, session, resolver):
    root = session.workspace.root
    os.mkfifo(root / "p")
    (root / "f").write_text("a regular file")

    async def fn(c):
        n, start = 0, time.monotonic()
        while racing(start, swapper.swaps > 100 and n > 5):
            r = await bounded(c, "run_command", {"command": f"echo {n} > out.txt"})
            assert r.structured_content["exit_code"] == 0
            n += 1
        return n

    with Swapper(root / "p", root / "f") as swapper:
        calls = client_run(server, fn)
    assert swapper.swaps > 100 and calls > 5


def test_a_sparse_two_gigabyte_file_is_paged_without_reading_it_whole(server, session):
    big = session.workspace.root / "big.txt"
    with open(big, "wb") as fh:
        fh.write(b"".join(b"line %d\n" % i for i in range(1, 1001)))
        fh.truncate(2 << 30)

    async def fn(c):
        first = await bounded(c, "read_file", {"path": "big.txt", "limit": 10})
        later = await bounded(c, "read_file", {"path": "big.txt", "offset": 995, "limit": 3})
        return first, later

    tracemalloc.start()
    try:
        first, later = client_run(server, fn)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20, f"peak Python allocation {peak / 2**20:.0f} MiB"
    page = first.structured_content
    assert page["content"] == "".join(f"line {i}\n" for i in range(1, 11)) and page["next_offset"] == 11
    assert page["total_lines"] is None, "a 2 GiB file is not counted"
    assert later.structured_content["content"] == "line 995\nline 996\nline 997\n"
    big.unlink()  # else the session's close hashes its 2 GiB of zeros (10-20 s here) for a manifest nobody reads


def test_a_line_longer_than_a_page_is_cut_and_the_file_still_counted(server, session):
    (session.workspace.root / "one.txt").write_bytes(b"a" * (50 << 20) + b"\nlast\n")

    async def fn(c):
        return await bounded(c, "read_file", {"path": "one.txt"})

    tracemalloc.start()
    try:
        page = client_run(server, fn).structured_content
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"peak Python allocation {peak / 2**20:.0f} MiB"
    assert page["content"] == "a" * 100_000 and page["cut_line"] == 1
    assert page["total_lines"] == 2 and page["next_offset"] == 2


def test_parallel_writes_are_recorded_in_order_and_audit_and_replay_agree(gemm_goal, tmp_path):
    session = Session.open(gemm_goal, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "tr"))
    server = build_server(gemm_goal, SingleSession(session))

    async def fn(c):
        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(bounded, c, "write_file", {"path": f"p/{i % 4}/f{i}.txt", "content": f"{i}\n" * 1000})
                tg.start_soon(bounded, c, "run_command", {"command": f"echo {i} > c{i}.txt"})

    client_run(server, fn)
    session.close("test finished")
    report = audit.audit(session.transcript_path)
    assert report.ok, [f.message for f in report.findings if f.severity == "error"]
    assert not [f for f in report.findings if f.area == "integrity" and f.kind != "authenticity"]
    rebuilt = replay.rebuild(steps.load_record(session.transcript_path), tmp_path / "r")
    assert rebuilt.problems == []
    for i in range(16):
        assert (tmp_path / "r" / f"p/{i % 4}/f{i}.txt").read_text() == f"{i}\n" * 1000
        assert (tmp_path / "r" / f"c{i}.txt").read_text() == f"{i}\n"


def test_an_unexpected_os_error_reaches_the_agent_as_a_message(server):
    async def fn(c):
        return await bounded(c, "write_file", {"path": "x" * 300, "content": "x"})

    r = client_run(server, fn)
    assert r.is_error and "cannot write" in r.content[0].text and "File name too long" in r.content[0].text


@pytest.mark.slow
def test_a_command_being_set_up_when_the_session_closes_never_runs_after_the_close_event(gemm_goal, tmp_path):
    """A red-team find: a run_command admitted just before the close (a budget spent by a parallel call) was set up
    while the close scanned and wrote its manifest, then started: it rewrote solution.py after the close event,
    recorded nowhere, and the audit said clean. Here the sandbox's setup is slow (as on a workspace of many
    directories) and the close lands during it."""
    box: list[Session] = []
    closer: list[threading.Thread] = []

    class SlowSetup(NoSandbox):
        def wrap(self, argv: list[str]) -> list[str]:
            closer.append(threading.Thread(target=box[0].close, args=("budget spent",)))
            closer[0].start()
            time.sleep(1.0)
            return argv

    session = Session.open(
        gemm_goal, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "tr"), wrap=SlowSetup()
    )
    box.append(session)
    (tmp_path / "ws" / "solution.py").write_text("honest\n")
    server = build_server(gemm_goal, SingleSession(session))

    async def fn(c):
        return await bounded(c, "run_command", {"command": "sleep 0.3; echo swapped > solution.py; touch late"})

    answer = client_run(server, fn)
    closer[0].join(10)
    time.sleep(1.0)
    assert answer.is_error and "did not run" in answer.content[0].text, answer
    assert (tmp_path / "ws" / "solution.py").read_text() == "honest\n" and not (tmp_path / "ws" / "late").exists()
    last = steps.load_record(session.transcript_path).events[-1]
    assert last.event == "close" and "late" not in last.manifest
    assert audit.audit(session.transcript_path).ok


@pytest.mark.slow
def test_a_change_seen_while_other_commands_ran_names_them_and_the_audit_says_any_may_have_made_it(gemm_goal, tmp_path):
    """A scan sees what changed, not who changed it: a red-team command that rewrote solution.py while an innocent
    `true` ran had the change recorded under `true` alone, and the audit showed the innocent step doing it. The
    change now names the commands still running (or not yet scanned) when it was seen, the audit warns, and a
    write_file's own write is never in doubt."""
    session = Session.open(gemm_goal, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "tr"))
    server = build_server(gemm_goal, SingleSession(session))

    async def fn(c):
        async with anyio.create_task_group() as tg:
            tg.start_soon(bounded, c, "run_command", {"command": "sleep 1; echo evil > solution.py; sleep 3"})
            await anyio.sleep(2.5)
            await bounded(c, "run_command", {"command": "true"})
            await bounded(c, "write_file", {"path": "notes.txt", "content": "thinking\n"})

    client_run(server, fn)
    session.close("test finished")
    record = steps.load_record(session.transcript_path)
    by_path = {ch.event.path: ch for ch in record.changes if ch.step not in (0, steps.END)}
    evil_step = next(c.step for c in record.calls if "evil" in str(c.arguments.get("command")))
    evil_id = next(c.request_id for c in record.calls if c.step == evil_step)
    assert by_path["solution.py"].event.running == [evil_id], by_path["solution.py"]
    assert by_path["notes.txt"].event.running is None, "write_file's own write is certain"
    findings = [f for f in audit.audit(session.transcript_path).findings if f.kind == "uncertain author"]
    assert len(findings) == 1 and "solution.py" in findings[0].message
    assert f"steps {evil_step} also ran" in findings[0].message


@pytest.mark.slow
def test_a_cancelled_commands_change_scanned_after_its_call_ended_still_names_it(gemm_goal, tmp_path):
    """A red-team find: a cancelled run_command waits for its scan only CANCELLED_SCAN_WAIT_S, and it was then
    no longer among the running commands although its scan had not run. A write_file whose scan ran first (the
    session's workspace jobs busy meanwhile) recorded the command's file as its own, with no other author named,
    and the audit passed. The command stays among the possible authors until its own scan has run."""
    session = Session.open(gemm_goal, SessionConfig(workspace_dir=tmp_path / "ws", transcripts_dir=tmp_path / "tr"))
    server = build_server(gemm_goal, SingleSession(session))
    gate = threading.Event()

    async def fn(c):
        async def abandoned():
            with pytest.raises(MCPError):
                await c.call_tool("run_command", {"command": "echo evil > evil.py; sleep 60"}, read_timeout_seconds=2)

        async with anyio.create_task_group() as tg:
            tg.start_soon(abandoned)
            await anyio.sleep(1.0)
            session.submit(lambda: gate.wait(30))  # the session's workspace jobs wait behind this one
            tg.start_soon(bounded, c, "write_file", {"path": "innocent.py", "content": "x = 1\n"})
            await anyio.sleep(4.0)  # the command is abandoned at 2 s and waits 2 s for its scan, queued last
            gate.set()

    client_run(server, fn)
    session.close("test finished")
    record = steps.load_record(session.transcript_path)
    evil = next(c.request_id for c in record.calls if "evil" in str(c.arguments.get("command")))
    (change,) = [ch.event for ch in record.changes if ch.event.path == "evil.py"]
    assert change.request_id == evil or evil in (change.running or []), change
    report = audit.audit(session.transcript_path)
    if change.request_id != evil:
        assert any(f.kind == "uncertain author" and "evil.py" in f.message for f in report.findings)
