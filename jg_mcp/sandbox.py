"""The OS sandbox around run_command: bubblewrap, resource limits and a scrubbed environment.

Each command runs in fresh pid, net, ipc and uts namespaces (and a user namespace when the
server is not root): the system is mounted read-only, the workspace read-write, /tmp and
HOME are private to the command, a per-session cache directory (Triton, pip) persists, there
is no network, and the goal files, the transcripts, other sessions' workspaces and jg-mcp's
own source are hidden behind empty read-only tmpfs mounts. GPU device nodes are passed through.

Limits: RLIMIT_FSIZE caps every file a command writes; RLIMIT_NPROC caps processes and
threads. The kernel never applies RLIMIT_NPROC to root, so a root server has bwrap drop
the command to an unprivileged uid (`setpriv`, after the mounts are made). RLIMIT_NPROC
counts every process of a uid, so each sandbox (one per session) takes a uid of its own
from a `UidPool`: one session's fork bomb exhausts its own cap, not the others'. (A server
that is not root runs commands under its own uid, so its sessions share one cap.)

The sandbox's pid 1 dies with the server (`--die-with-parent`) and when its command
returns; then the kernel kills every process in the namespace, so nothing a command
starts, daemons included, outlives it.
"""

from __future__ import annotations

import glob
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from jg_mcp import log
from jg_mcp.errors import JgError

logger = log.get("jg_mcp.sandbox")

MODES = ("auto", "bwrap", "none")
SANDBOX_HOME = "/tmp/home"
SANDBOX_CACHE = "/tmp/home/.cache"
MAX_HAND_OVER_DEPTH = 200
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KEPT_NAMES = {"LANG", "LANGUAGE", "TERM", "TZ", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "OMP_NUM_THREADS"}
KEPT_PREFIXES = ("LC_", "CUDA_", "TRITON_", "NVIDIA_", "TORCH_", "NCCL_", "PYTORCH_")
SECRET = re.compile(
    r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|SIGN"
    r"|^(AWS|GCP|GCLOUD|GOOGLE|AZURE|GH|GITHUB|GITLAB|HF|HUGGING|OPENAI|ANTHROPIC|SSH|NPM|PYPI|DOCKER)_",
    re.IGNORECASE,
)


class SandboxError(JgError):
    """bubblewrap was required but cannot run here, or no sandbox uid is free."""


class SandboxLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    max_processes: int = 1024
    """RLIMIT_NPROC: processes and threads of one session's sandbox uid (as root); stops fork bombs."""
    max_file_bytes: int = 8 * 1024**3
    """RLIMIT_FSIZE: the largest file a command may write; a larger write gets SIGXFSZ/EFBIG."""
    first_uid: int = 61000
    """The first unprivileged uid (and gid) commands run as when the server runs as root; each live
    session takes its own from first_uid .. first_uid + uid_count - 1."""
    uid_count: int = 184
    """How many uids the sessions may take: the most sandboxed sessions served at once as root. The
    default range ends below systemd's DynamicUser range (61184-65519)."""


def is_secret(name: str) -> bool:
    return bool(SECRET.search(name))


def sandbox_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment inside the sandbox: an allow-list of harmless variables, never a secret."""
    env = {
        k: v
        for k, v in environ.items()
        if (k in KEPT_NAMES or k.startswith(KEPT_PREFIXES)) and not is_secret(k)
    }
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), SYSTEM_PATH]),
        HOME=SANDBOX_HOME,
        XDG_CACHE_HOME=SANDBOX_CACHE,
        TRITON_CACHE_DIR=f"{SANDBOX_CACHE}/triton",
        TMPDIR="/tmp",
        USER="agent",
        LOGNAME="agent",
        PYTHONUNBUFFERED="1",
        LANG=environ.get("LANG", "C.UTF-8"),
    )
    return env


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri"))


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def python_dirs() -> list[Path]:
    """Where this interpreter and its environment live (the agent runs the same Python)."""
    dirs = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return sorted(dirs)


def running_uids() -> set[int]:
    """The real uids of the running processes (what RLIMIT_NPROC counts)."""
    uids = set()
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status) as f:
                line = next(ln for ln in f if ln.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        uids.add(int(line.split()[1]))
    return uids


def names_an_account(uid: int) -> bool:
    """True when `uid` is a user, or as a gid a group, of the account databases."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


class UidPool:
    """The sandbox uids this server process hands out, one per live sandbox. A uid is free when no
    other sandbox here holds it, no user or group has it, and no running process has it as its real
    uid (a closed session's processes still dying, another server's command)."""

    def __init__(self) -> None:
        self.held: set[int] = set()
        self._lock = threading.Lock()

    def take(self, first: int, count: int) -> int:
        with self._lock:
            busy = self.held | running_uids()
            for uid in range(first, first + count):
                if uid not in busy and not names_an_account(uid):
                    self.held.add(uid)
                    return uid
        raise SandboxError(
            f"no free sandbox uid in {first}..{first + count - 1} ({len(self.held)} held by live sessions "
            "here; the rest are accounts or run processes): close sessions or widen SandboxLimits.uid_count"
        )

    def give_back(self, uid: int) -> None:
        with self._lock:
            self.held.discard(uid)


UIDS = UidPool()
"""The pool every Bwrap takes from unless given another."""


def chown_tree(root: Path, uid: int, keep: Iterable[str] = ()) -> None:
    """chown everything under `root` (not `root` itself, nor its entries named in `keep`) to `uid`, through
    directory fds without following links, so a command running meanwhile cannot redirect it outside."""
    keep = set(keep)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    root_fd = os.open(root, flags)
    stack = [(root_fd, os.scandir(root_fd))]
    try:
        while stack:
            dfd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(dfd)
                stack.pop()
                continue
            if dfd == root_fd and entry.name in keep:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if st.st_uid != uid:
                    os.chown(entry.name, uid, uid, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) and len(stack) < MAX_HAND_OVER_DEPTH:
                    child = os.open(entry.name, flags, dir_fd=dfd)
                    stack.append((child, os.scandir(child)))
            except OSError:
                continue
    finally:
        for dfd, entries in stack:
            entries.close()
            os.close(dfd)


def closed_ancestors(paths: Iterable[Path], uid: int) -> list[Path]:
    """The outermost directory above each path that `uid` may not search (e.g. /root, mode 700).
    The sandbox replaces each with an empty tmpfs and binds back only the paths it needs."""
    closed: list[Path] = []
    for path in paths:
        for parent in reversed(path.parents):
            st = parent.stat()
            if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
                if parent not in closed:
                    closed.append(parent)
                break
    return closed


class Bwrap:
    """Wraps a command's argv in bubblewrap for one workspace; see the module docstring. As root it
    holds a uid of its own from `uids` until `release` or until it is garbage-collected."""

    def __init__(
        self,
        workspace: Path,
        hidden: Iterable[Path] = (),
        limits: SandboxLimits | None = None,
        keep_root_owned: Iterable[str] = ("reference.py",),
        bwrap: str | None = None,
        uids: UidPool = UIDS,
    ):
        self.workspace = Path(workspace)
        self.hidden = [Path(p).resolve() for p in hidden]
        self.limits = limits or SandboxLimits()
        self.keep_root_owned = set(keep_root_owned)
        self.bwrap = bwrap or shutil.which("bwrap") or "bwrap"
        self.as_root = os.geteuid() == 0
        self.env = sandbox_env(os.environ)
        """The environment inside; bwrap clears the rest."""
        self.uids = uids
        self._uid: int | None = None
        self._give_back: weakref.finalize | None = None

    def for_workspace(self, workspace: Path) -> Bwrap:
        """The same sandbox around another workspace (one per session). As root it takes its uid now,
        so a full pool fails the session's start rather than its first command."""
        sandbox = Bwrap(workspace, self.hidden, self.limits, self.keep_root_owned, self.bwrap, self.uids)
        if sandbox.as_root:
            sandbox.uid()
        return sandbox

    def uid(self) -> int:
        """The uid (and gid) this sandbox's commands run as under a root server; taken on first use."""
        if self._uid is None:
            self._uid = self.uids.take(self.limits.first_uid, self.limits.uid_count)
            self._give_back = weakref.finalize(self, self.uids.give_back, self._uid)
        return self._uid

    def release(self) -> None:
        """Give the uid back; a later command takes a new one. Safe to call twice."""
        if self._give_back is not None:
            self._give_back()
        self._uid = self._give_back = None

    def wrap(self, argv: list[str]) -> list[str]:
        """The sandboxed argv for `argv`; as root, first hands the workspace to the sandbox uid."""
        ws = self.workspace.resolve()
        lim = self.limits
        args = [
            "prlimit", f"--nproc={lim.max_processes}", f"--fsize={lim.max_file_bytes}", self.bwrap,
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/dev/shm",
            "--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777", "--dir", SANDBOX_HOME,
            "--bind", str(self._cache_dir(ws)), SANDBOX_CACHE,
        ]
        for dev in gpu_devices():
            args += ["--dev-bind-try", dev, dev]
        args += self._mounts(ws)
        args += ["--chdir", str(ws), "--clearenv"]
        for key, value in self.env.items():
            args += ["--setenv", key, value]
        if self.as_root:
            uid = self.uid()
            args += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
        return [*args, "--", *argv]

    def _mounts(self, ws: Path) -> list[str]:
        """Hide `hidden` (and, as root, directories the sandbox uid could not search anyway) behind
        read-only tmpfs mounts, outermost first, then bind back the workspace and this Python."""
        masked = [h for h in self.hidden if h.is_dir() and not _inside(h, ws)]
        reach = [ws, *python_dirs()]
        if self.as_root:
            self._hand_over(ws)
            masked += [d for d in closed_ancestors(reach, self.uid()) if d not in masked]
        covers = [*masked, Path("/tmp")]
        binds = [p for p in reach if p == ws or any(_inside(p, m) and m != p for m in covers)]
        args: list[str] = []
        for path in sorted({*masked, *binds}, key=lambda p: (len(p.parts), p != ws)):
            if path in masked and path not in binds:
                args += ["--tmpfs", str(path)]
                continue
            mask = max((m for m in covers if _inside(path, m) and m != path), key=lambda m: len(m.parts), default=None)
            if mask is not None:
                for parent in [p for p in reversed(path.parents) if mask in p.parents]:
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--bind" if path == ws else "--ro-bind", str(path), str(path)]
        for path in masked:
            args += ["--remount-ro", str(path)]
        return args

    def _cache_dir(self, ws: Path) -> Path:
        """The session's compile caches (Triton, pip, ...), kept across commands beside the workspace
        and outside it, so cached binaries are neither recorded nor part of the solution. As root it
        belongs to this sandbox's uid (handed over whole when an earlier sandbox's uid owned it)."""
        cache = ws.parent / f".{ws.name}.cache"
        cache.mkdir(mode=0o700, exist_ok=True)
        if self.as_root and cache.stat().st_uid != self.uid():
            os.chown(cache, self.uid(), self.uid())
            chown_tree(cache, self.uid())
        return cache

    def _hand_over(self, ws: Path) -> None:
        """chown the workspace tree to this sandbox's uid. The root stays root-owned with the sticky bit,
        so root-owned goal copies cannot be deleted or replaced."""
        os.chmod(ws, 0o1777)
        chown_tree(ws, self.uid(), self.keep_root_owned)


def probe(sandbox: Bwrap, where: Path) -> str | None:
    """None when `sandbox` can run a command in a new directory under `where`, else why not."""
    if not shutil.which(sandbox.bwrap):
        return f"bubblewrap not found ({sandbox.bwrap}); install the `bubblewrap` package"
    missing = [tool for tool in ("prlimit", "setpriv") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not found (util-linux)"
    Path(where).mkdir(parents=True, exist_ok=True)
    trial_dir = Path(tempfile.mkdtemp(prefix=".sandbox-probe-", dir=where))
    trial_dir.chmod(0o755)
    try:
        ws = trial_dir / "workspace"
        ws.mkdir()
        trial = sandbox.for_workspace(ws)
        try:
            argv = trial.wrap(["/bin/sh", "-c", "echo ok > probe && cat $PWD/probe"])
            done = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=30)
        finally:
            trial.release()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    finally:
        shutil.rmtree(trial_dir, ignore_errors=True)
    if done.returncode != 0 or done.stdout.strip() != "ok":
        hint = ""
        if sandbox.as_root:
            first, last = sandbox.limits.first_uid, sandbox.limits.first_uid + sandbox.limits.uid_count - 1
            hint = (f" (commands run as a uid in {first}..{last}: the workspace's parent directories and the "
                    "Python environment must be searchable by it, and unprivileged user namespaces enabled)")
        return f"bubblewrap cannot sandbox here (exit {done.returncode}): {done.stderr.strip()[:500]}{hint}"
    return None


def choose(mode: str, sandbox: Bwrap, where: Path) -> tuple[str, str | None]:
    """Resolve `--sandbox` by probing under `where`: returns (mode that runs, warning or None).
    Raises SandboxError when `bwrap` was demanded and cannot run."""
    if mode == "none":
        return "none", None
    reason = probe(sandbox, where)
    if reason is None:
        return "bwrap", None
    if mode == "bwrap":
        raise SandboxError(f"--sandbox bwrap: {reason}")
    warning = f"SANDBOX OFF: {reason}; run_command runs unsandboxed with this server's privileges"
    logger.warning(warning)
    return "none", warning
