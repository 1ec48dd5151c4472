"""Worker processes started ahead, for evals run one after another (`evaluate(options, spares=Spares())`).

A worker's start is mostly imports (torch, CUDA, and torch.compile's for the baselines): seconds per process,
three processes per eval. With a `Spares`, an eval starts the next eval's set (a work directory, its token, two
sandboxed candidate processes and a baseline process) as soon as its own processes are up, and the next eval
takes that set instead of starting its own. A spare has run nothing but the worker's own imports: it gets its
setup (which module, which callables) only from the eval that takes it, so it is as fresh as a process started
then.

Spares are made only when the candidate is sandboxed: a spare started while another eval's candidate runs must
be out of that candidate's reach, which without bubblewrap (same user, same pid namespace) it is not. No spare
imports while an eval times: the eval waits for its spares to say `started` (`settle`) before its timing phase.
A set that waited longer than `max_idle_s`, or one of whose processes has ended, is thrown away, not used.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from jg_mcp import log
from jg_mcp.eval.processes.compile_cache import baseline_dir, baseline_env
from jg_mcp.eval.processes.isolation import prepare
from jg_mcp.eval.processes.process import CandidateGone, WorkerLaunch, WorkerProcess

_log = log.get("jg_mcp.eval.processes.spares")
COMPILE_MODULES = ("torch._dynamo", "torch._inductor.compile_fx")
"""What a spare baseline process imports ahead: torch.compile's, seconds of a compiled baseline's first call."""


@dataclass
class SpareSet:
    """One eval's processes, started ahead: they live in `work` and carry `token`."""

    work: Path
    token: str
    procs: list[WorkerProcess]
    made: float = field(default_factory=time.monotonic)

    def pop(
        self,
        role: str,
        sandboxed: bool,
        device: str,
        cache_env: dict[str, str] | None,
        covers: tuple[tuple[str, str], ...] = (),
    ) -> WorkerProcess | None:
        """A process of this set started exactly as the eval would start it (its sandbox covering the same
        libraries), or None."""
        wanted = (role, sandboxed, device, cache_env, covers)
        for proc in self.procs:
            if (proc.role, proc.sandboxed, proc.device, proc.cache_env, proc.covers) == wanted:
                self.procs.remove(proc)
                return proc
        return None

    def alive(self) -> bool:
        return all(p.proc.poll() is None for p in self.procs)

    def close(self) -> None:
        for proc in self.procs:
            proc.close()
        self.procs.clear()
        shutil.rmtree(self.work, ignore_errors=True)


class Spares:
    """At most one set started ahead; `close()` (or leaving the `with`) ends what no eval took."""

    def __init__(self, max_idle_s: float = 600.0):
        self.max_idle_s = max_idle_s
        self.idle: SpareSet | None = None
        self.taken = 0
        """How many sets evals took (the measure of what spares saved)."""

    def take(self) -> SpareSet | None:
        spare, self.idle = self.idle, None
        if spare is None:
            return None
        if time.monotonic() - spare.made > self.max_idle_s or not spare.alive():
            _log.info("spare set thrown away", idle_s=round(time.monotonic() - spare.made, 1), alive=spare.alive())
            spare.close()
            return None
        self.taken += 1
        return spare

    def prestart(
        self,
        device: str,
        timeout_s: float,
        candidates: int,
        baseline: bool,
        covers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Start the next eval's set, unless one is waiting already: its own work directory and token,
        `candidates` sandboxed candidate processes and a baseline process (with torch.compile imported ahead).
        The candidates' sandboxes cover `covers`, the running eval's stubs: an eval takes only processes whose
        sandbox covers what its own would, and the next eval is most often of the same goal (a campaign's)."""
        if self.idle is not None:
            return
        import torch
        import triton

        spare = SpareSet(Path(tempfile.mkdtemp(prefix="jg-eval-")), secrets.token_hex(16), [])
        work = spare.work
        try:
            (work / "solution").mkdir()
            (work / "cache").mkdir()
            prepare(work / "solution", work / "cache")
            for _ in range(candidates):
                spare.procs.append(
                    WorkerProcess.spawn(
                        WorkerLaunch("candidate", work, True, spare.token, timeout_s, device, covers=covers)
                    )
                )
            if baseline:
                gpu = torch.cuda.get_device_name() if device == "cuda" else None
                cache, _ = baseline_dir(torch.__version__, triton.__version__, gpu, work / "bcache")
                env = baseline_env(cache)
                launch = WorkerLaunch("baseline", work, False, spare.token, timeout_s, device, env, COMPILE_MODULES)
                spare.procs.append(WorkerProcess.spawn(launch))
        except Exception as exc:  # a favour to the next eval: never the running eval's failure
            _log.warning("spare set not started", error=f"{type(exc).__name__}: {exc}")
            spare.close()
            return
        self.idle = spare

    def settle(self) -> None:
        """Return once every waiting spare has done its imports (or is thrown away for not doing them)."""
        if self.idle is None:
            return
        try:
            for proc in self.idle.procs:
                proc.wait_started()
        except CandidateGone as gone:
            _log.info("spare set thrown away", reason=gone.finding.detail)
            self.idle.close()
            self.idle = None

    def close(self) -> None:
        if self.idle is not None:
            self.idle.close()
            self.idle = None

    def __enter__(self) -> Spares:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
