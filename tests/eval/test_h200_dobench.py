"""eval/h200_dobench.py, the independent measurement eval/h200_check.py compares the eval's speedups with: the
agreement rows, the inputs it times (the eval's own, made again from the published seeds), the independent graph at
graph-timed shapes, and the parts that vary it (VARIANT_ENV, the split). Driven on the CPU with do_bench, the graphs
and the goal recorded or stood in for (they need CUDA); the measurements themselves ran on the H200 only
(eval/results/h200/check.md)."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
from eval_suite import load_h200_check, load_h200_dobench

from jg_mcp.eval import EvalReport
from tests.support import eval_report


def test_the_speedup_is_compared_with_do_bench_shape_by_shape():
    """do_bench measures solution, baseline, baseline, solution, twice over: the ratio is of the two medians (one
    measurement apart from the rest moves it not at all), and the order's own effect (the first solution-first pair
    against the last baseline-first pair) is reported beside it; the same comparison is made with every time read
    as an interquartile mean."""
    dob = load_h200_dobench()
    raw = eval_report("a" * 64, "b" * 64, speedup=1.25) | {"strongest_baseline": {"n16m": "torch_add"}}
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "q10_ms": 0.9, "q90_ms": 1.1, "reps": 20, "rel_se_median": 0.01}
    raw["shapes"][0] |= {"candidate": stats | {"iqm_ms": 2.0}, "baselines": {"torch_add": stats | {"iqm_ms": 3.0}}}
    results: dict = {"dobench": {}}
    plan = {"n16m": {"baseline": "torch_add", "input_sets": 3}}
    runs = {
        "n16m": {
            "median": {"candidate": [1.0, 1.0, 1.0, 1.0], "torch_add": [1.1, 1.15, 1.25, 1.3]},
            "iqm": {"candidate": [2.0, 2.0, 2.0, 9.0], "torch_add": [2.8, 3.2, 2.6, 3.4]},
        }
    }
    dob.agreement("axpy", EvalReport.model_validate(raw), plan, runs, results)
    row = results["dobench"]["axpy"]["n16m"]
    assert row["do_bench_ratio"] == pytest.approx(1.2)
    assert row["agreement_pct"] == pytest.approx(100 * (1.25 / 1.2 - 1))
    assert row["do_bench_order_pct"] == pytest.approx(100 * (1.1 / 1.3 - 1))
    assert row["eval_speedup_iqm"] == pytest.approx(1.5) and row["do_bench_ratio_iqm"] == pytest.approx(1.5)
    assert row["agreement_iqm_pct"] == pytest.approx(0.0)
    results |= {"repeat_agreement": {"axpy": {"n16m": 2.5}}, "repeat_agreement_iqm": {"axpy": {"n16m": 1.0}}}
    tables = sys.modules["h200_tables"]
    assert tables.targets_met(results) == [
        "- medians: 0/1 within 3% of do_bench, 0/1 repeat within 2%, 0/1 both",
        "- interquartile means: 1/1 within 3% of do_bench, 1/1 repeat within 2%, 1/1 both",
    ]
    again = {"n16m": {"median": {"candidate": [1.0, 1.0], "torch_add": [1.25, 1.25]}, "iqm": runs["n16m"]["iqm"]}}
    results["dobench_repeat"] = {}
    dob.agreement("axpy", EvalReport.model_validate(raw), plan, again, results, "dobench_repeat")
    assert tables.dobench_repeat(results)["axpy"]["n16m"] == pytest.approx(100 * (1.25 / 1.2 - 1))
    assert tables.targets_met(results)[2:] == [
        "- do_bench itself, medians, second fresh process against the first: 0/1 within 2%",
        "- do_bench itself, interquartile means, second fresh process against the first: 1/1 within 2%",
    ]
    assert "| +4.2 | +0.0 |" in "\n".join(tables.shape_table(results | {"evals": {"axpy": raw}}, {}))


def test_the_do_bench_cross_check_rotates_over_the_input_sets_call_by_call(monkeypatch):
    """The eval's calls rotate over its input sets, and at 5-45 us shapes do_bench on one set moved by up to
    18% between repeats on the H200: the do_bench that the eval's speedups are compared with (in the baseline
    process and in eval/h200_dobench.py) rotates the same way. triton's do_bench is replaced by one that records
    each call's inputs (it needs CUDA events)."""
    import triton.testing

    from jg_mcp.eval.candidate.worker_commands import rotating_do_bench

    seen: list[str] = []

    def do_bench(fn, warmup, rep, return_mode):
        for _ in range(7):
            fn()
        return [0.5, 0.25]

    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    got = rotating_do_bench(lambda x, y: seen.append(x + y), [["a", "1"], ["b", "2"], ["c", "3"]])
    assert got == [0.5, 0.25]
    assert seen == ["a1", "b2", "c3", "a1", "b2", "c3", "a1"]


def test_a_split_do_bench_times_the_solution_and_the_baseline_in_two_fresh_processes(monkeypatch):
    """`--parts dobench_split1`: the eval's arrangement under do_bench, one process per callable, each measured
    twice; the two processes' times are put together and compared with the eval's speedup as `dobench` is."""
    dob = load_h200_dobench()
    assert dob.dobench_calls("cublas", None) == ("candidate", "cublas", "cublas", "candidate") * 2
    assert dob.dobench_calls("cublas", "candidate") == ("candidate",) * 4
    assert dob.dobench_calls("cublas", "baseline") == ("cublas",) * 4
    raw = eval_report("a" * 64, "b" * 64, speedup=1.25) | {"strongest_baseline": {"n16m": "torch_add"}}
    results: dict = {"evals": {"axpy": raw}, "dobench_split1": {}}
    per_role = {
        "candidate": {"axpy": {"n16m": {"median": {"candidate": [1.0, 1.0]}, "iqm": {"candidate": [1.0, 1.0]}}}},
        "baseline": {"axpy": {"n16m": {"median": {"torch_add": [1.2, 1.3]}, "iqm": {"torch_add": [1.2, 1.3]}}}},
    }
    seen = []

    def fake_run(args, env, timeout_s):
        seen.append(args[3:])
        return per_role[args[3]], None

    monkeypatch.setattr(dob, "run_measuring", fake_run)
    dob.check_dobench(["axpy"], results, "dobench_split1")
    assert seen == [["candidate"], ["baseline"]]
    row = results["dobench_split1"]["axpy"]["n16m"]
    assert row["do_bench_ratio"] == pytest.approx(1.25) and row["agreement_pct"] == pytest.approx(0.0)
    assert row["do_bench_runs_ms"] == {"candidate": [1.0, 1.0], "torch_add": [1.2, 1.3]}


def test_the_agreement_is_also_read_in_clock_cycles_where_every_clock_is_known():
    """On a power-capped GPU each callable's clock follows the power drawn before and during its calls, which differs
    between the eval's blocks and do_bench's runs: the agreement is also given with each time read in cycles (times
    its own median SM clock), and the count says how many shapes that missed in milliseconds agree per cycle."""
    from jg_mcp.eval.report_timing import ClockSummary

    dob = load_h200_dobench()
    raw = eval_report("a" * 64, "b" * 64, speedup=0.5) | {"strongest_baseline": {"n16m": "torch_add"}}
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "q10_ms": 0.9, "q90_ms": 1.1, "reps": 20, "rel_se_median": 0.01}

    def clocked(mhz: float) -> dict:
        return stats | {"clocks": ClockSummary(samples=9, sm_mhz_median=mhz, sm_mhz_min=mhz).model_dump()}

    raw["shapes"][0] |= {"candidate": clocked(1800.0), "baselines": {"torch_add": clocked(1600.0)}}
    plan = {"n16m": {"baseline": "torch_add", "input_sets": 3}}
    times = {"candidate": [1.0, 1.0], "torch_add": [0.55, 0.55]}
    runs = {
        "n16m": {"median": times, "iqm": times, "mhz": {"candidate": [1800.0, 1800.0], "torch_add": [1760.0, None]}}
    }
    results: dict = {"dobench": {}}
    dob.agreement("axpy", EvalReport.model_validate(raw), plan, runs, results)
    row = results["dobench"]["axpy"]["n16m"]
    assert row["agreement_pct"] == pytest.approx(100 * (0.5 / 0.55 - 1))  # -9.1%: a miss in milliseconds
    assert row["do_bench_mhz"] == {"candidate": 1800.0, "torch_add": 1760.0}
    assert row["agreement_cycles_pct"] == pytest.approx(100 * ((0.5 * 1600 / 1800) / (0.55 * 1760 / 1800) - 1))
    line = [x for x in sys.modules["h200_tables"].targets_met(results) if "per clock cycle" in x]
    assert line == [
        "- per clock cycle (each callable's time times its own median SM clock): 0/1 within 3% of do_bench; of "
        "the 1 shapes that missed 3% in milliseconds, 0 agree per cycle"
    ]
    runs["n16m"]["mhz"]["torch_add"] = [1600.0, 1600.0]
    dob.agreement("axpy", EvalReport.model_validate(raw), plan, runs, results)
    assert results["dobench"]["axpy"]["n16m"]["agreement_cycles_pct"] == pytest.approx(100 * (0.5 / 0.55 - 1))
    del runs["n16m"]["mhz"]
    dob.agreement("axpy", EvalReport.model_validate(raw), plan, runs, results)
    assert "agreement_cycles_pct" not in results["dobench"]["axpy"]["n16m"]


def known_good_recording_seeds(module, monkeypatch) -> list[int]:
    """Stand in for `known_good` with a goal of one shape (`n16m`) whose input maker records each seed it is given
    (and returns it as the one input); the list it records into."""
    import types

    made: list[int] = []
    shape = types.SimpleNamespace(name="n16m", dims={"N": 4})
    goal = types.SimpleNamespace(
        goal=types.SimpleNamespace(shapes=[shape]),
        make_inputs=lambda dims, seed, device: made.append(seed) or [seed],
        baseline=lambda name: lambda x: x,
    )
    monkeypatch.setattr(module, "known_good", lambda name: (goal, lambda x: x))
    return made


def test_do_bench_times_the_very_inputs_the_eval_timed(monkeypatch):
    """The issue's comparison is of the same inputs: do_bench's sets are made again from the seeds the eval's report
    publishes (where inputs decide the work, other draws take other times), and only a report
    without them falls back to seeds 0..n-1. The goal's input maker and do_bench are recorded here (they need CUDA)."""

    import jg_mcp.eval.candidate.worker_commands as worker

    dob = load_h200_dobench()
    made = known_good_recording_seeds(dob, monkeypatch)
    monkeypatch.setattr(worker, "rotating_do_bench", lambda fn, sets: [1.0, 1.0])
    plan = {"n16m": {"baseline": "torch_add", "input_sets": 3, "seeds": [11, 22, 33]}}
    dob.dobench_one("axpy", plan)
    assert made == [11, 22, 33]
    made.clear()
    dob.dobench_one("axpy", {"n16m": {"baseline": "torch_add", "input_sets": 2}})
    assert made == [0, 1]


def test_a_shape_the_eval_timed_under_graphs_is_measured_under_an_independent_graph_on_the_graphs_inputs(monkeypatch):
    """At `timed_by: graph` the comparison is graph with graph: the sets are made again from the report's graph
    seeds, each tensor in an allocation of its own, timed by eval/independent_graph.py's graph_times with each call's
    outputs kept (as the eval's graphs do) after do_bench's warm-up, and the same graph timed in the eval's pattern
    is recorded beside it; do_bench is not used."""

    import jg_mcp.eval.candidate.worker_commands as worker

    dob = load_h200_dobench()  # puts eval/ on the path
    import independent_graph

    made = known_good_recording_seeds(dob, monkeypatch)
    graphs: list[tuple[str, list, bool]] = []
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, [["own", *group] for group in sets]))
    monkeypatch.setattr(worker, "rotating_do_bench", lambda fn, sets: pytest.fail("do_bench at a graph shape"))
    monkeypatch.setattr(
        independent_graph,
        "graph_times",
        lambda fn, sets, keep=False: graphs.append(("steady", sets, keep)) or [2.0],
    )
    monkeypatch.setattr(
        independent_graph, "graph_burst_times", lambda fn, sets: graphs.append(("burst", sets, True)) or [1.0]
    )
    plan = {"baseline": "torch_add", "input_sets": 3, "seeds": [11, 22, 33], "graph_seeds": [4, 5]}
    monkeypatch.delenv("JG_CHECK_BURST", raising=False)
    out = dob.dobench_one("axpy", {"n16m": plan})
    assert [kind for kind, _, _ in graphs] == ["steady"] * 8 and "graph_burst" not in out["n16m"]
    graphs.clear()
    monkeypatch.setenv("JG_CHECK_BURST", "1")
    out = dob.dobench_one("axpy", {"n16m": plan})
    assert made[-2:] == [4, 5] and all(sets == [["own", 4], ["own", 5]] and keep for _, sets, keep in graphs)
    assert [kind for kind, _, _ in graphs] == ["steady", "burst"] * 8
    assert out["n16m"]["median"]["candidate"] == [2.0] * 4 and out["n16m"]["graph_burst"]["torch_add"] == [1.0] * 4
    assert dob.VARIANT_ENV["dobench_burst"] == {"JG_CHECK_BURST": "1"}

    ways: list[tuple[bool, bool, bool]] = []

    class Other:
        closed = 0

        def close(self):
            Other.closed += 1

    def renewed(fn, sets, fresh, renew, clear, other, rounds):
        assert sets == [["own", 4], ["own", 5]] and len(fresh) == len(sets), "new values for every set the graph reads"
        assert rounds == dob.RENEWED_ROUNDS
        ways.append((renew, clear, other is not None))
        return [3.0 if renew and clear else 2.5] * 3 + [9.0]

    monkeypatch.setattr(independent_graph, "graph_renewed_times", renewed)
    monkeypatch.setattr(independent_graph, "OtherContext", Other)
    monkeypatch.delenv("JG_CHECK_BURST")
    monkeypatch.setenv("JG_CHECK_RENEWED", "1")
    out = dob.dobench_one("axpy", {"n16m": plan})
    assert made[-2:] == [4 ^ 1, 5 ^ 1], "the fresh values are made from other seeds than the graph's"
    assert ways == [(True, True, False), (False, True, False), (True, False, False), (False, True, True)] * 2, (
        "each way once per callable (at its first measurement), the last one's clear in another process"
    )
    assert Other.closed == 1, "one other process for the whole goal, ended with it"
    assert (
        out["n16m"]["graph_renewed"]["candidate"] == [3.0]
        and out["n16m"]["graph_cleared"]["torch_add"] == [2.5]
        and out["n16m"]["graph_elsewhere"]["torch_add"] == [2.5]
    )
    assert out["n16m"]["graph_renewed_q90"]["candidate"][0] > 3.0, "the slow replays show in the 90th percentile"


def test_the_variant_parts_time_each_graph_after_per_call_timing_or_with_no_clock_sampler(monkeypatch):
    """Under JG_CHECK_HISTORY (the part `dobench_history`) each callable is timed per call right before its graph,
    as the eval does; under JG_CHECK_UNSAMPLED (`dobench_unsampled`) no clock sampler runs in the timed process.
    Each part's process gets its variable and the others' none."""
    import jg_mcp.eval.candidate.worker_commands as worker

    dob = load_h200_dobench()  # puts eval/ on the path
    import independent_graph

    known_good_recording_seeds(dob, monkeypatch)
    events: list[str] = []
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, sets))
    monkeypatch.setattr(worker, "rotating_do_bench", lambda fn, sets: events.append("calls") or [1.0])
    monkeypatch.setattr(independent_graph, "graph_times", lambda fn, sets, keep=False: events.append("graph") or [2.0])
    monkeypatch.setattr(independent_graph, "graph_burst_times", lambda fn, sets: [1.0])
    monkeypatch.setattr(dob, "device_sampler", lambda device: events.append("sampler") and None)
    plan = {"n16m": {"baseline": "torch_add", "input_sets": 3, "seeds": [1], "graph_seeds": [4, 5]}}
    for variables, each in (({}, ["sampler", "graph"]), ({"JG_CHECK_HISTORY": "1"}, ["calls", "sampler", "graph"])):
        for name in ("JG_CHECK_HISTORY", "JG_CHECK_UNSAMPLED"):
            monkeypatch.delenv(name, raising=False)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        events.clear()
        dob.dobench_one("axpy", plan)
        assert events == each * 8
    monkeypatch.delenv("JG_CHECK_HISTORY")
    monkeypatch.setenv("JG_CHECK_UNSAMPLED", "1")
    events.clear()
    dob.dobench_one("axpy", plan)
    assert events == ["graph"] * 8
    assert dob.VARIANT_ENV["dobench_history"] == {"JG_CHECK_HISTORY": "1"}
    assert dob.VARIANT_ENV["dobench_unsampled"] == {"JG_CHECK_UNSAMPLED": "1"}


def test_the_part_dobench_lean_keeps_only_the_graphs_copies_of_its_inputs(monkeypatch):
    """Under JG_CHECK_LEAN (the part `dobench_lean`) the sets made from the seeds are let go once the graph's
    copies are made: the per-call timing before a graph (JG_CHECK_HISTORY) then reads the copies too."""
    import jg_mcp.eval.candidate.worker_commands as worker

    dob = load_h200_dobench()  # puts eval/ on the path
    import independent_graph

    known_good_recording_seeds(dob, monkeypatch)
    read: list[list] = []
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, [["own", *group] for group in sets]))
    monkeypatch.setattr(worker, "rotating_do_bench", lambda fn, sets: read.append(sets) or [1.0])
    monkeypatch.setattr(independent_graph, "graph_times", lambda fn, sets, keep=False: [2.0])
    monkeypatch.setattr(independent_graph, "graph_burst_times", lambda fn, sets: [1.0])
    plan = {"n16m": {"baseline": "torch_add", "input_sets": 3, "seeds": [1], "graph_seeds": [4]}}
    monkeypatch.setenv("JG_CHECK_HISTORY", "1")
    monkeypatch.delenv("JG_CHECK_LEAN", raising=False)
    dob.dobench_one("axpy", plan)
    assert read and all(sets[0][0] != "own" for sets in read)
    read.clear()
    monkeypatch.setenv("JG_CHECK_LEAN", "1")
    dob.dobench_one("axpy", plan)
    assert read and all(sets[0][0] == "own" for sets in read)
    assert dob.VARIANT_ENV["dobench_lean"] == {"JG_CHECK_LEAN": "1"}


def test_with_the_part_dobench_mapped_the_independent_graph_reads_sets_another_process_holds(monkeypatch):
    """`placed` gives the independent graph dedicated copies, or under JG_CHECK_MAPPED (what the part
    `dobench_mapped` sets for its process) the sets of the same seeds held by another process
    (eval/imported_inputs.py, mapped as the eval's workers map the harness's buffers)."""
    dob = load_h200_dobench()  # puts eval/ on the path
    import imported_inputs

    held: list[tuple[str, str, list[int]]] = []

    class Held:
        def __init__(self, goal: str, shape: str, seeds: list[int]):
            held.append((goal, shape, seeds))
            self.groups = [["mapped", s] for s in seeds]

    monkeypatch.setattr(imported_inputs, "Imported", Held)
    monkeypatch.setattr(dob, "dedicated", lambda sets: ("copies", sets))
    monkeypatch.delenv("JG_CHECK_MAPPED", raising=False)
    assert dob.placed("rope", "decode", [4, 5], [[4], [5]]) == ("copies", [[4], [5]]) and not held
    monkeypatch.setenv("JG_CHECK_MAPPED", "1")
    holder, groups = dob.placed("rope", "decode", [4, 5], [[4], [5]])
    assert held == [("rope", "decode", [4, 5])] and groups == [["mapped", 4], ["mapped", 5]] == holder.groups


@pytest.mark.slow
def test_check_md_sets_every_way_a_graph_was_timed_beside_the_evals_graph_time():
    """At a graph-timed shape each part's series (the independent graph, the eval's pattern) are listed per callable
    beside the eval's graph time, as medians and as % over it; a shape timed per call is not listed."""
    load_h200_check()
    tables = sys.modules["h200_tables"]
    raw = eval_report("a" * 64, "b" * 64, speedup=1.25) | {"strongest_baseline": {"n16m": "torch_add"}}
    stats = {"median_ms": 0.01, "iqr_ms": 0.001, "q10_ms": 0.009, "q90_ms": 0.011, "reps": 20, "rel_se_median": 0.01}
    graph = {"iqm_ms": 0.004, "q10_ms": 0.004, "q90_ms": 0.004, "replays": 18, "calls": 100, "sets": 50}
    graph |= {"unaccounted_ms": 0.1, "block_ms": 1.0, "seen_ms": 0.004}
    raw["shapes"][0] |= {
        "timed_by": "graph",
        "candidate": stats | {"graph": graph | {"median_ms": 0.004}},
        "baselines": {"torch_add": stats | {"graph": graph | {"median_ms": 0.005}}},
    }
    row = {
        "measured_by": "graph",
        "do_bench_runs_ms": {"candidate": [0.0042, 0.0041, 0.0043, 0.0042], "torch_add": [0.0055] * 4},
        "graph_burst_runs_ms": {"candidate": [0.004] * 4, "torch_add": [0.005, None, 0.005, 0.005]},
        "graph_renewed_runs_ms": {"candidate": [0.008] * 4, "torch_add": [0.006] * 4},
    }
    results = {"evals": {"axpy": raw}, "dobench_burst": {"axpy": {"n16m": row}}, "dobench": {}}
    lines = tables.graph_table(results)
    rest = " - | 8.000 (+100.0%) | - | - | - | - | - |"
    assert f"| dobench_burst | axpy | n16m | candidate | 4.000 | 4.200 (+5.0%) | 4.000 (+0.0%) |{rest}" in lines
    rest = " - | 6.000 (+20.0%) | - | - | - | - | - |"
    assert f"| dobench_burst | axpy | n16m | torch_add | 5.000 | 5.500 (+10.0%) | 5.000 (+0.0%) |{rest}" in lines
    row["measured_by"] = "do_bench"
    assert tables.graph_table(results) == []


def fake_worker_graphs(dob, monkeypatch, graph_times) -> list[tuple]:
    """dobench_one's independent graphs replaced by `graph_times`, the goal by the known-good axpy's; the list
    returned is for the caller's records."""
    import independent_graph

    known_good_recording_seeds(dob, monkeypatch)
    events: list[tuple] = []

    monkeypatch.setattr(dob, "module_of", lambda goal_name, goal, name: ("m.py", name))
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, sets))
    monkeypatch.setattr(dob, "device_sampler", lambda device: None)
    monkeypatch.setattr(independent_graph, "graph_times", graph_times)
    monkeypatch.setattr(independent_graph, "graph_burst_times", lambda fn, sets: [1.0])
    return events


def test_a_measuring_process_past_its_limit_is_stopped_and_the_goals_it_finished_are_kept(tmp_path):
    """A device command's limit cut a whole part before; each goal is now one line printed as it is finished, and a
    process past its limit is killed with those goals kept and the stop named."""
    dob = load_h200_dobench()
    done = {"axpy": {"n16m": {"median": {"candidate": [1.0]}}}}
    script = f"import time\nprint({json.dumps(json.dumps(done))}, flush=True)\nprint('{{\"cut', flush=True)\n"
    script += "time.sleep(60)\n"
    start = time.monotonic()
    measured, problem = dob.run_measuring([sys.executable, "-c", script], dict(os.environ), timeout_s=3.0)
    assert time.monotonic() - start < 30
    assert measured == done and problem == "stopped at its time limit of 3 s"
    measured, problem = dob.run_measuring([sys.executable, "-c", "import sys; sys.exit('broke')"], {}, 30.0)
    assert measured == {} and problem is not None and "exit 1" in problem and "broke" in problem


def test_the_measuring_process_prints_each_goal_once_it_is_measured(monkeypatch, capsys):
    dob = load_h200_dobench()
    printed: list[str] = []

    def one(goal, shapes, only):
        printed.append(capsys.readouterr().out)  # what the goals before this one had printed by now
        return {"n16m": {"median": {"candidate": [float(len(goal))]}}}

    monkeypatch.setattr(dob, "dobench_one", one)
    dob.dobench_all({"axpy": {}, "softmax": {}})
    assert printed[0] == "" and json.loads(printed[1]) == {"axpy": {"n16m": {"median": {"candidate": [4.0]}}}}
    assert json.loads(capsys.readouterr().out) == {"softmax": {"n16m": {"median": {"candidate": [7.0]}}}}
