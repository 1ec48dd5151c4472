"""`--sandbox auto|bwrap|none` and the sandbox's environment, through the real CLI and bwrap."""

from __future__ import annotations

import gc
import os
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from jg_mcp.live import seccomp
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.environment import SANDBOX_HOME, is_secret, sandbox_env
from jg_mcp.live.runner import Runner
from jg_mcp.live.sandbox import NoSandbox, Sandbox, SandboxLimits, sandbox_of
from jg_mcp.live.sandbox_probe import choose
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from jg_mcp.live.uids import SandboxError, UidPool
from jg_mcp.record.reading import read_transcript
from tests.support import bwrap_missing, serve_argv

BWRAP_MISSING = bwrap_missing()

pytestmark = pytest.mark.slow


def serve_stdio(tmp_path, sandbox: str, path: str | None = None) -> subprocess.CompletedProcess:
    """A stdio server whose client leaves at once (stdin closed): it starts, records, closes."""
    env = {**os.environ, "PATH": path} if path is not None else None
    return subprocess.run(
        serve_argv("--workspace", tmp_path / "ws", "--transcripts", tmp_path / "tr", "--sandbox", sandbox),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def only_transcript(tmp_path):
    [path] = (tmp_path / "tr").glob("*.jsonl")
    return read_transcript(path)


def test_secret_variables_are_dropped_and_a_minimal_environment_is_kept():
    environ = {
        "PATH": "/x",
        "HOME": "/root",
        "AWS_ACCESS_KEY_ID": "a",
        "GITHUB_TOKEN": "b",
        "HF_HOME": "c",
        "CUDA_VISIBLE_DEVICES": "0",
        "TRITON_CACHE_DIR": "/t",
        "CUDA_API_KEY": "d",
        "LANG": "en_US.UTF-8",
        "DB_PASSWORD": "e",
        "RANDOM_APP_SETTING": "f",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
    }
    env = sandbox_env(environ)
    assert {"CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "LANG", "LD_LIBRARY_PATH"} <= env.keys()
    assert (
        not {"AWS_ACCESS_KEY_ID", "GITHUB_TOKEN", "HF_HOME", "CUDA_API_KEY", "DB_PASSWORD", "RANDOM_APP_SETTING"}
        & env.keys()
    )
    assert env["HOME"] == "/tmp/home" and env["PATH"].startswith(os.path.dirname(sys.executable))
    assert all(is_secret(n) for n in ("OPENAI_API_KEY", "MY_SECRET", "SSH_AUTH_SOCK", "ANTHROPIC_BASE_URL"))


def test_auto_as_root_without_bwrap_refuses_to_start_in_one_line_naming_sandbox_none(tmp_path):
    """As root, a server without bubblewrap would run the agent's commands as root: `auto` refuses instead (it used
    to fall back to no sandbox with a warning), and says which option runs them anyway."""
    assert os.geteuid() == 0 or pytest.skip("the server must be root")
    done = serve_stdio(tmp_path, "auto", path="/nonexistent")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert "bubblewrap not found" in line and "as root" in line and "--sandbox none" in line, line
    assert not (tmp_path / "tr").exists() or not list((tmp_path / "tr").glob("*.jsonl"))


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


def test_each_sandbox_takes_its_own_uid_and_gives_it_back_when_released_or_collected(tmp_path):
    pool, limits = UidPool(), SandboxLimits(first_uid=62000, uid_count=3)
    template = Bwrap(tmp_path, limits=limits, uids=pool)
    a, b = Bwrap(tmp_path / "a", limits=limits, uids=pool), template.for_workspace(tmp_path / "b")
    uid_a, uid_b = a.uid(), b.uid()
    assert uid_a != uid_b and a.uid() == uid_a and pool.held == {uid_a, uid_b}
    a.release()
    a.release()
    del b
    gc.collect()
    assert pool.held == set()
    c, d, e = (Bwrap(tmp_path / n, limits=limits, uids=pool) for n in "cde")
    assert sorted([c.uid(), d.uid(), e.uid()]) == [62000, 62001, 62002]
    with pytest.raises(SandboxError, match="no free sandbox uid in 62000..62002"):
        Bwrap(tmp_path / "f", limits=limits, uids=pool).uid()


def test_a_uid_that_names_an_account_or_runs_a_process_is_not_handed_out():
    pool = UidPool()
    with pytest.raises(SandboxError, match="no free sandbox uid"):
        pool.take(0, 1)  # root: an account, and it runs processes
    if os.geteuid() != 0:
        pytest.skip("starting a process under another uid needs root")
    busy = subprocess.Popen(
        ["setpriv", "--reuid=62100", "--regid=62100", "--clear-groups", "sh", "-c", "echo up; exec sleep 60"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert busy.stdout.readline() == "up\n"  # now running as 62100
        assert pool.take(62100, 2) == 62101
    finally:
        busy.kill()
        busy.wait()


def test_a_uid_given_back_by_a_collected_sandbox_in_the_middle_of_take_does_not_deadlock(tmp_path, monkeypatch):
    """A sandbox's uid goes back through a weakref finalizer, which the garbage collector can run anywhere: in a CI
    run it ran inside `take` (while it read /proc) on the thread that held the pool's lock, and that thread and
    every later `take` waited forever. Here the finalizer's `give_back` runs at that point, on that thread."""
    import threading

    from jg_mcp.live import uids

    pool = UidPool(tmp_path / "locks")
    held = pool.take(62200, 10)
    reading = uids.running_uids

    def collected_meanwhile() -> set[int]:
        pool.give_back(held)
        return reading()

    monkeypatch.setattr(uids, "running_uids", collected_meanwhile)
    got: list[int] = []
    taking = threading.Thread(target=lambda: got.append(pool.take(62200, 10)), daemon=True)
    taking.start()
    taking.join(10)
    assert not taking.is_alive(), "take waited on the lock it holds, for a give_back run inside it"
    assert got == [held] and pool.held == {held}


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process under other uids needs root")
def test_a_uid_held_only_as_an_effective_or_saved_uid_is_busy_too():
    """A setuid file a session left behind runs with the session's uid as its effective uid and someone else's as
    its real one: that process can still write what the uid owns, so the uid is not handed to another session."""
    pool = UidPool()
    script = "import os, time; os.setresuid(65534, 62200, 62200); print('up', flush=True); time.sleep(60)"
    busy = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline() == "up\n"  # real uid nobody, effective and saved 62200
        assert pool.take(62200, 2) == 62201
    finally:
        busy.kill()
        busy.wait()


@pytest.mark.skipif(
    BWRAP_MISSING is not None or os.geteuid() != 0,
    reason=BWRAP_MISSING or "sandbox uids are used only by a root server",
)
def test_a_workspace_handed_to_a_sandbox_with_another_uid_stays_writable_compile_cache_included(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    first = Bwrap(ws)
    second = Bwrap(ws)  # takes another uid while `first` holds its own

    async def commands():
        with anyio.fail_after(60):
            wrote = await Runner(ws, wrap=first.wrap).run(
                "mkdir -p d $TRITON_CACHE_DIR && echo 1 > d/f && echo 1 > $TRITON_CACHE_DIR/k && id -u", 30
            )
            (ws / "from_server.txt").write_text("server\n")
            again = await Runner(ws, wrap=second.wrap).run(
                "echo 2 >> d/f && echo 2 >> $TRITON_CACHE_DIR/k && echo ok >> from_server.txt && id -u", 30
            )
            return wrote, again

    wrote, again = anyio.run(commands)
    assert wrote.exit_code == 0 and again.exit_code == 0, (wrote.stderr, again.stderr)
    assert wrote.stdout != again.stdout
    assert (ws / "d" / "f").read_text() == "1\n2\n" and (ws / "from_server.txt").read_text() == "server\nok\n"
    assert (tmp_path / ".ws.cache" / "triton" / "k").read_text() == "1\n2\n"


VALUE_SECRETS = {"LC_JG_TEST": "https://agent:hunter2-pw@example.com/x", "TRITON_JG_TEST": "ghp_" + "a1" * 12}


def test_a_secret_in_the_value_of_an_allow_listed_variable_is_dropped():
    env = sandbox_env({**VALUE_SECRETS, "LC_TIME": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda"})
    assert not VALUE_SECRETS.keys() & env.keys()
    assert env["LC_TIME"] == "C.UTF-8" and env["CUDA_HOME"] == "/usr/local/cuda"
    assert is_secret("LC_X", "glpat-abcdefgh12345") and not is_secret("LC_X", "en_US.UTF-8")


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")
def test_the_header_records_exactly_the_environment_the_sandboxed_command_saw(gemm_goal, tmp_path, monkeypatch):
    for name, value in VALUE_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_JG_PLAIN", "plain")
    ws = tmp_path / "ws"
    session = Session.open(
        gemm_goal,
        SessionConfig(workspace_dir=ws, transcripts_dir=tmp_path / "tr", sandbox="bwrap"),
        wrap=Bwrap(ws, [tmp_path / "tr"]),
    )

    async def go():
        with anyio.fail_after(60):
            async with Client(build_server(gemm_goal, SingleSession(session), sandboxed=True)) as client:
                return (await client.call_tool("run_command", {"command": "env -0"})).structured_content

    try:
        out = anyio.run(go)
    finally:
        session.close("test finished")
    seen = dict(item.split("=", 1) for item in out["stdout"].split("\0") if "=" in item)
    seen = {k: v for k, v in seen.items() if k not in ("PWD", "SHLVL", "_", "OLDPWD")}
    [header] = [e for e in read_transcript(session.transcript_path).events if e.event == "header"]
    assert not any(v in out["stdout"] for v in VALUE_SECRETS.values())
    assert seen["LC_JG_PLAIN"] == "plain"
    assert header.env == seen and header.env_redacted == []


def test_sandbox_uids_are_unique_across_server_processes(tmp_path):
    """Two processes, each with its own UidPool (as two servers have), take uids while both hold theirs."""
    take = (
        "import sys; from jg_mcp.live.uids import UidPool; pool = UidPool(); "
        "print(pool.take(62300, 4), flush=True); sys.stdin.readline()"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", take],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        uids = [int(p.stdout.readline() or -1) for p in procs]
    finally:
        for p in procs:
            p.communicate("\n", timeout=30)
    assert uids[0] != uids[1] and set(uids) <= set(range(62300, 62304)), [p.stderr for p in procs]


def test_a_uid_is_free_again_once_the_process_holding_it_is_gone(tmp_path):
    first, second = UidPool(tmp_path / "locks"), UidPool(tmp_path / "locks")
    held = first.take(62400, 2)
    assert second.take(62400, 2) == held + 1
    with pytest.raises(SandboxError, match="held by other jg-mcp servers"):
        UidPool(tmp_path / "locks").take(62400, 2)
    first.give_back(held)
    assert UidPool(tmp_path / "locks").take(62400, 2) == held


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")
def test_tmpfs_mounts_are_sized_and_a_workspace_over_its_quota_gets_a_notice(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    limits = SandboxLimits(max_tmp_bytes=1 << 20, max_workspace_bytes=3 << 20)
    box = Bwrap(ws, limits=limits)
    runner = Runner(ws, wrap=box.wrap, env=box.env, quota_bytes=limits.max_workspace_bytes)

    async def commands():
        with anyio.fail_after(60):
            tmp = await runner.run("head -c 2000000 /dev/zero > /tmp/big; head -c 2000000 /dev/zero > /dev/shm/big", 30)
            small = await runner.run("head -c 2000000 /dev/zero > one", 30)
            big = await runner.run("head -c 2000000 /dev/zero > two", 30)
            return tmp, small, big

    try:
        tmp, small, big = anyio.run(commands)
    finally:
        box.release()
    assert tmp.stderr.count("No space left on device") == 2, tmp
    assert small.notice is None
    assert big.notice and "more than its quota of 3145728 bytes" in big.notice


def test_the_sandbox_seam_takes_a_sandbox_its_bound_wrap_or_none():
    box = Bwrap(Path("ws"))
    assert sandbox_of(box) is box and sandbox_of(box.wrap) is box
    plain = sandbox_of(None)
    assert isinstance(plain, NoSandbox) and isinstance(plain, Sandbox) and plain.limits is None
    assert plain.wrap(["true"]) == ["true"] and plain.env["PATH"].startswith(os.path.dirname(sys.executable))
    with pytest.raises(TypeError):
        sandbox_of(lambda argv: argv)


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")
def test_where_bwrap_cannot_load_the_seccomp_filter_the_start_is_refused_unless_the_operator_waives_it(
    tmp_path, monkeypatch
):
    """A host whose bwrap or kernel cannot load the filter refuses the start in one line naming `--no-seccomp` (it
    used to drop the filter with a warning); with `--no-seccomp` commands stay sandboxed without it, and the
    protections say the operator waived it."""
    template = Bwrap(tmp_path / "runs", [])
    assert choose("bwrap", template, tmp_path / "probe") == ("bwrap", None) and template.filtered
    assert "seccomp" in template.protections.in_force and not template.protections.waived
    monkeypatch.setattr(seccomp, "program", lambda machine=None: b"\x06\x00\x00\x00\x00\x00")  # not 8-byte ops
    for mode in ("auto", "bwrap"):
        template = Bwrap(tmp_path / "runs", [])
        with pytest.raises(SandboxError, match="cannot load the seccomp filter") as refused:
            choose(mode, template, tmp_path / "probe")
        assert "--no-seccomp" in str(refused.value) and "\n" not in str(refused.value)
    template = Bwrap(tmp_path / "runs", [])
    assert choose("auto", template, tmp_path / "probe", seccomp_off=True) == ("bwrap", None)
    assert template.protections.waived == ["seccomp"] and template.protections.asked == [
        "--sandbox auto",
        "--no-seccomp",
    ]
    assert template.protections.missing == []
    ws = tmp_path / "runs" / "one" / "workspace"
    ws.mkdir(parents=True)
    sandbox = template.for_workspace(ws)
    try:
        out = anyio.run(Runner(ws, wrap=sandbox.wrap).run, "echo $HOME", 30.0)
    finally:
        sandbox.release()
    assert not sandbox.filtered and out.exit_code == 0 and out.stdout.strip() == SANDBOX_HOME, out


def test_what_a_killed_server_left_unsealed_is_sealed_before_its_uid_is_handed_out_again(tmp_path):
    """A server killed while a command ran never sealed its workspace: whatever that command left (a setuid shell,
    the workspace opened to everyone) must not reach the next sandbox handed the same uid. The uid's lock file
    names the directories its holder gave it; the next holder seals them (0700, no setuid or setgid bit) first."""
    ws, cache = tmp_path / "runs" / "a" / "workspace", tmp_path / "runs" / "a" / ".workspace.cache"
    ws.mkdir(parents=True)
    hold = (
        "import sys; from pathlib import Path; from jg_mcp.live.bwrap import Bwrap; from jg_mcp.live.sandbox "
        "import SandboxLimits; from jg_mcp.live.uids import UidPool; "
        f"box = Bwrap(Path({str(ws)!r}), limits=SandboxLimits(first_uid=62500, uid_count=1), "
        f"uids=UidPool(Path({str(tmp_path / 'locks')!r}))); box.wrap(['true']); print(box.uid(), flush=True); "
        "sys.stdin.readline()"
    )
    server = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline() == "62500\n"
        for d in (ws, cache):  # what a command left when the server died
            (d / "sh").write_bytes(Path("/bin/sh").read_bytes())
            (d / "sh").chmod(0o6755)
            d.chmod(0o755)
    finally:
        server.kill()
        server.wait()
    assert (ws / "sh").stat().st_mode & stat.S_ISUID, "left unsealed"
    limits = SandboxLimits(first_uid=62500, uid_count=1)
    (tmp_path / "runs" / "b").mkdir()
    nxt = Bwrap(tmp_path / "runs" / "b" / "workspace", limits=limits, uids=UidPool(tmp_path / "locks"))
    try:
        assert nxt.uid() == 62500
        for d in (ws, cache):
            assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE((d / "sh").stat().st_mode) == 0o755
    finally:
        nxt.release()
    assert UidPool(tmp_path / "locks").take(62500, 1) == 62500  # released cleanly: nothing noted, nothing to seal


def test_a_run_directory_is_reachable_by_its_owner_only(gemm_goal, tmp_path):
    """While a command runs, the sandbox uid owns the workspace and may open it (chmod 755 .) and leave a setuid
    file there until the command's end seals it: the run directory above it lets no other local user reach it."""
    session = Session.open(
        gemm_goal, SessionConfig(runs_dir=tmp_path / "runs", transcripts_dir=tmp_path / "tr", run_id="r1")
    )
    try:
        assert stat.S_IMODE((tmp_path / "runs" / "r1").stat().st_mode) == 0o700
        assert session.workspace.root == tmp_path / "runs" / "r1" / "workspace"
    finally:
        session.close("test finished")


def test_the_run_directory_serve_makes_is_reachable_by_its_owner_only(tmp_path):
    """`jg-mcp serve` passes the workspace it names (runs/RUN_ID/workspace) to the session: its run directory is
    made 0700 on that path too (red team: it was 0755 there, and a host user ran a setuid copy of bash a command
    left in the opened workspace)."""
    from jg_mcp.cli import build_parser
    from jg_mcp.commands.serve_config import from_args
    from jg_mcp.commands.serve_sessions import Sessions

    args = build_parser().parse_args(
        [
            "serve",
            "--goal",
            "gemm_fp8",
            "--sandbox",
            "none",
            "--runs",
            str(tmp_path / "runs"),
            "--transcripts",
            str(tmp_path / "tr"),
        ]
    )
    session, release = Sessions.open(from_args(args), tmp_path / "runs").make()
    try:
        run = session.workspace.root.parent
        assert run.parent == tmp_path / "runs" and stat.S_IMODE(run.stat().st_mode) == 0o700
    finally:
        session.close("test finished")
        release()
