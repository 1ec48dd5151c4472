"""A worker's launch is a description: its environment and command line are worked out without starting anything,
and `WorkerProcess.spawn` alone starts it."""

from __future__ import annotations

from jg_mcp.eval.processes.process import WorkerLaunch


def test_a_launch_describes_the_worker_and_starts_nothing(tmp_path):
    candidate = WorkerLaunch("candidate", tmp_path, False, "tok", 30.0, "cpu")
    env = candidate.environment("tok.1", None)
    assert (env["JG_EVAL_TOKEN"], env["TRITON_INTERPRET"]) == ("tok.1", "1")
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "cache" / "triton") and "PYTHONPYCACHEPREFIX" not in env
    baseline = WorkerLaunch("baseline", tmp_path, False, "tok", 30.0, "cuda", {"TRITON_CACHE_DIR": "/c"}, ("m",))
    env = baseline.environment("tok.2", tmp_path / "bytecode")
    assert "JG_EVAL_TOKEN" not in env and env["TRITON_CACHE_DIR"] == "/c" and "PYTHONDONTWRITEBYTECODE" not in env
    assert baseline.argv(["prefix"], 5, 42)[0] == "prefix"
    assert baseline.argv([], 5, 42)[-5:] == ["jg_mcp.eval.candidate.worker", "5", "42", "cuda", "m"]
    assert list(tmp_path.iterdir()) == []
