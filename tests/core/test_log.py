"""Logs go to stderr, including a stderr swapped in after logging was configured."""

from __future__ import annotations

import io
import logging
import sys

from jg_mcp import log


def test_logs_follow_the_current_stderr_and_never_touch_stdout(monkeypatch, capsys):
    log.configure("INFO")
    swapped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", swapped)
    log.get("t").info("structlog line", k=1)
    logging.getLogger("t").warning("stdlib line")
    assert "structlog line" in swapped.getvalue() and "k=1" in swapped.getvalue()
    assert "stdlib line" in swapped.getvalue()
    assert capsys.readouterr().out == ""
