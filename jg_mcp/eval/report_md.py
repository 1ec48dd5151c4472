"""The eval report in Markdown: the per-shape table printed on stdout, and the whole report for a reader."""

from __future__ import annotations

import re

from jg_mcp.eval.report import EvalReport
from jg_mcp.terminal import printable

MARKUP = re.compile(r"[\\`*_\[\]<>&|~!]")
"""The characters that start Markdown or HTML inside a line: emphasis, code, links, images, tags, entities, table
cells, strikethrough (and the backslash itself)."""


def text(s: str) -> str:
    """Candidate-derived text as plain text on one line of Markdown: line breaks and control characters written out
    as escapes, markup characters backslash-escaped, so it can neither add lines (rows, headings) nor markup."""
    return MARKUP.sub(lambda m: "\\" + m.group(), printable(s))


def code(s: str) -> str:
    """`s` as a one-line code span, fenced with more backticks than any run inside it."""
    s = printable(s)
    fence = "`" * (max((len(run) for run in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def table(report: EvalReport) -> str:
    """The per-shape table printed on stdout and embedded in the Markdown."""
    head = "| shape | kind | dims | correct | max abs | max rel | candidate ms | baselines ms | speedup | % roofline |"
    lines = [head, "|" + " --- |" * 10]
    for s in report.shapes:
        err = s.errors[0] if s.errors else None
        dims = "x".join(f"{k}{v}" for k, v in s.dims.items())
        base = ", ".join(f"{k} {t.median_ms:.4f}" for k, t in s.baselines.items()) or "-"
        speed = ", ".join(f"{v:.2f}x" for v in s.speedup.values()) or "-"
        lines.append(
            f"| {s.name} | {s.kind} | {dims} | {'yes' if s.correct else 'NO'} "
            f"| {_fmt(err.max_abs if err else None, '.3g')} | {_fmt(err.max_rel if err else None, '.3g')} "
            f"| {_fmt(s.candidate.median_ms if s.candidate else None, '.4f')} | {base} "
            f"| {speed} | {_fmt(s.roofline_pct, '.1f')} |"
        )
    return "\n".join(lines)


def markdown(report: EvalReport) -> str:
    """A human-readable report."""
    env = report.environment
    verdict = "ACCEPTED" if report.accepted else "REJECTED: " + ", ".join(report.reasons)
    out = [
        f"# eval: {report.goal}: {verdict}",
        "",
        f"- solution {code(report.solution_file)} sha256 `{report.solution_sha256}`",
        f"- goal sha256 `{report.goal_sha256}`, seed `{report.seed}`",
        f"- {f'{env.gpu} (driver {env.driver})' if env.gpu else 'no GPU'}, torch {env.torch}, triton {env.triton}, "
        f"jg-mcp {env.jg_mcp}, interpreter {env.interpreter}",
        f"- geometric-mean speedup vs strongest baseline: {_fmt(report.geomean_speedup, '.3f')}",
        f"- timing: {report.timing.skipped or report.timing.description}",
        f"- wall time {report.wall_s:.1f} s",
        "",
        table(report),
    ]
    clocked = [(s.name, s.clocks) for s in report.shapes if s.clocks]
    if clocked:
        out += [
            "",
            "## GPU while timing (NVML)",
            "",
            "| shape | SM MHz median (min) of max | W median of limit | slowdowns (share of samples) |",
            "| --- | --- | --- | --- |",
        ]
        for name, c in clocked:
            slow = ", ".join(f"{k} {v:.0%}" for k, v in c.slowdowns.items()) or "none"
            out.append(
                f"| {name} | {c.sm_mhz_median:.0f} ({c.sm_mhz_min:.0f}) of {_fmt(c.sm_mhz_max, '.0f')} "
                f"| {_fmt(c.power_w_median, '.0f')} of {_fmt(c.power_limit_w, '.0f')} | {slow} |"
            )
    if report.findings:
        out += ["", "## Findings", ""]
        for f in report.findings:
            where = f" at {text(f.shape)}" if f.shape else ""
            trial = f" trial {f.trial}" if f.trial is not None else ""
            out.append(f"- `{f.reason}`{where}{trial}: {text(f.detail)}")
    if report.notes:
        out += ["", "## Notes (not judged)", "", *(f"- {text(n)}" for n in report.notes)]
    return "\n".join(out) + "\n"
