"""Executing a campaign's runs: locally, one run per GPU (or CPU slot) at a time, or as Ray tasks.

Each run is a worker subprocess (`python -m jg_mcp.campaign.run`) in its own process group, killed with it
at the per-run timeout; a run that ends without a run.json gets one stating why. Finished runs (run.json
present) are skipped, so a killed campaign resumes where it stopped. Progress goes to stderr, one line per
event (a carriage-return status line only on a terminal).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from jg_mcp.campaign import REASON_CHARS
from jg_mcp.campaign.run import record_failure
from jg_mcp.campaign.run_record import RunRecord, RunSpec, is_finished, load_run
from jg_mcp.errors import JgError
from jg_mcp.terminal import printable

Task = tuple[str, RunSpec, float]
"""(run id, spec, timeout seconds)."""


class Progress:
    """Progress lines on stderr: `[done/total] RUN_ID: outcome (seconds)`."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.lock = threading.Lock()
        self.start = time.monotonic()

    def line(self, text: str) -> None:
        with self.lock:
            prefix = "\r\033[K" if self.tty else ""
            line = printable(f"[{self.done}/{self.total} {time.monotonic() - self.start:7.1f}s] {text}")
            self.stream.write(f"{prefix}{line}\n")
            self.stream.flush()

    def finished(self, record: RunRecord, seconds: float) -> None:
        with self.lock:
            self.done += 1
        reasons = f" ({', '.join(record.eval.reasons)})" if record.eval.reasons else ""
        outcome = "failed to start" if record.status == "failed to start" else record.eval.status + reasons
        self.line(f"{record.run_id}: {outcome}; {record.exit_reason} [{seconds:.1f}s]")


def run_worker(run_id: str, spec: RunSpec, out: Path, timeout_s: float, slot_env: dict[str, str]) -> RunRecord:
    """One run as a worker subprocess, bounded by `timeout_s`; always returns a record."""
    import signal

    argv = [
        sys.executable,
        "-m",
        "jg_mcp.campaign.run",
        "--spec",
        spec.model_dump_json(),
        "--out",
        str(out),
        "--run-id",
        run_id,
        "--parent-pid",
        str(os.getpid()),
    ]
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / f".{run_id}.worker.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **slot_env},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            proc.wait(timeout_s)
            reason = f"run worker exited with status {proc.returncode} without a run.json"
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(spec.grace_s + 5)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            reason = f"campaign run timeout: the run took over {timeout_s:.0f}s and was killed"
    if is_finished(out / run_id):
        return load_run(out / run_id)
    tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
    return record_failure(spec, out, run_id, reason + (f": {tail[0][:REASON_CHARS]}" if tail else ""))


def run_local(tasks: list[Task], out: Path, gpus: list[int], cpu_slots: int, progress: Progress) -> list[RunRecord]:
    """Run tasks on a pool of slots: one per GPU (CUDA_VISIBLE_DEVICES set per run) or `cpu_slots` on CPU."""
    slots: queue.Queue[dict[str, str]] = queue.Queue()
    for env in [{"CUDA_VISIBLE_DEVICES": str(g)} for g in gpus] or [{} for _ in range(cpu_slots)]:
        slots.put(env)
    todo: queue.Queue[Task] = queue.Queue()
    for task in tasks:
        todo.put(task)
    records: list[RunRecord] = []

    def worker() -> None:
        env = slots.get()
        while True:
            try:
                run_id, spec, timeout_s = todo.get_nowait()
            except queue.Empty:
                return
            progress.line(f"{run_id}: started" + (f" on GPU {env['CUDA_VISIBLE_DEVICES']}" if env else ""))
            start = time.monotonic()
            record = run_worker(run_id, spec, out, timeout_s, env)
            records.append(record)
            progress.finished(record, time.monotonic() - start)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(slots.qsize())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def run_ray(
    tasks: list[Task],
    out: Path,
    address: str | None,
    use_gpus: bool,
    progress: Progress,
    init: Callable[..., object] | None = None,
) -> list[RunRecord]:
    """Submit each run as a Ray task (num_gpus=1 when the campaign has GPUs; Ray sets CUDA_VISIBLE_DEVICES).
    `out` must be on a filesystem every Ray node shares."""
    try:
        import ray
    except ImportError:
        raise JgError("--executor ray needs Ray: pip install 'ray[default]' (or jg-mcp[ray])") from None
    (init or ray.init)(address=address)
    remote = ray.remote(num_gpus=1 if use_gpus else 0, num_cpus=1, max_retries=0)(_ray_run)
    pending = {
        remote.remote(run_id, spec.model_dump_json(), str(out), timeout_s): run_id for run_id, spec, timeout_s in tasks
    }
    for run_id in pending.values():
        progress.line(f"{run_id}: submitted")
    records = []
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=5.0)
        for ref in done:
            run_id = pending.pop(ref)
            record = RunRecord.model_validate_json(ray.get(ref))
            records.append(record)
            progress.finished(record, record.agent_wall_s + record.eval_s + record.audit_s)
    return records


def _ray_run(run_id: str, spec_json: str, out: str, timeout_s: float) -> str:
    env = {"CUDA_VISIBLE_DEVICES": os.environ["CUDA_VISIBLE_DEVICES"]} if "CUDA_VISIBLE_DEVICES" in os.environ else {}
    return run_worker(run_id, RunSpec.model_validate_json(spec_json), Path(out), timeout_s, env).model_dump_json()
