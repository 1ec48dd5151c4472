"""eval/h200_check.py, the one command that checks the eval on a GPU: its parts, what it writes, what a second
call finishes, and when it fails (its independent measurement, eval/h200_dobench.py: test_h200_dobench.py). Driven
here on the CPU with CPU evals in place of the GPU's (eval/results/h200/check.md holds the H200's runs)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from eval_suite import REPO, load_h200_check

from jg_mcp.eval import EvalOptions, evaluate
from jg_mcp.eval.processes.isolation import bwrap_problem
from tests.support import eval_report


def test_each_miss_is_listed_with_what_was_measured_at_its_shape():
    """A timed shape beyond 3% of do_bench or 2% between the two evals gets a line naming, of the causes seen on
    the H200, those measured there (the power cap, a pad, a callable waiting on the host, do_bench's two orders
    apart); a shape within both targets gets none, and a miss with none of the causes says so."""
    load_h200_check()
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


def test_a_miss_names_the_callable_whose_time_moved_between_the_processes_that_measured_it():
    """On an H200: fused_add_rmsnorm's compiled baseline took 60.1 us in the eval, 62.9 in the repeat and 63.4 in
    do_bench while the solution held at 61.5-61.9; the miss line shows each callable's time per process and how far
    apart, and only where one of them spans more than 2%. A baseline the speedup does not divide by is not named as
    a cause even when it waits on the host (grouped_gemm's matmul_loop at deepseek ep16, where grouped_mm decides)."""
    load_h200_check()
    tables = sys.modules["h200_tables"]

    def report(cand_ms: float, base_ms: float) -> dict:
        raw = eval_report("a" * 64, "b" * 64, speedup=base_ms / cand_ms) | {"strongest_baseline": {"n16m": "compiled"}}
        stats = {"iqr_ms": 0.001, "q10_ms": 0.05, "q90_ms": 0.07, "reps": 256, "rel_se_median": 0.001}
        raw["shapes"][0] |= {
            "speedup": {"compiled": base_ms / cand_ms, "loop": 10 * base_ms / cand_ms},
            "candidate": stats | {"median_ms": cand_ms},
            "baselines": {
                "compiled": stats | {"median_ms": base_ms},
                "loop": stats | {"median_ms": 10 * base_ms, "host_waits": True},
            },
        }
        return raw

    row = {"agreement_pct": -5.1, "do_bench_ms": {"candidate": 0.0619, "compiled": 0.0634}}
    results = {
        "evals": {"axpy": report(0.0618, 0.0601)},
        "repeat": {"axpy": report(0.0615, 0.0629)},
        "dobench": {"axpy": {"n16m": row}},
    }
    assert tables.misses(results, {"axpy": {"n16m": 5.3}})[2:] == [
        "- axpy n16m: do_bench -5.1%, repeat +5.3%; times per process (eval, repeat, do_bench; us): solution 61.80, "
        "61.50, 61.90 (0.7% apart); compiled 60.10, 62.90, 63.40 (5.5% apart)"
    ]
    results["repeat"] = {}
    row |= {"do_bench_ms": {"candidate": 0.0619, "compiled": 0.0612}}
    assert tables.misses(results, {})[2:] == ["- axpy n16m: do_bench -5.1%; none of the known causes"]


@pytest.mark.slow
def test_the_check_writes_its_parts_and_a_second_call_finishes_what_the_first_left(tmp_path, monkeypatch):
    check = load_h200_check()
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
    assert done["parts"] == ["evals", "repeat", "hacks"], "the run's record names every call's parts"
    assert set(done["part_wall_s"]) == {"evals", "repeat", "hacks"} and done["wall_s"] > written["wall_s"]
    assert main("--out", str(second), "--parts", "hacks", "--earlier", str(second / "check.json")) == 0
    assert len(ran) == 3, "a hack already in the earlier run is not run again"
    again = json.loads((second / "check.json").read_text())["part_wall_s"]["hacks"]
    assert again >= done["part_wall_s"]["hacks"], "a part that a later call runs again adds its time to the earlier"
    assert main("--out", str(second), "--parts", "hacks", "--hack-rounds", "2", "--earlier", earlier) == 0
    rounds = json.loads((second / "check.json").read_text())["hacks"]
    assert len(ran) == 5 and set(rounds) == {"background_thread", "background_thread#2"}
    assert all(isinstance(h["timings"], dict) for h in rounds.values()), "a hack keeps its shapes' timings"
    with pytest.raises(SystemExit):
        main("--out", str(second), "--parts", "hacks", "--hacks", "no_such_hack")

    late = tmp_path / "late"
    assert main("--out", str(late), "--goals", "softmax", "--parts", "evals", "--deadline-s", "0") == 1
    assert "SKIPPED (past --deadline-s): evals:softmax" in (late / "check.md").read_text() and len(ran) == 5
    after = tmp_path / "after"
    assert main("--out", str(after), "--parts", "hacks", "--earlier", str(late / "check.json")) == 1, (
        "a skip in an earlier call fails the run"
    )
    made_up = tmp_path / "made_up"
    assert (
        main("--out", str(made_up), "--goals", "softmax", "--parts", "evals", "--earlier", str(late / "check.json"))
        == 0
    )
    assert not json.loads((made_up / "check.json").read_text())["skipped"], "a later call made the skipped eval up"


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


@pytest.mark.slow
@pytest.mark.skipif(bwrap_problem() is not None, reason="spares need bubblewrap")
def test_with_spares_each_eval_of_the_check_takes_the_processes_the_one_before_started(tmp_path, monkeypatch):
    """By default the check's evals share one Spares, the second eval takes the set the first started, the count
    is in check.json and what is left is ended before the demo starts; with --no-spares no eval gets one. Driven on
    the CPU; the demo's subprocess is replaced by one that records whether a spare set was still up."""
    check = load_h200_check()
    given: list = []
    cpu = {"device": "cpu", "shapes": "smoke", "domain_shapes": 0}

    def cpu_evaluate(options, spares=None):
        given.append(spares)
        return evaluate(options.model_copy(update=cpu), None, spares)

    def main(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["h200_check", *args])
        return check.main()

    def demo(cmd, **kwargs):
        at_demo.append(given[-1].idle)
        return subprocess.CompletedProcess(cmd, 0, "demo ok", "")

    at_demo: list = []
    monkeypatch.setattr(check, "evaluate", cpu_evaluate)
    monkeypatch.setattr(check, "subprocess", SimpleNamespace(run=demo))
    assert main("--out", str(tmp_path / "a"), "--goals", "softmax,swiglu", "--parts", "evals,demo") == 0
    assert given[0] is given[1] is not None and given[0].idle is None, "one Spares for the check, closed at its end"
    assert at_demo == [None], "the spare set the last eval started is ended before the demo"
    assert json.loads((tmp_path / "a" / "check.json").read_text())["spares_taken"] == 1
    assert main("--out", str(tmp_path / "b"), "--goals", "softmax", "--parts", "evals", "--no-spares") == 0
    assert given[2] is None and "spares_taken" not in json.loads((tmp_path / "b" / "check.json").read_text())


@pytest.mark.slow
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
        sets = [s.memory.input_sets for s in timed if s.memory]
        assert timed and [len(set(s.input_seeds)) for s in timed] == sets, report.reasons
        seeds += [tuple(s.input_seeds) for s in timed]
    assert len(set(seeds)) == len(seeds)
