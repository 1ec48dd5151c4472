"""Escape attempts through run_command: each fails under bwrap and, where that means anything,
succeeds with the sandbox off, which proves the attempt is real."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest
from mcp import Client

import jg_mcp
from jg_mcp.goals import load_goal
from jg_mcp.live.bwrap import Bwrap, python_dirs
from jg_mcp.live.environment import SANDBOX_CACHE
from jg_mcp.live.runner import Argv, Runner
from jg_mcp.live.sandbox import SandboxLimits
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from tests.support import SECRET_VAR, bwrap_missing, can_set_oom_floor, copy_goal

pytestmark = pytest.mark.slow

BWRAP_MISSING = bwrap_missing()


class Env:
    """Two sessions under one runs dir, a goal copy, an outside dir; `mode` is bwrap or none."""

    def __init__(self, root: Path, mode: str, limits: SandboxLimits | None = None):
        self.root, self.mode = root, mode
        (root / "goals").mkdir(parents=True)
        self.goal_path = copy_goal(root / "goals")
        self.goal = load_goal(self.goal_path)
        self.outside = root / "outside"
        self.outside.mkdir()
        self.runs, self.transcripts = root / "runs", root / "transcripts"
        hidden = [self.goal_path.parent, self.runs, self.transcripts, Path(jg_mcp.__file__).parent]
        self.template = Bwrap(self.runs, hidden, limits or SandboxLimits())
        self.sandboxes: list[Bwrap] = []
        self.sessions = [self.new_session(), self.new_session()]

    def new_session(self) -> Session:
        run_id = f"run-{uuid.uuid4().hex[:8]}"
        ws = self.runs / run_id / "workspace"
        wrap = None
        if self.mode == "bwrap":
            self.sandboxes.append(self.template.for_workspace(ws))
            wrap = self.sandboxes[-1].wrap
        return Session.open(
            self.goal,
            SessionConfig(
                workspace_dir=ws, transcripts_dir=self.transcripts, runs_dir=self.runs, run_id=run_id, sandbox=self.mode
            ),
            wrap=wrap,
        )

    def run(self, command: str, which: int = 0, timeout_s: float = 30) -> dict:
        server = build_server(self.goal, SingleSession(self.sessions[which]), sandboxed=self.mode == "bwrap")

        async def go():
            with anyio.fail_after(timeout_s + 30):
                async with Client(server) as client:
                    result = await client.call_tool("run_command", {"command": command, "timeout_s": timeout_s})
                    return result.structured_content

        return anyio.run(go)

    def close(self) -> None:
        for s in self.sessions:
            s.close("test finished")
        for sandbox in self.sandboxes:
            sandbox.release()


@pytest.fixture(params=["bwrap", "none"])
def env(request, tmp_path, monkeypatch):
    if request.param == "bwrap" and BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    monkeypatch.setenv(SECRET_VAR, "s3cret-value")
    e = Env(tmp_path, request.param)
    yield e
    e.close()


def sandboxed(env: Env) -> bool:
    return env.mode == "bwrap"


def test_a_command_cannot_write_outside_the_workspace(env):
    target = env.outside / "pwned"
    out = env.run(f"echo owned > {target}; echo owned > /usr/pwned-{uuid.uuid4().hex}")
    assert target.exists() is not sandboxed(env)
    if sandboxed(env):
        assert "Read-only file system" in out["stderr"]


def test_a_session_cannot_read_another_sessions_workspace(env):
    other = env.sessions[1].workspace.root
    (other / "secret.txt").write_text("other session's secret\n")
    out = env.run(f"cat {other}/secret.txt; ls {env.runs}")
    assert ("other session's secret" in out["stdout"]) is not sandboxed(env)
    assert (env.sessions[1].run_id in out["stdout"]) is not sandboxed(env)


def test_goal_files_and_transcripts_cannot_be_read_or_modified(env):
    transcript = env.sessions[0].transcript_path
    out = env.run(f"cat {env.goal_path} && echo '# tampered' >> {env.goal_path}; cat {transcript}")
    tampered = "# tampered" in env.goal_path.read_text()
    assert tampered is not sandboxed(env)
    assert ("objective" in out["stdout"]) is not sandboxed(env)
    assert ('"event":"header"' in out["stdout"]) is not sandboxed(env)


def test_the_installed_package_is_invisible_and_read_only_in_the_sandbox(env):
    if not sandboxed(env):
        pytest.skip("without a sandbox the package is writable by design; not modified here")
    package = Path(jg_mcp.__file__).parent
    out = env.run(f"ls -A {package}; touch {package}/pwned; python -c 'import jg_mcp'")
    assert "server.py" not in out["stdout"]
    assert f"cannot touch '{package}/pwned': No such file or directory" in out["stderr"]  # absent, not only hidden
    assert "No module named 'jg_mcp'" in out["stderr"]
    assert not (package / "pwned").exists()


def test_the_network_is_unreachable_even_on_loopback(env):
    async def attempt():
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener:
            code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
            return await anyio.to_thread.run_sync(env.run, f'python -c "{code}"')

    out = anyio.run(attempt)
    assert ("connected" in out["stdout"]) is not sandboxed(env)


def test_secrets_in_the_environment_do_not_reach_commands(env):
    out = env.run("env")
    assert ("s3cret-value" in out["stdout"]) is not sandboxed(env)
    if sandboxed(env):
        assert "HOME=/tmp/home" in out["stdout"] and "PATH=" in out["stdout"]


def _pids_named(marker: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def test_no_background_process_outlives_the_session(env):
    plain, daemon = f"jgplain-{uuid.uuid4().hex}", f"jgdaemon-{uuid.uuid4().hex}"
    env.run(  # the daemon's new session is made before `ready` exists: the close cannot catch it still in the group
        f"(exec -a {plain} sleep 300) > /dev/null 2>&1 & setsid bash -c 'touch ready; exec -a {daemon} sleep 300' "
        "> /dev/null 2>&1 < /dev/null & until [ -e ready ]; do sleep 0.05; done; echo started"
    )
    env.close()
    survivors = _pids_named(daemon)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert _pids_named(plain) == []
    assert bool(survivors) is not sandboxed(env), "setsid escapes the process group, not the pid namespace"


def test_process_and_file_size_caps_hold(env, tmp_path):
    limited = Env(tmp_path / "limited", env.mode, SandboxLimits(max_processes=64, max_file_bytes=1 << 20))
    try:
        sized = limited.run("head -c 2000000 /dev/zero > big; stat -c %s big")
        forked = limited.run("for i in $(seq 100); do sleep 1 & done; wait; echo done")
    finally:
        limited.close()
    assert sized["stdout"].split() == (["1048576"] if sandboxed(env) else ["2000000"]), sized
    assert ("Resource temporarily unavailable" in forked["stderr"]) is sandboxed(env), forked


def test_commands_are_what_the_oom_killer_takes_first_and_cannot_change_that(env):
    """A command that exhausts the host's memory must not get the server killed in its place (the kernel's OOM
    killer picks the process with the highest score): commands start with the highest score adjustment, set by the
    root server before the sandbox drops privileges, which an unprivileged process cannot lower where the server
    holds CAP_SYS_RESOURCE (this container does not: then only the start is checked)."""
    out = env.run("cat /proc/self/oom_score_adj; echo 0 > /proc/self/oom_score_adj && echo lowered; true")
    assert out["stdout"].split()[0] == ("1000" if sandboxed(env) else "0"), out
    if sandboxed(env) and os.geteuid() == 0 and can_set_oom_floor():
        assert "lowered" not in out["stdout"], out


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")
def test_a_fork_bomb_is_contained_and_the_server_keeps_serving(tmp_path):
    bomb = Env(tmp_path, "bwrap", SandboxLimits(max_processes=128))
    try:
        out = bomb.run("bomb() { bomb | bomb & }; bomb; sleep 60", timeout_s=5)
        after = bomb.run("echo alive; ps -e --no-headers | wc -l")
    finally:
        bomb.close()
    assert out["timed_out"] and "Resource temporarily unavailable" in out["stderr"]
    alive, processes = after["stdout"].split()
    assert alive == "alive" and int(processes) < 10


@pytest.mark.parametrize("where", ["/tmp", "/run"])
def test_a_unix_socket_listening_on_the_host_cannot_be_reached(env, where):
    path = Path(where) / f"jg-test-{uuid.uuid4().hex[:12]}.sock"
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(path))
        path.chmod(0o777)  # reachable by the sandbox uid as far as permissions go
        listener.listen()
        code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('connected')"
        out = env.run(f'python -c "{code}"')
    finally:
        listener.close()
        path.unlink(missing_ok=True)
    assert ("connected" in out["stdout"]) is not sandboxed(env), out
    if sandboxed(env):
        assert "No such file or directory" in out["stderr"]


def test_only_what_a_kernel_developer_needs_is_mounted_and_the_toolchain_works(env):
    if not sandboxed(env):
        pytest.skip("unsandboxed commands see the whole host by design")
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    out = env.run(
        "echo $(ls -A /); ls /run /var /home 2>&1; python -c 'import torch, triton; print(\"toolchain ok\")'",
        timeout_s=120,
    )
    top = out["stdout"].split("\n", 1)[0].split()
    assert "toolchain ok" in out["stdout"], out["stderr"]
    assert {"usr", "etc", "tmp", "dev", "proc"} <= set(top) and not {"run", "var", "home", "srv"} & set(top)
    for absent in ("/run", "/var", "/home"):
        assert f"cannot access '{absent}': No such file or directory" in out["stdout"]


def test_pid_1s_command_line_names_no_hidden_path(env):
    if not sandboxed(env):
        pytest.skip("no pid namespace without the sandbox")
    out = env.run("tr '\\0' ' ' < /proc/1/cmdline")
    assert "bwrap --args" in out["stdout"], out
    for hidden in (env.runs, env.transcripts, env.goal_path.parent, Path(jg_mcp.__file__).parent):
        assert str(hidden) not in out["stdout"]


def test_the_workspace_is_private_and_the_goal_copy_cannot_be_changed_or_deleted(env):
    ws = env.sessions[0].workspace.root
    out = env.run(
        "rm -f reference.py; mv reference.py moved.py; echo '# tampered' >> reference.py; chmod 666 reference.py; ls"
    )
    reference = ws / "reference.py"
    if sandboxed(env):
        assert reference.exists() and "# tampered" not in reference.read_text()
        assert not (ws / "moved.py").exists() and "Device or resource busy" in out["stderr"]
        assert reference.stat().st_uid == 0 or os.geteuid() != 0
        assert ws.stat().st_mode & 0o777 == 0o700
        if os.geteuid() == 0:
            assert ws.stat().st_uid == env.sandboxes[0].uid()
    else:
        assert "# tampered" in reference.read_text()  # the attempt is real: unsandboxed it replaces the copy


def test_a_command_cannot_make_a_user_namespace_to_mount_memory_past_its_caps(env):
    """In a user namespace of its own a command holds every capability there, so it could mount a tmpfs of any
    size (host memory, charged to no process) past max_tmp_bytes: creating one is refused in the sandbox. The
    threads and subprocesses a toolchain starts still work."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare (util-linux)")
    out = env.run(
        "unshare -Urm sh -c 'mount -t tmpfs -o size=100G none /tmp && echo MOUNTED'; echo rc=$?; "
        'python -c \'import subprocess, threading; t = threading.Thread(target=print, args=("thread ok",)); '
        't.start(); t.join(); print(subprocess.run(["echo", "child ok"], capture_output=True, text=True).stdout)\''
    )
    assert "thread ok" in out["stdout"] and "child ok" in out["stdout"], out
    if sandboxed(env):
        assert "MOUNTED" not in out["stdout"] and "rc=0" not in out["stdout"], out
    elif os.geteuid() == 0 or Path("/proc/sys/kernel/unprivileged_userns_clone").exists():
        assert "MOUNTED" in out["stdout"], "the attempt is real: it mounts with the sandbox off"


def test_the_hosts_opt_is_not_shown_unless_the_toolchain_lives_there(env, tmp_path):
    """/opt holds whatever a host installed there (guides, mirrors, other tools): under the goal-only condition
    the agent sees the toolchain, not the host's collection. A directory under /opt that this Python or a named
    toolchain variable needs is still bound."""
    if not sandboxed(env):
        pytest.skip("unsandboxed commands see the whole host by design")
    out = env.run("ls -A /opt 2>/dev/null; echo end")
    listed = out["stdout"].split("end")[0].split()
    needed = {p.parts[2] for p in python_dirs() if len(p.parts) > 2 and p.parts[1] == "opt"}
    assert set(listed) <= needed, out


KEYRING_NUMBERS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}
"""add_key, request_key, keyctl (asm/unistd_64.h, asm-generic/unistd.h)."""
KEYRING_PROBE = f"""
import ctypes, errno, platform
add_key, request_key, keyctl = {KEYRING_NUMBERS!r}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long


def call(nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(L(nr), *args)
    return (result, "ok") if result >= 0 else (result, errno.errorcode.get(ctypes.get_errno(), "?"))


# the thread keyring dies with this process: nothing is left in a keyring that outlives the test
print("add_key", call(add_key, b"user", b"jg-probe", b"x", L(1), L(-1))[1])
print("request_key", call(request_key, b"user", b"jg-absent", None, L(0))[1])
print("keyctl", call(keyctl, L(0), L(-3), L(0))[1])  # KEYCTL_GET_KEYRING_ID of the session keyring
found, _ = call(keyctl, L(10), L(-3), b"user", b"jg-session-secret", L(0))  # KEYCTL_SEARCH
if found > 0:
    data = ctypes.create_string_buffer(256)
    size, _ = call(keyctl, L(11), L(found), data, L(256))  # KEYCTL_READ
    print("secret", data.raw[:size].decode())
"""
WITH_SESSION_KEYRING = f"""
import ctypes, os, platform, sys
add_key, _, keyctl = {KEYRING_NUMBERS!r}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
secret = sys.argv[1].encode()
# KEYCTL_JOIN_SESSION_KEYRING (anonymous, as pam_keyinit makes a login's), then a user key in it
if libc.syscall(L(keyctl), L(1), None) < 0 or libc.syscall(L(add_key), b"user", b"jg-session-secret", secret,
                                                            L(len(secret)), L(-3)) < 0:
    print("no session keyring here", ctypes.get_errno())
    sys.exit(77)
os.execvp(sys.argv[2], sys.argv[2:])
"""


@pytest.mark.skipif(platform.machine() not in KEYRING_NUMBERS, reason="no syscall numbers for this machine")
@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_a_command_cannot_reach_the_kernel_keyrings_of_the_server_or_its_uid(tmp_path, mode):
    """Keyrings are not namespaced: a command could read the server's session keyring (a root login's, with its
    secrets), which it inherits, and keep keys in its uid's user keyring, which the next session with that uid
    reads. The sandbox refuses add_key, request_key and keyctl with ENOSYS, as a kernel without keyrings would."""
    if mode == "bwrap" and BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    ws = tmp_path / "runs" / "one" / "workspace"
    ws.mkdir(parents=True)
    (ws / "probe.py").write_text(KEYRING_PROBE)
    secret = f"keyring-secret-{uuid.uuid4().hex}"
    sandbox = Bwrap(tmp_path / "runs", [tmp_path / "runs"]).for_workspace(ws) if mode == "bwrap" else None

    def wrap(argv: list[str]) -> Argv:
        inner = sandbox.wrap(argv) if sandbox is not None else Argv(argv)
        return Argv([sys.executable, "-c", WITH_SESSION_KEYRING, secret, *inner], inner.files, inner.fds)

    try:
        out = anyio.run(Runner(ws, wrap=wrap).run, "python probe.py", 60.0)
    finally:
        if sandbox is not None:
            sandbox.release()
    if out.exit_code == 77:
        pytest.skip(f"cannot make a session keyring here: {out.stdout}")
    calls = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    if mode == "bwrap":
        assert calls == {"add_key": "ENOSYS", "request_key": "ENOSYS", "keyctl": "ENOSYS"}, out
    else:  # the attempt is real: unsandboxed, the calls reach the kernel and the server's secret is read
        assert calls["add_key"] == "ok" and calls["request_key"] == "ENOKEY" and calls["secret"] == secret, out


SETUID_BITS = stat.S_ISUID | stat.S_ISGID


def _setuid_or_setgid(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & SETUID_BITS:
            found.append(f"{path.relative_to(root)} {oct(st.st_mode)}")
    return found


@pytest.mark.parametrize("killed", [False, True])
def test_no_setuid_file_or_open_workspace_is_left_when_a_command_returns(env, killed):
    """The sandbox's own mount is nosuid, the host's is not: a setuid copy of a shell left in a workspace opened to
    everyone would give any local user the sandbox uid, which the next session is handed, and with it that
    session's live workspace. Once a command's processes are gone (it returned or its timeout killed it), and
    before its result is back, the workspace and the compile cache are 0700 again and nothing in them is setuid or
    setgid."""
    ws = env.sessions[0].workspace.root
    cache = ws.parent / f".{ws.name}.cache"
    plant = "cp /bin/sh sh && chmod 4755 sh && mkdir -p d && cp /bin/sh d/sg && chmod 2755 d/sg && chmod 2777 d"
    if sandboxed(env):
        plant += f" && cp /bin/sh {SANDBOX_CACHE}/sh && chmod 6755 {SANDBOX_CACHE}/sh && chmod 755 {SANDBOX_CACHE}"
    out = env.run(
        f"{plant} && chmod 755 . && echo planted{' && sleep 60' if killed else ''}", timeout_s=2 if killed else 30
    )
    assert "planted" in out["stdout"] and out["timed_out"] is killed, out
    if sandboxed(env):
        assert stat.S_IMODE(ws.stat().st_mode) == 0o700 and stat.S_IMODE(cache.stat().st_mode) == 0o700
        assert _setuid_or_setgid(ws) == [] and _setuid_or_setgid(cache) == []
        assert os.access(ws / "sh", os.X_OK) and (cache / "sh").exists(), "the files stay, only the bits go"
    else:  # the attempt is real: what a command sets is what is left
        assert stat.S_IMODE(ws.stat().st_mode) == 0o755 and "sh 0o104755" in _setuid_or_setgid(ws)
