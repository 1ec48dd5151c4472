"""What the campaign table counts: only runs of one setup are seeds of one cell (another budget, model or agent
version is another line, named by what differs), a seed run twice counts once, a run that failed to start and a
copied run directory count nowhere, and each geomean says over how many goals it is taken."""

from __future__ import annotations

import shutil

import pytest

from jg_mcp.campaign import table
from jg_mcp.campaign.budget import Budget
from jg_mcp.campaign.run_record import RUN_FILE, EvalSummary, RunIdentity, RunRecord, RunSpec


def record(
    goal: str = "axpy",
    seed: int = 0,
    status: str = "accepted",
    speedup: float | None = None,
    agent: str = "claude",
    version: str = "2.0.0",
    model: str | None = None,
    budget: Budget | None = None,
    started_at: str = "2026-01-01T00:00:00Z",
    run_id: str | None = None,
    run_status: str = "finished",
) -> RunRecord:
    """A run record as `jg-mcp run` writes one: its id from its identity unless given."""
    budget = budget or Budget(wall_clock_minutes=10)
    identity = RunIdentity(
        agent=agent,
        adapter="command",
        agent_version=version,
        model=model,
        condition="goal-only",
        goal=goal,
        goal_sha256="0" * 64,
        budget=budget,
        seed=seed,
    )
    return RunRecord(
        run_id=run_id or identity.run_id(),
        spec=RunSpec(agent="command", goal=goal, seed=seed, model=model),
        identity=identity,
        status=run_status,
        label=agent,
        agent="command",
        agent_version=version,
        condition="goal-only",
        goal=goal,
        goal_sha256="0" * 64,
        budget=budget,
        server_argv=[],
        started_at=started_at,
        exit_reason="agent exited (code 0)",
        eval=EvalSummary(status=status, geomean_speedup=speedup),
    )


def summary(md: str) -> list[str]:
    return md.split("\n\n")[0].splitlines()


def test_runs_under_another_budget_model_or_agent_version_are_never_pooled_but_named_apart():
    capped = record(status="no solution", budget=Budget(wall_clock_minutes=10, max_tool_calls=2))
    uncapped = record(speedup=2.0, budget=Budget(wall_clock_minutes=10, max_tool_calls=50), started_at="2026-01-02")
    other_model = [
        record(goal="gemm", status="no solution", model="weak"),
        record(goal="gemm", speedup=3.0, model="strong"),
    ]
    updated = [record(seed=0, version="2.0.0", goal="rope", speedup=1.5)] + [
        record(seed=s, version="2.0.1", goal="rope", speedup=1.5, started_at="2026-01-02") for s in (0, 1)
    ]
    t = table.build([capped, uncapped, *other_model, *updated])
    lines = summary(table.markdown(t))
    assert "| axpy | goal-only (claude with budget.max_tool_calls=2) | 0/1 | - | - |" in lines
    assert "| axpy | goal-only (claude with budget.max_tool_calls=50) | 1/1 | 2.00x n=1 | - |" in lines
    assert "| rope | goal-only (claude with agent_version=2.0.0) | 1/1 | 1.50x n=1 | - |" in lines
    assert "| rope | goal-only (claude with agent_version=2.0.1) | 2/2 | 1.50x [1.50-1.50] n=2 | - |" in lines
    assert "| gemm | goal-only (claude with model=strong) | 1/1 | 3.00x n=1 | - |" in lines
    assert "| gemm | goal-only (claude with model=weak) | 0/1 | - | - |" in lines
    assert [c.runs for c in t.cells] == [1, 1, 1, 1, 1, 2]
    with pytest.raises(LookupError, match="in 2 setups"):
        t.cell("claude", "axpy", "goal-only")
    conditions = {line.split(",")[3] for line in table.to_csv(t).splitlines()[1:] if ",axpy," in line}
    assert conditions == {"goal-only (budget.max_tool_calls=2)", "goal-only (budget.max_tool_calls=50)"}
    assert t.geomean_goals["claude"]["goal-only"] == (0, 3), "no one median stands for a goal run several ways"


def test_a_seed_run_twice_under_one_setup_counts_once_the_latest():
    old = record(status="rejected", run_id="claude__axpy__goal-only__s0__first", started_at="2026-01-01")
    new = record(speedup=2.0, run_id="claude__axpy__goal-only__s0__again", started_at="2026-01-02")
    t = table.build([new, old])
    cell = t.cell("claude", "axpy", "goal-only")
    assert (cell.runs, cell.accepted, cell.speedups) == (1, 1, [2.0])
    [left_out] = [r for r in t.rows if r.not_counted]
    assert left_out.run_id == old.run_id and "superseded by claude__axpy__goal-only__s0__again" in left_out.not_counted
    md = table.markdown(t)
    assert f"## Not counted\n\n| run | why | evidence | links |\n| --- | --- | --- | --- |\n| {old.run_id} |" in md
    assert old.run_id not in table.to_csv(t)


def test_a_run_that_failed_to_start_counts_in_no_cell_and_is_listed_apart():
    never = record(status="no solution", version="unknown", run_status="failed to start")
    ran = record(speedup=2.0, started_at="2026-01-02")
    t = table.build([never, ran])
    cell = t.cell("claude", "axpy", "goal-only")  # one setup: the failed start, under an unknown version, is none
    assert (cell.runs, cell.accepted) == (1, 1)
    lines = summary(table.markdown(t))
    assert "| axpy | goal-only | 1/1 | 2.00x n=1 | - |" in lines
    md = table.markdown(t)
    assert f"| {never.run_id} | failed to start: not a result | failed to start: agent exited (code 0) | - |" in md
    assert never.run_id not in md.split("## Not counted")[0]
    assert never.run_id not in table.to_csv(t)


def test_a_copied_run_directory_is_read_once_and_the_copy_listed_as_not_read(tmp_path):
    runs = tmp_path / "runs"
    run = record(speedup=2.0)
    (runs / run.run_id).mkdir(parents=True)
    (runs / run.run_id / RUN_FILE).write_text(run.model_dump_json())
    # names that sort before and after the original: the directory named for the run is the one read
    for copy in ("0backup", f"{run.run_id}.bak"):
        shutil.copytree(runs / run.run_id, runs / copy)
    t = table.build_from(runs)
    assert [r.run_id for r in t.rows] == [run.run_id] and t.cell("claude", "axpy", "goal-only").runs == 1
    assert t.unreadable == [
        f"{runs / copy / RUN_FILE}: run id {run.run_id} already read from {runs / run.run_id}, not counted twice"
        for copy in ("0backup", f"{run.run_id}.bak")
    ]
    assert "| axpy | goal-only | 1/1 | 2.00x n=1 | - |" in summary(table.markdown(t))


def test_each_geomean_says_over_how_many_of_the_goals_it_is_taken():
    t = table.build(
        [
            record(agent="A", goal="gemm", speedup=3.0),
            record(agent="A", goal="rope", status="rejected"),
            record(agent="A", goal="softmax", status="rejected"),
            *[record(agent="B", goal=g, speedup=2.0) for g in ("gemm", "rope", "softmax")],
        ]
    )
    assert t.geomean_goals == {"A": {"goal-only": (1, 3)}, "B": {"goal-only": (3, 3)}}
    lines = summary(table.markdown(t))
    assert lines[-2:] == [
        "| geomean | goal-only |  | 3.00x |  |  | 2.00x |  |",
        "| goals in geomean | goal-only |  | 1 of 3 |  |  | 3 of 3 |  |",
    ]
    assert "<td>goals in geomean</td><td>goal-only</td><td></td><td>1 of 3</td>" in table.to_html(t)


def test_an_accepted_kernel_whose_audit_failed_is_not_counted_accepted():
    """The audit found the judged kernel is not the transcript's (an edit outside the session): no accepted run."""
    run = record(speedup=2.0)
    run.audit_ok = False
    (row,) = table.build([run]).rows
    assert row.label == "failed" and "audit failed" in row.why and row.speedup is None
