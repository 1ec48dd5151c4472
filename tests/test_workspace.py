"""Paths in the file tools stay inside the workspace."""

from __future__ import annotations

import os

import pytest

from jg_mcp.errors import PathRefused
from jg_mcp.workspace import Workspace


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    return Workspace(root, protected=("reference.py",))


@pytest.mark.parametrize(
    "path, why",
    [
        ("/etc/passwd", "outside the workspace"),
        ("../secret.txt", "outside the workspace"),
        ("a/../../secret.txt", "outside the workspace"),
        ("ok\0.txt", "NUL byte"),
        ("", "empty"),
    ],
)
def test_escapes_are_refused(ws, path, why):
    with pytest.raises(PathRefused, match=why):
        ws.resolve(path)


def test_symlink_pointing_outside_is_refused(ws, tmp_path):
    os.symlink(tmp_path / "secret.txt", ws.root / "link.txt")
    with pytest.raises(PathRefused, match="outside the workspace"):
        ws.resolve("link.txt")


def test_new_file_under_symlinked_directory_outside_is_refused(ws, tmp_path):
    os.symlink(tmp_path, ws.root / "out")
    with pytest.raises(PathRefused, match="outside the workspace"):
        ws.resolve("out/new.txt", for_write=True)


def test_inside_paths_resolve(ws):
    assert ws.resolve("a/b/c.py") == ws.root / "a" / "b" / "c.py"
    assert ws.resolve(str(ws.root / "x.py")) == ws.root / "x.py"


def test_protected_file_is_not_writable(ws):
    with pytest.raises(PathRefused, match="read-only"):
        ws.resolve("reference.py", for_write=True)
    assert ws.resolve("reference.py") == ws.root / "reference.py"


def test_changes_report_written_and_deleted_files(ws):
    (ws.root / "a.txt").write_text("1")
    changed, deleted = ws.changes()
    assert set(changed) == {"a.txt"} and deleted == []
    (ws.root / "a.txt").unlink()
    (ws.root / "b.txt").write_text("2")
    changed, deleted = ws.changes()
    assert set(changed) == {"b.txt"} and deleted == ["a.txt"]
    assert ws.changes() == ({}, [])
