"""One run end to end: start an agent on a goal under a condition with a budget, stop it, eval, audit.

runs/RUN_ID/ holds: workspace/, transcripts/ (the server's RUN.jsonl and blobs), agent/ (the agent's
working directory), mcp.json (the only MCP server the agent gets), prompt.md, agent.log (its stdout: its
own log, stream-json for Claude Code), agent.stderr.log, eval.json/eval.md, audit.json/session.html and,
written last, run.json (its model, RunRecord, and the RunIdentity that defines a run are in
jg_mcp.campaign.run_record; what a run is before it runs, in jg_mcp.campaign.plan). A run directory whose run.json
says `finished` is kept; one that failed to start or reached no verdict is run again, and so is anything else.

Every wait is bounded: jg_mcp.campaign.supervise stops the agent (its process group: SIGTERM, then SIGKILL
after a grace) when its budget is spent; the eval and the audit run with timeouts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from jg_mcp import log
from jg_mcp.campaign import RunInputs
from jg_mcp.campaign.agent_account import violations
from jg_mcp.campaign.agents import mcp_config
from jg_mcp.campaign.plan import Plan, reusable
from jg_mcp.campaign.preflight import gpu_problem
from jg_mcp.campaign.run_record import (
    FAILED_TO_START,
    NO_VERDICT,
    RUN_FILE,
    EvalSummary,
    RunRecord,
    RunSpec,
    ShapeSummary,
)
from jg_mcp.campaign.supervise import (
    POLL_S,
    Watch,
    close_reason,
    kill_agents_and_exit,
    made_a_tool_call,
    supervise,
    transcripts,
    watch_parent,
)
from jg_mcp.errors import EvalReportError
from jg_mcp.live.places import check_place, make_private_dir
from jg_mcp.live.session import host_info, now_iso
from jg_mcp.record.audit import read_eval_report
from jg_mcp.record.conditions import agent_instruction, check_transcript

if TYPE_CHECKING:
    from jg_mcp.goals import LoadedGoal

logger = log.get("jg_mcp.run")
CLOSE_WAIT_S = 15.0


def _subprocess(args: list[str], env: dict[str, str], timeout_s: float, log_path: Path) -> int | None:
    """`python -m jg_mcp ARGS` with its output in log_path; None when it timed out."""
    with log_path.open("wb") as out:
        try:
            return subprocess.run(
                [sys.executable, "-m", "jg_mcp", "--log-level", "WARNING", *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout_s,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            return None


def summarize_eval(path: Path, code: int | None) -> EvalSummary:
    if code is None:
        return EvalSummary(status="error", reasons=["eval timed out"])
    try:
        report = read_eval_report(path)
    except EvalReportError as exc:
        return EvalSummary(status="error", exit_code=code, reasons=[f"eval exit {code}, report unusable: {exc}"])
    timed = [s for s in report.shapes if s.kind == "timed"]
    roof = sorted(s.roofline_pct for s in timed if s.roofline_pct is not None)
    status = "accepted" if code == 0 and report.accepted else "rejected" if code == 1 else "error"
    return EvalSummary(
        status=status,
        exit_code=code,
        reasons=[str(r) for r in report.reasons],
        geomean_speedup=report.geomean_speedup,
        roofline_pct=roof[len(roof) // 2] if roof else None,
        device=report.environment.device,
        shapes=[
            ShapeSummary(
                name=s.name, speedup=min(s.speedup.values()) if s.speedup else None, roofline_pct=s.roofline_pct
            )
            for s in timed
        ],
    )


def execute(spec: RunSpec, out: Path, run_id: str | None = None, plan: Plan | None = None) -> RunRecord:
    """Run `spec` into out/RUN_ID and return its record (also in run.json). A run with a result is not redone (one
    made under another identity is refused: `reusable`); one that failed to start or reached no verdict is."""
    from jg_mcp.goal_text import instruction

    plan = plan or Plan.resolve(spec, run_id)
    loaded, agent, minutes, budget = plan.loaded, plan.agent, plan.minutes, plan.budget
    run_id = plan.run_id
    make_private_dir(out, "--out")
    out = out.resolve()
    run_dir = out / run_id
    check_place(run_dir, "the run directory")
    before = reusable(run_dir, plan.identity)
    if before is not None:
        return before
    if run_dir.exists():
        shutil.rmtree(run_dir)
    make_private_dir(run_dir, "the run directory")  # as serve's runs/RUN_ID: the sandbox uid may open below it
    (run_dir / "agent").mkdir()
    server_argv = [
        sys.executable,
        "-m",
        "jg_mcp",
        "--log-level",
        "WARNING",
        "serve",
        "--goal",
        str(loaded.yaml_path.resolve()),
        "--workspace",
        str(run_dir / "workspace"),
        "--transcripts",
        str(run_dir / "transcripts"),
        "--runs",
        str(out),
        "--sandbox",
        spec.sandbox,
        "--condition",
        spec.condition,
        "--budget-minutes",
        f"{minutes:g}",
    ]
    if budget.max_tool_calls:
        server_argv += ["--max-tool-calls", str(budget.max_tool_calls)]
    if budget.max_command_seconds:
        server_argv += ["--max-command-seconds", f"{budget.max_command_seconds:g}"]
    env = dict(os.environ)
    if spec.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(spec.gpu)
    config = mcp_config(server_argv)
    if "CUDA_VISIBLE_DEVICES" in env:
        config["mcpServers"]["jg"]["env"]["CUDA_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"]
    (run_dir / "mcp.json").write_text(json.dumps(config, indent=2) + "\n")
    (run_dir / "prompt.md").write_text(agent_instruction(instruction(loaded), spec.condition))
    inputs = RunInputs(
        run_dir=run_dir,
        mcp_config=run_dir / "mcp.json",
        server_argv=server_argv,
        prompt_file=run_dir / "prompt.md",
        model=spec.model,
        seed=spec.seed,
    )
    record = RunRecord(
        run_id=run_id,
        spec=spec,
        identity=plan.identity,
        label=plan.identity.agent,
        agent=agent.name,
        agent_version=plan.identity.agent_version,
        agent_kept=agent.kept,
        model=spec.model,
        condition=spec.condition,
        goal=loaded.name,
        goal_sha256=plan.identity.goal_sha256,
        budget=budget,
        gpu=env.get("CUDA_VISIBLE_DEVICES"),
        server_argv=server_argv,
        started_at=now_iso(),
        eval=EvalSummary(status="error"),
        host=host_info(),
    )
    logger.info("run started", run_id=run_id, agent=agent.name, condition=spec.condition)
    watch = Watch(run_dir, minutes * 60, spec.startup_s, spec.grace_s)
    missing = agent.missing() or (gpu_problem(spec.gpu) if spec.gpu is not None else None)
    try:
        record.launch = agent.launch(inputs)
        if missing:
            reason, code, wall = f"agent could not start: {missing}", None, 0.0
        else:
            passed = {k: v for k, v in env.items() if k not in record.launch.withheld}
            reason, code, wall = supervise(record.launch, run_dir, {**passed, **record.launch.env}, watch)
    except Exception as exc:  # noqa: BLE001 -- the run's boundary: a failure is a result, recorded in run.json
        reason, code, wall = f"run error: {type(exc).__name__}: {exc}", None, 0.0
    record.exit_reason, record.agent_exit_code, record.agent_wall_s = reason, code, round(wall, 3)
    logs = [
        (run_dir / n).read_text(errors="replace") if (run_dir / n).exists() else ""
        for n in ("agent.log", "agent.stderr.log")
    ]
    if code not in (0, None) or reason.startswith("agent could not start"):
        why = agent.diagnose(*logs)
        record.exit_reason += f": {why}" if why and not reason.startswith("agent could not start") else ""
    record.agent_account = agent.account(logs[0])
    if record.agent_account is not None:
        record.model = record.model or record.agent_account.model
        record.agent_version = record.agent_account.version or record.agent_version
    finish(record, loaded, run_dir, env, spec)
    return record


def finish(record: RunRecord, loaded: LoadedGoal, run_dir: Path, env: dict[str, str], spec: RunSpec) -> None:
    """Wait (bounded) for the transcript to close, then eval, audit, check the condition; write run.json."""
    waited = time.monotonic()
    while (
        transcripts(run_dir) and not close_reason(transcripts(run_dir)[0]) and time.monotonic() - waited < CLOSE_WAIT_S
    ):
        time.sleep(POLL_S)
    found = transcripts(run_dir)
    if found:
        record.transcript = str(found[0].relative_to(run_dir))
        record.close_reason = close_reason(found[0])
    elif record.agent_exit_code is not None or "stopped" in record.exit_reason:
        record.exit_reason += "; the agent never started the jg server"
    if not found or not made_a_tool_call(found[0]):
        record.status = FAILED_TO_START
    solution = run_dir / "workspace" / loaded.goal.solution.file
    record.solution = solution.is_file()
    goal_yaml = str(loaded.yaml_path.resolve())
    if record.solution:
        start = time.monotonic()
        code = _subprocess(
            [
                "eval",
                "--goal",
                goal_yaml,
                "--workspace",
                str(run_dir / "workspace"),
                "--json",
                str(run_dir / "eval.json"),
                "--markdown",
                str(run_dir / "eval.md"),
                *spec.eval_args,
            ],
            env,
            spec.eval_timeout_s,
            run_dir / "eval.log",
        )
        record.eval = summarize_eval(run_dir / "eval.json", code)
        record.eval_s = round(time.monotonic() - start, 3)
        if record.eval.status == "error" and record.status != FAILED_TO_START:
            record.status = NO_VERDICT
    else:
        record.eval = EvalSummary(status="no solution", reasons=[f"no {loaded.goal.solution.file} in the workspace"])
    if found:
        audit_args = [
            str(found[0]),
            "--goal",
            goal_yaml,
            "--json",
            str(run_dir / "audit.json"),
            "--html",
            str(run_dir / "session.html"),
        ]
        if (run_dir / "eval.json").is_file():
            audit_args += ["--eval-report", str(run_dir / "eval.json")]
        start = time.monotonic()
        record.audit_ok = _subprocess(["audit", *audit_args], env, 600, run_dir / "audit.log") == 0
        record.audit_s = round(time.monotonic() - start, 3)
        record.condition_violations = check_transcript(found[0], record.condition)
    if record.agent_account is not None:
        record.condition_violations += violations(record.agent_account)
    elif record.status != FAILED_TO_START and record.agent == "claude-code":
        record.condition_violations.append("the agent gave no account of what it had (no init event in its log)")
    record.ended_at = now_iso()
    tmp = run_dir / (RUN_FILE + ".tmp")
    tmp.write_text(record.model_dump_json(indent=2) + "\n")
    tmp.replace(run_dir / RUN_FILE)
    logger.info("run finished", run_id=record.run_id, reason=record.exit_reason, eval=record.eval.status)


def record_failure(spec: RunSpec, out: Path, run_id: str, reason: str) -> RunRecord:
    """run.json for a run that ended without writing one (killed at the campaign's timeout, crashed), or that could
    not start (its agent or GPU missing): `failed to start` unless its transcript shows the agent reached the
    server, else `no verdict` (nothing judged what it left)."""
    plan = Plan.resolve(spec, run_id)
    run_dir = out / run_id
    make_private_dir(run_dir, "the run directory")
    found = transcripts(run_dir)
    record = RunRecord(
        run_id=run_id,
        spec=spec,
        identity=plan.identity,
        status=NO_VERDICT if found and made_a_tool_call(found[0]) else FAILED_TO_START,
        label=plan.identity.agent,
        agent=plan.agent.name,
        agent_version=plan.identity.agent_version,
        agent_kept=plan.agent.kept,
        model=spec.model,
        condition=spec.condition,
        goal=plan.loaded.name,
        goal_sha256=plan.identity.goal_sha256,
        budget=plan.budget,
        server_argv=[],
        started_at=now_iso(),
        ended_at=now_iso(),
        exit_reason=reason,
        transcript=str(found[0].relative_to(run_dir)) if found else None,
        close_reason=close_reason(found[0]) if found else None,
        eval=EvalSummary(status="error", reasons=[reason]),
        host=host_info(),
    )
    (run_dir / RUN_FILE).write_text(record.model_dump_json(indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    """The campaign's worker: `python -m jg_mcp.campaign.run --spec JSON --out OUT --run-id ID`."""
    import argparse

    p = argparse.ArgumentParser(prog="jg_mcp.campaign.run")
    p.add_argument("--spec", required=True, help="a RunSpec as JSON")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--parent-pid", type=int, help="end the run when this process is gone (default: the parent now)")
    args = p.parse_args(argv)
    log.configure("WARNING")
    signal.signal(signal.SIGTERM, kill_agents_and_exit)
    watch_parent(args.parent_pid or os.getppid())
    spec = RunSpec.model_validate_json(args.spec)
    # The campaign imported every goal's module before its first run; importing it again here costs each run's
    # process torch's import (1.6 s on two cores) and changes nothing.
    record = execute(spec, args.out, args.run_id, Plan.resolve(spec, args.run_id, import_module=False))
    return 0 if record.eval.status == "accepted" else 1


if __name__ == "__main__":
    sys.exit(main())
