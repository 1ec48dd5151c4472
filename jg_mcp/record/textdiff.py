"""Unified diffs of the agent's files and outputs in time linear in their size, with the caps said where they bite.

difflib compares line by line in time that grows with the product of the two lengths (two versions of a 511 KiB
file took 74 s; at the 8 MiB blob cap, hours). Here the lines both versions share at the start and at the end
are set aside first (one pass), so an edit anywhere in a large file costs what the edited region costs. A region
only one version has is shown as added or removed. Any other region is compared by difflib only up to
COMPARED_LINES lines a side and, over all the diffs one `PairBudget` pays for (the audit page), PAIRS line pairs; past
either cap it is summarised (its place, and how many of its distinct lines the other version lacks, found with
sets). What is shown is capped too: SHOWN_LINES diff lines a diff, SHOWN_CHARS characters a line."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

COMPARED_LINES = 2000
"""The most lines of each version compared line by line, after the lines both share at the start and end."""
PAIRS = 40_000_000
"""The most line pairs (old lines times new lines compared) one PairBudget pays for: the audit page's whole bound."""
SHOWN_LINES = 4000
"""The most diff lines shown for one diff; a count of the rest follows."""
SHOWN_CHARS = 500
"""The most characters shown of one diff line; a count of the rest follows."""

CAPS = (
    "Diffs set aside the lines both versions share at the start and end, and show lines only one version has as "
    f"added or removed; other lines are compared line by line up to {COMPARED_LINES} lines of each version "
    f"({PAIRS:,} line pairs in all for one page), and a larger region is summarised by where it lies and how many "
    f"of its distinct lines the other version lacks. At most {SHOWN_LINES} diff lines are shown for a change, and "
    f"{SHOWN_CHARS} characters of a line; each cut says what it left out."
)
"""The caps in words, for the page and the commands' help."""


@dataclass
class PairBudget:
    """Line pairs left to compare, shared by the diffs of one page."""

    pairs: int = PAIRS


@dataclass
class Diff:
    lines: list[str] = field(default_factory=list)
    """Unified diff lines, each ending in a newline (empty: no textual difference, or only a summary)."""
    summary: list[str] = field(default_factory=list)
    """What was not compared or not shown, and why; empty when the diff is whole."""


def _clip(line: str) -> str:
    body = line[:-1] if line.endswith("\n") else line
    if len(body) > SHOWN_CHARS:
        body = f"{body[:SHOWN_CHARS]}... ({len(body) - SHOWN_CHARS} more characters)"
    return body + "\n"


def _range(start: int, length: int) -> str:
    """A unified diff range: `start,length` counted from 1 (`start-1,0` for an empty one), as difflib writes it."""
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _region(head: int, length: int, name: str) -> str:
    return f"lines {head + 1}-{head + length} of {name} ({length} lines)" if length else f"no lines of {name}"


def _hunks(a: list[str], b: list[str], offset_a: int, offset_b: int, context: int) -> list[str]:
    out = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(offset_a + i1, i2 - i1)} +{_range(offset_b + j1, j2 - j1)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out += [" " + line for line in a[a1:a2]]
                continue
            out += ["-" + line for line in a[a1:a2]]
            out += ["+" + line for line in b[b1:b2]]
    return out


def unified(
    old: str, new: str, old_name: str, new_name: str, context: int = 3, budget: PairBudget | None = None
) -> Diff:
    """The unified diff of `old` against `new`, bounded as the module says; `budget` (None: a fresh one) pays for
    the line pairs compared."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head == len(a) == len(b):
        return Diff()
    budget = budget if budget is not None else PairBudget()
    region_a, region_b = len(a) - tail - head, len(b) - tail - head
    pairs = region_a * region_b  # none when one side only adds or only removes: no line to compare
    diff = Diff()
    if pairs and (max(region_a, region_b) > COMPARED_LINES or pairs > budget.pairs):
        why = (
            f"over {COMPARED_LINES} lines a side"
            if max(region_a, region_b) > COMPARED_LINES
            else f"the {PAIRS:,} line pairs this page compares are spent"
        )
        in_old, in_new = set(a[head : len(a) - tail]), set(b[head : len(b) - tail])
        diff.summary.append(
            f"not compared line by line ({why}): {_region(head, region_a, old_name)} against "
            f"{_region(head, region_b, new_name)}; the first {head} and last {tail} lines are the same in both; of "
            f"the distinct lines in those regions, {len(in_old - in_new)} are only in {old_name} and "
            f"{len(in_new - in_old)} only in {new_name}"
        )
        return diff
    budget.pairs -= pairs
    start, end = max(head - context, 0), max(tail - context, 0)
    body = _hunks(a[start : len(a) - end], b[start : len(b) - end], start, start, context)
    diff.lines = [f"--- {old_name}\n", f"+++ {new_name}\n", *(_clip(line) for line in body[:SHOWN_LINES])]
    if len(body) > SHOWN_LINES:
        diff.summary.append(f"{len(body) - SHOWN_LINES} more diff lines not shown (at most {SHOWN_LINES})")
    return diff
