"""The no_kernel check: whether the candidate compiled a Triton kernel is read from the eval's own Triton cache on
the host, after its processes ended (jg_mcp.eval.harness.compiled_a_kernel)."""

from __future__ import annotations

import os

from jg_mcp.eval.harness import compiled_a_kernel


def test_a_cubin_anywhere_in_the_cache_counts_and_nothing_else_does(tmp_path):
    cache = tmp_path / "triton"
    assert not compiled_a_kernel(cache), "no cache at all: nothing compiled"
    (cache / "HASH1").mkdir(parents=True)
    (cache / "HASH1" / "cuda_utils.so").write_bytes(b"\x7fELF")
    (cache / "HASH1" / "__grp__softmax.json").write_text("{}")
    assert not compiled_a_kernel(cache), "Triton's own launcher and metadata are not a kernel"
    (cache / "HASH2").mkdir()
    (cache / "HASH2" / "softmax_kernel.cubin").write_bytes(b"\x7fELF")
    assert compiled_a_kernel(cache)


def test_a_link_out_of_the_cache_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "k.cubin").write_bytes(b"")
    cache = tmp_path / "triton"
    cache.mkdir()
    os.symlink(elsewhere, cache / "linked")
    assert not compiled_a_kernel(cache)


def test_a_cache_too_large_to_read_is_not_judged(tmp_path):
    cache = tmp_path / "triton"
    cache.mkdir()
    for i in range(30):
        (cache / f"f{i}").write_text("")
    assert compiled_a_kernel(cache, most=20), "past the bound the check gives no verdict, never a rejection"
    assert not compiled_a_kernel(cache, most=100)
