"""A worker process: imports one module (the candidate's solution, or the goal's baselines) and runs its callables
on tensors laid over memory the harness shares with it.

Run as `python -m jg_mcp.eval.candidate.worker SOCKET_FD HARNESS_PID DEVICE [MODULE ...]`: it imports torch (and the
MODULEs), says `started`, then waits for its setup. A worker never sees a seed, a reference or a goal
file: it reads inputs from and writes outputs to the harness's buffers, and reports what it did. For the
candidate role nothing it says is believed: the harness reads the buffers itself and checks the times it
reports against its own clock. What the in-process guard sees is sent as hints (early findings).

This module is the process: its start, the limits and watchdog it sets itself, and the loop that hands each command
to the `Worker` (jg_mcp/eval/candidate/worker_commands.py), which answers it.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from jg_mcp.eval.candidate.worker_commands import TRACEBACK_CHARS, Worker
from jg_mcp.eval.wire import channel
from jg_mcp.eval.wire.messages import (
    COMMAND,
    Bind,
    Block,
    Call,
    DoBench,
    Gates,
    Graph,
    ImportFailed,
    Ready,
    Release,
    Setup,
    Started,
    Warm,
    WorkerError,
)

SETUP_WAIT_S = 900
"""How long a started worker waits for its setup (a spare waits for the next eval) before it exits."""
MAX_FILE_BYTES = 256 << 20
"""The largest file a candidate's process may write (RLIMIT_FSIZE, soft and hard, set before its module is imported;
an unprivileged process cannot raise a hard limit). Its stdout and stderr go to a log file, so a flood ends with
SIGXFSZ at this size (a `crashed` finding), not with the harness's disk."""


def die_with(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent (the harness) dies; exit now if it already has."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)


def bound_files() -> None:
    """Limit every file this process writes to MAX_FILE_BYTES (its log included), and write no core dumps: core
    limit 1, the one value at which the kernel also skips a host's pipe core helper. In the sandbox it is 1 already,
    and its seccomp filter refuses any change (jg_mcp.live.seccomp)."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    most = MAX_FILE_BYTES if hard == resource.RLIM_INFINITY else min(hard, MAX_FILE_BYTES)
    resource.setrlimit(resource.RLIMIT_FSIZE, (most, most))
    core = resource.getrlimit(resource.RLIMIT_CORE)
    if core != (1, 1):
        one = 0 if core[1] == 0 else 1
        resource.setrlimit(resource.RLIMIT_CORE, (one, one))


def watch_group() -> None:
    """Unsandboxed only: fork a watchdog that, once this process is gone (killed with the harness, say), kills what
    is left of its process group (what the candidate started, which PR_SET_PDEATHSIG does not reach). It holds
    none of the sockets, so a dead worker still reads as dead at once."""
    me = os.getpid()
    if os.fork() != 0:
        return
    try:
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        while os.getppid() == me:
            time.sleep(0.5)
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(0)


def serve(worker: Worker, reader: channel.Reader) -> int:
    handlers: dict[type, Callable[[Any], object]] = {
        Bind: worker.bind,
        Gates: worker.gates,
        Release: worker.release,
        Call: worker.call,
        Block: worker.block,
        Graph: worker.graph,
        DoBench: worker.do_bench,
        Warm: worker.warm,
    }
    while True:
        cmd = COMMAND.validate_python(reader.recv(86400))
        handler = handlers.get(type(cmd))
        if handler is None:
            return 0
        handler(cmd)


def start(device: str, ahead: list[str]) -> None:
    """What every worker needs before its setup (torch, CUDA), and the `ahead` modules its callables will import
    anyway (torch.compile's): a worker started ahead of its eval (`jg_mcp.eval.processes.spares`) has it done by
    then."""
    import torch

    from jg_mcp.eval.candidate import guard, recorder  # noqa: F401
    from jg_mcp.eval.wire import buffers  # noqa: F401

    if device == "cuda":
        torch.cuda.init()
    for name in ahead:
        importlib.import_module(name)


def main(argv: list[str]) -> int:
    fd, parent, device, ahead = int(argv[1]), int(argv[2]), argv[3], argv[4:]
    die_with(parent)
    if parent:
        watch_group()
    sock = socket.socket(fileno=fd)
    reader = channel.Reader(fd)
    try:
        start(device, ahead)
        channel.send(fd, Started().model_dump(mode="json"))
        setup = COMMAND.validate_python(reader.recv(SETUP_WAIT_S))
        if not isinstance(setup, Setup):
            raise ValueError("the first message must be the setup")
        if setup.device != device:
            raise ValueError(f"this worker was started for {device}, the setup is for {setup.device}")
        if setup.role == "candidate":
            bound_files()
        worker = Worker(sock, setup)
        worker.reader = reader
    except Exception as exc:
        channel.send(fd, WorkerError(error=f"{type(exc).__name__}: {exc}").model_dump(mode="json"))
        return 1
    try:
        worker.load()
    except SystemExit as exc:
        worker.send(ImportFailed(reason="early_exit", error=f"sys.exit({exc.code!r}) at import"))
        return 0
    except BaseException as exc:
        worker.send(ImportFailed(reason="import_error", error="".join(traceback.format_exception(exc)[-6:])))
        return 0
    worker.send(Ready(version=setup.version, hints=worker.hints()))
    try:
        return serve(worker, reader)
    except (channel.ChannelClosed, channel.ChannelTimeout):
        return 0
    except Exception as exc:
        worker.send(WorkerError(error="".join(traceback.format_exception(exc)[-4:])[-TRACEBACK_CHARS:]))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
