"""`jg-mcp demo`: a whole recorded session, end to end, with a scripted client and no LLM.

It starts `jg-mcp serve` as a real stdio subprocess on a small embedded goal, reads the goal,
queries the GPU, writes a Triton solution, runs it through run_command (under the Triton
interpreter when there is no GPU) and prints what happened and where the transcript is. Then it
re-verifies the kernel left behind with `jg-mcp eval` and audits the transcript with `jg-mcp audit`.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from jg_mcp.commands.arguments import new_dir
from jg_mcp.errors import JgError
from jg_mcp.gpu import query_gpu
from jg_mcp.record.reading import read_transcript

if TYPE_CHECKING:
    from mcp import StdioServerParameters

    from jg_mcp.scripted import Step, StepResult

DEMO_GOAL = Path(__file__).resolve().parent.parent / "demo_goal" / "axpy.yaml"

SOLUTION = DEMO_GOAL.parent / "axpy_solution.py"
"""The demo goal's known-good solution, the Triton kernel the scripted session writes."""

CHECK = """import sys
import torch
from reference import make_inputs, reference
from solution import kernel

device = "cuda" if torch.cuda.is_available() else "cpu"
worst = 0.0
for n in (1000, 4099, 65536):
    x, y, alpha = make_inputs({"N": n}, seed=n, device=device)
    err = (kernel(x, y, alpha) - reference(x, y, alpha)).abs().max().item()
    worst = max(worst, err)
    print(f"N={n:6d} max abs error {err:.2e}")
print("OK" if worst < 1e-5 else "FAIL", f"device={device}")
sys.exit(0 if worst < 1e-5 else 1)
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="run a recorded end-to-end session with a scripted client, then eval and audit it",
        description="Start `jg-mcp serve` over stdio on a small embedded goal (axpy) and drive a whole session "
        "with a deterministic scripted client (no LLM): read the goal, query the GPU, write a Triton kernel, run "
        "it (in the Triton interpreter on the CPU when there is no GPU). Each step is printed as it completes, "
        "numbered as `jg-mcp replay --step` and `jg-mcp audit` number them (one per tools/call, from 1; other "
        "requests are marked '-'). Then it re-verifies the kernel left behind with `jg-mcp eval` and audits the "
        "transcript with `jg-mcp audit`, which also writes the session as an HTML page. Exit 0 when the session, "
        "the eval and the audit all succeed, 1 otherwise, 2 when --out is not a new or empty directory.",
    )
    p.add_argument(
        "--out", type=Path, help="new or empty directory for the workspace and transcript (default: runs/demo-TIME)"
    )
    p.add_argument(
        "--sandbox",
        choices=["auto", "bwrap", "none"],
        default="auto",
        help="the server's sandbox, as `jg-mcp serve --sandbox` (default auto: a sandbox that cannot run refuses "
        "the start; none runs the demo's commands unsandboxed, which the audit then accepts as asked for)",
    )
    p.set_defaults(func=run)


def demo_steps(goal_name: str, interpret: bool) -> list[Step]:
    from jg_mcp.scripted import Step, call

    prefix = "TRITON_INTERPRET=1 " if interpret else ""
    return [
        Step(kind="list_tools", note="the tools the agent gets"),
        Step(kind="read_resource", name=f"goal://{goal_name}", note="read the goal"),
        call("query_gpu", note="look at the hardware"),
        call("read_file", path="reference.py", limit=20, note="read the reference"),
        call("write_file", path="solution.py", content=SOLUTION.read_text(), note="write a Triton kernel"),
        call("write_file", path="check.py", content=CHECK, note="write a correctness check"),
        # -B: no __pycache__ in the workspace, which the transcript would note as files it does not record
        call("run_command", command=f"{prefix}python -B check.py", timeout_s=300, note="run the check"),
        call("run_command", command="ls -la > listing.txt && wc -l listing.txt", note="a command that writes a file"),
        call("read_file", path="/etc/passwd", note="try to leave the workspace (refused)"),
    ]


EXPECTED = {"read_file was refused": "expected: the demo's last step tries to leave the workspace on purpose"}
"""The audit's findings that the demo causes on purpose, by a text each one's line holds, with what to print beside
it: a newcomer reads a WARNING as something wrong with the install."""

SHOWN_LINES = 12
"""The last lines of `jg-mcp eval`'s and `jg-mcp audit`'s output the demo shows: the verdict and its findings."""
STDERR_TAIL_CHARS = 2000
"""How much of a failed eval's or audit's stderr the demo shows (its end, where the error is)."""

NEXT = """
next:
  the session page, every step, command and file change: open {out}/session.html in a browser
  the workspace as it was after step 3: .venv/bin/jg-mcp replay {transcript} --to {out}/replay-3 --step 3
  a real goal for an agent to attach to: .venv/bin/jg-mcp serve --goal softmax (README.md, "Attach an agent")"""


def private_out(out: Path) -> None:
    """Make the demo's folder, its owner's alone: the session's workspace and the transcript key live in it, and a
    folder other users can search is one the server rightly warns about. A folder the user made is left as it is."""
    if not out.exists():
        out.mkdir(parents=True)
        out.chmod(0o700)


def write_key(out: Path) -> Path:
    """A fresh transcript key (mode 600) for the server to sign every event with and the audit to check them by."""
    key = out / "transcript.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return key


def mark_expected(line: str) -> str:
    """An audit output line, with a note where it is a finding the demo causes on purpose."""
    note = next((why for text, why in EXPECTED.items() if text in line), None)
    return f"{line}\n        ({note})" if note else line


def summary(r: StepResult) -> str:
    s = r.structured or {}
    if "exit_code" in s:
        return f"exit {s['exit_code']}, {s['duration_s']:.2f}s"
    if "sha256" in s:
        return f"{s['size']} bytes, sha256 {s['sha256'][:12]}"
    if "available" in s:
        return "GPU available" if s["available"] else f"no GPU ({s.get('reason') or 'NVML reports none'})"
    if "total_lines" in s:
        return f"lines {s['start_line']}-{s['end_line']} of {s['total_lines']}"
    text = r.text.strip()
    return text.splitlines()[0] if text else ""


def step_line(number: int | None, r: StepResult) -> str:
    """One printed row; `number` is the replay/audit step (tools/call requests only), None for other requests."""
    status = "ok " if r.ok else "ERR"
    label = f"{number:2d}." if number is not None else " -."
    return (
        f"{label} [{status}] {r.step.name or r.step.kind:16s} {r.step.note:38s} {r.duration_s:6.2f}s  {summary(r)[:80]}"
    )


async def run_session(params: StdioServerParameters, steps: list[Step]) -> list[StepResult]:
    """Drive the session, printing each step as it completes, numbered as replay and audit number them."""
    from mcp import Client

    from jg_mcp.scripted import run_step

    results: list[StepResult] = []
    calls = 0
    with anyio.fail_after(600):
        async with Client(params) as client:
            for step in steps:
                result = await run_step(client, step)
                calls += step.kind == "call_tool"
                print(step_line(calls if step.kind == "call_tool" else None, result), flush=True)
                results.append(result)
    return results


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the MCP SDK is needed for the demo, not for the other commands.
    from mcp import StdioServerParameters

    out = args.out or Path("runs") / f"demo-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    new_dir(out, "--out")  # a transcript already there would be taken for this session's
    workspace, transcripts = out / "workspace", out / "transcripts"
    private_out(out)
    key = write_key(out)
    gpu = query_gpu()
    interpret = not gpu.available
    print(
        f"GPU: {gpu.devices[0].name if gpu.available else 'none'}"
        + (" -> kernels run in the Triton interpreter (TRITON_INTERPRET=1) on the CPU" if interpret else "")
    )
    print(
        "steps are numbered as `jg-mcp replay --step` and `jg-mcp audit` number them (one per tools/call); "
        "'-' marks requests that are not tool calls",
        flush=True,
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "jg_mcp",
            "--log-level",
            "WARNING",
            "serve",
            "--goal",
            str(DEMO_GOAL),
            "--workspace",
            str(workspace),
            "--transcripts",
            str(transcripts),
            "--transcript-key-file",
            str(key),
            "--sandbox",
            args.sandbox,
        ],
        env=dict(os.environ),  # the SDK's default passes no PYTHONPATH: an offline --target install would vanish
    )
    try:
        results = anyio.run(run_session, params, demo_steps("axpy", interpret))
    except Exception as exc:  # the server's own error is on stderr above; say so in one line, not a task group
        first = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions else exc
        raise JgError(
            f"the demo's server session failed ({type(first).__name__}: {first}); the server's own "
            "error, if it printed one, is above"
        ) from None
    check = results[6].structured or {}
    print("\ncheck output:\n" + (check.get("stdout") or "").rstrip())
    transcript = next(transcripts.glob("*.jsonl"))
    read = read_transcript(transcript)
    kinds = [e.event for e in read.events]
    print(f"\ntranscript: {transcript} ({len(kinds)} events, hash chain verified, closed={read.closed})")
    print(f"workspace:  {workspace}")
    session_ok = check.get("exit_code") == 0 and not results[-1].ok and read.closed
    eval_ok = _after_session(
        "eval",
        [
            "--goal",
            "axpy",
            "--workspace",
            str(workspace),
            "--json",
            str(out / "eval.json"),
            "--markdown",
            str(out / "eval.md"),
        ],
    )
    audit_ok = _after_session(
        "audit",
        [
            str(transcript),
            "--goal",
            str(DEMO_GOAL),
            "--eval-report",
            str(out / "eval.json"),
            "--html",
            str(out / "session.html"),
            "--key-file",
            str(key),
        ],
    )
    print(f"\neval report: {out / 'eval.md'}\nsession page: {out / 'session.html'}")
    ok = session_ok and eval_ok and audit_ok
    print("demo", "succeeded" if ok else "FAILED")
    if ok:
        print(NEXT.format(out=out, transcript=transcript))
    return 0 if ok else 1


def _after_session(command: str, args: list[str]) -> bool:
    """Run `jg-mcp eval` / `jg-mcp audit` on what the session left, as a user would; print their verdict."""
    print(f"\n$ jg-mcp {command} {' '.join(args)}", flush=True)
    proc = subprocess.run(
        [sys.executable, "-m", "jg_mcp", "--log-level", "WARNING", command, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    print("\n".join(mark_expected(ln) for ln in lines[-SHOWN_LINES:]), flush=True)
    if proc.returncode != 0:
        print(proc.stderr[-STDERR_TAIL_CHARS:], file=sys.stderr)
    return proc.returncode == 0
