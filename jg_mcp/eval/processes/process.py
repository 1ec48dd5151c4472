"""A worker process as the harness sees it: start it (the candidate sandboxed), talk over a socket, judge silence.

The worker is a fresh interpreter (`python -m jg_mcp.eval.candidate.worker`) in its own session and process group with
stdin from /dev/null and stdout/stderr captured to a log (a candidate's bounded in size by its file size limit; only
its tail is ever read). Every message it sends is validated against the
typed protocol; one that does not validate, or a wrong one at its turn, is a `tampered` finding. An ended or
silent process becomes a finding with its reason. The worker dies with the harness (PR_SET_PDEATHSIG; under
bwrap also --die-with-parent and the pid namespace). Without bwrap, processes it leaves are found by the
eval's token in their environment and killed: only a candidate's processes carry it, each process a token of its
own under the eval's (with one token for all, on the H200 a baseline's process was stopped with the candidate's
while it was being timed and its Triton cache judged as the candidate's code, and here the correctness process's
freeze stopped the timing process, which nothing resumed).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from jg_mcp.errors import JgError
from jg_mcp.eval.native.native import NativeScan
from jg_mcp.eval.processes.compile_cache import bytecode_dir
from jg_mcp.eval.processes.isolation import CACHE_DIR, SOLUTION_DIR, bwrap_argv, filter_file, pythonpath
from jg_mcp.eval.processes.proctree import carrying, descendant, resume, running, stop_all, tree
from jg_mcp.eval.reasons import ERROR_TAIL_CHARS, Reason
from jg_mcp.eval.report import Finding
from jg_mcp.eval.wire import channel
from jg_mcp.eval.wire.messages import WORKER_MESSAGE, Bind, Bound, Setup, Started, WorkerError
from jg_mcp.live import lifeline

M = TypeVar("M", bound=BaseModel)
TAIL_BYTES = 4000
"""How much of a worker's output the report keeps (its last bytes)."""
KEPT_ENV = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LANG", "TZ", "CUDA_HOME", "TRITON_PTXAS_PATH")
"""The host's variables a worker keeps."""
CANDIDATE_ENV = ("CPATH",)
"""The host's variables only a candidate's worker keeps. `CPATH` names include directories the compiler searches
before torch's own: where the operator keeps a precompiled `torch/extension.h` (tests/tools/precompile_torch_header.py),
a C++ build of a torch extension takes about 9 core-s instead of 20; GCC uses it only where it is valid for the
build's flags, so what a build makes is the same. The baselines build nothing from it, and headers there must not
reach their compiles (torch.compile's C++ on a CPU)."""


class CandidateGone(Exception):
    """The worker ended, stopped answering or broke the protocol; carries the finding."""

    def __init__(self, finding: Finding):
        self.finding = finding
        super().__init__(finding.detail)


SETTLE_S = 0.05
"""The longest `settled_cpu_ms` waits for the worker's threads to stop running."""


@dataclass(frozen=True)
class WorkerLaunch:
    """What a worker process is started as. `sandboxed` runs it in the candidate's bubblewrap sandbox, whose compile
    caches (Triton's, and torch's extension builds, which the eval's two candidate processes share) are the eval's;
    unsandboxed, `cache_env` names its compile caches (the baselines' own), else the eval's; `covers` are the stubs
    bound over the libraries the goal forbids in its sandbox. `ahead` are the modules it imports before its setup."""

    role: str
    """candidate or baseline."""
    work: Path
    """The eval's work directory (its `solution` and `cache`; an unsandboxed worker's home and every log)."""
    sandboxed: bool
    """Whether the candidate's bubblewrap sandbox holds it."""
    token: str
    """The eval's token; the process carries one of its own under it."""
    timeout_s: float
    """How long the harness waits for any one answer."""
    device: str
    """cuda or cpu (then Triton interprets)."""
    cache_env: dict[str, str] | None = None
    """The compile caches of an unsandboxed worker (the baselines' own); None: the eval's."""
    ahead: tuple[str, ...] = ()
    """Modules imported before its setup (a spare's torch.compile)."""
    covers: tuple[tuple[str, str], ...] = ()
    """(stub, real library) pairs bound over the real files in its sandbox (jg_mcp.eval.native.stubs)."""

    def environment(self, token: str, bytecode: Path | None) -> dict[str, str]:
        """The worker's environment (less its home, which `WorkerProcess.spawn` makes when unsandboxed): `token` is
        its own, carried only by a candidate's; `bytecode` the shared compiled-bytecode directory, if any."""
        kept = KEPT_ENV + (CANDIDATE_ENV if self.role == "candidate" else ())
        env = {k: os.environ[k] for k in kept if k in os.environ}
        env |= {
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
            "PYTHONPATH": os.pathsep.join(pythonpath()),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "TRITON_INTERPRET": "0" if self.device == "cuda" else "1",
        }
        if self.role == "candidate":  # what carries it is the candidate's (stopped, judged, swept), never a baseline
            env["JG_EVAL_TOKEN"] = token
        if bytecode is not None:
            env["PYTHONPYCACHEPREFIX"] = str(bytecode)
            if not self.sandboxed:
                del env["PYTHONDONTWRITEBYTECODE"]  # a baseline's process writes it; a sandboxed candidate reads it
        if self.sandboxed:
            env |= {"HOME": "/tmp", "TMPDIR": "/tmp", "TRITON_CACHE_DIR": f"{CACHE_DIR}/triton"}
            env["TORCH_EXTENSIONS_DIR"] = f"{CACHE_DIR}/torch_extensions"
        else:
            env |= self.cache_env or {
                "TRITON_CACHE_DIR": str(self.work / "cache" / "triton"),
                "TORCH_EXTENSIONS_DIR": str(self.work / "cache" / "torch_extensions"),
            }
        return env

    def argv(self, prefix: list[str], channel_fd: int, parent: int) -> list[str]:
        """The worker's command line after `prefix` (bwrap's, or none): its channel, the pid it dies with (0: the
        sandbox's own), its device and the modules it imports ahead."""
        worker = [sys.executable, "-X", "faulthandler", "-m", "jg_mcp.eval.candidate.worker"]
        return [*prefix, *worker, str(channel_fd), str(parent), self.device, *self.ahead]


class WorkerProcess:
    """One worker, started by `spawn` (which imports torch and the `ahead` modules in it); it runs nothing of its
    role until `start(setup)`. The constructor only holds a started process's parts."""

    def __init__(self, launch: WorkerLaunch, token: str, proc: subprocess.Popen, sock: socket.socket, log_path: Path):
        self.launch = launch
        self.timeout_s = launch.timeout_s
        self.deadline: tuple[float, float] | None = None
        """The eval's own limit, set by the eval that runs this worker: (time.monotonic() at which it runs out, its
        length in seconds)."""
        self.role = launch.role
        self.sandboxed = launch.sandboxed
        self.device = launch.device
        self.cache_env = launch.cache_env
        self.covers = launch.covers
        self.ready = False
        self.started = False
        """Whether the worker said `started` (its imports done), which it does once, before its setup."""
        self.born = time.monotonic()
        self._pid: int | None = None
        self.token = token
        """This process's own token under the eval's (`carrying` the eval's finds every one, this one only this
        process's): a candidate's freeze must stop no other process of the eval, not the correctness process's
        successor, not a baseline."""
        self.frozen: list[int] | None = None
        """The pids `freeze` stopped, until `thaw`."""
        self.native: NativeScan | None = None
        """Where the native code of this worker's processes is judged (a candidate's): at every freeze."""
        self.proc = proc
        self.sock = sock
        self.log_path = log_path
        self.reader = channel.Reader(self.sock.fileno())

    @classmethod
    def spawn(cls, launch: WorkerLaunch) -> WorkerProcess:
        """Start the worker `launch` describes: its own session and process group, stdin from /dev/null, its output
        to a log in the work directory, its channel a socket pair."""
        token = f"{launch.token}.{secrets.token_hex(4)}"
        sock, theirs = socket.socketpair()
        bytecode = bytecode_dir() if launch.sandboxed or launch.role == "baseline" else None
        env = launch.environment(token, bytecode)
        if launch.sandboxed:
            rules = filter_file()
            readable = [bytecode] if bytecode is not None else []
            solution_dir, cache_dir = launch.work / "solution", launch.work / "cache"
            fd = rules.fileno() if rules else None
            prefix = bwrap_argv(solution_dir, cache_dir, env, fd, readable, launch.covers)
            cwd, parent = "/", 0
            passed = (theirs.fileno(), lifeline.read_end(), *([rules.fileno()] if rules else []))
        else:
            home = launch.work / f"home-{secrets.token_hex(3)}"
            home.mkdir()
            env |= {"HOME": str(home), "TMPDIR": str(home)}
            prefix, cwd, parent, rules, passed = [], str(home), os.getpid(), None, (theirs.fileno(),)
        log_path = launch.work / f"{launch.role}-{secrets.token_hex(4)}.log"
        with open(log_path, "wb") as out, contextlib.ExitStack() as files:
            if rules is not None:
                files.enter_context(rules)
            proc = subprocess.Popen(
                launch.argv(prefix, theirs.fileno(), parent),
                pass_fds=passed,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        theirs.close()
        return cls(launch, token, proc, sock, log_path)

    def start(self, setup: Setup) -> None:
        """Tell the worker what to run; its answer (ready, or why not) is the next `recv`. The worker's process is
        found first where it can be (its command line is the harness's until the candidate's module runs)."""
        self.find_pid()
        if self.sandboxed:
            setup = setup.model_copy(update={"module": f"{SOLUTION_DIR}/{Path(setup.module).name}"})
        try:
            self.send(setup)
        except CandidateGone:
            pass  # the process is already gone: the first recv says how it ended

    def wait_started(self) -> None:
        """Wait for `started` (a spare's imports), within the timeout; CandidateGone if it does not come."""
        if not self.started:
            self.expect(Started)

    def send(self, message: BaseModel, binding: Any = None) -> None:
        self.thaw()  # a frozen worker could not answer
        try:
            channel.send(self.sock.fileno(), message.model_dump(mode="json"))
            if binding is not None:
                binding.send_fds(self.sock)
        except OSError:
            raise CandidateGone(self._exit_finding()) from None

    def bind(self, binding: Any) -> None:
        message: Bind = binding.message()
        self.send(message, binding)
        self.expect(Bound)

    def recv(self, wanted: type | None = None) -> Any:
        """The next message, validated; anything else raises CandidateGone with the finding. The worker's first
        message, `started`, is taken here and the next one returned (unless `wanted` is Started)."""
        wait = self.timeout_s
        if self.deadline is not None:
            wait = min(wait, max(0.0, self.deadline[0] - time.monotonic()))
        try:
            raw = self.reader.recv(wait)
        except channel.ChannelTimeout:
            self.kill()
            detail = f"no answer within {self.timeout_s:.0f} s; the process was killed"
            if self.deadline is not None and wait < self.timeout_s:
                detail = (
                    f"the eval's time limit of {self.deadline[1]:.0f} s (--total-timeout) ran out while it waited "
                    f"for the {self.role} process, which was killed"
                )
            raise CandidateGone(Finding(reason=Reason.TIMEOUT, detail=detail)) from None
        except channel.ChannelClosed:
            raise CandidateGone(self._exit_finding()) from None
        except channel.Malformed as exc:
            self.kill()
            raise CandidateGone(_forged(str(exc))) from None
        try:
            message = parse(raw)
        except channel.Malformed as exc:
            self.kill()
            raise CandidateGone(_forged(str(exc))) from None
        if isinstance(message, Started):
            if self.started:
                self.kill()
                raise CandidateGone(_forged("`started` a second time"))
            self.started = True
            self.find_pid()
            return message if wanted is Started else self.recv()
        if isinstance(message, WorkerError) and self.ready:
            error = message.error[-ERROR_TAIL_CHARS:]
            what = f"the worker code in the process failed after the candidate ran: {error}"
            raise CandidateGone(Finding(reason=Reason.EXCEPTION, detail=what))
        return message

    def expect(self, kind: type[M]) -> M:
        message = self.recv(kind)
        if not isinstance(message, kind):
            self.kill()
            raise CandidateGone(_forged(f"`{getattr(message, 'event', '?')}` where `{kind.__name__}` was due"))
        return message

    def find_pid(self) -> None:
        """Remember the worker's interpreter (under bwrap not bwrap itself) by its pid, found by its command line
        while no candidate code has run (at its setup or its `started`), never again afterwards: a candidate can
        rewrite its command line."""
        if self._pid is None:
            self._pid = descendant(self.proc.pid, b"jg_mcp.eval.candidate.worker")

    def settled_cpu_ms(self) -> float:
        """`cpu_ms` once every thread of the worker has stopped running (at most SETTLE_S): the kernel adds a
        running thread's time to its process's clock when it stops (or at the next tick), so a clock read while a
        thread still runs on another core is up to a tick behind."""
        give_up = time.monotonic() + SETTLE_S
        while self._pid is not None and time.monotonic() < give_up and running(self._pid):
            time.sleep(0.0001)
        return self.cpu_ms()

    def cpu_ms(self) -> float:
        """CPU time the worker process has used, every thread including those that have ended, from the kernel's
        process CPU clock (clock_gettime on the pid's CPUCLOCK_SCHED clock, in ns): the harness's clock for the CPU
        stand-in of timing, which no code in the worker can change and which time the worker spent descheduled on
        a loaded machine does not inflate. A candidate's process whose clock cannot be read is a finding."""
        try:
            if self._pid is None:
                raise ProcessLookupError("the worker's process was not found")
            return time.clock_gettime_ns(((~self._pid) << 3) | 2) / 1e6
        except OSError as exc:
            if self.role != "candidate":
                raise JgError(f"the {self.role} process's CPU clock cannot be read: {exc}") from None
            raise CandidateGone(
                Finding(reason=Reason.TAMPERED, detail=f"the harness cannot read the process's CPU clock ({exc})")
            ) from None

    def _exit_finding(self) -> Finding:
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            return Finding(reason=Reason.TIMEOUT, detail="the process closed its channel and did not exit")
        if rc < 0 or rc > 128:
            signum = -rc if rc < 0 else rc - 128
            name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
            return Finding(reason=Reason.CRASHED, detail=f"the {self.role} process died from signal {name}")
        return Finding(
            reason=Reason.EARLY_EXIT,
            detail=f"the {self.role} process exited with status {rc} before the harness was done",
        )

    def freeze(self) -> None:
        """Stop the worker and every process it started (SIGSTOP, which no code can catch or delay), so that none
        of its code runs, on the host or queueing GPU work, while the harness times another process: the
        candidate's processes are frozen while the baselines are timed. Found as the worker's process tree (under
        bwrap every process of the sandbox is in it, orphans reparented to the sandbox's init) and, unsandboxed,
        every process carrying the eval's token. A tree that keeps running is a finding. Stopped, a candidate's
        processes have the native code they mapped judged (`native`)."""
        if self.frozen is not None or self.proc.poll() is not None:
            return

        def find() -> list[int]:
            return sorted(set(tree(self.proc.pid)) | ({*carrying(self.token)} if not self.sandboxed else set()))

        stopped = stop_all(find)
        if stopped is None:
            self.kill()
            what = f"the {self.role} process's children could not all be stopped while another process was timed"
            raise CandidateGone(Finding(reason=Reason.THREADS_LEFT, detail=what))
        self.frozen = stopped
        if self.native is not None:
            self.native.scan(stopped)

    def inspect(self) -> None:
        """Stop the worker's processes and judge the native code they loaded (a candidate's, before it is closed);
        CandidateGone if its tree cannot be stopped."""
        if self.native is None:
            return
        if self.frozen is None:
            self.freeze()  # judges as it stops them
        else:
            self.native.scan(self.frozen)

    def thaw(self) -> None:
        if self.frozen is not None:
            resume(self.frozen)
            self.frozen = None

    def kill(self) -> None:
        """Kill the process group: the worker and anything it started that is still there."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def close(self) -> str:
        """End the process and return the tail of what it printed (read from the end: the log may be as large as
        the worker's file size limit, `jg_mcp.eval.candidate.worker.MAX_FILE_BYTES`)."""
        self.kill()
        self.sock.close()
        return log_tail(self.log_path, TAIL_BYTES)


def log_tail(path: Path, most: int) -> str:
    """The last `most` bytes of a log, decoded; only those are read, whatever the file's size."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - most))
            return f.read(most).decode(errors="replace")
    except OSError:
        return ""


def parse(raw: dict[str, Any]) -> Any:
    """A decoded frame as a worker message; anything that does not validate is `Malformed`, whatever fails (the
    frame may be the candidate's)."""
    try:
        return WORKER_MESSAGE.validate_python(raw)
    except ValidationError as exc:
        raise channel.Malformed(f"a message that is not in the protocol ({exc.error_count()} errors)") from None
    except Exception as exc:  # the boundary of untrusted data: no failure of validation escapes
        raise channel.Malformed(f"a message that cannot be validated ({type(exc).__name__})") from None


def _forged(what: str) -> Finding:
    return Finding(reason=Reason.TAMPERED, detail=f"result channel: {what} (a forged or corrupted message)")
