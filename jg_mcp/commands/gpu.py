"""`jg-mcp gpu`: what the query_gpu tool returns, for people."""

from __future__ import annotations

import argparse

from jg_mcp.gpu import describe, query_gpu


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpu", help="show what query_gpu reports", description="Show the GPUs as NVML reports them.")
    p.add_argument("--json", action="store_true", help="print the structured answer the tool returns")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = query_gpu()
    print(report.model_dump_json(indent=2) if args.json else describe(report))
    return 0
