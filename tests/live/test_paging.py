"""read_file's paging: skipping to an offset is done in bounded chunks, under a byte budget, and stops when asked."""

from __future__ import annotations

import os
import random
import time

import anyio
import pytest
from mcp import Client

from jg_mcp.live import paging, workspace
from jg_mcp.live.paging import PageStopped, SkipTooFar, read_page


def page_of(path, offset, limit, **kw):
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_page(fd, os.fstat(fd).st_size, offset, limit, **kw)
    finally:
        os.close(fd)


def naive(data: bytes, offset: int, limit: int) -> list[str]:
    lines = data.decode().splitlines(keepends=True)
    return lines[offset - 1 : offset - 1 + limit]


def test_skipping_to_an_offset_lands_on_the_same_line_as_reading_line_by_line(tmp_path):
    rng = random.Random(7)
    for trial in range(40):
        data = b"".join(b"x" * rng.choice([0, 1, 5, 70_000]) + b"\n" for _ in range(rng.randint(0, 60)))
        if rng.random() < 0.5:
            data += b"tail"
        path = tmp_path / f"f{trial}"
        path.write_bytes(data)
        total = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
        for offset in {1, 2, max(total, 1), total + 1, rng.randint(1, total + 2), 10**12}:
            page = page_of(path, offset, 3)
            want = naive(data, offset, 3)
            assert page.lines == want[: len(page.lines)] and bool(page.lines) == bool(want)  # a page may hold back
            assert page.total == total
            assert page.more == (offset - 1 + len(page.lines) < total)


def test_a_huge_offset_over_many_newlines_is_skipped_in_bounded_time(tmp_path):
    path = tmp_path / "nl.txt"
    path.write_bytes(b"\n" * (64 << 20))
    start = time.monotonic()
    page = page_of(path, 10**12, 1)
    assert time.monotonic() - start < 5  # line by line in Python this took about a minute
    assert (page.lines, page.more, page.total) == ([], False, 64 << 20)


def test_an_offset_past_the_skip_budget_is_an_error_saying_how_far_it_got(tmp_path):
    path = tmp_path / "nl.txt"
    path.write_bytes(b"ab\n" * 1000)
    with pytest.raises(SkipTooFar) as caught:
        page_of(path, 2000, 1, skip_bytes=1500)
    assert caught.value.lines == 500 and caught.value.position == 1500
    assert "1500 bytes" in str(caught.value) and "500 lines" in str(caught.value)
    assert "tail -c +1501" in str(caught.value)
    assert page_of(path, 400, 1, skip_bytes=1500).lines == ["ab\n"]


def test_a_skip_stops_between_chunks_when_its_caller_says_so(tmp_path):
    path = tmp_path / "nl.txt"
    path.write_bytes(b"\n" * (8 << 20))
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(PageStopped):
        page_of(path, 10**12, 1, stop=stop)
    assert len(calls) == 3


def test_read_file_past_the_skip_budget_answers_with_how_to_go_on(server, session, monkeypatch):
    monkeypatch.setattr(paging, "SKIP_BYTES", 4096)
    (session.workspace.root / "nl.txt").write_bytes(b"line\n" * 2000)

    async def go():
        with anyio.fail_after(60):
            async with Client(server) as c:
                far = await c.call_tool("read_file", {"path": "nl.txt", "offset": 1500, "limit": 1})
                near = await c.call_tool("read_file", {"path": "nl.txt", "offset": 800, "limit": 1})
                return far, near

    far, near = anyio.run(go)
    assert far.is_error
    text = far.content[0].text
    assert "line 1500" in text and "4096 bytes" in text and "819 lines" in text, text
    assert near.structured_content["content"] == "line\n"


def test_a_closing_session_stops_its_reads(session, tmp_path):
    from jg_mcp.live.server import _read_text

    (session.workspace.root / "nl.txt").write_bytes(b"\n" * (8 << 20))
    session.close("test")
    with pytest.raises(Exception, match="session is closed"):
        _read_text(session, "nl.txt", 10**12, 1)


def test_a_huge_directory_is_listed_in_part_and_says_so(server, session, monkeypatch):
    monkeypatch.setattr(workspace, "LISTED_ENTRIES", 50)
    big = session.workspace.root / "big"
    big.mkdir()
    for i in range(120):
        (big / f"f{i:03}").touch()

    async def go():
        with anyio.fail_after(60):
            async with Client(server) as c:
                return await c.call_tool("read_file", {"path": "big"})

    text = anyio.run(go).content[0].text
    assert "is a directory" in text and "the first 50 entries listed" in text, text
    names, complete = session.workspace.listing(("big",))
    assert len(names) == 50 and not complete
