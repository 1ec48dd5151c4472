"""What the server says about the workspace stays true whatever a hostile command does to it: a walk holds a few
descriptors however many directories there are (no EMFILE for the rest of the server), a quota check that could not
count everything says so, and a cached hash is never trusted across a command (a write through a shared mmap
changes no size, time or inode)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import anyio
import pytest

from jg_mcp.live import walk, workspace_scan
from jg_mcp.live.runner import Argv, Runner, quota_notice
from jg_mcp.live.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
A = b"import torch\n# clean, reviewed version ..........................\n"
B = b"import os\nos.system('id')  # hidden payload .....................\n"


def in_subprocess(code: str, nofile: int, user: int | None = None) -> str:
    """Run `code` in a fresh interpreter whose RLIMIT_NOFILE is `nofile`, having imported jg_mcp.live.runner and
    workspace and then become `user` when given (the interpreter may be one that user cannot start); its stdout."""
    prelude = f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile}))\n"
    prelude += "import os; import jg_mcp.live.runner, jg_mcp.live.workspace\n"
    if user is not None:
        prelude += f"os.setgroups([]); os.setgid({user}); os.setuid({user})\n"
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


class Counting:
    """A hasher that records the files it was asked to hash (their sizes)."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, fd: int, size: int) -> tuple[str, int]:
        self.calls.append(size)
        return workspace_scan.file_sha256(fd, size)


def test_walks_of_thousands_of_sibling_directories_complete_under_a_low_descriptor_limit(tmp_path):
    root = tmp_path / "ws"
    for i in range(5000):
        (root / "w" / f"{i:05}").mkdir(parents=True)
        (root / "w" / f"{i:05}" / "f").write_bytes(b"abc")
    out = in_subprocess(
        f"""
        from pathlib import Path
        from jg_mcp.live.runner import quota_notice
        from jg_mcp.live.workspace import Workspace
        root = Path({str(root)!r})
        print(repr(quota_notice(root, 15_000)))
        print(repr(quota_notice(root, 14_999)))
        scan = Workspace.open(root).scan()
        print(len(scan.states), scan.partial, scan.skipped)
        """,
        nofile=256,
    )
    under, over, scanned = out.splitlines()
    assert under == "None", "5000 files of 3 bytes are within a quota of 15000"
    assert "counted 15000" in over, "every file counted: none silently skipped at the descriptor limit"
    assert scanned == "5000 False []"


def test_a_quota_check_that_cannot_read_a_directory_says_so_rather_than_passing(tmp_path):
    base = Path(tempfile.mkdtemp(dir="/tmp" if os.geteuid() == 0 else tmp_path))
    try:
        base.chmod(0o755)
        (base / "open").mkdir()
        (base / "open" / "small").write_bytes(b"x" * 10)
        (base / "locked").mkdir()
        with open(base / "locked" / "big", "wb") as fh:
            fh.truncate(10 * 1024 * 1024)
        (base / "locked").chmod(0)
        out = in_subprocess(
            f"""
            from pathlib import Path
            from jg_mcp.live.runner import quota_notice
            print(quota_notice(Path({str(base)!r}), 1024 * 1024))
            """,
            nofile=1024,
            user=65534 if os.geteuid() == 0 else None,
        )
    finally:
        (base / "locked").chmod(0o700)
        subprocess.run(["rm", "-rf", str(base)], check=True)
    assert out.strip() != "None", "a directory the check could not read passed the workspace as under its quota"
    assert "locked" in out and "could not" in out


def test_a_quota_check_past_its_depth_or_entry_bound_says_what_it_did_not_count(tmp_path, monkeypatch):
    deep = tmp_path / "deep"
    d = deep.joinpath(*["d"] * 8)
    d.mkdir(parents=True)
    (d / "f").write_bytes(b"x")
    monkeypatch.setattr(walk, "SCAN_DEPTH", 4)
    notice = quota_notice(deep, 1000)
    assert notice is not None and "deeper than 4" in notice
    wide = tmp_path / "wide"
    wide.mkdir()
    for i in range(300):
        (wide / str(i)).write_bytes(b"x")
    monkeypatch.setattr(walk, "SCAN_ENTRIES", 100)
    notice = quota_notice(wide, 1000)
    assert notice is not None and "100 entries" in notice


def test_a_scan_stops_at_its_entry_bound_and_is_partial(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    for i in range(300):
        (root / f"{i:03}").mkdir(parents=True)
    ws = Workspace.open(root)
    monkeypatch.setattr(walk, "SCAN_ENTRIES", 100)
    scan = ws.scan()
    assert scan.partial and any("100 entries" in s for s in scan.skipped)


def test_a_command_between_two_scans_makes_the_next_scan_hash_every_file_afresh(tmp_path):
    ws = Workspace.open(tmp_path)
    (tmp_path / "a.py").write_bytes(A)
    ws.changes()
    hasher = Counting()
    ws.changes(hasher)
    assert hasher.calls == [], "no command ran: the cached hash is trusted"
    anyio.run(Runner(tmp_path).run, "true", 30.0)
    ws.changes(hasher)
    assert hasher.calls == [len(A)], "a command ran since the hash was taken: it is not trusted"


def test_a_session_close_hashes_every_file_afresh(tmp_path):
    ws = Workspace.open(tmp_path)
    (tmp_path / "a.py").write_bytes(A)
    runner = Runner(tmp_path)
    ws.changes()
    runner.kill_all()
    hasher = Counting()
    ws.changes(hasher)
    assert hasher.calls == [len(A)]


@pytest.mark.skipif(sys.platform != "linux", reason="the dirty-page behaviour of shared mappings is Linux's")
def test_a_write_through_a_shared_mmap_during_a_command_is_seen_by_the_scan_after_it(tmp_path):
    """The red team's mmap_hide: the command dirties a mapped page (times updated), a scan taken meanwhile hashes A,
    then the command writes B through the still dirty, writable page: no size, time or inode changes."""
    ws = Workspace.open(tmp_path)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    script = f"""
import mmap, os
with open("solution.py", "wb") as f: f.write({A!r})
f = open("solution.py", "r+b"); m = mmap.mmap(f.fileno(), {len(A)})
m[0:1] = m[0:1]
os.write({ready_w}, b"r"); os.read({go_r}, 1)
m[:] = {B!r}
m.flush()
"""
    (tmp_path / "y.py").write_text(script)
    runner = Runner(tmp_path, wrap=lambda argv: Argv(argv, fds=(ready_w, go_r)))
    before: dict[str, os.stat_result] = {}

    async def go() -> None:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(runner.run, f"{sys.executable} y.py", 50.0)
                await anyio.to_thread.run_sync(os.read, ready_r, 1)
                changed, _, _ = await anyio.to_thread.run_sync(ws.changes)
                assert changed["solution.py"].sha256 == hashlib.sha256(A).hexdigest()
                before["st"] = os.stat(tmp_path / "solution.py")
                os.write(go_w, b"g")

    try:
        anyio.run(go)
    finally:
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
    after = os.stat(tmp_path / "solution.py")
    assert (tmp_path / "solution.py").read_bytes() == B
    same = (after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino) == (
        before["st"].st_size,
        before["st"].st_mtime_ns,
        before["st"].st_ctime_ns,
        before["st"].st_ino,
    )
    changed, _, _ = ws.changes()
    assert ws.manifest()["solution.py"]["sha256"] == hashlib.sha256(B).hexdigest(), (
        f"the scan reused A's hash (metadata unchanged: {same})"
    )
    assert "solution.py" in changed
