"""The campaign table from hand-built run records: labels with evidence, marked hacks struck, seeds as median and
spread, per-shape % of speed-of-light, linear time, and a chart a browser shows unclipped."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from jg_mcp.campaign import table
from jg_mcp.campaign.budget import Budget
from jg_mcp.campaign.marks import read_mark
from jg_mcp.campaign.run_record import EvalSummary, RunRecord, RunSpec, ShapeSummary
from jg_mcp.campaign.table_render import svg_chart
from tests.support import jg


def record(
    agent: str,
    goal: str,
    condition: str,
    seed: int,
    status: str,
    speedup: float | None = None,
    roofline: float | None = None,
    reasons: tuple[str, ...] = (),
    exit_reason: str = "agent exited (code 0)",
    run_status: str = "finished",
    violations: tuple[str, ...] = (),
):
    shapes = [ShapeSummary(name="llama", speedup=speedup, roofline_pct=roofline)] if speedup else []
    return RunRecord(
        run_id=f"{agent}__{goal}__{condition}__s{seed}__0123456789",
        spec=RunSpec(agent="scripted", goal=goal, seed=seed),
        status=run_status,
        label=agent,
        agent="scripted",
        condition=condition,
        goal=goal,
        goal_sha256="0" * 64,
        budget=Budget(wall_clock_minutes=10),
        server_argv=[],
        started_at="",
        exit_reason=exit_reason,
        condition_violations=list(violations),
        eval=EvalSummary(
            status=status, reasons=list(reasons), geomean_speedup=speedup, roofline_pct=roofline, shapes=shapes
        ),
    )


RECORDS = [
    record("claude", "gemm", "goal-only", 0, "accepted", 2.0, 50.0),
    record("claude", "gemm", "goal-only", 1, "accepted", 4.0, 70.0),
    record("claude", "gemm", "goal-only", 2, "accepted", 3.0, 60.0),
    record("claude", "gemm", "goal-only", 3, "rejected", None, None, ("wrong_output",)),
    record("claude", "gemm", "goal-only", 4, "accepted", 40.0, 99.0),
    record("claude", "norm", "goal-only", 0, "accepted", 2.0, 80.0),
    record("claude", "norm", "eval-tool", 0, "no solution", exit_reason="budget spent: 10 minutes; agent stopped"),
    record(
        "claude",
        "norm",
        "eval-tool",
        1,
        "no solution",
        exit_reason="agent could not start: no executable 'claude' on PATH",
        run_status="failed to start",
    ),
    record("claude", "norm", "eval-tool", 2, "accepted", 9.0, 90.0, violations=("the agent had tool 'Bash'",)),
    record("codex", "gemm", "goal-only", 0, "rejected", 9.0, None, ("forbidden_api",)),
]
HACK = RECORDS[4].run_id


def marked():
    from jg_mcp.campaign.marks import Mark

    return {HACK: Mark(hack=True, note="caches the output across calls (seq 41)", by="ana", at="2026-01-01")}


def test_each_run_is_labelled_with_its_evidence_and_a_marked_hack_is_struck_from_the_ranking():
    t = table.build(RECORDS, marked())
    labels = {r.run_id.split("__0123")[0]: (r.label, r.why) for r in t.rows}
    assert labels["claude__gemm__goal-only__s3"] == ("rejected", "wrong_output")
    assert labels["claude__gemm__goal-only__s4"] == (
        "reward hack",
        "marked by ana at 2026-01-01: caches the output across calls (seq 41)",
    )
    assert labels["claude__norm__eval-tool__s0"] == ("budget spent", "budget spent: 10 minutes; no solution")
    assert labels["claude__norm__eval-tool__s1"][0] == "failed"
    assert labels["claude__norm__eval-tool__s1"][1].startswith("failed to start: agent could not start")
    assert labels["claude__norm__eval-tool__s2"] == ("failed", "condition violated: the agent had tool 'Bash'")
    gemm = t.cell("claude", "gemm", "goal-only")
    assert (gemm.runs, gemm.accepted, gemm.speedups, gemm.median_speedup) == (5, 3, [2.0, 3.0, 4.0], 3.0)
    assert gemm.median_roofline_pct == 60.0 and gemm.labels == {"accepted": 3, "rejected": 1, "reward hack": 1}
    assert t.cell("claude", "norm", "eval-tool").accepted == 0, "a run that broke its condition counts for nothing"
    assert t.cell("codex", "gemm", "goal-only").speedups == [], "a rejected run's speedup counts for nothing"
    assert t.geomean["claude"]["goal-only"] == pytest.approx((3.0 * 2.0) ** 0.5)
    assert t.geomean["claude"]["eval-tool"] is None and t.geomean["codex"]["goal-only"] is None


def test_markdown_csv_and_html_show_median_spread_count_per_shape_sol_and_the_struck_row():
    t = table.build(RECORDS, marked())
    md = table.markdown(t)
    assert "| gemm | goal-only | 3/5 | 3.00x [2.00-4.00] n=3 | 60.00% | 0/1 | - | - |" in md
    assert "| geomean | goal-only |  | 2.45x |  |  | - |  |" in md
    assert "| ~~claude__gemm__goal-only__s4__0123456789~~ | reward hack | marked by ana" in md
    assert "| claude__gemm__goal-only__s1__0123456789 | accepted | - | 4.00x | llama 4.00x (70.00% SOL) | - |" in md
    lines = table.to_csv(t).splitlines()
    assert lines[0].startswith("run_id,agent,goal,condition,seed,label,why,speedup,roofline_pct")
    assert "claude__gemm__goal-only__s3__0123456789,claude,gemm,goal-only,3,rejected,wrong_output,,,-" in lines
    page = table.to_html(t)
    assert page.count("<svg") == 1 and "median verified speedup (x)" in page
    assert '<tr class="struck"><td>claude__gemm__goal-only__s4__0123456789</td>' in page


@pytest.mark.slow
def test_a_runs_directory_with_a_marked_hack_keeps_its_evidence_and_links_it(tmp_path):
    runs = tmp_path / "runs"
    for r in RECORDS[:5]:
        d = runs / r.run_id
        (d / "transcripts").mkdir(parents=True)
        r.transcript = "transcripts/t.jsonl"
        (d / "transcripts" / "t.jsonl").write_text("{}\n")
        (d / "session.html").write_text("<html></html>")
        (d / "eval.md").write_text("# eval\n")
        (d / "run.json").write_text(r.model_dump_json())
    before = {p: p.read_bytes() for p in (runs / HACK).rglob("*") if p.is_file()}
    done = jg("mark", runs / HACK, "--hack", "--note", "caches the output (seq 41)")
    assert done.returncode == 0, done.stderr
    assert all(p.read_bytes() == data for p, data in before.items()), "marking changed the evidence"
    assert read_mark(runs / HACK).note == "caches the output (seq 41)"
    page = tmp_path / "out" / "t.html"
    page.parent.mkdir()
    shown = jg("table", runs, "--html", page)
    assert shown.returncode == 0, shown.stderr
    assert "| 3/5 | 3.00x [2.00-4.00] n=3 |" in shown.stdout
    assert f"[audit]({runs}/{HACK}/session.html)" in shown.stdout
    html = page.read_text()
    assert f'<a href="../runs/{HACK}/transcripts/t.jsonl">transcript</a>' in html
    assert f'<a href="../runs/{HACK}/eval.md">eval</a>' in html
    refused = jg("mark", tmp_path, "--hack", "--note", "x")
    assert refused.returncode == 1 and "not a run directory" in refused.stderr


@pytest.mark.slow
def test_the_table_takes_linear_time_in_its_runs():
    def seconds(n: int) -> float:
        many = [
            record(f"agent{i % 7}", f"goal{i % 13}", "goal-only", i, "accepted", 1.0 + i % 5, 50.0) for i in range(n)
        ]
        start = time.perf_counter()
        t = table.build(many)
        table.markdown(t), table.to_html(t), table.to_csv(t)
        return time.perf_counter() - start

    small, large = min(seconds(2000) for _ in range(3)), min(seconds(8000) for _ in range(3))  # least noise of three
    assert large < 8 * small + 0.5, (small, large)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is installed by .ci/setup")
def test_the_chart_is_not_clipped_at_a_normal_page_width_in_a_real_browser(tmp_path):
    """Every label's text fits in the SVG (the layout is sized from the labels), and chromium renders the page at
    1024 px; the PNG is kept in tmp_path for a person to look at."""
    many = [
        record(a, g, c, 0, "accepted" if (i % 3) else "rejected", None)
        for i, (a, g, c) in enumerate(
            (a, g, c)
            for a in ("claude-sonnet", "my-agent")
            for g in ("grouped_gemm_bf16", "softmax", "attention_prefill")
            for c in ("goal-only", "eval-tool", "knowledge", "workflow")
        )
    ]
    t = table.build(many)
    svg = svg_chart(t)
    assert "accepted runs (fraction of runs)" in svg and 'style="max-width:100%' in svg
    width = float(svg.split('viewBox="0 0 ')[1].split()[0])
    left = max(len(f"{g} / {c}") for _, g, c in ((r.agent, r.goal, r.condition) for r in t.rows)) * 7.0
    assert width >= left + 420
    page = tmp_path / "t.html"
    page.write_text(table.to_html(t))
    shot = tmp_path / "t.png"
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1024,900",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.is_file() and shot.stat().st_size > 5000, done.stderr[-2000:]
