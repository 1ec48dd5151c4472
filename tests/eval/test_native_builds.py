"""A native build kept between evals of the same sources (jg_mcp.eval.native.builds) is kept and handed on only
once it has ended: torch's builder waits for ever on the lock a cut-off build leaves."""

from __future__ import annotations

from jg_mcp.eval.native.builds import keep, restore


def build(root, lock: bool):
    ext = root / "myext"
    ext.mkdir(parents=True)
    (ext / "myext.so").write_bytes(b"\x7fELF")
    if lock:
        (ext / "lock").write_bytes(b"")
    return root


def test_a_build_cut_off_is_not_kept_and_a_finished_one_is(tmp_path, monkeypatch):
    monkeypatch.setenv("JG_MCP_CACHE", str(tmp_path / "cache"))
    kept = restore("k1", tmp_path / "eval1", None)
    assert kept is not None and not any(kept.iterdir())
    keep(build(tmp_path / "eval1", lock=True), kept)
    assert not any(kept.iterdir()), "a build that still holds torch's lock was cut off"
    keep(build(tmp_path / "eval2", lock=False), kept)
    assert (kept / "myext" / "myext.so").is_file()
    assert restore("k1", tmp_path / "eval3", None) == kept and (tmp_path / "eval3" / "myext" / "myext.so").is_file()


def test_a_cut_off_build_kept_before_is_dropped_not_handed_on(tmp_path, monkeypatch):
    monkeypatch.setenv("JG_MCP_CACHE", str(tmp_path / "cache"))
    kept = restore("k2", tmp_path / "first", None)
    assert kept is not None
    build(kept, lock=True)  # what an earlier version kept of a build its eval's timeout cut off
    again = restore("k2", tmp_path / "second", None)
    assert again == kept and not (tmp_path / "second" / "myext").exists(), "the eval builds anew"
    assert not any(kept.iterdir())
