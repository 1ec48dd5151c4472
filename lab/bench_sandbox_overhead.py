"""Overhead of the bwrap sandbox on run_command("true"): median and p95, bwrap against none, in one run.

    python lab/bench_sandbox_overhead.py [--calls 200] [--goal gemm_fp8]

Each call goes through the real MCP tool path (in-process client, transcript, workspace scan).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

import jg_mcp
from jg_mcp.goals import find_goal, load_goal
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.sandbox_probe import probe
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig


async def time_calls(server, calls: int) -> list[float]:
    async with Client(server) as client:
        await client.call_tool("run_command", {"command": "true"})
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            result = await client.call_tool("run_command", {"command": "true"})
            times.append((time.perf_counter() - start) * 1000)
            assert result.structured_content["exit_code"] == 0
        return times


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--goal", default="gemm_fp8")
    args = parser.parse_args()
    loaded = load_goal(find_goal(args.goal))
    root = Path(tempfile.mkdtemp(prefix="jg-bench-"))
    root.chmod(0o755)
    results = {}
    for mode in ("none", "bwrap"):
        ws = root / mode / "workspace"
        sandbox = Bwrap(ws, [root / "transcripts", Path(jg_mcp.__file__).parent])
        if mode == "bwrap" and (reason := probe(sandbox, root)):
            raise SystemExit(f"bwrap unavailable: {reason}")
        session = Session.open(
            loaded,
            SessionConfig(workspace_dir=ws, transcripts_dir=root / "transcripts", sandbox=mode),
            wrap=sandbox if mode == "bwrap" else None,
        )
        try:
            results[mode] = anyio.run(time_calls, build_server(loaded, SingleSession(session)), args.calls)
        finally:
            session.close("benchmark finished")
            sandbox.release()
    print(f"run_command('true'), {args.calls} calls each, milliseconds per call (client round trip)")
    print(f"{'mode':<6} {'median':>8} {'p95':>8}")
    for mode, times in results.items():
        print(f"{mode:<6} {statistics.median(times):8.2f} {quantile(times, 0.95):8.2f}")
    none, bwrap = results["none"], results["bwrap"]
    print(
        f"{'added':<6} {statistics.median(bwrap) - statistics.median(none):8.2f} "
        f"{quantile(bwrap, 0.95) - quantile(none, 0.95):8.2f}"
    )


if __name__ == "__main__":
    main()
