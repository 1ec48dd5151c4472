"""Bounded diffs: every diff shown applies (old plus its hunks is new), and each cap says what it left out."""

from __future__ import annotations

import random
import re
import time

import pytest

from jg_mcp.record import textdiff
from jg_mcp.record.textdiff import PairBudget, unified

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply(old: str, diff_lines: list[str]) -> str:
    """`old` with the unified diff's hunks applied, checking every context and removed line against it."""
    a, out, at = old.splitlines(keepends=True), [], 0
    for line in diff_lines[2:]:
        if m := HUNK.match(line):
            start = int(m.group(1)) - (0 if m.group(2) != "0" else -1) - 1
            out += a[at:start]
            at = start
        elif line[0] in " -":
            assert a[at] == line[1:], (at, a[at], line)
            at += 1
            if line[0] == " ":
                out.append(line[1:])
        else:
            out.append(line[1:])
    return "".join(out + a[at:])


def variant(r: random.Random, lines: list[str]) -> list[str]:
    out = list(lines)
    for _ in range(r.randrange(1, 6)):
        i = r.randrange(len(out) + 1)
        op = r.choice("adr")
        if op == "a":
            out[i:i] = [f"new {r.random()}\n" for _ in range(r.randrange(1, 4))]
        elif op == "d":
            del out[i : i + r.randrange(1, 4)]
        else:
            out[i : i + 1] = [f"changed {r.random()}\n"]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_every_shown_diff_turns_the_old_version_into_the_new(seed):
    r = random.Random(seed)
    old = [f"{r.randrange(8)}\n" for _ in range(r.randrange(0, 60))]
    new = variant(r, old)
    diff = unified("".join(old), "".join(new), "a", "b", context=r.randrange(0, 4))
    assert not diff.summary
    assert apply("".join(old), diff.lines) == "".join(new)
    assert diff.lines[:2] == (["--- a\n", "+++ b\n"] if old != new else [])


@pytest.mark.slow
def test_an_edit_deep_in_a_large_file_costs_what_the_edit_costs():
    old = [f"line {i}\n" for i in range(1_000_000)]
    new = old[:700_000] + ["inserted\n"] + old[700_001:]
    began = time.monotonic()
    diff = unified("".join(old), "".join(new), "a", "b")
    assert time.monotonic() - began < 10
    assert diff.lines[2] == "@@ -699998,7 +699998,7 @@\n" and not diff.summary
    assert apply("".join(old), diff.lines) == "".join(new)


def test_a_region_over_the_line_cap_is_summarised_by_place_and_content():
    old = "".join(f"{i}\n" for i in range(5000))
    new = "".join(f"{i}\n" if i % 2 else f"{i} x\n" for i in range(5000))
    diff = unified(old, new, "a", "b")
    assert diff.lines == []
    assert diff.summary == [
        f"not compared line by line (over {textdiff.COMPARED_LINES} lines a side): lines 1-4999 of a (4999 lines) "
        "against lines 1-4999 of b (4999 lines); the first 0 and last 1 lines are the same in both; of the "
        "distinct lines in those regions, 2500 are only in a and 2500 only in b"
    ]


def test_a_page_budget_once_spent_summarises_the_rest(monkeypatch):
    budget = PairBudget(pairs=150)
    first = unified("a\nb\nc\n" * 4, "x\ny\nz\n" * 4, "a", "b", budget=budget)
    assert first.lines and budget.pairs == 150 - 12 * 12
    second = unified("a\nb\nc\n" * 4, "x\ny\nz\n" * 4, "a", "b", budget=budget)
    assert not second.lines and "line pairs this page compares are spent" in second.summary[0]


def test_shown_lines_and_characters_are_capped_and_say_so(monkeypatch):
    monkeypatch.setattr(textdiff, "SHOWN_LINES", 10)
    diff = unified("".join(f"{i}\n" for i in range(20)), "".join(f"{i}x\n" for i in range(20)), "a", "b")
    assert len(diff.lines) == 12 and diff.summary == ["31 more diff lines not shown (at most 10)"]
    long = unified("short\n", "y" * 1000 + "\n", "a", "b")
    assert long.lines[-1] == "+" + "y" * 499 + "... (501 more characters)\n"


@pytest.mark.slow
def test_a_new_large_file_is_shown_as_added_up_to_the_shown_lines():
    diff = unified("", "".join(f"{i}\n" for i in range(1_000_000)), "a", "b")
    assert diff.lines[2] == "@@ -0,0 +1,1000000 @@\n" and diff.lines[3] == "+0\n"
    assert diff.summary == [f"{1_000_001 - textdiff.SHOWN_LINES} more diff lines not shown (at most 4000)"]
