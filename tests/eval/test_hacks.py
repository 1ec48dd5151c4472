"""The adversarial suite: every known hack in eval/hacks/ is rejected, each for its own reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_suite import CUDA, HACKS

from jg_mcp.eval import Reason

R = Reason
# hack -> reasons the report must contain. Static reasons show the source check caught it; the runtime
# reasons show the harness caught it in the running process even if the source check were evaded.
CPU_HACKS: dict[str, set[Reason]] = {
    "reuse_freed_reference": {R.UNWRITTEN},
    "zero_inputs": {R.INPUT_MODIFIED},
    "write_inputs": {R.INPUT_MODIFIED},
    "return_input": {R.ALIASES_INPUT},
    "return_input_view": {R.ALIASES_INPUT},
    "cache_by_pointer": {R.CACHED_OUTPUT},
    "cache_by_content": {R.CACHED_OUTPUT},
    "cache_in_shm_file": {R.FILES_WRITTEN, R.STATIC_IO},
    "cache_in_workspace_file": {R.FILES_WRITTEN, R.STATIC_IO},
    "background_thread": {R.THREADS_LEFT, R.STATIC_CONCURRENCY},
    "background_process": {R.THREADS_LEFT, R.STATIC_CONCURRENCY},
    "tensor_subclass": {R.NOT_PLAIN_TENSOR, R.STATIC_SUBCLASS},
    "lazy_tensor": {R.NOT_PLAIN_TENSOR},
    "forbidden_direct": {R.STATIC_FORBIDDEN, R.FORBIDDEN_CALL},
    "forbidden_operator": {R.STATIC_FORBIDDEN, R.FORBIDDEN_CALL},
    "forbidden_getattr": {R.STATIC_DYNAMIC, R.FORBIDDEN_CALL},
    "forbidden_importlib": {R.STATIC_DYNAMIC, R.FORBIDDEN_CALL},
    "patch_elapsed_time": {R.TAMPERED, R.STATIC_MONKEYPATCH},
    "patch_synchronize": {R.TAMPERED, R.STATIC_DYNAMIC},
    "read_seed": {R.STATIC_INTROSPECTION, R.FORBIDDEN_CALL},
    "read_reference_output": {R.STATIC_INTROSPECTION, R.INCORRECT},
    "read_seed_environment": {R.STATIC_IO},
    "timed_shapes_only": {R.INCORRECT},
    "low_precision": {R.INCORRECT},
    "partial_write": {R.UNWRITTEN},
    "forge_result_channel": {R.TAMPERED, R.STATIC_IO},
    "crash_exception": {R.EXCEPTION},
    "crash_sys_exit": {R.EARLY_EXIT, R.STATIC_PROCESS},
    "crash_os_exit": {R.EARLY_EXIT, R.STATIC_PROCESS},
    "crash_segfault": {R.CRASHED, R.STATIC_INTROSPECTION},
    "hang": {R.TIMEOUT},
}
GPU_HACKS: dict[str, set[Reason]] = {
    "side_stream": {R.TIMING_ESCAPE, R.STATIC_CONCURRENCY},
    "background_thread": {R.THREADS_LEFT},
    "patch_elapsed_time": {R.TAMPERED},
    "patch_synchronize": {R.TAMPERED},
    "below_floor": {R.BELOW_FLOOR},
    "cache_by_sampled_content": {R.CACHED_OUTPUT},
    "wrong_when_rushed": {R.INCORRECT},
}
TIMEOUTS = {"hang": 30.0}
ALONE = {"cache_in_shm_file"}
"""Hacks that write /dev/shm, which every eval watches: they run with no other eval beside them."""
GPU_SHAPE = "llama3_8b_prefill_qkv"


def cpu_options(name: str) -> dict:
    return ({"timeout_s": TIMEOUTS[name]} if name in TIMEOUTS else {}) | {"alone": name in ALONE}


def gpu_options(name: str) -> dict:
    return {"shapes": "timed", "only": [GPU_SHAPE], "domain_shapes": 0, "timing": {"budget_s": 1.0}, "alone": False}


@pytest.fixture(scope="module")
def cpu_suite(runs):
    """Start every CPU hack's eval at once; each test then waits for its own."""
    for name in CPU_HACKS:
        runs.submit(HACKS / name / "solution.py", "gemm_fp8", **cpu_options(name))
    yield runs
    runs.get(HACKS / "cache_in_shm_file" / "solution.py", "gemm_fp8", **cpu_options("cache_in_shm_file"))
    for leftover in Path("/dev/shm").glob("jg_hack_cache_*"):
        leftover.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def gpu_suite(runs):
    for name in GPU_HACKS:
        runs.submit(HACKS / name / "solution.py", "gemm_fp8", **gpu_options(name))
    return runs


def test_every_hack_directory_is_in_the_suite():
    assert {p.parent.name for p in HACKS.glob("*/solution.py")} == set(CPU_HACKS) | set(GPU_HACKS)


@pytest.mark.parametrize("name", sorted(CPU_HACKS))
def test_hack_is_rejected_for_its_reason(cpu_suite, name):
    report = cpu_suite.get(HACKS / name / "solution.py", "gemm_fp8", **cpu_options(name))
    assert not report.accepted
    missing = CPU_HACKS[name] - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )


def test_shape_specialised_hack_fails_only_at_drawn_shapes(cpu_suite):
    report = cpu_suite.get(HACKS / "timed_shapes_only" / "solution.py", "gemm_fp8", **cpu_options("timed_shapes_only"))
    assert all(s.correct for s in report.shapes if s.kind != "domain")
    assert [s.kind for s in report.shapes if not s.correct] == ["domain"]


def test_the_seed_is_nowhere_the_candidate_can_look_before_it_runs(cpu_suite):
    report = cpu_suite.get(HACKS / "read_seed_environment" / "solution.py", "gemm_fp8")
    assert "SEEN:" in report.candidate_output_tail
    assert str(report.seed) not in report.candidate_output_tail
    assert all(s.correct for s in report.shapes)


def test_crash_verdicts_come_back_quickly_and_name_the_signal(cpu_suite):
    report = cpu_suite.get(HACKS / "crash_segfault" / "solution.py", "gemm_fp8")
    assert any("SIGSEGV" in f.detail for f in report.findings if f.reason == R.CRASHED)
    hang = cpu_suite.get(HACKS / "hang" / "solution.py", "gemm_fp8", **cpu_options("hang"))
    assert hang.wall_s < TIMEOUTS["hang"] * 3


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device: timing, streams and the physical floor")
@pytest.mark.parametrize("name", sorted(GPU_HACKS))
def test_gpu_hack_is_rejected_for_its_reason(gpu_suite, name):
    report = gpu_suite.get(HACKS / name / "solution.py", "gemm_fp8", **gpu_options(name))
    assert not report.accepted
    missing = GPU_HACKS[name] - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_patched_timer_does_not_change_the_measurement(gpu_suite):
    report = gpu_suite.get(
        HACKS / "patch_elapsed_time" / "solution.py", "gemm_fp8", **gpu_options("patch_elapsed_time")
    )
    shape = next(s for s in report.shapes if s.name == GPU_SHAPE)
    assert shape.candidate is not None, f"no timing: {report.reasons}: {[f.detail[-300:] for f in report.findings]}"
    assert shape.candidate.median_ms > shape.floor_ms
