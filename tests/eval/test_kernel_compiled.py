"""The no_kernel check: whether the candidate compiled a Triton kernel is read from the eval's own Triton cache on
the host, after its processes ended (jg_mcp.eval.native.builds.compiled_a_kernel)."""

from __future__ import annotations

import os

from jg_mcp.eval.native.builds import compiled_a_kernel


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


def test_a_cuda_object_of_torchs_extension_builder_counts_as_a_kernel(tmp_path):
    """A solution in CUDA C++ compiles no Triton kernel: nvcc's object in the eval's extension builds is its own."""
    cache = tmp_path / "cache"
    build = cache / "torch_extensions" / "gemm_wmma"
    build.mkdir(parents=True)
    for name in ("build.ninja", "main.o", "gemm_wmma.so"):
        (build / name).write_bytes(b"")
    assert not compiled_a_kernel(cache), "a host-only C++ build is not a GPU kernel"
    (build / "cuda.cuda.o").write_bytes(b"\x7fELF")
    assert compiled_a_kernel(cache)


def test_the_solutions_files_are_placed_under_their_paths_at_one_time(tmp_path):
    from jg_mcp.eval.native.builds import SOURCE_TIME, place
    from jg_mcp.eval.native.sources import SourceFile

    files = [SourceFile("kernels/main.py", b"import k\n"), SourceFile("kernels/k.cu", b"//\n")]
    place(files, tmp_path / "solution")
    assert (tmp_path / "solution" / "solution.py").read_bytes() == b"import k\n"
    assert (tmp_path / "solution" / "kernels" / "k.cu").read_bytes() == b"//\n"
    assert {p.stat().st_mtime for p in (tmp_path / "solution").rglob("*") if p.is_file()} == {SOURCE_TIME}


def test_the_main_file_is_the_solution_imported_though_the_workspace_has_a_solution_py_too(tmp_path):
    """`--solution kernels/main.py` in a workspace that also holds a `solution.py`: the worker imports the main
    file, whose hash the report names."""
    from jg_mcp.eval.native.builds import place
    from jg_mcp.eval.native.sources import SourceFile

    place([SourceFile("kernels/main.py", b"MAIN = 1\n"), SourceFile("solution.py", b"OTHER = 1\n")], tmp_path / "s")
    assert (tmp_path / "s" / "solution.py").read_bytes() == b"MAIN = 1\n"
