"""`jg-mcp audit` on a file that is not a transcript says so in one line (it printed one error per line of the
file: 581 for the README), while a damaged transcript is still audited line by line."""

from __future__ import annotations

import subprocess
import sys

from jg_mcp.record.reading import not_a_transcript
from tests.support import REPO


def audit(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jg_mcp", "audit", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_readme_is_not_a_transcript_in_one_line():
    done = audit(REPO / "README.md")
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "README.md:1: not a jg-mcp transcript" in line


def test_a_transcript_with_its_header_damaged_is_still_one(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'not json\n{"event":"request","seq":1}\n')
    assert not_a_transcript(path) is None
    log = tmp_path / "log.txt"
    log.write_bytes(b"\n".join(b'{"level": "info"}' for _ in range(5)) + b"\n")
    assert "not a jg-mcp transcript" in (not_a_transcript(log) or "")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert not_a_transcript(empty) is None
