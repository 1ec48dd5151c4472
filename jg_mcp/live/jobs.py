"""A session's workspace jobs (scans, writes) run one at a time, in order, and the wait for one on the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio

T = TypeVar("T")


class JobQueue:
    """Runs a session's workspace jobs (scans, writes) one at a time, in order, on a daemon thread that lives
    while there are jobs.

    Jobs waiting their turn hold no thread, so a slow scan delays only its own session's later jobs; the
    thread being a daemon, a scan that never ends cannot keep the process from exiting."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._lock = threading.Lock()
        self._running = False

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            self._jobs.append((future, fn))
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name=self.name, daemon=True).start()
        return future

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._running = False
                    return
                future, fn = self._jobs.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to whoever waits for the job
                future.set_exception(exc)


async def outcome(future: Future[T]) -> T:
    """Wait on the event loop, holding no thread, for a job's result. Cancelling the wait leaves the job be."""
    if not future.done():
        done = anyio.Event()
        loop = asyncio.get_running_loop()

        def wake(_: Future[T]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has ended: nobody waits any more
                loop.call_soon_threadsafe(done.set)

        future.add_done_callback(wake)
        await done.wait()
    return future.result()
