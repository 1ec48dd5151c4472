"""Timing under CUDA graphs (jg_mcp/eval/graphs.py): sizing, the rules that read the harness's clock and the replay
on seen inputs, and the protocol end to end on the CPU stand-in (the same calls one by one, CPU time for device time).
Capture itself needs a GPU: eval/h200_check.py runs it there."""

from __future__ import annotations

import pytest
from eval_suite import CPU_TIMING, eval_solution

from jg_mcp.eval.graphs import MOST_CALLS, enough, lead_replays, replay_calls
from jg_mcp.eval.options import TimingParams
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.scoring import SEEN_MIN_MS, gained

HONEST = "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"
GRAPHED = CPU_TIMING | {
    "policy": "open",
    "only": ["n256k"],
    "timing": CPU_TIMING["timing"] | {"graph_below_ms": 1e6, "graph_calls": 8, "graph_replay_ms": 0.0},
}
"""Every shape qualifies; 8 calls per graph, each on an input set of its own; the open policy (the candidates below
walk the worker's stack)."""
IN_GRAPH = """
import sys


def in_graph(x):
    \"\"\"True when the worker's graph runs this call: its `replays` is on the stack (a block's: `calls`).\"\"\"
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "replays":
        frame = frame.f_back
    return frame is not None


def remember(out):
    return out
"""
"""How a candidate tells the graph's calls from the per-call ones on the CPU stand-in (on a GPU it asks torch
whether the stream is being captured): it walks the worker's stack, as a hostile candidate may."""
CACHE_BY_POINTER_IN_GRAPH = (
    "import torch\n"
    + IN_GRAPH
    + """
CACHE = {}


def kernel(x, y, alpha):
    if not in_graph(x):
        return remember(torch.addcmul(y, x, alpha))
    if x.data_ptr() not in CACHE:
        CACHE[x.data_ptr()] = torch.addcmul(y, x, alpha)
    return remember(CACHE[x.data_ptr()].clone())
"""
)
"""Honest per call; under the graph it answers from a cache keyed by where the inputs are, which every timed replay
shows (the harness renews the inputs in the same buffers)."""
REFUSES_IN_GRAPH = (
    "import torch\n"
    + IN_GRAPH
    + """

def kernel(x, y, alpha):
    if in_graph(x):  # from the eighth call of the graph's first replay (its capture on a GPU)
        raise RuntimeError("not on these")
    return remember(torch.addcmul(y, x, alpha))
"""
)
"""Fails on the graph's calls only, as a callable that cannot be captured fails its capture on the GPU."""


def test_the_lead_is_sized_by_the_slowest_callable_so_a_forged_small_time_cannot_stretch_it():
    """On the H200 a hack that forged tiny event times (patch_elapsed_time, a 0.66 ms GEMM) once qualified its shape
    for graphs, and a lead sized by its own time asked for 1024 replays of 64 GEMMs per turn (43 s)."""
    assert lead_replays([0.0037, 0.0049, 0.041], 100, 60.0, 1024) == 15
    assert lead_replays([1e-6, 0.33], 66, 60.0, 1024) == 3
    assert lead_replays([1e-6], 64, 60.0, 256) == 256 and lead_replays([50.0], 64, 60.0, 256) == 1


def test_a_graph_has_as_many_calls_as_fill_a_replay_at_the_fastest_baselines_time_each_on_its_own_set():
    assert replay_calls(64, 0.008, 4.0, fit=10**6) == 500, "rope's 8b decode shape"
    assert replay_calls(64, 0.05, 4.0, fit=10**6) == 80
    assert replay_calls(64, 1.0, 4.0, fit=10**6) == 64, "a slow shape keeps graph_calls"
    assert replay_calls(64, 0.008, 0.0, fit=10**6) == 64, "0: graph_calls alone"
    assert replay_calls(64, 1e-9, 4.0, fit=10**6) == MOST_CALLS
    assert replay_calls(64, 0.008, 4.0, fit=320) == 320, "as many as memory holds"
    assert replay_calls(64, 0.008, 4.0, fit=5) == 5, "under graph_calls where memory says so (then not timed)"


def test_graph_rounds_stop_after_an_even_number_from_the_least_once_every_callables_times_agree():
    steady, noisy = [1.0, 1.01, 0.995, 1.0], [1.0, 1.1, 0.95, 1.0]
    assert enough([steady, [2.0] * 4], 4, 0.02)
    assert not enough([steady, noisy], 4, 0.02), "one callable's spread keeps the rounds going"
    assert not enough([steady[:3], [2.0] * 3], 4, 0.02), "fewer than the least"
    assert not enough([steady + [1.0], [2.0] * 5], 4, 0.02), "an odd count: one order of the turns more often"
    assert not enough([steady, [2.0] * 3], 4, 0.02), "as many times for every callable"
    assert not enough([steady, [2.0] * 4], 4, 0.0), "0: every round"
    with pytest.raises(ValueError, match="graph_min_rounds"):
        TimingParams(graph_min_rounds=8, graph_rounds=6)


def test_speed_on_seen_sets_is_caching_unless_the_baselines_share_it():
    least = SEEN_MIN_MS
    assert gained((0.007, 0.0035), [(0.0051, 0.005)], "", least), "twice as fast on seen sets"
    assert not gained((0.007, 0.0035), [(0.0051, 0.005)], "", 0.005), "within a stated least saving"
    assert not gained((0.007, 0.0035), [(0.011, 0.005)], "", least), "the baselines speed up as much"
    assert not gained((0.0037, 0.0035), [(0.005, 0.005)], "", least)


def test_an_honest_candidate_is_timed_under_graphs_and_its_speedups_are_the_graphs(tmp_path, timing_goal):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "solution.py").write_text(HONEST)
    stops = {"graph_min_rounds": 2, "graph_spread": 10.0}  # any spread stops the rounds after the least
    sized = GRAPHED | {"timing": GRAPHED["timing"] | {"graph_replay_ms": 8.0} | stops}
    report = eval_solution(tmp_path / "src" / "solution.py", timing_goal, tmp_path / "runs", **sized)
    assert report.accepted, [f.detail for f in report.findings]
    params = report.timing.params
    assert params and params.graph_below_ms == 1e6 and params.graph_replay_ms == 8.0
    (shape,) = [s for s in report.shapes if s.candidate]
    assert shape.timed_by == "graph" and shape.graph_note is None
    cand, base = shape.candidate, shape.baselines["torch_add"]
    assert cand is not None and cand.graph is not None and base.graph is not None
    assert cand.graph.calls > 8, "sized by the baseline's time (8 by graph_calls)"
    assert cand.graph.sets == cand.graph.calls, "every call of a replay reads a set of its own"
    assert cand.graph.replays == base.graph.replays == 2, "one replay per timed block, the least rounds"
    assert base.graph.calls == cand.graph.calls
    graph_parts = {"graph_inputs", "graph_capture", "graph_leads", "graph_blocks", "graph_judged"}
    assert graph_parts <= set(shape.wall_s) and all(shape.wall_s[k] > 0 for k in graph_parts)
    assert sum(shape.wall_s[k] for k in graph_parts) <= shape.wall_s["time_graphs"]
    rounds = 1 + cand.graph.replays  # the graph's own sets, then one renewal per round
    assert len(shape.renewed_seeds) >= rounds and len(set(shape.renewed_seeds)) == len(shape.renewed_seeds)
    assert cand.graph.block_ms > 0 and cand.graph.seen_ms is None, "no seen-input check under the graph"
    assert shape.speedup["torch_add"] == pytest.approx(base.graph.median_ms / cand.graph.median_ms)
    assert cand.median_ms > 0 and cand.seen_median_ms, "the per-call timing and its checks ran first"


def test_a_candidate_that_answers_graph_calls_from_a_cache_is_rejected(tmp_path, timing_goal):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "solution.py").write_text(CACHE_BY_POINTER_IN_GRAPH)
    report = eval_solution(tmp_path / "src" / "solution.py", timing_goal, tmp_path / "runs", **GRAPHED)
    assert not report.accepted
    assert Reason.INCORRECT in report.reasons, [f.detail for f in report.findings]
    wrong = [f for f in report.findings if f.reason == Reason.INCORRECT]
    forms = ("spot check", "read when its clock stopped")
    assert all(f.shape == "n256k" and any(form in f.detail for form in forms) for f in wrong)
    assert any(forms[1] in f.detail for f in wrong), "every call of a replay is read when the replay ends"


def test_a_callable_that_cannot_run_under_the_graph_leaves_the_shape_timed_per_call(tmp_path, timing_goal):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "solution.py").write_text(REFUSES_IN_GRAPH)
    report = eval_solution(tmp_path / "src" / "solution.py", timing_goal, tmp_path / "runs", **GRAPHED)
    assert report.accepted, [f.detail for f in report.findings]
    (shape,) = [s for s in report.shapes if s.candidate]
    assert shape.timed_by == "calls" and shape.graph_note and "candidate could not be captured" in shape.graph_note
    assert "not on these" in shape.graph_note
    assert shape.candidate is not None and shape.candidate.graph is None
    assert shape.speedup["torch_add"] == pytest.approx(
        shape.baselines["torch_add"].median_ms / shape.candidate.median_ms
    )
