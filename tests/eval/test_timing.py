"""Timing statistics, the physical floor and the escape rule."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

import torch

from jg_mcp.eval.guard import Guard
from jg_mcp.eval.policy import CallRecorder
from jg_mcp.eval.timing import block_sizes, escaped, floor_ms, measure, summarize


def test_summary_reports_median_spread_and_a_shrinking_standard_error():
    rng = random.Random(0)
    few = [1.0 + rng.gauss(0, 0.05) for _ in range(20)]
    many = [1.0 + rng.gauss(0, 0.05) for _ in range(400)]
    s_few, s_many = summarize(few), summarize(many)
    assert abs(s_many["median_ms"] - 1.0) < 0.01
    assert 0.04 < s_many["iqr_ms"] < 0.1
    assert s_many["q10_ms"] < s_many["median_ms"] < s_many["q90_ms"]
    assert s_many["rel_se_median"] < s_few["rel_se_median"] < 0.05


def test_floor_is_the_larger_of_compute_and_memory_time():
    assert floor_ms(2e12, 1e6, 1000.0, 4.0) == 2.0
    assert floor_ms(1e6, 8e9, 1000.0, 4.0) == 2.0


def test_escape_needs_most_of_the_host_time_missing_from_the_events():
    assert escaped(0.01, 1.0)
    assert not escaped(1.0, 1.05)
    assert not escaped(0.02, 0.06)


class _HostEvent:
    """A stand-in for torch.cuda.Event on the CPU: records the host clock."""

    def __init__(self, enable_timing: bool = False):
        self.t = 0.0

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def _child(recorder, guard=None):
    watched = {
        "torch.cuda.synchronize": lambda: None,
        "torch.cuda.Event": _HostEvent,
        "torch.cuda.Event.elapsed_time": _HostEvent.elapsed_time,
        "torch.cuda.Event.record": _HostEvent.record,
        "torch.Tensor.clone": torch.Tensor.clone,
    }
    guard = guard or SimpleNamespace(watched={}, absorb_threads=lambda: None)
    guard.watched.update(watched)
    return SimpleNamespace(torch=torch, device="cpu", recorder=recorder, guard=guard)


def _sleepers(calls):
    def fast(x):
        calls.append(("candidate", x))
        time.sleep(0.001)

    def slow(x):
        calls.append(("baseline", x))
        time.sleep(0.003)

    return {"candidate": fast, "baseline": slow}


def test_per_call_mode_alternates_a_b_b_a_rotates_sets_and_stops_on_the_standard_error():
    calls = []
    recorder = CallRecorder()
    params = {"warmup": 1, "min_reps": 10, "max_reps": 40, "budget_s": 5.0, "target_rel_se": 0.05, "probe": 2}
    out = measure(_child(recorder), _sleepers(calls), [(1,), (2,)], params | {"block_ms": 0, "sync_ms": 0})
    assert 0.9 < out["candidate"]["median_ms"] < out["baseline"]["median_ms"] - 1.0
    assert out["candidate"]["reps"] == out["baseline"]["reps"] >= 10
    assert out["candidate"]["block"] == out["baseline"]["block"] == 1
    assert out["candidate"]["host_median_ms"] >= out["candidate"]["median_ms"] * 0.9
    timed = calls[8:]
    assert [n for n, _ in timed[:4]] == ["candidate", "baseline", "baseline", "candidate"]
    assert [x for n, x in timed if n == "candidate"][:4] == [1, 2, 1, 2]
    assert recorder.calls == [] and recorder.armed


def test_block_mode_times_each_callable_in_back_to_back_blocks_that_take_turns():
    calls = []
    params = {"warmup": 1, "min_reps": 10, "max_reps": 400, "budget_s": 0.5, "target_rel_se": 0.0, "probe": 1}
    out = measure(_child(CallRecorder()), _sleepers(calls), [(1,), (2,), (3,)], params | {"block_ms": 12})
    blocks = {n: out[n]["block"] for n in ("candidate", "baseline")}
    assert blocks["candidate"] > blocks["baseline"] > 1, blocks
    assert out["candidate"]["reps"] >= 4 * blocks["candidate"], "fewer rounds than min_rounds"
    expected = []
    for r in range(100):
        for name in ("candidate", "baseline") if r % 2 == 0 else ("baseline", "candidate"):
            expected += [name] * blocks[name]
    timed = calls[12 : 12 + out["candidate"]["reps"] + out["baseline"]["reps"]]
    assert [n for n, _ in timed] == expected[: len(timed)]
    assert [x for n, x in timed if n == "baseline"][:7] == [1, 2, 3, 1, 2, 3, 1]
    assert 0.9 < out["candidate"]["median_ms"] < out["baseline"]["median_ms"] - 1.0


def test_block_sizes_fill_the_block_time_within_bounds():
    assert block_sizes({"a": 1.0, "b": 0.3, "c": 40.0, "d": 0.0}, 25.0, 64) == {"a": 25, "b": 64, "c": 1, "d": 64}
    assert block_sizes({"a": 1.0, "b": 0.001}, 0, 64) == {"a": 1, "b": 1}


def test_threads_a_baseline_leaves_are_not_blamed_on_the_candidate():
    stop = threading.Event()
    pool = []

    def baseline(x):
        if not pool:
            pool.append(threading.Thread(target=stop.wait, name="inductor-like-pool"))
            pool[0].start()

    guard = Guard.capture(torch, {})
    params = {"warmup": 1, "min_reps": 5, "max_reps": 5, "probe": 1}
    try:
        measure(_child(CallRecorder(), guard), {"candidate": lambda x: None, "baseline": baseline}, [(1,)], params)
        assert guard.new_threads() == []
    finally:
        stop.set()
        pool[0].join()


def test_each_callable_is_also_timed_on_inputs_it_has_never_seen():
    cache = {}

    def caching(x):
        if id(x) not in cache:
            time.sleep(0.004)
            cache[id(x)] = x
        time.sleep(0.0005)

    def honest(x):
        time.sleep(0.002)

    fresh_made = []

    def fresh(i):
        fresh_made.append(i)
        return (object(),)

    params = {"warmup": 1, "min_reps": 10, "max_reps": 40, "budget_s": 2.0, "probe": 1, "fresh": 3, "block_ms": 0}
    out = measure(_child(CallRecorder()), {"candidate": caching, "baseline": honest}, [(object(),), (object(),)],
                  params, fresh=fresh)
    assert fresh_made == [0, 1, 2]
    assert out["candidate"]["median_ms"] < 2.0 < 4.0 < out["candidate"]["fresh_median_ms"]
    assert 0.5 < out["baseline"]["fresh_median_ms"] / out["baseline"]["median_ms"] < 2.0


def test_copies_of_randomly_chosen_timed_candidate_outputs_are_kept_for_checking():
    calls = {"n": 0, "returned": []}

    def candidate(x):
        for earlier in calls["returned"]:
            earlier.fill_(-1.0)
        calls["n"] += 1
        out = torch.tensor([float(calls["n"]), float(x)])
        calls["returned"].append(out)
        return out

    params = {"warmup": 1, "min_reps": 10, "max_reps": 60, "budget_s": 5.0, "probe": 1, "spot_checks": 3,
              "block_ms": 0, "target_rel_se": 0.0}
    picked = []
    for _ in range(6):
        kept = []
        calls.update(n=0, returned=[])
        out = measure(_child(CallRecorder()), {"candidate": candidate, "baseline": lambda x: None},
                      [(1,), (2,), (3,)], params, kept=kept)
        assert len(kept) == 3 and out["candidate"]["reps"] == 60
        warm = 1 * 3 + 3
        for set_index, copy in kept:
            n, x = copy.tolist()
            assert warm < n <= warm + 60, "a kept output must come from a timed call"
            assert x == set_index + 1, "kept with the index of its input set"
            picked.append(n - warm)
    assert len(set(picked)) > 6, "the same calls were kept every time: the choice is not random"
    assert max(picked) > 30, "only early calls were ever kept: the pick does not cover the whole run"


def test_no_more_spot_checks_than_the_fewest_timed_calls():
    kept = []
    params = {"warmup": 1, "min_reps": 4, "max_reps": 8, "budget_s": 0.1, "probe": 1, "spot_checks": 50,
              "block_ms": 0, "min_rounds": 1}
    measure(_child(CallRecorder()), {"candidate": lambda x: x, "baseline": lambda x: None}, [(1,)], params, kept=kept)
    assert len(kept) == 4
