"""eval/state_probe.py's reading of its rows and its arguments (the probe itself needs CUDA)."""

from __future__ import annotations

import sys

import pytest
from eval_suite import REPO

sys.path.insert(0, str(REPO / "eval"))

import state_probe  # noqa: E402


def rope(proc: str, way: str, name: str, us: float, copy: int = 0) -> dict:
    return {"proc": proc, "point": "rope", "callable": name, "copy": copy, "way": way, "us": us}


ROWS = [
    {"proc": "0_plain", "point": "cuda_started", "callable": "torch_add", "captured_at": "cuda_started", "us": 1.2},
    {"proc": "0_plain", "point": "end", "callable": "torch_add", "captured_at": "cuda_started", "us": 1.3},
    rope("0_plain", "replay", "candidate", 4.0),
    rope("0_plain", "replay", "candidate", 4.2, copy=1),
    rope("0_plain", "other_stream", "candidate", 9.9),
    rope("0_plain", "replay", "compiled", 5.5),
    {"proc": "0_plain", "point": "rope", "callable": "compiled", "error": "RuntimeError('cuGraphUpload: 1')"},
    rope("1_eval", "eval", "candidate", 3.7),
    rope("1_eval", "eval", "compiled", 4.8),
    rope("1_eval", "eval", "eager", 40.0),
    rope("2_worker_bound", "worker_bound", "compiled", 5.6),
]


def test_the_table_gives_each_process_and_way_the_median_of_its_graphs_for_the_two_callables():
    lines = state_probe.table(ROWS).splitlines()
    assert lines[0] == "| process | timed by | candidate us | compiled us |"
    assert lines[2:] == [
        "| 0_plain | replay | 4.100 | 5.500 |",
        "| 1_eval | eval | 3.700 | 4.800 |",
        "| 2_worker_bound | worker_bound | - | 5.600 |",
    ]


def test_the_summary_reads_trivial_graphs_by_checkpoint_and_skips_a_failed_way():
    lines = state_probe.summary(ROWS)
    assert lines[0].split() == ["0_plain", "torch_add", "cuda_started", "1.200-1.200", "end", "1.300-1.300"]
    assert "replay#0 4.000" in lines[1] and "other_stream#0 9.900" in lines[1]
    assert lines[2].split()[1:] == ["compiled", "replay#0", "5.500"]


def test_what_could_instrument_kernels_is_reported(monkeypatch):
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/inject.so")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    found = state_probe.loaded()
    assert found["env"]["CUDA_INJECTION64_PATH"] == "/opt/inject.so" and "LD_PRELOAD" not in found["env"]
    assert all(any(s in lib.rsplit("/", 1)[-1] for s in state_probe.INSTRUMENTS) for lib in found["libs"])


def test_an_unknown_way_is_refused_by_name(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["state_probe.py", "--starts", "plain,sideways"])
    with pytest.raises(SystemExit) as exited:
        state_probe.main()
    assert exited.value.code == 2 and "no way named sideways" in capsys.readouterr().err
