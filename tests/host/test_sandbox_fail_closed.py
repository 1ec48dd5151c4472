"""Fail closed: no failed probe, full disk or missing tool turns a protection off without the operator's word; the
transcript header records what was in force and what was waived, and the audit fails a run missing one unwaived."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from mcp import StdioServerParameters

from jg_mcp.errors import JgError
from jg_mcp.live import sandbox_probe, seccomp
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.uids import SandboxError
from jg_mcp.record.events import Header
from jg_mcp.record.reading import read_transcript
from jg_mcp.scripted import call, run_script
from tests.support import GEMM_FP8, bwrap_missing, jg, serve_argv

BWRAP_MISSING = bwrap_missing()
ROOT = os.geteuid() == 0

pytestmark = [pytest.mark.slow, pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")]


def serve_closed(tmp_path: Path, *args: object, path: str | None = None) -> subprocess.CompletedProcess:
    """A stdio server whose client leaves at once (stdin closed): it starts, records its header, closes."""
    env = {**os.environ, "PATH": path} if path is not None else None
    return subprocess.run(
        serve_argv("--workspace", tmp_path / "ws", "--transcripts", tmp_path / "tr", *args),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def failing_bwrap(tmp_path: Path) -> str:
    """A PATH whose `bwrap` is installed but cannot sandbox (as where user namespaces are forbidden)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    (bin_dir / "bwrap").chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


def protection_findings(transcript: Path, tmp_path: Path) -> tuple[int, list[dict]]:
    out = tmp_path / "audit.json"
    done = jg("audit", transcript, "--goal", GEMM_FP8, "--json", out)
    findings = json.loads(out.read_text())["findings"]
    return done.returncode, [f for f in findings if f["kind"] == "protection"]


def test_auto_refuses_to_start_when_an_installed_bwrap_cannot_sandbox(tmp_path):
    """A probe that fails for any reason (here bwrap cannot make its namespaces) refuses the start in one line
    naming `--sandbox none`: the server used to fall back to running commands unsandboxed."""
    done = serve_closed(tmp_path, "--sandbox", "auto", path=failing_bwrap(tmp_path))
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert "bubblewrap cannot sandbox here" in line and "Permission denied" in line and "--sandbox none" in line
    assert not list((tmp_path / "tr").glob("*.jsonl")), "a refused server records no session"


@pytest.mark.skipif(not ROOT, reason="mounting a file system needs root")
def test_a_probe_on_a_full_file_system_refuses_the_start_instead_of_running_unsandboxed(tmp_path, monkeypatch):
    """Where the probe's only place is a full file system, the probe fails and the start is refused (the old
    server probed in --runs, failed on a disk the agent had filled, and ran the next agent's commands as root)."""
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True, timeout=30)
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={full / 'fill'}", "bs=4k"], capture_output=True, timeout=30)
        monkeypatch.setattr(sandbox_probe, "probe_place", lambda fallback: fallback, raising=False)
        template = Bwrap(full / "runs")
        with pytest.raises(SandboxError, match="--sandbox none") as refused:
            sandbox_probe.choose("auto", template, full)
        assert "\n" not in str(refused.value)
    finally:
        subprocess.run(["umount", "-l", str(full)], timeout=30)


@pytest.mark.skipif(not ROOT, reason="a root server's sandbox runs bwrap under unshare")
def test_a_root_server_without_unshare_refuses_the_start(tmp_path, monkeypatch):
    """As root, bwrap runs under `unshare` in a pid namespace that dies with the server (jg_mcp.live.bwrap): a host
    without it fails the probe by name, before any command could run in a sandbox that outlives the server."""
    import shutil

    found = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool, *a, **k: None if tool == "unshare" else found(tool, *a, **k))
    assert sandbox_probe.probe(Bwrap(tmp_path / "runs"), tmp_path) == "unshare not found (util-linux)"


@pytest.fixture
def disk(tmp_path):
    """A small ext4 file system with 20% of its blocks reserved for root, mounted (as root) under tmp_path."""
    if not ROOT:
        pytest.skip("mounting a file system needs root")
    image, mount = tmp_path / "disk.img", tmp_path / "disk"
    with open(image, "wb") as f:
        f.truncate(48 << 20)
    mount.mkdir()
    made = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "20", str(image)], capture_output=True, timeout=60)
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True, timeout=60)
    if mounted.returncode != 0:
        pytest.skip(f"no loop mount here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], timeout=60)


def test_an_agent_that_filled_the_runs_file_system_leaves_the_next_server_sandboxed(disk, tmp_path):
    """The red team's attack: an unprivileged uid fills the file system holding --runs up to the blocks ext4 keeps
    for root; the next `serve --sandbox auto` must still sandbox its commands (its probe writes on a memory file
    system), or refuse. The old server's probe failed there and its agent's `id -u` printed 0."""

    def write_as_nobody(name: str, *dd: str) -> bytes:
        # The file is opened here, written by uid 65534: ext4 lets only root's writes into its reserved blocks.
        with open(disk / name, "wb") as out:
            argv = ["dd", "if=/dev/zero", *dd]
            return subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, user=65534, timeout=60).stderr

    for name, block in (("fill", "bs=1M"), ("rest", "bs=4k")):
        write_as_nobody(name, block)
    more = write_as_nobody("more", "bs=4k", "count=1")
    assert b"No space left on device" in more, "the file system is not full for an unprivileged uid"
    (disk / "runs").mkdir()
    serve = [sys.executable, "-m", "jg_mcp", "serve", "--goal", str(GEMM_FP8), "--runs", str(disk / "runs")]
    serve += ["--transcripts", str(tmp_path / "tr")]
    # With the workspace's own file system (the default), its space cannot be reserved on the full disk: refused.
    refused = subprocess.run(serve, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert refused.returncode != 0 and "--unbounded-workspace" in refused.stderr, refused.stderr[-2000:]
    assert not list((tmp_path / "tr").glob("*.jsonl")), "a refused server records no session"
    # Without that bound, the probe (on a memory file system) still finds the sandbox working.
    params = StdioServerParameters(command=serve[0], args=[*serve[1:], "--unbounded-workspace"], env=dict(os.environ))
    [result] = anyio.run(run_script, params, [call("run_command", command="id -u")], 120)
    assert result.ok, result.text
    assert result.structured["stdout"].strip() != "0", "the agent's command ran as root"
    [path] = (tmp_path / "tr").glob("*.jsonl")
    header = read_transcript(path).events[0]
    assert header.sandbox == "bwrap" and header.protections.missing == []
    assert set(header.protections.in_force) == {"sandbox", "seccomp", "uid_separation"}


def test_auto_without_bwrap_on_a_server_that_is_not_root_runs_unsandboxed_and_the_audit_fails_it(tmp_path, monkeypatch):
    """The one fallback left: no bubblewrap installed and a server that is not root. It runs, says so loudly, and
    its header records the sandbox and the filter missing and not waived, so the audit fails the transcript."""
    from jg_mcp.cli import build_parser
    from jg_mcp.commands.serve_config import from_args
    from jg_mcp.commands.serve_sessions import Sessions

    args = build_parser().parse_args(
        ["serve", "--goal", "gemm_fp8", "--runs", str(tmp_path / "runs"), "--transcripts", str(tmp_path / "tr")]
    )
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    sessions = Sessions.open(from_args(args), tmp_path / "runs")
    monkeypatch.undo()
    assert sessions.mode == "none" and sessions.warning and sessions.warning.startswith("SANDBOX OFF")
    session, release = sessions.make()
    session.close("test finished")
    release()
    header = read_transcript(session.transcript_path).events[0]
    assert header.protections.asked == ["--sandbox auto"] and header.protections.missing == ["sandbox", "seccomp"]
    code, found = protection_findings(session.transcript_path, tmp_path)
    assert code == 1 and {f["severity"] for f in found} == {"error"}
    assert ["without sandbox" in found[0]["message"], "without seccomp" in found[1]["message"]] == [True, True]


@pytest.mark.parametrize(
    ("options", "in_force", "waived"),
    [
        (["--sandbox", "auto"], ["sandbox", "seccomp", "uid_separation"], []),
        (["--sandbox", "bwrap", "--no-seccomp"], ["sandbox", "uid_separation"], ["seccomp"]),
        (["--sandbox", "none"], [], ["sandbox", "seccomp", "uid_separation"]),
    ],
)
def test_the_header_records_the_protections_and_the_audit_accepts_what_the_operator_waived(
    tmp_path, options, in_force, waived
):
    if not ROOT:
        in_force = [p for p in in_force if p != "uid_separation"]
    done = serve_closed(tmp_path, *options)
    assert done.returncode == 0, done.stderr
    [path] = (tmp_path / "tr").glob("*.jsonl")
    p = read_transcript(path).events[0].protections
    assert p.asked == [" ".join(options[:2]), *options[2:]] and p.in_force == in_force
    assert p.waived == waived and p.missing == []
    assert protection_findings(path, tmp_path)[1] == []


def header_fields(version: int) -> dict:
    """A transcript header's fields but the sandbox's and the protections', at a format version."""
    return dict(
        format_version=version,
        jg_mcp_version="0",
        run_id="r",
        goal="g",
        goal_sha256="0" * 64,
        condition="goal-only",
        workspace="/w",
        host={},
        gpu={},
        started_at="2026-01-01T00:00:00Z",
    )


def test_an_older_transcript_without_protections_still_reads_and_an_unsandboxed_one_is_a_warning():
    from jg_mcp.record.audit_policy import check_protections

    fields = header_fields(5)
    assert check_protections(SimpleNamespace(header=Header(sandbox="bwrap", **fields))) == []
    [found] = check_protections(SimpleNamespace(header=Header(sandbox="none", **fields)))
    assert found.severity == "warning" and "format 5" in found.message


def test_the_eval_refuses_a_broken_sandbox_instead_of_running_the_candidate_unsandboxed(tmp_path, monkeypatch):
    """`isolation auto` fails closed like `--sandbox auto`: an installed bwrap that cannot sandbox, no bwrap as
    root, or a filter that cannot load raise one line (they used to give a plain process or drop the filter);
    `bwrap-unfiltered` is the operator's explicit word for the last."""
    from jg_mcp.eval.processes import isolation

    def choose(mode: str):
        isolation.bwrap_problem.cache_clear()
        return isolation.choose_isolation(mode)

    try:
        monkeypatch.setenv("PATH", failing_bwrap(tmp_path))
        with pytest.raises(JgError, match="isolation none") as refused:
            choose("auto")
        assert "Permission denied" in str(refused.value) and "\n" not in str(refused.value)
        if ROOT:
            monkeypatch.setenv("PATH", "/nonexistent")
            with pytest.raises(JgError, match="as root"):
                choose("auto")
        monkeypatch.undo()
        monkeypatch.setattr(seccomp, "program", lambda machine=None: b"\x06\x00\x00\x00\x00\x00")  # not 8-byte ops
        with pytest.raises(JgError, match="bwrap-unfiltered"):
            choose("auto")
        chosen = choose("bwrap-unfiltered")
        assert chosen.sandbox == "bwrap" and chosen.missing == [isolation.UNFILTERED]
    finally:
        monkeypatch.undo()
        assert choose("auto").missing == [] and isolation.FILTERED == [True]


def test_a_sandboxed_session_without_the_workspace_bound_fails_the_audit_unless_the_operator_asked():
    from jg_mcp.live.protections import Protections
    from jg_mcp.record.audit_policy import check_protections

    fields = header_fields(6) | {"sandbox": "bwrap"}
    in_force = ["sandbox", "seccomp", "uid_separation"]

    def header(asked, bound):
        p = Protections(asked=asked, in_force=in_force, waived=[], server_root=True)
        return SimpleNamespace(header=Header(protections=p, workspace_fs_bytes=bound, **fields))

    assert check_protections(header(["--sandbox auto"], 1 << 30)) == []
    [found] = check_protections(header(["--sandbox auto"], None))
    assert found.severity == "error" and "size bound" in found.message
    assert check_protections(header(["--sandbox auto", "--unbounded-workspace"], None)) == []
