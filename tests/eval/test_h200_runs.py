"""eval/h200_runs.py: each GPU run of the check is one file written once, indexed by one row in history.md, and
read back by name (the committed runs and eval/h200_spread.py's RUN:PART)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.support import REPO


def load():
    spec = importlib.util.spec_from_file_location("h200_runs", REPO / "eval" / "h200_runs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RESULTS = {"parts": ["evals", "hacks"], "wall_s": 12.4, "evals": {"rope": {"accepted": True}}, "hacks": {}}


def test_a_run_is_written_once_and_indexed(tmp_path):
    runs = load()
    path = runs.write_run(RESULTS, "run99_abc1234", tmp_path)
    assert path == tmp_path / "runs" / "run99_abc1234.json"
    assert json.loads(path.read_text()) == RESULTS
    rows = (tmp_path / "history.md").read_text().splitlines()
    assert rows[-1] == "| run99_abc1234 | evals,hacks | 12 | 1/1 | - | - |"
    with pytest.raises(FileExistsError):
        runs.write_run({"parts": []}, "run99_abc1234", tmp_path)
    assert json.loads(path.read_text()) == RESULTS
    assert (tmp_path / "history.md").read_text().count("run99_abc1234") == 1
    assert runs.pick("run99_abc1234:evals", tmp_path) == RESULTS["evals"]
    with pytest.raises(ValueError):
        runs.write_run(RESULTS, "../escape", tmp_path)


def test_the_committed_runs_are_one_small_file_each_and_all_indexed():
    runs = load()
    files = sorted((REPO / "eval" / "results" / "h200" / "runs").glob("*.json"))
    assert len(files) > 50 and not (REPO / "eval" / "results" / "h200" / "check.json").exists()
    assert max(f.stat().st_size for f in files) < 1_000_000
    history = (REPO / "eval" / "results" / "h200" / "history.md").read_text()
    assert all(f"| {f.stem} |" in history for f in files)
    assert runs.read_run("run62_2794ed9")["wall_s"] > 0
