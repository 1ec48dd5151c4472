"""eval/h200_check.py, the one command that checks the eval on a GPU: its parts, what it writes, what a second
call finishes, and when it fails, and eval/h200_dobench.py, its independent measurement. Driven here on the CPU
with CPU evals in place of the GPU's; the do_bench part needs CUDA and was validated on the H200 only
(eval/results/h200/check.md)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from eval_suite import REPO

from jg_mcp.eval import EvalOptions, EvalReport, evaluate
from jg_mcp.eval.isolation import bwrap_problem
from tests.support import eval_report


def _check():
    spec = importlib.util.spec_from_file_location("h200_check", REPO / "eval" / "h200_check.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _dobench():
    """eval/h200_dobench.py, the module h200_check imports (loading h200_check puts eval/ on the path)."""
    _check()
    import h200_dobench

    return h200_dobench


def test_the_speedup_is_compared_with_do_bench_shape_by_shape():
    """do_bench measures solution, baseline, baseline, solution, twice over: the ratio is of the two medians (one
    measurement apart from the rest moves it not at all), and the order's own effect (the first solution-first pair
    against the last baseline-first pair) is reported beside it; the same comparison is made with every time read
    as an interquartile mean."""
    dob = _dobench()
    raw = eval_report("a" * 64, "b" * 64, speedup=1.25) | {"strongest_baseline": {"n16m": "torch_add"}}
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "q10_ms": 0.9, "q90_ms": 1.1, "reps": 20, "rel_se_median": 0.01}
    raw["shapes"][0] |= {"candidate": stats | {"iqm_ms": 2.0}, "baselines": {"torch_add": stats | {"iqm_ms": 3.0}}}
    results: dict = {"dobench": {}}
    plan = {"n16m": {"baseline": "torch_add", "pad_ms": 0.1, "input_sets": 3}}
    runs = {
        "n16m": {
            "median": {"candidate": [1.0, 1.0, 1.0, 1.0], "torch_add": [1.1, 1.15, 1.25, 1.3]},
            "iqm": {"candidate": [2.0, 2.0, 2.0, 9.0], "torch_add": [2.8, 3.2, 2.6, 3.4]},
        }
    }
    dob.agreement("axpy", EvalReport.model_validate(raw), plan, runs, results)
    row = results["dobench"]["axpy"]["n16m"]
    assert row["do_bench_ratio"] == pytest.approx(1.2) and row["pad_ms"] == 0.1
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


def test_each_miss_is_listed_with_what_was_measured_at_its_shape():
    """A timed shape beyond 3% of do_bench or 2% between the two evals gets a line naming, of the causes seen on
    the H200, those measured there (the power cap, a pad, a callable waiting on the host, do_bench's two orders
    apart); a shape within both targets gets none, and a miss with none of the causes says so."""
    _check()
    tables = sys.modules["h200_tables"]
    raw = eval_report("a" * 64, "b" * 64) | {"strongest_baseline": {"n16m": "torch_add"}}
    clocks = {"samples": 9, "sm_mhz_median": 1600.0, "sm_mhz_min": 1400.0, "slowdowns": {"sw_power_cap": 0.9}}
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "q10_ms": 0.9, "q90_ms": 1.1, "reps": 20, "rel_se_median": 0.01}
    raw["shapes"][0] |= {
        "candidate": stats,
        "baselines": {"torch_add": stats | {"host_waits": True}},
        "pad_ms": 0.25,
        "clocks": clocks,
    }
    row = {"agreement_pct": 4.2, "do_bench_order_pct": -9.5, "eval_mhz": {"candidate": 1800.0, "torch_add": 1500.0}}
    results = {"evals": {"axpy": raw}, "dobench": {"axpy": {"n16m": row}}}
    assert tables.misses(results, {"axpy": {"n16m": -2.5}}) == [
        "",
        "Misses, and what was measured at each:",
        "- axpy n16m: do_bench +4.2%, repeat -2.5%; power-capped 90% (SM MHz, solution and baseline: eval 1800, 1500, "
        "do_bench -); padded 0.250 ms (launch-bound); host waits: torch_add; do_bench's own two orders -9.5% apart",
    ]
    row |= {"agreement_pct": 2.9}
    assert tables.misses(results, {"axpy": {"n16m": 1.9}}) == []
    raw["shapes"][0] |= {"pad_ms": 0.0, "clocks": None, "baselines": {"torch_add": stats}}
    row |= {"do_bench_order_pct": 0.5}
    assert tables.misses(results, {"axpy": {"n16m": 2.1}})[2:] == [
        "- axpy n16m: repeat +2.1%; none of the known causes"
    ]
    assert "Misses, and what" in tables.markdown(
        results | {"wall_s": 1.0, "hacks": {}, "repeat_agreement": {"axpy": {"n16m": 2.1}}}
    )


def test_the_check_writes_its_parts_and_a_second_call_finishes_what_the_first_left(tmp_path, monkeypatch):
    check = _check()
    ran: list[str] = []

    asked: list[dict] = []

    def cpu_eval(solution, goal, **options):
        ran.append(solution.parent.name)
        asked.append(options)
        ws = tmp_path / f"ws{len(ran)}"
        ws.mkdir()
        (ws / "solution.py").write_bytes(solution.read_bytes())
        options = EvalOptions(
            goal=REPO / "goals" / f"{goal}.yaml", workspace=ws, device="cpu", shapes="smoke", domain_shapes=0
        )
        return evaluate(options)

    def main(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["h200_check", *args])
        return check.main()

    monkeypatch.setattr(check, "run_eval", cpu_eval)
    monkeypatch.setattr(check, "GPU_HACKS", {"background_thread": check.GPU_HACKS["background_thread"]})
    first, second = tmp_path / "first", tmp_path / "second"
    assert main("--out", str(first), "--goals", "softmax", "--parts", "evals,repeat") == 0
    assert ran == ["softmax", "softmax"]
    assert asked[1] == {"timing": {}, "shapes": "timed", "domain_shapes": 0, "trials": 1}, "the repeat times again"
    written = json.loads((first / "check.json").read_text())
    assert written["evals"]["softmax"]["accepted"] and written["repeat"]["softmax"]["accepted"]
    assert (
        set(written["part_wall_s"]) == {"evals", "repeat"}
        and "| softmax | accepted |" in (first / "check.md").read_text()
    )
    phases = written["evals"]["softmax"]["phases"]
    assert "- GPU: none, driver -" in (first / "check.md").read_text()
    assert f"- evals, phases summed over 1 goals (s): setup {phases['setup']:.1f}, " in (first / "check.md").read_text()

    earlier = str(first / "check.json")
    assert main("--out", str(second), "--goals", "softmax", "--parts", "hacks", "--earlier", earlier) == 0
    assert ran[2:] == ["background_thread"]
    done = json.loads((second / "check.json").read_text())
    assert done["hacks"]["background_thread"]["ok"] and done["evals"]["softmax"]["accepted"]
    assert done["hacks"]["background_thread"]["phases"]["correctness"] > 0, "a hack's eval keeps its phases"
    assert main("--out", str(second), "--parts", "hacks", "--earlier", str(second / "check.json")) == 0
    assert len(ran) == 3, "a hack already in the earlier run is not run again"
    assert main("--out", str(second), "--parts", "hacks", "--hack-rounds", "2", "--earlier", earlier) == 0
    rounds = json.loads((second / "check.json").read_text())["hacks"]
    assert len(ran) == 5 and set(rounds) == {"background_thread", "background_thread#2"}
    assert all(isinstance(h["timings"], dict) for h in rounds.values()), "a hack keeps its shapes' timings"
    with pytest.raises(SystemExit):
        main("--out", str(second), "--parts", "hacks", "--hacks", "no_such_hack")

    late = tmp_path / "late"
    assert main("--out", str(late), "--goals", "softmax", "--parts", "evals", "--deadline-s", "0") == 1
    assert "SKIPPED (past --deadline-s): evals:softmax" in (late / "check.md").read_text() and len(ran) == 5


def test_the_do_bench_cross_check_rotates_over_the_input_sets_call_by_call(monkeypatch):
    """The eval's calls rotate over its input sets, and at 5-45 us shapes do_bench on one set moved by up to
    18% between repeats on the H200: the do_bench that the eval's speedups are compared with (in the baseline
    process and in eval/h200_dobench.py) rotates the same way. triton's do_bench is replaced by one that records
    each call's inputs (it needs CUDA events)."""
    import triton.testing

    from jg_mcp.eval.worker_commands import padded_do_bench

    seen: list[str] = []

    def do_bench(fn, warmup, rep, return_mode):
        for _ in range(7):
            fn()
        return [0.5, 0.25]

    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    got = padded_do_bench(lambda x, y: seen.append(x + y), [["a", "1"], ["b", "2"], ["c", "3"]], 0.0)
    assert got == [0.5, 0.25]
    assert seen == ["a1", "b2", "c3", "a1", "b2", "c3", "a1"]


def test_the_spread_between_processes_is_read_the_same_way_for_the_eval_and_for_do_bench():
    """eval/h200_spread.py: over several evals and several do_bench processes, each one's spread (largest minus
    smallest over the mean) per shape, and the agreement of the two means."""
    spec = importlib.util.spec_from_file_location("h200_spread", REPO / "eval" / "h200_spread.py")
    spread = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(spread)  # type: ignore[union-attr]
    evals = [
        {"axpy": eval_report("a" * 64, "b" * 64, speedup=sp) | {"strongest_baseline": {"n16m": "torch_add"}}}
        for sp in (1.0, 1.05, 1.02)
    ]
    dobench = [{"axpy": {"n16m": {"do_bench_ratio": r}}} for r in (1.0, 1.01)]
    (row,) = spread.rows(evals, dobench)
    assert row["eval"] == pytest.approx(100 * 0.05 / (3.07 / 3)) and row["do_bench"] == pytest.approx(
        100 * 0.01 / 1.005
    )
    assert row["agreement_of_means"] == pytest.approx(100 * ((3.07 / 3) / 1.005 - 1)) and "eval_iqm" not in row
    text = spread.markdown([row], 3, 2)
    assert "eval: spread within 2% at 0/1 shapes" in text and "do_bench: spread within 2% at 1/1 shapes" in text
    assert "mean of the evals within 3% of the mean of do_bench: 1/1" in text


def test_the_pads_of_two_evals_are_set_beside_how_far_their_speedups_part():
    """eval/h200_spread.py's pad section: pairs grouped by whether both evals padded the shape, neither or one, and
    among the padded the correlation of the pads' difference with the repeat's size."""
    spec = importlib.util.spec_from_file_location("h200_spread", REPO / "eval" / "h200_spread.py")
    spread = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(spread)  # type: ignore[union-attr]

    def run(speedup: float, pad: float) -> dict:
        raw = eval_report("a" * 64, "b" * 64, speedup=speedup) | {"strongest_baseline": {"n16m": "torch_add"}}
        raw["shapes"][0] |= {"pad_ms": pad, "launch_bound": pad > 0}
        return {"axpy": raw}

    pairs = spread.pad_pairs([run(1.0, 0.2), run(1.03, 0.3), run(1.0, 0.0), run(1.01, 0.5)])
    assert len(pairs) == 6
    first = next(p for p in pairs if p["pads"] == (0.2, 0.3))
    assert first["repeat_pct"] == pytest.approx(3.0) and first["launch_bound"] == (True, True)
    lines = spread.pad_summary(pairs)
    assert lines[0] == "- both padded: 3 pairs, median |repeat| 1.94%, max 3.00%, over 2% at 1"
    assert lines[1].startswith("- one padded: 3 pairs")
    assert lines[2].startswith("- both padded: correlation of |pad difference| with |repeat| ")


def test_each_callables_spread_is_set_beside_the_spread_of_their_ratio():
    """eval/h200_spread.py: over the processes, how far the candidate's time, the baseline's and their ratio each
    moved, for the eval and for do_bench: two times that moved together leave the ratio still."""
    spec = importlib.util.spec_from_file_location("h200_spread", REPO / "eval" / "h200_spread.py")
    spread = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(spread)  # type: ignore[union-attr]
    stats = {"iqr_ms": 0.1, "q10_ms": 0.9, "q90_ms": 1.1, "reps": 20, "rel_se_median": 0.01}

    def run(cand: float, base: float) -> dict:
        raw = eval_report("a" * 64, "b" * 64, speedup=base / cand) | {"strongest_baseline": {"n16m": "torch_add"}}
        raw["shapes"][0] |= {
            "candidate": stats | {"median_ms": cand},
            "baselines": {"torch_add": stats | {"median_ms": base}},
        }
        return {"axpy": raw}

    evals = [run(1.0, 2.0), run(1.02, 2.04)]
    dobench = [
        {"axpy": {"n16m": {"do_bench_runs_ms": {"candidate": [1.0, 1.0], "torch_add": [2.0, 2.0]}}}},
        {"axpy": {"n16m": {"do_bench_runs_ms": {"candidate": [1.02, 1.02], "torch_add": [2.0, 2.0]}}}},
    ]
    (row,) = spread.callable_spreads(evals, dobench)
    assert row["baseline"] == "torch_add"
    assert row["eval"] == pytest.approx((100 * 0.02 / 1.01, 100 * 0.04 / 2.02, 0.0))
    assert row["do_bench"][:2] == pytest.approx((100 * 0.02 / 1.01, 0.0))
    assert row["do_bench"][2] == pytest.approx(100 * (2 - 2 / 1.02) / ((2 + 2 / 1.02) / 2))
    text = spread.callable_markdown([row])
    assert "- eval: the ratio spread less than the more moving of its two times at 1/1 shapes" in text
    assert "- do_bench: the ratio spread less than the more moving of its two times at 0/1 shapes" in text


def test_a_split_do_bench_times_the_solution_and_the_baseline_in_two_fresh_processes(monkeypatch):
    """`--parts dobench_split1`: the eval's arrangement under do_bench, one process per callable, each measured
    twice; the two processes' times are put together and compared with the eval's speedup as `dobench` is."""
    dob = _dobench()
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

    def fake_run(args, **kwargs):
        seen.append(args[3:])
        return subprocess.CompletedProcess(args, 0, stdout=json.dumps(per_role[args[3]]) + "\n", stderr="")

    monkeypatch.setattr(dob.subprocess, "run", fake_run)
    dob.check_dobench(["axpy"], results, "dobench_split1")
    assert seen == [["candidate"], ["baseline"]]
    row = results["dobench_split1"]["axpy"]["n16m"]
    assert row["do_bench_ratio"] == pytest.approx(1.25) and row["agreement_pct"] == pytest.approx(0.0)
    assert row["do_bench_runs_ms"] == {"candidate": [1.0, 1.0], "torch_add": [1.2, 1.3]}


@pytest.mark.skipif(bwrap_problem() is not None, reason="spares need bubblewrap")
def test_with_spares_each_eval_of_the_check_takes_the_processes_the_one_before_started(tmp_path, monkeypatch):
    """`--spares`: the check's evals share one Spares, the second eval takes the set the first started, the count
    is in check.json and what is left is ended; without it no eval gets one. Driven on the CPU."""
    check = _check()
    given: list = []
    cpu = {"device": "cpu", "shapes": "smoke", "domain_shapes": 0}

    def cpu_evaluate(options, spares=None):
        given.append(spares)
        return evaluate(options.model_copy(update=cpu), None, spares)

    def main(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["h200_check", *args])
        return check.main()

    monkeypatch.setattr(check, "evaluate", cpu_evaluate)
    assert main("--out", str(tmp_path / "a"), "--goals", "softmax,swiglu", "--parts", "evals", "--spares") == 0
    assert given[0] is given[1] is not None and given[0].idle is None, "one Spares for the check, closed at its end"
    assert json.loads((tmp_path / "a" / "check.json").read_text())["spares_taken"] == 1
    assert main("--out", str(tmp_path / "b"), "--goals", "softmax", "--parts", "evals") == 0
    assert given[2] is None and "spares_taken" not in json.loads((tmp_path / "b" / "check.json").read_text())


def test_the_agreement_is_also_read_in_clock_cycles_where_every_clock_is_known():
    """On a power-capped GPU each callable's clock follows the power drawn before and during its calls, which differs
    between the eval's blocks and do_bench's runs: the agreement is also given with each time read in cycles (times
    its own median SM clock), and the count says how many shapes that missed in milliseconds agree per cycle."""
    from jg_mcp.eval.report import ClockSummary

    dob = _dobench()
    raw = eval_report("a" * 64, "b" * 64, speedup=0.5) | {"strongest_baseline": {"n16m": "torch_add"}}
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "q10_ms": 0.9, "q90_ms": 1.1, "reps": 20, "rel_se_median": 0.01}

    def clocked(mhz: float) -> dict:
        return stats | {"clocks": ClockSummary(samples=9, sm_mhz_median=mhz, sm_mhz_min=mhz).model_dump()}

    raw["shapes"][0] |= {"candidate": clocked(1800.0), "baselines": {"torch_add": clocked(1600.0)}}
    plan = {"n16m": {"baseline": "torch_add", "pad_ms": 0.0, "input_sets": 3}}
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

    import jg_mcp.eval.worker_commands as worker

    dob = _dobench()
    made = known_good_recording_seeds(dob, monkeypatch)
    monkeypatch.setattr(worker, "padded_do_bench", lambda fn, sets, pad: [1.0, 1.0])
    plan = {"n16m": {"baseline": "torch_add", "pad_ms": 0.0, "input_sets": 3, "seeds": [11, 22, 33]}}
    dob.dobench_one("axpy", plan)
    assert made == [11, 22, 33]
    made.clear()
    dob.dobench_one("axpy", {"n16m": {"baseline": "torch_add", "pad_ms": 0.0, "input_sets": 2}})
    assert made == [0, 1]


def test_a_shape_the_eval_timed_under_graphs_is_measured_under_an_independent_graph_on_the_graphs_inputs(monkeypatch):
    """At `timed_by: graph` the comparison is graph with graph: the sets are made again from the report's graph
    seeds, each tensor in an allocation of its own, timed by eval/independent_graph.py's graph_times with each call's
    outputs kept (as the eval's graphs do) after do_bench's warm-up, and the same graph timed in the eval's pattern
    is recorded beside it; do_bench is not used."""

    import jg_mcp.eval.worker_commands as worker

    dob = _dobench()  # puts eval/ on the path
    import independent_graph

    made = known_good_recording_seeds(dob, monkeypatch)
    graphs: list[tuple[str, list, bool]] = []
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, [["own", *group] for group in sets]))
    monkeypatch.setattr(worker, "padded_do_bench", lambda fn, sets, pad: pytest.fail("do_bench at a graph shape"))
    monkeypatch.setattr(
        independent_graph,
        "graph_times",
        lambda fn, sets, keep=False: graphs.append(("steady", sets, keep)) or [2.0],
    )
    monkeypatch.setattr(
        independent_graph, "graph_burst_times", lambda fn, sets: graphs.append(("burst", sets, True)) or [1.0]
    )
    plan = {"baseline": "torch_add", "pad_ms": 0.5, "input_sets": 3, "seeds": [11, 22, 33], "graph_seeds": [4, 5]}
    out = dob.dobench_one("axpy", {"n16m": plan})
    assert made == [4, 5] and all(sets == [["own", 4], ["own", 5]] and keep for _, sets, keep in graphs)
    assert [kind for kind, _, _ in graphs] == ["steady", "burst"] * 8
    assert out["n16m"]["median"]["candidate"] == [2.0] * 4 and out["n16m"]["graph_burst"]["torch_add"] == [1.0] * 4


def test_the_variant_parts_time_each_graph_after_per_call_timing_or_with_no_clock_sampler(monkeypatch):
    """Under JG_CHECK_HISTORY (the part `dobench_history`) each callable is timed per call right before its graph,
    as the eval does; under JG_CHECK_UNSAMPLED (`dobench_unsampled`) no clock sampler runs in the timed process.
    Each part's process gets its variable and the others' none."""
    import jg_mcp.eval.worker_commands as worker

    dob = _dobench()  # puts eval/ on the path
    import independent_graph

    known_good_recording_seeds(dob, monkeypatch)
    events: list[str] = []
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, sets))
    monkeypatch.setattr(worker, "padded_do_bench", lambda fn, sets, pad: events.append("calls") or [1.0])
    monkeypatch.setattr(independent_graph, "graph_times", lambda fn, sets, keep=False: events.append("graph") or [2.0])
    monkeypatch.setattr(independent_graph, "graph_burst_times", lambda fn, sets: [1.0])
    monkeypatch.setattr(dob, "device_sampler", lambda device: events.append("sampler") and None)
    plan = {"n16m": {"baseline": "torch_add", "pad_ms": 0.5, "input_sets": 3, "seeds": [1], "graph_seeds": [4, 5]}}
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
    import jg_mcp.eval.worker_commands as worker

    dob = _dobench()  # puts eval/ on the path
    import independent_graph

    known_good_recording_seeds(dob, monkeypatch)
    read: list[list] = []
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, [["own", *group] for group in sets]))
    monkeypatch.setattr(worker, "padded_do_bench", lambda fn, sets, pad: read.append(sets) or [1.0])
    monkeypatch.setattr(independent_graph, "graph_times", lambda fn, sets, keep=False: [2.0])
    monkeypatch.setattr(independent_graph, "graph_burst_times", lambda fn, sets: [1.0])
    plan = {"n16m": {"baseline": "torch_add", "pad_ms": 0.5, "input_sets": 3, "seeds": [1], "graph_seeds": [4]}}
    monkeypatch.setenv("JG_CHECK_HISTORY", "1")
    monkeypatch.delenv("JG_CHECK_LEAN", raising=False)
    dob.dobench_one("axpy", plan)
    assert read and all(sets[0][0] != "own" for sets in read)
    read.clear()
    monkeypatch.setenv("JG_CHECK_LEAN", "1")
    dob.dobench_one("axpy", plan)
    assert read and all(sets[0][0] == "own" for sets in read)
    assert dob.VARIANT_ENV["dobench_lean"] == {"JG_CHECK_LEAN": "1"}


def test_an_eval_publishes_the_secret_seeds_of_its_timed_inputs(tmp_path):
    """Drawn afresh by each eval (no candidate can know them beforehand), one per input set of each timed shape."""
    from eval_suite import CPU_TIMING, cpu_timing_goal

    goal = cpu_timing_goal(tmp_path / "goal")
    seeds = []
    for run in ("a", "b"):
        workspace = tmp_path / run
        workspace.mkdir()
        (workspace / "solution.py").write_text(
            "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"
        )
        report = evaluate(EvalOptions(goal=goal, workspace=workspace, **CPU_TIMING | {"only": ["n256k"]}))
        timed = [s for s in report.shapes if s.candidate is not None]  # on the CPU the smoke shapes are timed
        assert timed and all(len(set(s.input_seeds)) == report.timing.input_sets for s in timed), report.reasons
        seeds += [tuple(s.input_seeds) for s in timed]
    assert len(set(seeds)) == len(seeds)


def test_with_the_part_dobench_mapped_the_independent_graph_reads_sets_another_process_holds(monkeypatch):
    """`placed` gives the independent graph dedicated copies, or under JG_CHECK_MAPPED (what the part
    `dobench_mapped` sets for its process) the sets of the same seeds held by another process
    (eval/imported_inputs.py, mapped as the eval's workers map the harness's buffers)."""
    dob = _dobench()  # puts eval/ on the path
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


def test_the_part_dobench_evalcode_times_each_graph_also_with_the_eval_workers_own_code(monkeypatch):
    """Under JG_CHECK_EVALCODE (the part `dobench_evalcode`) each callable's graph is also timed by
    eval/eval_code_graph.py, with the lead the eval ran at that shape (the plan's `graph_lead`), beside the
    independent graph in the same process."""
    dob = _dobench()  # puts eval/ on the path
    import eval_code_graph
    import independent_graph

    known_good_recording_seeds(dob, monkeypatch)
    leads: list[int] = []
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, sets))
    monkeypatch.setattr(dob, "device_sampler", lambda device: None)
    monkeypatch.setattr(independent_graph, "graph_times", lambda fn, sets, keep=False: [2.0])
    monkeypatch.setattr(
        independent_graph, "graph_burst_times", lambda fn, sets, lead=None: [1.0 if lead is None else lead]
    )
    monkeypatch.setattr(eval_code_graph, "eval_code_graph_times", lambda fn, sets, lead: leads.append(lead) or [3.0])
    plan = {"n16m": {"baseline": "torch_add", "pad_ms": 0.0, "input_sets": 3, "graph_seeds": [4], "graph_lead": 7}}
    monkeypatch.delenv("JG_CHECK_EVALCODE", raising=False)
    assert "graph_evalcode" not in dob.dobench_one("axpy", plan)["n16m"] and leads == []
    monkeypatch.setenv("JG_CHECK_EVALCODE", "1")
    out = dob.dobench_one("axpy", plan)["n16m"]
    assert leads == [7] * 8 and out["graph_evalcode"] == {"candidate": [3.0] * 4, "torch_add": [3.0] * 4}
    assert out["graph_burst_evallead"]["torch_add"] == [7] * 4 and out["graph_burst"]["torch_add"] == [1.0] * 4
    assert out["median"]["candidate"] == [2.0] * 4
    assert dob.VARIANT_ENV["dobench_evalcode"] == {"JG_CHECK_EVALCODE": "1"}


def test_the_eval_code_graph_runs_the_workers_graph_command_in_the_evals_pattern():
    """eval/eval_code_graph.py drives jg_mcp/eval/worker_commands.py's `Worker.graph` itself (on the CPU its
    stand-in: the graph's calls one by one): a capture, then rounds of a lead and the timed replays; only the timed
    replays' times come back, one per replay."""
    _check()  # puts eval/ on the path
    import torch
    from eval_code_graph import eval_code_graph_times

    calls: list[int] = []
    sets = [[torch.full((4,), float(i))] for i in range(3)]
    times = eval_code_graph_times(lambda x: calls.append(int(x[0])) or x + 1, sets, lead=4, rounds=2, device="cpu")
    per_graph = 66  # the smallest multiple of 3 from 64
    assert len(times) == 2 * 3 and all(t >= 0 for t in times)
    assert len(calls) == per_graph * (1 + 2 * (4 + 3)) and calls[:4] == [0, 1, 2, 0]


def test_the_variant_parts_measure_only_the_shapes_the_eval_timed_under_graphs(monkeypatch):
    """What the parts of VARIANT_ENV vary is the graph gap: their plan holds only graph-timed shapes, with the
    eval's lead there; a report without one starts no process."""
    import types

    dob = _dobench()
    raw = eval_report("a" * 64, "b" * 64, speedup=1.25) | {"strongest_baseline": {"n16m": "torch_add"}}
    results: dict = {"evals": {"axpy": raw}, "dobench_evalcode": {}}
    monkeypatch.setattr(dob.subprocess, "run", lambda *a, **k: pytest.fail("a process for no graph-timed shape"))
    dob.check_dobench(["axpy"], results, "dobench_evalcode")
    assert results["dobench_evalcode"] == {}
    report = types.SimpleNamespace(timing=types.SimpleNamespace(lead_ms=60.0))
    shape = types.SimpleNamespace(
        timed_by="graph",
        candidate=types.SimpleNamespace(median_ms=0.004, graph=types.SimpleNamespace(calls=100)),
        baselines={"compiled": types.SimpleNamespace(median_ms=0.008), "eager": types.SimpleNamespace(median_ms=0.064)},
    )
    assert dob.graph_lead(report, shape) == 10  # 60 ms at the slowest callable's 0.064 ms per call, 100 calls
    assert dob.graph_lead(report, types.SimpleNamespace(timed_by="calls", candidate=None)) == 0


def test_the_part_dobench_workerproc_times_each_graph_in_a_process_started_as_the_eval_starts_its_workers(tmp_path):
    """eval/worker_proc_graph.py starts a real worker process (jg_mcp/eval/process.py), which imports the
    callable's module, maps the input sets this process holds and runs the eval's graph messages: a capture, then
    rounds of a lead and the timed replays, whose times alone come back (here the CPU stand-in, which makes each
    call and appends its input's first value to a file, so the calls and their order are seen from outside)."""
    _check()  # puts eval/ on the path
    import torch
    from worker_proc_graph import WorkerGraph

    seen = tmp_path / "seen.txt"
    module = tmp_path / "callables.py"
    module.write_text(f"def f(x):\n    open({str(seen)!r}, 'a').write(str(int(x[0])) + ' ')\n    return x + 1\n")
    worker = WorkerGraph(module, "f", [[torch.full((4,), float(i))] for i in range(3)], device="cpu")
    try:
        times = worker.times(lead=4, rounds=2)
    finally:
        worker.close()
    calls = seen.read_text().split()
    assert len(times) == 2 * 3 and all(t >= 0 for t in times)
    assert len(calls) == 66 * (1 + 2 * (4 + 3)) and calls[:4] == ["0", "1", "2", "0"]
    assert worker.proc.proc.poll() is not None


def test_under_dobench_workerproc_each_callable_of_a_shape_gets_one_worker_process_closed_after_it(monkeypatch):
    """JG_CHECK_WORKERPROC: each callable's four measurements at a graph-timed shape go to one worker process
    (the solution's file or the goal's module), each with the eval's lead; both are closed when the shape is done."""
    dob = _dobench()  # puts eval/ on the path
    import independent_graph
    import worker_proc_graph

    known_good_recording_seeds(dob, monkeypatch)
    events: list[tuple] = []

    class Fake:
        def __init__(self, module, function, sets):
            events.append(("start", function))

        def times(self, lead):
            events.append(("times", lead))
            return [5.0]

        def close(self):
            events.append(("close",))

    monkeypatch.setattr(worker_proc_graph, "WorkerGraph", Fake)
    monkeypatch.setattr(dob, "module_of", lambda goal_name, goal, name: ("m.py", name))
    monkeypatch.setattr(dob, "dedicated", lambda sets: (None, sets))
    monkeypatch.setattr(dob, "device_sampler", lambda device: None)
    monkeypatch.setattr(independent_graph, "graph_times", lambda fn, sets, keep=False: [2.0])
    monkeypatch.setattr(independent_graph, "graph_burst_times", lambda fn, sets: [1.0])
    monkeypatch.setenv("JG_CHECK_WORKERPROC", "1")
    plan = {"n16m": {"baseline": "torch_add", "pad_ms": 0.0, "input_sets": 3, "graph_seeds": [4], "graph_lead": 9}}
    out = dob.dobench_one("axpy", plan)["n16m"]
    assert [e for e in events if e[0] == "start"] == [("start", "candidate"), ("start", "torch_add")]
    assert events.count(("times", 9)) == 8 and events[-2:] == [("close",), ("close",)]
    assert out["graph_workerproc"] == {"candidate": [5.0] * 4, "torch_add": [5.0] * 4}
    assert dob.VARIANT_ENV["dobench_workerproc"] == {"JG_CHECK_WORKERPROC": "1"}
