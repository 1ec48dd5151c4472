"""The independent graph eval/h200_dobench.py times where the eval timed a shape under CUDA graphs: one CUDA graph
of calls rotating over input sets, built by other code than the eval's (jg_mcp/eval/graphs.py and the worker's
`captured`), timed with CUDA events around each replay, as do_bench warms up and times its calls (`graph_times`),
or in the eval's own pattern of a lead, a gap and three timed replays (`graph_burst_times`), or one replay at a
time after the inputs were renewed and the L2 cleared, as the eval times its graphs (`graph_renewed_times`).
lab/timing_probe.py's `graph_rot` is `graph_times` without warm-up.
"""

from __future__ import annotations

import math
import time


def graph_times(
    fn, sets: list[list], replays: int = 10, keep: bool = False, warmup_ms: float = 25.0, rep_ms: float = 100.0
) -> list[float]:
    """Device time per call in one CUDA graph of `captured` calls: as do_bench does with its calls, untimed
    replays for `warmup_ms` (the GPU's clocks rise to their steady state) and timed replays for `rep_ms` (at least
    `replays`), each between two events, one time per replay. The replay count is sized by one timed replay. The
    graph and its memory go with the function's frame."""
    import torch

    graph, n, kept = captured(fn, sets, keep)
    replay_ms = timed_replays(graph, 1)[0]
    for _ in range(min(10_000, math.ceil(warmup_ms / replay_ms))):
        graph.replay()
    times = timed_replays(graph, max(replays, min(10_000, math.ceil(rep_ms / replay_ms))))
    del kept
    torch.cuda.synchronize()
    return [t / n for t in times]


def graph_burst_times(
    fn,
    sets: list[list],
    rounds: int = 6,
    replays: int = 3,
    lead_ms: float = 30.0,
    gap_ms: float = 1.0,
    lead: int | None = None,
) -> list[float]:
    """Device time per call in the same graph timed as the eval times its graphs (jg_mcp/eval/graphs.py), each
    call's outputs kept: `rounds` times, untimed replays for `lead_ms` (or `lead` of them), the GPU idle for
    `gap_ms` (the eval's message between its lead and its timed block), then `replays` timed replays."""
    import torch

    graph, n, kept = captured(fn, sets, keep=True)
    replay_ms = timed_replays(graph, 1)[0]
    times = []
    for _ in range(rounds):
        for _ in range(min(10_000, math.ceil(lead_ms / replay_ms)) if lead is None else lead):
            graph.replay()
        torch.cuda.synchronize()
        time.sleep(gap_ms / 1e3)
        times += timed_replays(graph, replays)
    del kept
    return [t / n for t in times]


RENEWALS = {
    "renewed": (True, True, False),
    "cleared": (False, True, False),
    "rewritten": (True, False, False),
    "elsewhere": (False, True, True),
}
"""The ways `graph_renewed_times` may time single replays (part `dobench_renewed`): each a (write new inputs, clear
the L2, clear it from another process) triple before every timed replay. `renewed` is the eval's own order since
every timed call reads renewed inputs; `cleared` and `rewritten` each leave one of the two out; `elsewhere` clears
the L2 from another process's CUDA context, as the eval's harness renews and clears from its own process while
the timed graph runs in a worker's."""


class OtherContext:
    """Another process with a CUDA context of its own, which writes `clear_bytes` of its own memory (an L2 clear)
    each time `clear` is called and returns when that work has ended on the GPU."""

    SCRIPT = (
        "import sys, torch\n"
        "scratch = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device='cuda')\n"
        "print('ready', flush=True)\n"
        "for _ in sys.stdin:\n"
        "    scratch.zero_(); torch.cuda.synchronize(); print('done', flush=True)\n"
    )

    def __init__(self, clear_bytes: int = 256 << 20):
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, str(clear_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._expect("ready")

    def _expect(self, word: str) -> None:
        line = self.proc.stdout.readline().strip()  # type: ignore[union-attr]
        if line != word:
            raise RuntimeError(f"the other CUDA process answered {line!r}, not {word!r}")

    def clear(self) -> None:
        self.proc.stdin.write("clear\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        self._expect("done")

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)


def graph_renewed_times(
    fn,
    sets: list[list],
    fresh: list[list],
    renew: bool,
    clear: bool,
    other: OtherContext | None = None,
    rounds: int = 12,
    lead_ms: float = 30.0,
    clear_bytes: int = 256 << 20,
) -> list[float]:
    """Device time per call of single replays of the graph over `sets`, each after untimed replays for `lead_ms`
    and, with `renew`, `fresh`'s values written into every set the graph reads, then, with `clear`, `clear_bytes`
    written to clear the L2 (by `other` once the lead has ended, when given); `rounds` times, each replay between
    two events. Which of these makes a replay on renewed inputs slower than replays back to back
    (docs/decisions/2026-12-06-graph-replays-on-renewed-inputs.md)."""
    import torch

    graph, n, kept = captured(fn, sets, keep=True)
    scratch = torch.empty(clear_bytes, dtype=torch.uint8, device="cuda") if clear and other is None else None
    replay_ms = timed_replays(graph, 1)[0]
    times = []
    for _ in range(rounds):
        for _ in range(min(10_000, math.ceil(lead_ms / replay_ms))):
            graph.replay()
        if renew:
            for group, new in zip(sets, fresh, strict=True):
                for tensor, value in zip(group, new, strict=True):
                    tensor.copy_(value)
        if scratch is not None:
            scratch.zero_()
        if clear and other is not None:
            torch.cuda.synchronize()
            other.clear()
        times += timed_replays(graph, 1)
    del kept, scratch
    torch.cuda.synchronize()
    return [t / n for t in times]


def captured(fn, sets: list[list], keep: bool) -> tuple[object, int, list]:
    """One CUDA graph of n calls rotating over `sets` (n: the smallest multiple of their count from 64), warmed on
    a side stream first as torch documents, n, and the calls' outputs. With `keep`, every call's outputs stay
    allocated until the graph is captured (each call writes memory of its own, as in the eval's graphs, whose every
    call can be checked); without, each is freed before the next call (which then writes the same memory)."""
    import torch

    n = len(sets) * math.ceil(64 / len(sets))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in sets[:3]:
            fn(*s)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    kept = []
    with torch.cuda.graph(graph):
        for i in range(n):
            out = fn(*sets[i % len(sets)])
            kept += [out] if keep else []
            del out
    return graph, n, kept


def timed_replays(graph, count: int) -> list[float]:
    """`count` replays of `graph`, queued back to back, each between two events: their times in ms (at least 1 ns)."""
    import torch

    marks = []
    for _ in range(count):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        marks.append((start, end))
    torch.cuda.synchronize()
    return [max(1e-6, a.elapsed_time(b)) for a, b in marks]
