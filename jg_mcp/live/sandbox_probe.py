"""Which sandbox a server runs commands in, failing closed: `choose` resolves `--sandbox auto|bwrap|none` (and
`--no-seccomp`) by `probe`, a trial command in a bwrap sandbox.

Nothing but the operator turns a protection off. `auto` runs commands unsandboxed only where bubblewrap is not
installed and the server is not root (its header then records the sandbox missing, and the audit fails it); a
probe that fails, for whatever reason, refuses the start, as does a seccomp filter bwrap cannot load. Each refusal
is one line that says why and which option chooses otherwise.

The probe writes only in a private directory on a memory file system (`probe_place`): /run/jg-mcp as root where
/run is one, else /dev/shm. The agent's commands write to the workspaces' file system (and to tmpfs mounts of their
own), so a command that fills it cannot make the next server's probe fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from jg_mcp import log
from jg_mcp.live import seccomp
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.uids import SandboxError, private_dir

logger = log.get("jg_mcp.live.sandbox")
MEMORY_FS = ("tmpfs", "ramfs")


def file_system(path: Path) -> str:
    """The type of the file system `path` lies on (the mount that holds it, by /proc/self/mountinfo, whose mount
    points spell a space, tab, newline or backslash as an octal escape)."""
    path = Path(os.path.realpath(path))
    best, kind = -1, ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
            fstype = fields[fields.index("-") + 1]
            if (point == path or point in path.parents) and len(point.parts) > best:
                best, kind = len(point.parts), fstype
    return kind


def probe_place(fallback: Path) -> Path:
    """Where a probe writes: /run/jg-mcp (as root) or /dev/shm, the first on a memory file system, which no
    command's writes reach; else `fallback`, where a full disk makes the probe fail and the start refuse."""
    if os.geteuid() == 0 and file_system(Path("/run")) in MEMORY_FS:
        return private_dir(Path("/run/jg-mcp"))
    if os.path.isdir("/dev/shm") and file_system(Path("/dev/shm")) in MEMORY_FS:
        return Path("/dev/shm")
    return fallback


def probe(sandbox: Bwrap, where: Path) -> str | None:
    """None when `sandbox` (with its filter, when `filtered`) runs a command in a workspace made in a new private
    directory under `where`, else why not, on one line."""
    if not shutil.which(sandbox.bwrap):
        return f"bubblewrap not found ({sandbox.bwrap}); install the `bubblewrap` package"
    tools = ("prlimit", "setpriv", *(("unshare",) if sandbox.as_root else ()))  # bwrap.OWN_PID_NAMESPACE, as root
    missing = [tool for tool in tools if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not found (util-linux)"
    if sandbox.filtered and seccomp.program() is None:
        return "this machine has no seccomp filter (jg_mcp.live.seccomp knows x86_64 and aarch64)"
    try:
        Path(where).mkdir(parents=True, exist_ok=True)
        trial_dir = Path(tempfile.mkdtemp(prefix=".sandbox-probe-", dir=where))
    except OSError as exc:
        return f"the probe cannot make its directory in {where}: {exc}"
    try:
        trial_dir.chmod(0o755)
        ws = trial_dir / "workspace"
        ws.mkdir()
        trial = sandbox.for_workspace(ws)
        try:
            argv = trial.wrap(["/bin/sh", "-c", "echo ok > probe && cat $PWD/probe"])
            try:
                done = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=30, pass_fds=argv.pass_fds)
            finally:
                argv.close()
        finally:
            trial.release()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    finally:
        shutil.rmtree(trial_dir, ignore_errors=True)
    if done.returncode != 0 or done.stdout.strip() != "ok":
        hint = " (a server that is not root needs unprivileged user namespaces)"
        if sandbox.as_root:
            first, last = sandbox.limits.first_uid, sandbox.limits.first_uid + sandbox.limits.uid_count - 1
            hint = f" (commands run as a uid in {first}..{last})"
        said = " ".join(done.stderr.split())[:500]
        return f"bubblewrap cannot sandbox here (exit {done.returncode}: {said}){hint}"
    return None


def choose(mode: str, sandbox: Bwrap, where: Path, seccomp_off: bool = False) -> tuple[str, str | None]:
    """Resolve `--sandbox` (and `--no-seccomp`, `seccomp_off`) by a probe in `probe_place(where)`: returns (mode
    that runs, warning or None) and sets `sandbox.filtered` and `sandbox.asked`. "none" comes back only when asked
    for, or for `auto` where bubblewrap is not installed and the server is not root; any other failure raises
    SandboxError, one line naming the option that chooses otherwise."""
    sandbox.asked = [f"--sandbox {mode}", *(["--no-seccomp"] if seccomp_off else [])]
    sandbox.filtered = not seccomp_off
    if mode == "none":
        return "none", None
    otherwise = "or pass --sandbox none to run commands unsandboxed with this server's privileges"
    if not shutil.which(sandbox.bwrap):
        if mode == "bwrap" or sandbox.as_root:
            why = " as root (commands would run as root)" if mode == "auto" else ""
            raise SandboxError(
                f"--sandbox {mode}: bubblewrap not found ({sandbox.bwrap}){why}: install the `bubblewrap` package, "
                f"{otherwise}"
            )
        warning = f"SANDBOX OFF: bubblewrap not found ({sandbox.bwrap}); run_command runs unsandboxed with this "
        warning += "server's privileges, and the audit fails this session (--sandbox none asks for it)"
        logger.warning(warning)
        return "none", warning
    reason = probe(sandbox, probe_place(where))
    if reason is None:
        return "bwrap", None
    if sandbox.filtered:
        sandbox.filtered = False
        unfiltered = probe(sandbox, probe_place(where))
        sandbox.filtered = True
        if unfiltered is None:
            raise SandboxError(
                f"--sandbox {mode}: bubblewrap cannot load the seccomp filter here ({reason}): pass --no-seccomp to "
                "sandbox commands without it (they may then make user namespaces, use kernel keyrings and lower "
                f"their core limit), {otherwise}"
            )
    raise SandboxError(f"--sandbox {mode}: {reason}: the server will not run commands unsandboxed instead; {otherwise}")
