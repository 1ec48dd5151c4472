"""Timing statistics, the physical floor and the escape rule."""

from __future__ import annotations

import random

from jg_mcp.eval.timing import escaped, floor_ms, summarize


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
