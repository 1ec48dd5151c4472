"""The eval's own graph code run in the independent measurement's process (the part `dobench_evalcode` of
eval/h200_dobench.py): is the gap between the eval's graph times and the independent graph's (3-12% at rope's and
softmax's smallest shapes) in the code that captures and times the graphs, or in the process that runs it?

`eval_code_graph_times` sets the process up as a worker sets itself up before its callables run (jg_mcp/eval/
worker_commands.py's `Worker`: the op recorder installed, the guard's snapshot taken), then has `Worker.graph`
itself capture and time the callable's graph over the same input sets, in the eval's pattern (jg_mcp/eval/
graphs.py): rounds of a lead of `lead` untimed replays, a message's gap, then the timed replays.
"""

from __future__ import annotations

import functools
import sys
import time
from types import SimpleNamespace
from typing import Any


@functools.cache
def worker_state() -> tuple[Any, Any]:
    """The op recorder (installed, no op forbidden: a baseline's setup) and the guard a worker holds."""
    import torch

    from jg_mcp.eval.candidate import worker_commands
    from jg_mcp.eval.candidate.guard import Guard
    from jg_mcp.eval.candidate.recorder import OpRecorder
    from jg_mcp.eval.wire import channel

    recorder = OpRecorder(set())
    recorder.install()
    return recorder, Guard.capture(torch, {"worker_commands": worker_commands, "channel": channel})


def eval_pattern(n_sets: int, lead: int, rounds: int, replays: int) -> list[tuple[Any, bool]]:
    """The graph messages the eval sends one callable at a shape (jg_mcp/eval/graphs.py), each with whether its
    times are kept: the capture (one replay), then `rounds` of a lead of `lead` untimed replays and `replays` timed
    ones, every call of the graph on the next of `n_sets` input sets. As many calls as the eval's graphs had until
    report version 10 (the smallest multiple of `n_sets` from 64), which the graph-state probes in lab/ used;
    the eval now sizes its graphs by `graph_replay_ms` too."""
    from jg_mcp.eval.graphs import graph_calls
    from jg_mcp.eval.sizing import rotation
    from jg_mcp.eval.wire.messages import Graph

    order = rotation(graph_calls(n_sets, 64), n_sets)
    steps = [(1, False)] + [step for _ in range(rounds) for step in ((lead, False), (replays, True))]
    return [(Graph(fn="fn", inputs="gin", sets=order, replays=count, ring=None), timed) for count, timed in steps]


def eval_code_graph_times(
    fn, sets: list[list], lead: int, rounds: int = 6, replays: int = 3, gap_ms: float = 1.0, device: str = "cuda"
) -> list[float]:
    """Per-call device times (ms) of `replays` timed replays per round of the graph `Worker.graph` captures of `fn`
    over `sets` (as many calls as `eval_pattern`: the smallest multiple of their count from 64). On the CPU
    (`device`), the worker's stand-in: the same calls one by one, timed by the thread's CPU clock."""
    import torch

    from jg_mcp.eval.candidate.worker_commands import Worker

    recorder, guard = worker_state()
    replies: list[Any] = []
    worker = Worker.__new__(Worker)
    worker.torch, worker.device, worker.recorder, worker.guard = torch, device, recorder, guard
    worker.sync = guard.watched["torch.cuda.synchronize"] if device == "cuda" else (lambda: None)
    worker.graphs, worker.send = {}, replies.append
    worker.bound, worker.fns = {"gin": SimpleNamespace(groups=sets)}, {"fn": fn}
    times: list[float] = []
    for message, timed in eval_pattern(len(sets), lead, rounds, replays):
        worker.graph(message)
        done = replies.pop()
        if done.error is not None:
            print(f"eval-code graph failed: {done.error}", file=sys.stderr, flush=True)
            return []
        if timed:
            times += done.times_ms
        else:
            time.sleep(gap_ms / 1e3)
    worker.graphs.clear()
    worker.sync()
    return times
