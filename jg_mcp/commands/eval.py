"""`jg-mcp eval`: re-verify the solution an agent left in its workspace."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from jg_mcp import log
from jg_mcp.commands.arguments import input_dir, non_negative_int, output_file, positive_float
from jg_mcp.errors import JgError, NoVerdict, UsageError
from jg_mcp.goals import find_goal, load_goal
from jg_mcp.live.places import write_output
from jg_mcp.terminal import printable, unguarded

logger = log.get("jg_mcp.commands.eval")

if TYPE_CHECKING:
    from jg_mcp.eval.report import EvalReport


class Bar:
    """Progress on stderr: step count, elapsed time, current step. On a terminal one line redrawn in
    place; in a file or a CI log (not a terminal) one plain line per step, no carriage returns."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or unguarded(sys.stderr)  # redrawn with carriage returns: its labels are the goal's
        self.live = self.stream.isatty()
        self.n = 0
        self.start = time.monotonic()

    def __call__(self, label: str) -> None:
        self.n += 1
        elapsed = time.monotonic() - self.start
        if self.live:
            spin = "#" * (self.n % 20) + "." * (20 - self.n % 20)
            self.stream.write(f"\r[{spin}] step {self.n} {elapsed:6.1f}s {label[:60]:60s}")
        else:
            self.stream.write(f"eval step {self.n} {elapsed:6.1f}s {label}\n")
        self.stream.flush()

    def done(self) -> None:
        if self.live and self.n:
            self.stream.write("\n")


def _at_least_3(text: str) -> int:
    value = int(text)
    if value < 3:
        raise argparse.ArgumentTypeError("at least 3 trials are needed")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="re-verify a workspace's solution: correctness on secret inputs, anti-cheat, timing vs baselines",
        description="Evaluate the solution in a workspace against its goal. Without a GPU, correctness is checked "
        "at the goal's small shapes in the Triton interpreter and timing is skipped. Exit 0 accepted, 1 rejected, "
        "2 usage error (no such goal or workspace, --device cuda without a CUDA device), 3 no verdict (the harness "
        "or the host failed: no report).",
    )
    p.add_argument("--goal", required=True, help="goal name (as in `jg-mcp goals list`, or axpy) or YAML path")
    p.add_argument("--workspace", required=True, type=Path, help="the agent's workspace directory")
    p.add_argument("--solution", help="workspace-relative solution file (default: the goal's)")
    p.add_argument("--shapes", choices=["timed", "smoke", "all"], default="all", help="which goal shapes (default all)")
    p.add_argument("--only", action="append", default=[], metavar="SHAPE", help="only this goal shape (repeatable)")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available")
    p.add_argument(
        "--trials",
        type=_at_least_3,
        default=3,
        help="correctness trials per shape, at least 3 (default 3; 2 at the extremes and CPU top shapes)",
    )
    p.add_argument(
        "--domain-shapes", type=non_negative_int, default=2, help="untimed shapes drawn from the domain (default 2)"
    )
    p.add_argument(
        "--timeout", type=positive_float, default=300.0, help="seconds to wait for each answer (default 300)"
    )
    p.add_argument(
        "--total-timeout",
        type=positive_float,
        default=1800.0,
        help="seconds for the whole eval; when they run out the solution is rejected (timeout) (default 1800)",
    )
    p.add_argument(
        "--timing-budget",
        type=positive_float,
        help="seconds of timing per shape (default: budget_s in jg_mcp/eval/timing.py)",
    )
    p.add_argument(
        "--policy",
        choices=["open", "triton"],
        default="open",
        help="open: any language, several files, native code built from the workspace's sources (default); "
        "triton: the Triton-only allow-list of one Python file (for competitions)",
    )
    p.add_argument(
        "--isolation",
        choices=["auto", "bwrap", "bwrap-unfiltered", "none"],
        default="auto",
        help="the candidate's sandbox: bwrap with its seccomp filter (auto: a plain process only where bubblewrap is "
        "not installed and this is not root), bwrap without the filter, or a plain process (none)",
    )
    p.add_argument("--do-bench", action="store_true", help="cross-check baselines with triton.testing.do_bench")
    p.add_argument("--json", type=Path, help="write the JSON report here")
    p.add_argument("--markdown", type=Path, help="write the Markdown report here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    input_dir(args.workspace, "--workspace")
    output_file(args.json, "--json")
    output_file(args.markdown, "--markdown")
    goal = find_goal(args.goal)
    loaded = load_goal(goal)  # a missing goal is a usage error (exit 2), a malformed one a failure (exit 1)
    shapes = [s.name for s in (*loaded.goal.shapes, *loaded.goal.smoke_shapes)]
    for name in args.only:
        if name not in shapes:
            raise UsageError(f"--only {name}: goal {loaded.name} has no such shape (its shapes: {', '.join(shapes)})")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device (leave --device out to check on the CPU)")
    from jg_mcp.eval.harness import EvalOptions, evaluate
    from jg_mcp.eval.report_md import markdown, table

    options = EvalOptions(
        goal=goal,
        workspace=args.workspace,
        solution=args.solution,
        shapes=args.shapes,
        only=args.only,
        device=args.device,
        trials=args.trials,
        domain_shapes=args.domain_shapes,
        timeout_s=args.timeout,
        total_timeout_s=args.total_timeout,
        timing={"budget_s": args.timing_budget} if args.timing_budget else {},
        do_bench=args.do_bench,
        policy=args.policy,
        isolation=args.isolation,
    )
    bar = Bar()
    try:
        report = evaluate(options, bar)
    except JgError:
        raise  # says what is wrong (a goal the harness cannot use: exit 1, a failure; a usage error: exit 2)
    except Exception as exc:  # noqa: BLE001 (whatever else failed, there is no verdict: never exit 1, a rejection)
        logger.debug("the eval failed", exc_info=True)
        raise NoVerdict(
            f"no verdict: the eval failed: {type(exc).__name__}: {exc} (--log-level DEBUG shows where)"
        ) from None
    finally:
        bar.done()
    if args.json:
        write_output(args.json, report.model_dump_json(indent=2), "--json")
    if args.markdown:
        write_output(args.markdown, markdown(report), "--markdown")
    print(table(report))
    print("\n" + verdict_lines(report))
    return 0 if report.accepted else 1


DETAIL_CHARS = 300
"""The most of a finding's detail printed on the terminal (the whole of it is in the JSON report)."""


def _detail(text: str) -> str:
    """The last line of a finding's detail (a traceback's exception), as one printable line of bounded length with
    no runs of spaces: candidate text can neither steer the terminal nor wrap a line of its own into view."""
    last = text.splitlines()[-1] if text.strip() else ""
    line = printable(" ".join(last.split()))
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 3] + "..."


def verdict_lines(report: EvalReport) -> str:
    """One line per finding, then the verdict with the speedup or why there is none: the verdict comes last, after
    every piece of candidate text, so nothing printed after it can be taken for it."""
    verdict = "ACCEPTED" if report.accepted else "REJECTED: " + ", ".join(report.reasons)
    if report.timing.skipped:
        speed = f"timing skipped: {report.timing.skipped}"
    elif report.geomean_speedup is None:
        speed = "no speedup measured"
    else:
        speed = f"geomean speedup {report.geomean_speedup:.3f}x vs the strongest baseline"
    lines = []
    for f in report.findings:
        where = f" at {_detail(f.shape)}" if f.shape else ""
        lines.append(f"  {f.reason}{where}: {_detail(f.detail)}")
    lines.append(f"{report.goal}: {verdict}; {speed}")
    return "\n".join(lines)
