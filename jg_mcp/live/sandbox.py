"""The OS sandbox around run_command, as a seam: `Sandbox`, where commands run. `wrap(argv)` gives the argv that
runs a command inside, `env` the environment the command sees, `limits` what it runs under (None: none),
`protections` what protects it. `NoSandbox` runs commands as they are; `Bwrap` (`jg_mcp.live.bwrap`) runs each in
bubblewrap, under `SandboxLimits`.

Here too is what every bubblewrap sandbox on the host shares, the agent's (`Bwrap`) and the eval's candidate's
(`jg_mcp.eval.processes.isolation`): its namespaces (`NAMESPACES`), the host's system directories it shows
(`SYSTEM_DIRS`) and the GPU device nodes it passes through (`gpu_devices`).
"""

from __future__ import annotations

import glob
import inspect
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from jg_mcp.live.protections import Protections, unsandboxed
from jg_mcp.live.runner import command_env
from jg_mcp.models import Strict

MODES = ("auto", "bwrap", "none")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
"""What of the host's root the sandbox shows (read-only); /etc whole, since the toolchain reads much of it
(ld.so.cache, alternatives, passwd, ssl, nvidia icd files) and what in it is secret is not world-readable.
Not /opt: a host keeps anything there (guides, package mirrors, other tools), which the goal-only condition
does not hand out; a toolchain under /opt is bound when this Python lives there or a kept variable names it."""
NAMESPACES = (
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
)
"""bwrap's isolation of every sandbox, the agent's commands and the eval's candidate alike: its own pid, network,
IPC, hostname and cgroup namespaces, killed with its parent.

Not `--new-session`: bwrap's setsid() would move the sandbox's pid 1 out of the process group its caller kills, and
pid 1 binds itself to bwrap's outer process (--die-with-parent) only after that, so a kill landing in between (a
call cancelled or timed out as its sandbox starts) would end bwrap's outer process alone and leave pid 1 orphaned,
the command running. In the caller's group, pid 1 dies with the group's SIGKILL, and every process of the sandbox
with it. Both callers start bwrap in a new session of their own (the runner's and the eval's `start_new_session`), with
stdin from /dev/null: the sandbox has no controlling terminal to push input into."""


class SandboxLimits(Strict):
    max_processes: int = 1024
    """RLIMIT_NPROC: processes and threads of one session's sandbox uid (as root); stops fork bombs."""
    max_file_bytes: int = 8 * 1024**3
    """RLIMIT_FSIZE: the largest file a command may write; a larger write gets SIGXFSZ/EFBIG."""
    max_tmp_bytes: int = 4 * 1024**3
    """The size of each of the sandbox's tmpfs mounts (/tmp with HOME, and /dev/shm): a write past it
    gets ENOSPC. They live in memory for the length of one command."""
    max_workspace_bytes: int = 1024**3
    """The workspace's quota: the size of the file system of its own that holds the workspace and the compile
    cache (jg_mcp.live.workspace_fs), reserved on the host's disk when the session starts, so each live session
    takes this much of it (32 HTTP sessions 32 GiB; the MCP conformance suite opens 30 and leaves them to the idle
    timeout); without one (`serve --unbounded-workspace`), checked after each command, whose result then carries a
    notice."""
    first_uid: int = 61000
    """The first unprivileged uid (and gid) commands run as when the server runs as root; each live
    sandbox on the host takes its own from first_uid .. first_uid + uid_count - 1."""
    uid_count: int = 184
    """How many uids the sandboxes may take: the most sandboxed sessions served at once as root. The
    default range ends below systemd's DynamicUser range (61184-65519)."""


@runtime_checkable
class Sandbox(Protocol):
    """Where run_command's commands run."""

    @property
    def env(self) -> dict[str, str]:
        """The environment commands see."""
        ...

    @property
    def limits(self) -> SandboxLimits | None:
        """The limits they run under; None for none."""
        ...

    @property
    def protections(self) -> Protections:
        """What protects the commands, and what the operator waived (the transcript header records it)."""
        ...

    def wrap(self, argv: list[str]) -> list[str]:
        """The argv that runs `argv` inside (an `Argv` when the process must inherit files)."""
        ...

    def release(self) -> None:
        """Give back what the sandbox holds (a uid); safe to call twice."""
        ...


class NoSandbox:
    """Commands run as they are, with the server's privileges and environment (this Python first on PATH).
    `protections` says who chose that: made without them, a NoSandbox is its maker's explicit choice (as
    `--sandbox none`); serve passes those of an `--sandbox auto` that found no bubblewrap, which waive nothing."""

    limits: SandboxLimits | None = None

    def __init__(self, env: dict[str, str] | None = None, protections: Protections | None = None):
        self.env = env if env is not None else command_env()
        self.protections = protections or unsandboxed(["--sandbox none"])

    def wrap(self, argv: list[str]) -> list[str]:
        return argv

    def release(self) -> None:
        """Nothing to give back."""


def sandbox_of(given: Sandbox | Callable[[list[str]], list[str]] | None) -> Sandbox:
    """The Sandbox a caller gave: None is NoSandbox(); a Sandbox's bound `wrap` (what callers written before
    the Protocol pass) is that Sandbox. Anything else is refused: its environment would be unknown."""
    if given is None:
        return NoSandbox()
    if isinstance(given, Sandbox):
        return given
    if inspect.ismethod(given) and isinstance(given.__self__, Sandbox) and given.__name__ == "wrap":
        return given.__self__
    raise TypeError(f"not a Sandbox: {given!r}")


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri"))
