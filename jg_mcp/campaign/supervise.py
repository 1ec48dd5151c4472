"""The agent's process: started in its own process group, watched, and stopped with a bounded grace.

The runner stops the agent when the server closes the session for a spent budget, when the wall clock from the
session's first request passes the budget plus a grace (an agent that makes no call after its budget), or at
the hard deadline (startup allowance + budget + grace). A worker whose campaign is gone kills its agents and
itself (`watch_parent`), and so does one told to stop (SIGTERM: `kill_agents_and_exit`). A worker killed outright
(SIGKILL runs no handler) takes its agent down too: the agent is started under `jg_mcp.live.lifeline`'s guards
(the kernel's parent-death signal, and a check that the worker is still there once that is set).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from jg_mcp.campaign import Launch
from jg_mcp.campaign.budget import SPENT_PREFIX
from jg_mcp.live import lifeline

POLL_S = 0.2


AGENT_GROUPS: set[int] = set()
"""Process groups of the agents this process started and has not yet reaped."""


def kill_agents_and_exit(*_: object) -> None:
    """A worker's end when its campaign is gone or it is told to stop: SIGKILL every agent group, then its own
    group (eval and audit subprocesses included)."""
    for pgid in list(AGENT_GROUPS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.killpg(os.getpgid(0), signal.SIGKILL)


def watch_parent(parent: int, poll_s: float = 0.5) -> None:
    """In a worker: when `parent`, the process that started it, is gone (getppid differs: re-parented), end
    everything, also when that happened before this was called."""
    import threading

    def loop() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        kill_agents_and_exit()

    threading.Thread(target=loop, daemon=True, name="watch-parent").start()


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the process group, SIGKILL it after `grace_s`; bounded."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def transcripts(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "transcripts").glob("*.jsonl"), key=lambda p: p.stat().st_size, reverse=True)


def close_reason(path: Path) -> str | None:
    """The close event's reason if the transcript's last line is one, else None."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 65536))
            last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        event = json.loads(last)
    except (OSError, ValueError):
        return None
    return event.get("reason") if isinstance(event, dict) and event.get("event") == "close" else None


def first_request_time(path: Path, max_lines: int = 200) -> float | None:
    """Unix time of the transcript's first request (when the server's budget clock started), or None yet."""
    try:
        with path.open("rb") as f:
            for _, line in zip(range(max_lines), f, strict=False):
                event = json.loads(line)
                if event.get("event") == "request":
                    return float(event["ts"])
    except (OSError, ValueError, KeyError):
        return None
    return None


def made_a_tool_call(path: Path) -> bool:
    """Whether the transcript records a tools/call request: the agent reached the server and worked there (a
    connection and a listing alone are what an agent that cannot reach its model also makes)."""
    try:
        with path.open("rb") as f:
            for line in f:
                if b'"tools/call"' not in line:
                    continue
                event = json.loads(line)
                if event.get("event") == "request" and event.get("method") == "tools/call":
                    return True
    except (OSError, ValueError):
        return False
    return False


REFUSAL_S = 2.0
"""How long after the server closed a session for its spent budget the agent is stopped: the close event is written
while the refusal that caused it is still on its way, and an agent stopped at once may never read it (its own log
would not say why it stopped)."""


class Watch:
    """What the runner watches while the agent runs: the server's close event for a spent budget, the wall
    clock from the first request (for an agent that makes no call after its budget), and the hard deadline."""

    def __init__(self, run_dir: Path, budget_s: float, startup_s: float, grace_s: float):
        self.run_dir = run_dir
        self.budget_s = budget_s
        self.hard_s = startup_s + budget_s + grace_s
        self.grace_s = grace_s
        self.start = time.monotonic()
        self.first_request: float | None = None
        self.closed_at: float | None = None
        """When the server's close for a spent budget was first seen (the agent is stopped REFUSAL_S after it)."""

    def reason_to_stop(self) -> str:
        found = transcripts(self.run_dir)
        closed = next((r for p in found if (r := close_reason(p))), None)
        if closed and closed.startswith(SPENT_PREFIX):
            if self.closed_at is None:
                self.closed_at = time.monotonic()
            if time.monotonic() - self.closed_at >= REFUSAL_S:
                return f"{closed}; agent stopped"
            return ""
        if self.first_request is None and found:
            self.first_request = first_request_time(found[0])
        if self.first_request is not None and time.time() > self.first_request + self.budget_s + self.grace_s:
            return f"{SPENT_PREFIX}: {self.budget_s / 60:g} minutes of wall clock, no tool call after it; agent stopped"
        if time.monotonic() - self.start > self.hard_s:
            return f"run timeout: the agent was still running after {self.hard_s:.0f}s; agent stopped"
        return ""


def unrunnable(program: str, cwd: str, env: dict[str, str]) -> str | None:
    """Why `program` cannot be run (as exec would find it: by PATH, or relative to `cwd` when it names a
    directory), else None: the agent starts through a wrapper, whose own start would not say so."""
    if "/" in program:
        found: str | None = str(Path(cwd, program))
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None or not os.path.exists(found):
        return "No such file or directory"
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        return "Permission denied"
    return None


def supervise(launch: Launch, run_dir: Path, env: dict[str, str], watch: Watch) -> tuple[str, int | None, float]:
    """Run the agent until it exits or `watch` says to stop it. Returns (exit reason, exit code, wall seconds)."""
    start = time.monotonic()
    Path(launch.cwd).mkdir(parents=True, exist_ok=True)
    for d in launch.dirs:
        Path(d).mkdir(mode=0o700, parents=True)
    stdin = open(launch.stdin_file, "rb") if launch.stdin_file else subprocess.DEVNULL  # noqa: SIM115
    try:
        with (run_dir / "agent.log").open("wb") as out, (run_dir / "agent.stderr.log").open("wb") as err:
            missing = unrunnable(launch.argv[0], launch.cwd, env)
            if missing:
                return f"agent could not start: {missing}: {launch.argv[0]}", None, 0.0
            try:
                proc = subprocess.Popen(
                    lifeline.outer(lifeline.inner(launch.argv)),
                    cwd=launch.cwd,
                    env=env,
                    stdin=stdin,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    pass_fds=(lifeline.read_end(),),
                )
            except OSError as exc:
                return f"agent could not start: {exc.strerror or exc}: {launch.argv[0]}", None, 0.0
            AGENT_GROUPS.add(proc.pid)
            reason = ""
            while proc.poll() is None:
                reason = watch.reason_to_stop()
                if reason:
                    stop_group(proc, watch.grace_s)
                    break
                time.sleep(POLL_S)
            code = proc.wait(watch.grace_s + 10)
            AGENT_GROUPS.discard(proc.pid)
    finally:
        if not isinstance(stdin, int):
            stdin.close()
    return reason or f"agent exited (code {code})", code, time.monotonic() - start
