"""NVML clock sampling while a shape is timed: the summary, a board that stops answering, no GPU at all."""

from __future__ import annotations

import itertools
import time

import pytest
import torch
from eval_suite import environment

from jg_mcp.eval.clocks import ClockSampler, nvml_sampler

HONEST = "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"


def wait_until(predicate, timeout_s: float = 30) -> None:
    """Poll until true, or fail: the sampler's thread runs when the scheduler lets it, so the tests wait for
    the samples they need, not for a fixed time that a busy host may not give the thread."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"not true after {timeout_s}s"
        time.sleep(0.005)


def test_the_summary_gives_clock_power_and_the_share_of_each_slowdown():
    readings = itertools.cycle([(1980.0, 690.0, frozenset()), (1500.0, 700.0, frozenset({"sw_power_cap"}))])
    with ClockSampler(lambda: next(readings), max_mhz=1980, limit_w=700, interval_s=0.001) as sampler:
        wait_until(lambda: len(sampler.samples) >= 10)
    count = len(sampler.samples)
    time.sleep(0.02)
    assert len(sampler.samples) == count, "the sampler kept sampling after the block ended"
    s = sampler.summary()
    assert s.samples == count >= 10
    assert s.sm_mhz_min == 1500 and s.sm_mhz_max == 1980 and s.power_limit_w == 700
    assert 1500 <= s.sm_mhz_median <= 1980 and 690 <= s.power_w_median <= 700
    assert list(s.slowdowns) == ["sw_power_cap"] and 0.4 <= s.slowdowns["sw_power_cap"] <= 0.6


def test_each_sample_is_labelled_with_the_owner_of_its_time_and_summarised_by_owner():
    """On a power-capped GPU each callable runs at the clock its own draw allows: the timing labels each sample
    with the callable whose timed block ran, and a summary of one owner (from a given sample on) holds only its."""
    sampler = ClockSampler(
        lambda: ({"a": 1000.0, "b": 2000.0}.get(sampler.owner, 500.0), None, frozenset()), 0, 0, 0.001
    )
    with sampler:
        for owner in ("a", None, "b", "a"):
            sampler.owner = owner
            seen = len(sampler.samples)
            wait_until(lambda seen=seen: len(sampler.samples) >= seen + 3)
        first_b = sampler.owners.index("b")
    assert sampler.summary("a").sm_mhz_median == 1000 and sampler.summary("b").sm_mhz_median == 2000
    assert sampler.summary("a", since=first_b).samples < sampler.summary("a").samples
    assert sampler.summary("c") is None and sampler.summary().samples == len(sampler.samples)


@pytest.mark.slow
def test_the_timing_keeps_each_callables_own_clocks(tmp_path, monkeypatch):
    """An eval labels the samples of each callable's timed blocks with its name (the sampler here reads a clock that
    says whose block runs), and reports them per callable beside the shape's."""
    from eval_suite import CPU_TIMING, cpu_timing_goal, eval_solution

    from jg_mcp.eval import timing

    def fake(device: str) -> ClockSampler:
        mhz = {"candidate": 1500.0, "torch_add": 1900.0}
        sampler = ClockSampler(lambda: (mhz.get(sampler.owner, 1000.0), 600.0, frozenset()), 1980, 700, 0.001)
        return sampler

    monkeypatch.setattr(timing, "device_sampler", fake)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "solution.py").write_text(HONEST)
    report = eval_solution(tmp_path / "src" / "solution.py", cpu_timing_goal(tmp_path), tmp_path / "runs", **CPU_TIMING)
    assert report.accepted, [f.detail for f in report.findings]
    for shape in report.shapes:
        assert shape.candidate.clocks.sm_mhz_median == 1500 and shape.candidate.clocks.sm_mhz_min == 1500
        assert shape.baselines["torch_add"].clocks.sm_mhz_median == 1900
        assert shape.clocks.sm_mhz_min == 1000 and shape.clocks.samples > shape.candidate.clocks.samples


def test_a_board_that_stops_answering_ends_the_sampling_not_the_eval():
    calls = []

    def read():
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return 1410.0, None, frozenset()

    with ClockSampler(read, interval_s=0.001) as sampler:
        wait_until(lambda: len(calls) > 3)
    s = sampler.summary()
    assert s.samples == 3 and s.sm_mhz_median == 1410 and s.power_w_median is None


def test_no_clock_readings_give_no_summary():
    with ClockSampler(lambda: (None, None, frozenset()), interval_s=0.001) as sampler:
        wait_until(lambda: len(sampler.samples) >= 3)
    assert sampler.summary() is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_without_a_gpu_there_is_no_sampler():
    assert nvml_sampler("00000000-0000-0000-0000-000000000000") is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_gpu_the_eval_runs_on_is_sampled():
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    with nvml_sampler(uuid) as sampler:
        wait_until(lambda: len(sampler.samples) >= 5)
    s = sampler.summary()
    assert s.samples >= 5 and s.sm_mhz_median > 0 and s.sm_mhz_max >= s.sm_mhz_median


def test_the_markdown_report_shows_the_clocks_of_each_timed_shape():
    from jg_mcp.eval.report import EvalReport, ShapeResult
    from jg_mcp.eval.report_md import markdown
    from jg_mcp.eval.report_timing import ClockSummary

    env = environment("cuda")
    clocks = ClockSummary(
        samples=40,
        sm_mhz_median=1755,
        sm_mhz_min=1530,
        sm_mhz_max=1980,
        power_w_median=688,
        power_limit_w=700,
        slowdowns={"sw_power_cap": 0.75},
    )
    shape = ShapeResult(name="m8192", kind="timed", dims={"M": 8192}, trials=3, correct=True, clocks=clocks)
    report = EvalReport(
        goal="g",
        goal_sha256="0" * 64,
        solution_sha256="1" * 64,
        solution_file="solution.py",
        accepted=True,
        seed=7,
        environment=env,
        shapes=[shape],
    )
    assert "| m8192 | 1755 (1530) of 1980 | 688 of 700 | sw_power_cap 75% |" in markdown(report)
