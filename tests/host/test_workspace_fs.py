"""The workspace's own file system (jg_mcp.live.workspace_fs): its size limit holds while commands run, the server's
own writes never depend on space the agent can take, and a finished (or killed) session's workspace is given back
to the server's user and can be resumed. Through the real CLI, bubblewrap, loop devices and mount, as root (as CI
and deployments run)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from jg_mcp.live.workspace_fs import copy_tree, mount_points
from jg_mcp.record.reading import read_transcript
from tests.support import INIT, Wire, bwrap_missing, serve_argv

MIB = 1024 * 1024
QUOTA = 96 * MIB
DISK = 512 * MIB
FILL = (
    "fallocate -l 8G big; for i in $(seq 1 12); do dd if=/dev/zero of=f$i bs=1M count=64 status=none; done; "
    "dd if=/dev/zero of=$XDG_CACHE_HOME/c bs=1M count=600 status=none; echo filled"
)
"""Far past the quota at once (fallocate), then in loops, the compile cache included."""

BWRAP_MISSING = bwrap_missing()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mount need root (CI runs as root)"),
    pytest.mark.skipif(BWRAP_MISSING is not None, reason=str(BWRAP_MISSING)),
]


def stop(servers: list[subprocess.Popen]) -> None:
    for proc in servers:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)


@pytest.fixture
def servers(tmp_path):
    """The servers a test starts: killed at its end, whatever ended it, and what they left mounted unmounted."""
    started: list[subprocess.Popen] = []
    yield started
    stop(started)
    for left in reversed(under(tmp_path)):
        subprocess.run(["umount", left], timeout=60)


@pytest.fixture
def disk(tmp_path, servers):
    """A file system of DISK bytes of its own, holding --runs and --transcripts as the host's disk does (unmounted
    once the test's servers are gone, with whatever they left mounted in it)."""
    path = tmp_path / "disk"
    path.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK},mode=0700", "tmpfs", str(path)], check=True, timeout=30)
    try:
        yield path
    finally:
        stop(servers)
        subprocess.run(["umount", "-R", str(path)], timeout=60)


def used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def start(servers: list, tmp_path: Path, *args: object, env: dict[str, str] | None = None) -> Wire:
    """A stdio `jg-mcp serve`, initialized (its stderr in tmp_path/stderr-N.txt), added to `servers`."""
    n = len(list(tmp_path.glob("stderr-*.txt")))
    err = open(tmp_path / f"stderr-{n}.txt", "w+")
    proc = subprocess.Popen(
        serve_argv(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=tmp_path
    )
    servers.append(proc)
    wire = Wire(proc)
    wire.raw(json.dumps(INIT).encode())
    assert "result" in wire.answer(120), (tmp_path / f"stderr-{n}.txt").read_text()
    wire.raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return wire


def run(wire: Wire, rid: int, command: str) -> dict:
    wire.call(rid, "run_command", command=command, timeout_s=120)
    answer = wire.answer(180)
    return answer["result"]["structuredContent"]


def under(path: Path) -> list[str]:
    return [m for m in mount_points() if m.startswith(f"{path}/")]


def test_a_command_cannot_fill_the_disk_of_runs_and_the_next_server_still_starts_sandboxed(tmp_path, disk, servers):
    """Red team: commands filled the file system holding --runs (fallocate takes gigabytes at once; the quota was
    counted after each command), the next server's sandbox probe failed, and that server ran unsandboxed."""
    runs, transcripts = disk / "runs", disk / "tr"
    first = start(servers, tmp_path, "--runs", runs, "--transcripts", transcripts, "--max-workspace-bytes", QUOTA)
    result = run(first, 2, FILL)
    server_own = tree_bytes(transcripts)
    assert used(disk) <= QUOTA + server_own + 4 * MIB, "the disk shrank by more than the quota"
    assert result["stdout"].strip() == "filled" and "No space left on device" in result["stderr"]
    assert "file system is full" in result["notice"]

    second = start(servers, tmp_path, "--runs", runs, "--transcripts", transcripts, "--max-workspace-bytes", QUOTA)
    assert run(second, 2, "id -u; echo written > w.txt")["stdout"] not in ("", "0\n"), "sandboxed, as its own uid"
    for wire in (second, first):
        wire.end()
    records = [read_transcript(p) for p in sorted(transcripts.glob("*.jsonl"))]
    for record in records:
        head = record.events[0]
        assert head.sandbox == "bwrap" and head.workspace_fs_bytes == QUOTA
        assert record.events[-1].event == "close", "the server's own writes went on"
    assert under(disk) == [] and not list(runs.glob("*/.workspace.fs"))
    workspaces = sorted(runs.glob("*/workspace"))
    assert len(workspaces) == 2 and all(w.stat().st_uid == 0 for w in workspaces)
    assert any((w / "w.txt").is_file() for w in workspaces) and any((w / "big").is_file() for w in workspaces)


def test_a_workspace_is_given_back_when_its_session_ends_and_a_later_serve_resumes_it(tmp_path, servers):
    """Red team: a second `serve` on a finished session's workspace was refused ("belongs to uid 61000"). Then a
    server killed mid-session leaves its workspace mounted, its files shown there, and the next serve takes it up."""
    ws, transcripts = tmp_path / "ws", tmp_path / "tr"
    args = ("--workspace", ws, "--transcripts", transcripts, "--max-workspace-bytes", QUOTA)
    first = start(servers, tmp_path, *args)
    run(first, 2, "echo one > a.txt; mkdir -p d/__pycache__; echo two > d/__pycache__/b.py")
    first.end()
    for path in (ws, ws / "a.txt", ws / "d" / "__pycache__" / "b.py"):
        assert path.lstat().st_uid == os.geteuid(), f"{path} given back to the server's user"
    assert under(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

    second = start(servers, tmp_path, *args)
    assert run(second, 2, "cat a.txt d/__pycache__/b.py; echo three > c.txt")["stdout"] == "one\ntwo\n"
    second.proc.send_signal(signal.SIGKILL)
    second.proc.wait(timeout=60)
    assert (ws / "c.txt").read_text() == "three\n", "a killed server's workspace still shows its files"

    third = start(servers, tmp_path, *args)
    assert run(third, 2, "cat c.txt")["stdout"] == "three\n"
    third.end()
    assert under(tmp_path) == [] and not (tmp_path / ".ws.fs").exists()
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "c.txt", "d", "reference.py"]
    ends = [read_transcript(p).events[-1].event for p in sorted(transcripts.glob("*.jsonl"))]
    assert ends.count("close") == 2, "the killed server left no close event; the others did"


def test_serve_refuses_without_the_bound_unless_the_operator_runs_unbounded_which_the_header_records(tmp_path, servers):
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # mkfs.ext4 lives in /usr/sbin
    ws, transcripts = tmp_path / "ws", tmp_path / "tr"
    done = subprocess.run(
        serve_argv("--workspace", ws, "--transcripts", transcripts),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "mkfs.ext4 not found" in last and "--unbounded-workspace" in last, done.stderr
    assert not list(transcripts.glob("*.jsonl"))

    for n in (1, 2):  # the second one resumes what the first left, handed back to the server's user
        wire = start(
            servers, tmp_path, "--workspace", ws, "--transcripts", transcripts, "--unbounded-workspace", env=env
        )
        run(wire, 2, f"echo {n} > n{n}.txt")
        wire.end()
        assert all(p.lstat().st_uid == os.geteuid() for p in [ws, *ws.iterdir()])
    heads = [read_transcript(p).events[0] for p in transcripts.glob("*.jsonl")]
    assert [(h.sandbox, h.workspace_fs_bytes) for h in heads] == [("bwrap", None)] * 2


def test_the_copy_back_takes_no_more_than_the_tree_and_drops_setid_bits_and_special_files(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    with open(src / "d" / "sparse", "wb") as f:
        f.truncate(1024**3)
        f.write(b"head")
    (src / "tool").write_text("#!/bin/sh\n")
    (src / "tool").chmod(0o4755)
    (src / "link").symlink_to("/etc/shadow")
    os.mkfifo(src / "fifo")
    (src / "data").write_bytes(os.urandom(MIB))
    for i in range(100):
        os.link(src / "data", src / "d" / f"link{i}")
    assert copy_tree(src, tmp_path / "dst") == []
    dst = tmp_path / "dst"
    assert (dst / "d" / "sparse").stat().st_size == 1024**3 and (dst / "d" / "sparse").stat().st_blocks < 1024
    assert stat.S_IMODE((dst / "tool").stat().st_mode) == 0o755
    assert os.readlink(dst / "link") == "/etc/shadow" and not (dst / "fifo").exists()
    assert (dst / "d" / "link99").stat().st_ino == (dst / "data").stat().st_ino, "a hard link is copied once"
