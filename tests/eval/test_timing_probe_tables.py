"""eval/timing_probe_tables.py, the tables eval/timing_probe.py prints (the probe itself needs CUDA)."""

from __future__ import annotations

import sys

from eval_suite import REPO

sys.path.insert(0, str(REPO / "eval"))

import timing_probe_tables as tables  # noqa: E402

PROCESSES = [
    {"shapes": {"rope:decode": {"candidate": {"db1": [1.0, 1.2]}, "compiled": {"db1": [2.0, 2.2]}}}},
    {"shapes": {"rope:decode": {"candidate": {"db1": [1.0, 1.0]}, "compiled": {"db1": [3.0, 3.0]}}}},
]
EVALS = {"rope": {"shapes": {"decode": {"candidate": {"eval": 1.0}, "compiled": {"eval": 2.5}}}}}


def test_each_variant_is_read_as_the_median_of_its_repeats_with_their_range():
    assert tables.cell([1.0, 2.0, None]) == "1.5000 [1.0000-2.0000]"
    assert tables.cell([None]) == "-" and tables.cell(None) == "-" and tables.cell(0.5, 1) == "0.5"
    assert tables.median([None, 3.0, 1.0]) == 2.0 and tables.median([None]) is None
    assert tables.spread([1.0, 2.0, 3.0]) == 100.0 and tables.spread([1.0]) is None
    lines = tables.table(EVALS, PROCESSES[0]).splitlines()
    assert lines[2] == "| rope:decode | candidate | 1.0000 | - | - | 1.1000 [1.0000-1.2000] |"


def test_the_ratios_are_compared_with_the_evals_and_spread_over_the_processes():
    """Each process's ratio is the median baseline time over the median candidate time; the agreement table gives
    the median of those over the processes beside the eval's, the spread table their range over the median."""
    agreement = tables.agreement(EVALS, PROCESSES).splitlines()
    assert agreement[2] == f"| rope:decode | compiled/candidate | 2.5000 | {(2.1 / 1.1 + 3.0) / 2:.4f} |"
    spreads = tables.spreads(PROCESSES).splitlines()
    assert spreads[2] == "| rope:decode | candidate | 9.5 |"
