"""Paths in the file tools stay inside the workspace, whichever way the kernel resolves them."""

from __future__ import annotations

import os
import py_compile

import pytest

from jg_mcp.errors import PathRefused
from jg_mcp.live import safefs, workspace_scan
from jg_mcp.live.workspace import Workspace


@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    """Each test runs with openat2 (where the kernel has it) and with the O_NOFOLLOW walk."""
    if request.param == "openat2" and not safefs.HAVE_OPENAT2:
        pytest.skip("this kernel has no openat2")
    monkeypatch.setattr(safefs, "HAVE_OPENAT2", request.param == "openat2")
    return request.param


@pytest.fixture
def ws(tmp_path, resolver):
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    return Workspace.open(root, protected=("reference.py",))


def read(ws: Workspace, path: str) -> bytes:
    with ws.open_file(ws.parts(path)) as (fd, st):
        return os.read(fd, st.st_size + 1)


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
        ws.parts(path)


def test_symlink_pointing_outside_is_refused(ws, tmp_path):
    os.symlink(tmp_path / "secret.txt", ws.root / "link.txt")
    with pytest.raises(PathRefused, match="symbolic link"):
        read(ws, "link.txt")


def test_new_file_under_symlinked_directory_outside_is_refused(ws, tmp_path):
    os.symlink(tmp_path, ws.root / "out")
    with pytest.raises(PathRefused, match="symbolic link"):
        ws.write(ws.parts("out/new.txt", for_write=True), b"x")
    with pytest.raises(PathRefused, match="symbolic link"):
        read(ws, "out/secret.txt")
    assert not (tmp_path / "new.txt").exists()


def test_inside_paths_resolve_to_their_components(ws):
    assert ws.parts("a/b/c.py") == ("a", "b", "c.py")
    assert ws.parts(str(ws.root / "x.py")) == ("x.py",)
    assert ws.parts("a/./b/../c.py") == ("a", "c.py")


def test_written_files_read_back_and_parents_are_made(ws):
    assert ws.write(ws.parts("a/b/c.txt", for_write=True), b"one") is True
    assert ws.write(ws.parts("a/b/c.txt", for_write=True), b"two") is False
    assert read(ws, "a/b/c.txt") == b"two"
    assert sorted(os.listdir(ws.root / "a" / "b")) == ["c.txt"], "no temporary file is left behind"


def test_protected_file_is_not_writable(ws):
    with pytest.raises(PathRefused, match="read-only"):
        ws.parts("reference.py", for_write=True)
    assert ws.parts("reference.py") == ("reference.py",)


def test_fifos_and_devices_are_refused_without_blocking(ws):
    os.mkfifo(ws.root / "pipe")
    os.symlink("/dev/zero", ws.root / "zero")
    with pytest.raises(PathRefused, match="a FIFO, not a regular file"):
        read(ws, "pipe")
    with pytest.raises(PathRefused, match="symbolic link"):
        read(ws, "zero")
    assert ws.kind(ws.parts("pipe")) == "a FIFO"
    assert set(ws.scan().states) == set(), "the scan records neither"


def test_changes_report_written_and_deleted_files(ws):
    (ws.root / "a.txt").write_text("1")
    changed, deleted, _ = ws.changes()
    assert set(changed) == {"a.txt"} and deleted == []
    (ws.root / "a.txt").unlink()
    (ws.root / "b.txt").write_text("2")
    changed, deleted, _ = ws.changes()
    assert set(changed) == {"b.txt"} and deleted == ["a.txt"]
    assert ws.changes()[:2] == ({}, [])


def bytecode(path) -> None:
    """Real bytecode at `path`, as the interpreter writes it."""
    source = path.with_name("m_source.py")
    source.write_text("x = 1\n")
    py_compile.compile(str(source), cfile=str(path), doraise=True)
    source.unlink()


def test_the_scan_names_what_it_does_not_record(ws):
    (ws.root / "a" / "__pycache__").mkdir(parents=True)
    bytecode(ws.root / "a" / "__pycache__" / "m.pyc")
    (ws.root / "z").mkdir()  # a level's files come before its directories: these come after a/
    for i in range(3):
        (ws.root / "z" / f"f{i}.txt").write_text(str(i))
    scan = ws.scan(limit=2)
    assert len(scan.states) == 2 and scan.unrecorded == ["a/__pycache__/m.pyc"]
    assert scan.skipped and "past the first 2" in scan.skipped[0]


def test_a_scan_cut_short_by_the_limit_reports_no_false_deletions(ws, monkeypatch):
    for name in ("b.txt", "c.txt"):
        (ws.root / name).write_text(name)
    ws.changes()
    (ws.root / "a.txt").write_text("new")
    monkeypatch.setattr(workspace_scan, "SCAN_LIMIT", 2)
    changed, deleted, scan = ws.changes()
    assert scan.skipped and set(changed) == {"a.txt"} and deleted == []
    assert set(ws.manifest()) == {"a.txt", "b.txt", "c.txt"}


def test_only_real_bytecode_goes_unrecorded_and_every_other_file_is_recorded_wherever_it_lies(ws):
    """Red team: a `.py` file under `__pycache__/` was named "bytecode" and not stored, so the record had a
    hiding place. Only the interpreter's cache is passed over: a .pyc file under `__pycache__/` that is bytecode by
    its content."""
    cache = ws.root / "pkg" / "__pycache__"
    cache.mkdir(parents=True)
    (cache / "hidden.py").write_text("print('kept out of the record')\n")
    (cache / "data.bin").write_bytes(b"\x00" * 64)
    (cache / "fake.pyc").write_text("not bytecode, only named so\n")
    bytecode(cache / "real.cpython-311.pyc")
    bytecode(ws.root / "top.pyc")
    changed, _, scan = ws.changes()
    hidden = {"pkg/__pycache__/hidden.py", "pkg/__pycache__/data.bin", "pkg/__pycache__/fake.pyc"}
    assert set(changed) == hidden | {"top.pyc"}, "bytecode Python imports with no source beside it is recorded"
    assert scan.unrecorded == ["pkg/__pycache__/real.cpython-311.pyc"]
