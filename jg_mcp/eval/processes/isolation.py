"""Where a worker process runs: the candidate inside bubblewrap when it works here, else a plain process whose
missing protections the report names.

The candidate's sandbox: its own pid, net, ipc and uts namespaces (nothing it starts outlives it; no network;
no shared memory with other processes), an empty read-only root with only the system directories, this Python
environment and the jg_mcp package bound read-only (no workspace, goals, reports or other evals to see), a
private tmpfs /tmp (its cwd and HOME) and /dev/shm, GPU device nodes, and as root an unprivileged uid.
The per-eval compile cache is the one writable directory it shares with the eval's other candidate process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

import jg_mcp
from jg_mcp.eval.report import Isolation
from jg_mcp.live import lifeline, oom, seccomp
from jg_mcp.live.sandbox import NAMESPACES, SYSTEM_DIRS, gpu_devices
from jg_mcp.live.sandbox_probe import probe_place

NOBODY = 65534
TMP_BYTES = 4 * 1024**3
"""The size of each of the candidate's tmpfs mounts (/tmp, /dev/shm): memory, which unbounded could take the host's."""
MAX_PROCESSES = 4096
"""RLIMIT_NPROC of the candidate's uid (as root, the unprivileged NOBODY): a fork bomb stops here. It counts threads,
and every eval's candidates share the uid: room for several evals' torch and Triton threads. Not set when the
harness is not root: the cap would count the user's own processes."""
SOLUTION_DIR = "/jg/solution"
CACHE_DIR = "/jg/cache"
UNSANDBOXED = [
    "pid namespace: processes the candidate starts can outlive it (those still carrying the eval's token "
    "in their environment are killed at the end; one started with a cleared environment and its own session "
    "escapes that sweep and outlives the eval)",
    "signals and /proc of other processes: the candidate can stop or signal the harness (SIGSTOP hangs it past "
    "every timeout) and reach the baselines' process and its memory",
    "filesystem view: the candidate can read what this user can (workspace, goals, earlier reports)",
    "private /tmp and /dev/shm: the candidate can write where other processes read",
    "network namespace: the candidate can reach the network",
    "the baselines' compile and bytecode caches (jg_mcp/eval/processes/compile_cache.py): the candidate can write "
    "kernels and Python bytecode that this and later evals' baselines load",
]


def package_root() -> Path:
    """The directory holding the jg_mcp package (what the worker needs on its PYTHONPATH)."""
    return Path(jg_mcp.__file__).resolve().parent.parent


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def pythonpath() -> list[str]:
    """The worker's PYTHONPATH: the jg_mcp checkout's root, then this process's own PYTHONPATH entries."""
    return [str(package_root()), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]


def python_binds() -> list[Path]:
    """Read-only binds that make this interpreter and its packages importable: the prefixes, the site-packages
    directories and this process's PYTHONPATH entries whole (a wheelhouse unpacked with `pip --target`), of the
    jg_mcp checkout only the package itself (not its goals or eval data), and of any other sys.path directory (a
    script's own directory, often /tmp or a home) or a PYTHONPATH entry that is such a shared place, only the
    top-level modules this process imported from it, never the directory itself."""
    package = Path(jg_mcp.__file__).resolve().parent
    checkout = package.parent
    shared = {Path(p).resolve() for p in ("/", "/tmp", "/var/tmp", "/dev/shm", str(Path.home()))}
    given = {Path(p).resolve() for p in pythonpath()[1:]} - shared
    wanted = [Path(sys.prefix), Path(sys.base_prefix)]
    for entry in sys.path:
        p = Path(entry or ".").resolve()
        if {"site-packages", "dist-packages"} & set(p.parts):
            wanted.append(p)
        elif not _inside(p, checkout):
            wanted += [p] if p in given else _imported_from(p)
    binds: list[Path] = [package]
    for p in (w.resolve() for w in wanted):
        if not p.exists() or _inside(checkout, p) or any(_inside(p, b) for b in binds):
            continue
        if any(_inside(p, Path(s)) for s in SYSTEM_DIRS if Path(s).is_dir()):
            continue
        binds.append(p)
    return sorted(set(binds), key=lambda p: len(p.parts))


def _imported_from(directory: Path) -> list[Path]:
    """The files and package directories of top-level modules this process imported from `directory`."""
    found = []
    # dict.copy takes the entries in one step under the GIL; iterating the live dict, even into a list, can let
    # another thread of this process (another eval's) import between two items, and then it raises
    for name, module in sys.modules.copy().items():
        file = getattr(module, "__file__", None)
        if "." in name or name == "__main__" or not file:
            continue
        f = Path(file).resolve()
        if f.parent == directory:
            found.append(f)
        elif f.name == "__init__.py" and f.parent.parent == directory:
            found.append(f.parent)
    return found


BLOCKER = "hidden_package.py"
"""The file bound over each hidden package's `__init__.py` (and over a hidden top-level module): importing it raises."""
BLOCKER_TEXT = 'raise ImportError("this kernel library is hidden from solutions: write your own kernel")\n'


def hidden_packages() -> list[Path]:
    """Where the kernel libraries a solution may not use (jg_mcp.policy.open_policy.KERNEL_LIBRARIES) lie in this Python
    environment: each top-level package directory or module file of those distributions, and of those module names
    wherever the import system finds them. The candidate's sandbox hides each one, so no spelling of an import (nor
    a path) reaches their kernels. Looked up once per import path (50-75 ms of reading every distribution's files
    on a small environment, for every worker started otherwise)."""
    return list(_hidden_packages(tuple(sys.path)))


@functools.cache
def _hidden_packages(path: tuple[str, ...]) -> tuple[Path, ...]:
    import importlib.metadata
    import importlib.util

    from jg_mcp.policy.open_policy import KERNEL_LIBRARIES

    found: set[Path] = set()
    for name in KERNEL_LIBRARIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and spec.origin not in ("built-in", "frozen"):
            origin = Path(spec.origin)
            found.add(origin.parent if origin.name == "__init__.py" else origin)
        elif spec is not None and spec.submodule_search_locations:
            found.update(Path(p) for p in spec.submodule_search_locations)
    wanted = {n.replace("_", "-") for n in KERNEL_LIBRARIES}
    for dist in importlib.metadata.distributions():
        if (dist.metadata["Name"] or "").lower().replace("_", "-") not in wanted:
            continue
        for file in dist.files or []:
            top = file.parts[0]
            if top.endswith((".dist-info", ".egg-info", ".data")) or top == "..":
                continue
            found.add(Path(str(dist.locate_file(top))))
    return tuple(sorted(p for p in found if p.exists()))


def hide_args(paths: list[Path], blocker: Path) -> list[str]:
    """bwrap arguments that hide `paths`: a directory becomes an empty read-only tmpfs whose `__init__.py` raises, a
    file is covered by that raising module. Read-only because the tmpfs lies under a trusted root (site-packages)
    and, under a user namespace, belongs to the candidate: a library it left there would pass for the host's own
    code (`jg_mcp.eval.native`). Without `blocker` written (`prepare` writes it), nothing is hidden."""
    if not paths:
        return []
    args: list[str] = []
    for p in paths:
        if p.is_dir():
            args += ["--perms", "0555", "--tmpfs", str(p), "--ro-bind", str(blocker), str(p / "__init__.py")]
            args += ["--remount-ro", str(p)]
        else:
            args += ["--ro-bind", str(blocker), str(p)]
    return args


def launcher() -> str:
    """The bubblewrap executable that starts the candidate's sandbox: bwrap on the harness's PATH."""
    return shutil.which("bwrap") or "bwrap"


def bwrap_argv(
    solution_dir: Path,
    cache_dir: Path,
    env: dict[str, str],
    rules: int | None = None,
    readable: list[Path] | tuple[Path, ...] = (),
    covers: tuple[tuple[str, str], ...] = (),
) -> list[str]:
    """The bubblewrap prefix that runs a command as the candidate's sandbox (see the module docstring); the
    process gets `lifeline.read_end()`, so it runs only while the harness lives, and `rules`, the descriptor of a
    fresh `seccomp.program_file()` (no new user namespace: in one the candidate could mount memory past its caps;
    no kernel keyrings: the harness's session keyring, and the user keyring every candidate's uid shares; the core
    limit, 1, kept: a crash never reaches the host's core helper).
    `readable` directories are bound read-only at their own paths (the workers' bytecode); each (stub, real) pair of
    `covers` binds the stub over the real file."""
    capped = ["prlimit", "--core=1", *([f"--nproc={MAX_PROCESSES}"] if os.geteuid() == 0 else [])]
    args = lifeline.outer(oom.first([*capped, launcher(), *NAMESPACES, "--hostname", "candidate"]))
    if rules is not None:
        args += ["--seccomp", str(rules)]
    for d in SYSTEM_DIRS:
        args += ["--ro-bind-try", d, d]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(TMP_BYTES),
        "--tmpfs",
        "/tmp",
        "--perms",
        "1777",
        "--size",
        str(TMP_BYTES),
        "--tmpfs",
        "/dev/shm",
    ]
    made: set[Path] = {Path("/tmp")}
    for p in [*python_binds(), *readable]:
        for parent in [q for q in reversed(p.parents) if q != Path("/") and q not in made]:
            args += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
        args += ["--ro-bind", str(p), str(p)]
    for dev in gpu_devices():
        args += ["--dev-bind-try", dev, dev]
    args += hide_args(hidden_packages(), solution_dir.parent / BLOCKER)
    for stub, real in covers:  # libraries the goal forbids, covered by stubs that fail (jg_mcp.eval.native.stubs)
        args += ["--ro-bind", stub, real]
    args += [
        "--perms",
        "0755",
        "--dir",
        "/jg",
        "--ro-bind",
        str(solution_dir),
        SOLUTION_DIR,
        "--bind",
        str(cache_dir),
        CACHE_DIR,
        "--remount-ro",
        "/",
        "--chdir",
        "/tmp",
        "--clearenv",
    ]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args.append("--")
    if os.geteuid() == 0:
        args += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--no-new-privs"]
    return args + lifeline.inner([])


UNFILTERED = (
    "the seccomp filter (isolation bwrap-unfiltered): the candidate could make a user namespace and mount memory "
    "past its sandbox's tmpfs caps, use kernel keyrings, and lower its core limit so that a crash reaches the "
    "host's core helper"
)
FILTERED = [True]
"""Whether the candidate's sandbox gets the seccomp filter: only `choose_isolation("bwrap-unfiltered")` turns it
off (and names it missing)."""


def filter_file() -> BinaryIO | None:
    """A fresh `seccomp.program_file()` for one candidate sandbox, or None where there is none or it cannot load."""
    return seccomp.program_file() if FILTERED[0] else None


@functools.cache
def bwrap_problem(filtered: bool = True) -> str | None:
    """None when bubblewrap can run the candidate's sandbox here (with the seccomp filter unless not `filtered`),
    else why not (probed once per process)."""
    if filtered and seccomp.program() is None:
        return "this machine has no seccomp filter (jg_mcp.live.seccomp knows x86_64 and aarch64)"
    was, FILTERED[0] = FILTERED[0], filtered
    try:
        return _bwrap_problem()
    finally:
        FILTERED[0] = was


def _bwrap_problem() -> str | None:
    if not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed"
    if not shutil.which("prlimit") or (os.geteuid() == 0 and not shutil.which("setpriv")):
        return "setpriv or prlimit (util-linux) is not installed"
    # private (0700), never a name planted beforehand, on a memory file system where there is one
    probe = Path(tempfile.mkdtemp(prefix="jg-eval-probe-", dir=probe_place(Path(tempfile.gettempdir()))))
    try:
        (probe / "solution").mkdir()
        (probe / "cache").mkdir()
        prepare(probe / "solution", probe / "cache")
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(pythonpath())}
        with contextlib.ExitStack() as files:
            rules = filter_file()
            fds = [lifeline.read_end()]
            if rules is not None:
                fds.append(files.enter_context(rules).fileno())
            argv = bwrap_argv(probe / "solution", probe / "cache", env, fds[1] if rules else None)
            done = subprocess.run(
                [*argv, sys.executable, "-c", "import jg_mcp.eval.wire.messages; print('ok')"],
                capture_output=True,
                text=True,
                timeout=60,
                pass_fds=fds,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if done.returncode != 0 or done.stdout.strip() != "ok":
        return f"bubblewrap cannot run the candidate here (exit {done.returncode}): {done.stderr.strip()[-400:]}"
    return None


def prepare(solution_dir: Path, cache_dir: Path) -> None:
    """Make the solution readable and the cache writable by the sandbox's unprivileged uid, and write the module that
    stands in for hidden kernel libraries (`hide_args`) beside them."""
    solution_dir.chmod(0o755)
    for f in solution_dir.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o444)
    blocker = solution_dir.parent / BLOCKER
    if not blocker.exists():  # a spare's work has it already
        blocker.write_text(BLOCKER_TEXT)
        blocker.chmod(0o444)
    if os.geteuid() == 0:
        os.chown(cache_dir, NOBODY, NOBODY)
    cache_dir.chmod(0o700)


def choose_isolation(mode: str) -> Isolation:
    """Resolve the `isolation` option, failing closed: `bwrap` demands the sandbox with its seccomp filter,
    `bwrap-unfiltered` the sandbox without the filter, `auto` the sandbox with the filter, or none only where
    bubblewrap is not installed and the harness is not root. Anything else that stops the sandbox raises JgError,
    one line naming the choice that runs otherwise."""
    from jg_mcp.errors import JgError

    if mode == "none":
        return Isolation(sandbox="none", missing=UNSANDBOXED, detail="isolation turned off (--isolation none)")
    if not shutil.which("bwrap") and mode == "auto" and os.geteuid() != 0:
        return Isolation(sandbox="none", missing=UNSANDBOXED, detail="bubblewrap (bwrap) is not installed")
    filtered = mode != "bwrap-unfiltered"
    problem = bwrap_problem(filtered)
    FILTERED[0] = filtered
    if problem is None:
        return Isolation(sandbox="bwrap", missing=[] if filtered else [UNFILTERED])
    if filtered and bwrap_problem(False) is None:
        problem = (
            f"bubblewrap cannot load the seccomp filter here ({problem}); isolation bwrap-unfiltered runs it without"
        )
    problem, as_root = " ".join(problem.split()), " as root" if os.geteuid() == 0 else ""
    raise JgError(
        f"--isolation {mode}{as_root}: {problem}: the eval will not run the candidate unsandboxed instead; "
        "isolation none runs it as a plain process with this user's privileges"
    )
