"""The agent's bubblewrap sandbox: `Bwrap`, the `Sandbox` (`jg_mcp.live.sandbox`) that runs each command of
run_command under bubblewrap, resource limits and a scrubbed environment (`environment.py`).

`Bwrap` runs each command in fresh pid, net, ipc and uts namespaces (and a user namespace when the server is
not root) on an empty root that holds only what a kernel developer needs, read-only: /usr and the
/bin, /sbin, /lib* links or directories, /etc, /sys (GPU topology), this Python's environment
and the directories the kept environment names (CUDA_HOME, LD_LIBRARY_PATH). The rest of the host is
absent: /opt, /run, /var, /home, the host's /tmp and every unix socket in them, the goal files, the
transcripts, other sessions' workspaces (hidden directories inside a bound one are covered by empty
read-only tmpfs mounts). The workspace is bound read-write, its root-owned goal copies (reference.py)
read-only on top, so they can be neither changed nor deleted; /tmp, /dev/shm and HOME are private
tmpfs mounts of a bounded size; a per-session cache directory (Triton, pip) persists; there is no
network. GPU device nodes are passed through. bwrap reads its options from a memfd (`--args FD`), so
its command line, which every process inside can read as /proc/1/cmdline, names no host path. A seccomp
filter refuses new user namespaces (`jg_mcp.live.seccomp`): in one, a command could mount a tmpfs past the
caps below; and the kernel keyrings, which are not namespaced (the server's session keyring, the uid's user
keyring that the next session with the uid would read).

Limits: RLIMIT_CORE is 1, soft and hard, and the seccomp filter refuses to change it: no command dumps core, and
none reaches a host's core helper (for a core_pattern that pipes to one, which the kernel runs as root outside the
sandbox, it skips the dump only at exactly 1; 0 would not stop it). RLIMIT_FSIZE caps every file a command
writes, `--size` each tmpfs; the workspace's total is bounded by a file system of its own
(`jg_mcp.live.workspace_fs`, made by the session). RLIMIT_NPROC caps processes and threads; the kernel never
applies it to root, so a root server has bwrap drop the command to an unprivileged uid
(`setpriv`, after the mounts are made), one per sandbox, unique across the host's jg-mcp servers
(`jg_mcp.live.uids`): one session's fork bomb exhausts its own cap, not the others'. As root the workspace
is handed to that uid with mode 0700. (A server that is not root runs commands under its own uid,
so its sessions share one cap.) There is no memory cap; a command is what the OOM killer takes first
(`jg_mcp.live.oom`), not the server.

The sandbox's mounts are nosuid, the host's are not: a setuid copy of a shell that a command leaves in a workspace
it opened to everyone would hand any local user the sandbox uid, which the next session on the host is given. So
whatever ends a command's processes (it returns, its timeout kills it, the client cancels), before its result goes
back the workspace and the compile cache are sealed (`jg_mcp.live.seal`): 0700 again, and nothing in them setuid or
setgid.
The hand-over to the uid before each command and the seal after it walk with the scan's bounded `Walk`, so neither
costs more than a scan whatever a command leaves; what they could not reach is said in the command's result. What
the hand-over misses stays root's (only less writable to commands); what the seal misses lies under the 0700 root,
which only the uid and root can enter. Releasing the sandbox seals them once more; what a killed server could not
seal, the next sandbox handed the same uid seals before its first command (the uid's lock file names the
directories its holder gave it, `UidPool.note`).

Inside, the command runs under a reaper that reports the signal that killed it (`jg_mcp.live.reaper`): bwrap's own
status, 128+N, cannot tell it from an exit with that number.

Nothing a command starts outlives it, nor the server, however either ends. The sandbox's pid 1 ends when its
command returns, and the kernel then kills every process in its pid namespace. The runner's kill (a timeout, a
cancelled call, the session's close) is a SIGKILL to the process group of bwrap's outer process, which holds the
sandbox's pid 1 too (hence no `--new-session`: `jg_mcp.live.sandbox.NAMESPACES`), so pid 1 dies with it at whatever
point of its start it is. The server's own death: bwrap's `--die-with-parent` binds pid 1 to bwrap's outer process
only once pid 1 is up, after it has forked the command, and the lifeline has let the command run by then (the server
was alive). So as root, bwrap runs as pid 1 of a pid namespace of its own (`OWN_PID_NAMESPACE`), whose maker
(`unshare`) dies with the server (`jg_mcp.live.lifeline.outer`) and kills bwrap when it dies (`--kill-child`), each
bound before bwrap starts: bwrap's death takes down every process below it, the sandbox's included. (A server that is
not root cannot make that namespace; killed in the moment between a command's start and pid 1's binding, it leaves
that command running.) A server killed while bwrap is still starting takes the sandbox down too, or the command
never runs (`jg_mcp.live.lifeline`).
"""

from __future__ import annotations

import os
import shutil
import sys
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path

from jg_mcp import log
from jg_mcp.live import lifeline, oom, reaper, seccomp
from jg_mcp.live.environment import PATH_VARIABLES, SANDBOX_CACHE, SANDBOX_HOME, sandbox_env
from jg_mcp.live.protections import Protection, Protections
from jg_mcp.live.runner import Argv
from jg_mcp.live.sandbox import NAMESPACES, SYSTEM_DIRS, SandboxLimits, gpu_devices
from jg_mcp.live.seal import seal
from jg_mcp.live.uids import UIDS, UidPool, chown_tree, end_holders

logger = log.get("jg_mcp.live.sandbox")
OWN_PID_NAMESPACE = ("unshare", "--pid", "--kill-child=KILL", "--")
"""bwrap started as pid 1 of a pid namespace of its own, whose creator kills it on its own death: see the module
docstring (needs CAP_SYS_ADMIN, so a root server only)."""


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def python_dirs() -> list[Path]:
    """Where this interpreter and its environment live (the agent runs the same Python)."""
    return sorted({Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()})


def named_dirs(env: Mapping[str, str]) -> list[Path]:
    """The existing absolute paths that the toolchain variables of `env` name (CUDA_HOME, LD_LIBRARY_PATH)."""
    found = []
    for name in PATH_VARIABLES:
        for item in env.get(name, "").split(os.pathsep):
            if os.path.isabs(item) and os.path.exists(item):
                found.append(Path(item).resolve())
    return found


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
        self.limits: SandboxLimits = limits or SandboxLimits()
        self.keep_root_owned = set(keep_root_owned)
        self.bwrap = bwrap or shutil.which("bwrap") or "bwrap"
        self.as_root = os.geteuid() == 0
        self.env = sandbox_env(os.environ)
        """The environment inside; bwrap clears the rest."""
        self.uids = uids
        self.filtered = True
        """Whether commands get the seccomp filter: only the operator turns it off (`--no-seccomp`)."""
        self.asked = ["--sandbox bwrap"]
        """The options that chose this sandbox (`jg_mcp.live.sandbox_probe.choose` sets them), for `protections`."""
        self._uid: int | None = None
        self._give_back: weakref.finalize | None = None

    def for_workspace(self, workspace: Path) -> Bwrap:
        """The same sandbox around another workspace (one per session). As root it takes its uid now,
        so a full pool fails the session's start rather than its first command."""
        sandbox = Bwrap(workspace, self.hidden, self.limits, self.keep_root_owned, self.bwrap, self.uids)
        sandbox.filtered, sandbox.asked = self.filtered, self.asked
        if sandbox.as_root:
            sandbox.uid()
        return sandbox

    @property
    def protections(self) -> Protections:
        """The sandbox; the filter unless the operator waived it (or this machine has none: then it is missing, and
        `choose` refuses to start unless waived); as root, a uid of its own."""
        in_force: list[Protection] = ["sandbox"]
        if self.filtered and seccomp.program() is not None:
            in_force.append("seccomp")
        if self.as_root:
            in_force.append("uid_separation")
        waived: list[Protection] = [] if self.filtered else ["seccomp"]
        return Protections(asked=self.asked, in_force=in_force, waived=waived, server_root=self.as_root)

    def uid(self) -> int:
        """The uid (and gid) this sandbox's commands run as under a root server; taken on first use. What an
        earlier holder of the uid left unsealed (its server was killed) is sealed first; the uid's lock file then
        names this sandbox's directories until `release`."""
        if self._uid is None:
            uid = self.uids.take(self.limits.first_uid, self.limits.uid_count)
            self._give_back = weakref.finalize(self, self.uids.give_back, uid)
            for left in self.uids.noted(uid):
                if left.is_dir() and not left.is_symlink() and (missed := seal(left)):
                    logger.warning("what an earlier holder of the uid left could not be sealed whole", missed=missed)
            self.uids.note(uid, self.holdings())
            self._uid = uid
        return self._uid

    def holdings(self) -> list[Path]:
        """The host directories this sandbox's uid can write: the workspace and the compile cache."""
        ws = self.workspace.resolve()
        return [ws, self._cache_path(ws)]

    def seal(self) -> list[str]:
        """`seal` the workspace and the compile cache (those that exist): once each command's processes are gone,
        and at release. Returns a sentence for the agent when a walk could not reach everything, else nothing."""
        missed = []
        for root in self.holdings():
            if root.is_dir() and not root.is_symlink():
                missed += seal(root)
        if not missed:
            return []
        return [
            f"the workspace could not be sealed whole after the command ({'; '.join(missed)}): setuid or setgid "
            "bits may be left where the walk did not reach (the workspace stays 0700, so no other user of the host "
            "reaches them). Remove numerous or deep directories"
        ]

    def release(self) -> None:
        """End every process still holding the uid, seal the workspace, give the uid back; a later command takes a
        new one. Safe to call twice."""
        if self._uid is not None:
            end_holders(self._uid)
        if missed := self.seal():
            logger.warning("a released sandbox's workspace could not be sealed whole", missed=missed)
        if self._give_back is not None and self._uid is not None:
            self.uids.note(self._uid, [])
            self._give_back()
        self._uid = self._give_back = None

    def wrap(self, argv: list[str]) -> Argv:
        """The sandboxed argv for `argv`: bwrap's options go through a memfd it inherits. As root, first
        hands the workspace to the sandbox uid."""
        ws = self.workspace.resolve()
        lim = self.limits
        tmpfs = ["--perms", "1777", "--size", str(lim.max_tmp_bytes), "--tmpfs"]
        options = [
            *NAMESPACES,
            "--hostname",
            "sandbox",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            *tmpfs,
            "/dev/shm",
            *tmpfs,
            "/tmp",
            "--perms",
            "1777",
            "--dir",
            SANDBOX_HOME,
            "--bind",
            str(self._cache_dir(ws)),
            SANDBOX_CACHE,
        ]
        for dev in gpu_devices():
            options += ["--dev-bind-try", dev, dev]
        notes = self._prepare(ws)
        options += self._mounts(ws)
        options += ["--remount-ro", "/", "--chdir", str(ws), "--clearenv"]
        for key, value in self.env.items():
            options += ["--setenv", key, value]
        files = [f for f in [seccomp.program_file() if self.filtered else None] if f is not None]
        options += [o for f in files for o in ("--seccomp", str(f.fileno()))]
        args_file = open(os.memfd_create("bwrap-args", os.MFD_CLOEXEC), "w+b")
        args_file.write(b"".join(os.fsencode(o) + b"\0" for o in options))
        args_file.flush()
        args_file.seek(0)
        limits = ["prlimit", f"--nproc={lim.max_processes}", f"--fsize={lim.max_file_bytes}", "--core=1"]
        head = lifeline.outer(oom.first([*limits, *(OWN_PID_NAMESPACE if self.as_root else ()), self.bwrap]))
        head += ["--args", str(args_file.fileno())]
        if self.as_root:
            uid = self.uid()
            head += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
        status = reaper.Status.open()
        inner = lifeline.inner(reaper.reaped(argv, status.write_fd))
        wrapped = Argv(
            [*head, "--", *inner], [args_file, *files, status.write_end], [lifeline.read_end()], contained=True
        )
        wrapped.notes += notes
        wrapped.ended = lambda: wrapped.notes.extend(self.seal())
        wrapped.killed_by = status.signal
        return wrapped

    def _mounts(self, ws: Path) -> list[str]:
        """Bind the system directories, the Python environment and the named toolchain directories
        read-only; cover hidden directories inside them with read-only tmpfs mounts; then bind back what
        lies under a cover, the workspace read-write and its root-owned files read-only on top."""
        wanted = [Path(d) for d in SYSTEM_DIRS if os.path.lexists(d)]
        links = [d for d in wanted if d.is_symlink()]
        # this host's toolchain, never the commands' `env`: a replay takes that from a transcript, whose writer chose it
        named = [d for d in named_dirs(sandbox_env(os.environ)) if not any(_inside(d, h) for h in self.hidden)]
        roots = [*(d for d in wanted if d not in links), *python_dirs(), *named]
        masked = [h for h in self.hidden if h.is_dir() and not _inside(h, ws) and any(_inside(h, r) for r in roots)]

        def needed(root: Path) -> bool:
            covered = [r for r in roots if r != root and _inside(root, r)]
            hiding = [m for m in masked if _inside(root, m)]
            return (not covered or bool(hiding)) and root not in masked

        keep = [
            ws / name for name in sorted(self.keep_root_owned) if (ws / name).is_file() and not (ws / name).is_symlink()
        ]
        plan = [(r, "--ro-bind") for r in dict.fromkeys(roots) if needed(r)]
        plan += [(m, "--tmpfs") for m in masked] + [(ws, "--bind")] + [(k, "--ro-bind") for k in keep]
        from_host = [p for p, how in plan if how != "--tmpfs"]
        args: list[str] = []
        for link in links:
            args += ["--symlink", os.readlink(link), str(link)]
        made: set[Path] = set()
        for path, how in sorted(plan, key=lambda p: len(p[0].parts)):
            for parent in reversed(path.parents[:-1]):
                # bwrap would make a missing parent 0700: make it searchable, unless the host's is mounted
                mounted = max(
                    (m for m in [*from_host, *masked, Path("/tmp")] if _inside(parent, m)),
                    key=lambda m: len(m.parts),
                    default=None,
                )
                if parent not in made and mounted not in from_host:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            args += [how, str(path)] if how == "--tmpfs" else [how, str(path), str(path)]
        for path in masked:
            args += ["--remount-ro", str(path)]
        return args

    def _prepare(self, ws: Path) -> list[str]:
        """Make the workspace private (0700). As root, hand it to this sandbox's uid, but for the root-owned
        files named in keep_root_owned: a bounded walk; returns a sentence for the agent when it could not reach
        everything (what it did not reach keeps its owner: it can only be less writable to commands)."""
        notes = []
        if self.as_root and (missed := chown_tree(ws, self.uid(), self.keep_root_owned)):
            notes.append(
                f"the workspace could not be handed to the sandbox's uid whole before the command ({'; '.join(missed)})"
                ": files written with write_file where the walk did not reach may be read-only to commands. Remove "
                "numerous or deep directories"
            )
        os.chmod(ws, 0o700)
        return notes

    @staticmethod
    def _cache_path(ws: Path) -> Path:
        return ws.parent / f".{ws.name}.cache"

    def _cache_dir(self, ws: Path) -> Path:
        """The session's compile caches (Triton, pip, ...), kept across commands beside the workspace
        and outside it, so cached binaries are neither recorded nor part of the solution. As root it
        belongs to this sandbox's uid (handed over whole when an earlier sandbox's uid owned it)."""
        cache = self._cache_path(ws)
        cache.mkdir(mode=0o700, exist_ok=True)
        if self.as_root and cache.stat().st_uid != self.uid() and (missed := chown_tree(cache, self.uid())):
            logger.warning("the compile cache could not be handed to the sandbox's uid whole", missed=missed)
        return cache
