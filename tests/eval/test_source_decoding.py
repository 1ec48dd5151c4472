"""The static check reads exactly the text Python compiles: UTF-8, with or without a BOM; any other declared
encoding, and bytes that are not UTF-8, are refused with a finding instead of being read one way by the check
and another by the import."""

from __future__ import annotations

import json

import pytest
from eval_suite import SOLUTIONS

from jg_mcp.cli import main
from jg_mcp.eval.native.sources import solution_text
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import EvalReport, Finding

UTF7_DESYNC = b'''# -*- coding: utf-7 -*-
"""Red team a6: the harness's static check reads the bytes as UTF-8, the worker's import honours the coding cookie.
Under UTF-7 the comment below holds newlines (+AAo-), so the import sees code the policy never saw."""
import torch

# +AAo-import ctypes, sys, threading+AAo-SIG = torch.sigmoid+AAo-
# +AAo-sys.modules['__main__'].Worker.hints = lambda self: []+AAo-


def kernel(gate, up):
    g = gate.float()
    return (g * SIG(g) * up.float()).to(torch.bfloat16)
'''


def _eval(tmp_path, data: bytes) -> tuple[int, EvalReport]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_bytes(data)
    out = tmp_path / "r.json"
    argv = ["eval", "--goal", "swiglu", "--workspace", str(ws), "--device", "cpu", "--shapes", "smoke"]
    rc = main([*argv, "--domain-shapes", "0", "--json", str(out)])
    return rc, EvalReport.model_validate(json.loads(out.read_text()))


@pytest.mark.slow
def test_a_utf7_coding_cookie_hiding_code_in_a_comment_is_rejected_naming_the_encoding(tmp_path):
    rc, report = _eval(tmp_path, UTF7_DESYNC)
    assert rc == 1 and not report.accepted
    assert any(f.reason == Reason.SYNTAX and "utf-7" in f.detail for f in report.findings), report.findings


@pytest.mark.slow
def test_an_honest_solution_with_a_utf8_bom_is_accepted(tmp_path):
    rc, report = _eval(tmp_path, b"\xef\xbb\xbf" + (SOLUTIONS / "swiglu" / "solution.py").read_bytes())
    assert [f.reason for f in report.findings] == [] and report.accepted and rc == 0


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"# -*- coding: latin-1 -*-\nx = 1\n", "latin-1"),
        (b"#!/usr/bin/env python\n# vim: set fileencoding=utf-7 :\nx = 1\n", "utf-7"),
        (b"# coding: no-such-codec\nx = 1\n", "no-such-codec"),
        (b"x = 1\r# coding: utf-7\nx = 2\n", "utf-7"),
        (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "latin-1"),
    ],
)
def test_a_declared_encoding_other_than_utf8_is_refused(data, named):
    found = solution_text(data)
    assert isinstance(found, Finding) and found.reason == Reason.SYNTAX and named in found.detail


def test_bytes_that_are_not_utf8_are_refused_not_replaced():
    found = solution_text(b"x = 1  # caf\xe9\n")
    assert isinstance(found, Finding) and found.reason == Reason.SYNTAX and "UTF-8" in found.detail


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"x = 1\n", "x = 1\n"),
        (b"\xef\xbb\xbfx = 1\n", "x = 1\n"),
        (b"# -*- coding: utf-8 -*-\nx = '\xc3\xa9'\n", "# -*- coding: utf-8 -*-\nx = '\u00e9'\n"),
        (b"# coding: utf8\nx = 1\n", "# coding: utf8\nx = 1\n"),
    ],
)
def test_utf8_sources_decode_to_the_text_python_compiles(data, text):
    assert solution_text(data) == text
