"""The adversarial suite: every known hack in eval/hacks/ is rejected, each for its own reason.

Static reasons show the harness's source check caught it; the runtime reasons show the harness caught it from
outside the candidate's process (its own buffers, its own clock) even if the source check were evaded.
"""

from __future__ import annotations

import pytest
from eval_suite import CPU_TIMING, CUDA, HACKS, NATIVE_HACKS, REPO

from jg_mcp.eval import Reason

R = Reason
GEMM = "gemm_fp8"


def _gpu_check():
    import importlib.util

    spec = importlib.util.spec_from_file_location("h200_check", REPO / "eval" / "h200_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CPU_HACKS: dict[str, tuple[str, set[Reason]]] = {
    "reuse_freed_reference": (GEMM, {R.INCORRECT}),
    "zero_inputs": (GEMM, {R.INPUT_MODIFIED}),
    "write_inputs": (GEMM, {R.INPUT_MODIFIED}),
    "return_input": (GEMM, {R.ALIASES_INPUT, R.UNWRITTEN}),
    "return_input_view": (GEMM, {R.ALIASES_INPUT, R.UNWRITTEN}),
    "cache_by_pointer": (GEMM, {R.INCORRECT}),
    "cache_in_shm_file": (GEMM, {R.STATIC_IO}),
    "cache_in_workspace_file": (GEMM, {R.STATIC_IO}),
    "background_thread": (GEMM, {R.THREADS_LEFT, R.STATIC_CONCURRENCY}),
    "background_process": (GEMM, {R.THREADS_LEFT, R.STATIC_CONCURRENCY}),
    "tensor_subclass": (GEMM, {R.NOT_PLAIN_TENSOR, R.UNWRITTEN, R.STATIC_SUBCLASS}),
    "lazy_tensor": (GEMM, {R.NOT_PLAIN_TENSOR, R.UNWRITTEN}),
    "forbidden_direct": (GEMM, {R.STATIC_FORBIDDEN, R.FORBIDDEN_CALL}),
    "forbidden_operator": (GEMM, {R.STATIC_FORBIDDEN, R.FORBIDDEN_CALL}),
    "forbidden_getattr": (GEMM, {R.STATIC_DYNAMIC, R.FORBIDDEN_CALL}),
    "forbidden_importlib": (GEMM, {R.STATIC_DYNAMIC, R.FORBIDDEN_CALL}),
    "forbidden_unlisted_family": (GEMM, {R.STATIC_FORBIDDEN, R.FORBIDDEN_CALL}),
    "forbidden_method_spelling": (GEMM, {R.STATIC_FORBIDDEN, R.FORBIDDEN_CALL}),
    "forbidden_private_alias": ("softmax", {R.STATIC_DYNAMIC, R.FORBIDDEN_CALL}),
    "native_through_triton_build": (GEMM, {R.STATIC_DYNAMIC}),
    "native_into_triton_cache": ("gemm_bf16", {R.STATIC_DYNAMIC}),
    "gemm_through_embedding_bag": ("gemm_bf16", {R.STATIC_FORBIDDEN}),
    "gemm_through_triangular_solve": ("gemm_bf16", {R.STATIC_FORBIDDEN}),
    "forbidden_in_dataloader_worker": ("gemm_bf16", {R.STATIC_DYNAMIC}),
    "gemm_through_transformer_layer": ("gemm_bf16", {R.STATIC_FORBIDDEN}),
    "native_by_linker_flags": ("gemm_bf16", {R.STATIC_DYNAMIC}),
    "gemm_through_native_python_attr": ("gemm_bf16", {R.STATIC_DYNAMIC}),
    "native_reaches_any_module": ("softmax", {R.STATIC_DYNAMIC}),
    "gemm_matmul_inplace_when_unwatched": ("gemm_bf16", {R.STATIC_FORBIDDEN}),
    "env_write_knobs": ("swiglu", {R.STATIC_IO, R.STATIC_MONKEYPATCH}),
    "foreign_cubin_softmax": ("softmax", {R.STATIC_DYNAMIC, R.STATIC_MONKEYPATCH}),
    "gemm_conv_module_when_warm": ("gemm_bf16", {R.STATIC_FORBIDDEN}),
    "swiglu_glu_module_when_warm": ("swiglu", {R.STATIC_FORBIDDEN}),
    "softmax_through_logsumexp": ("softmax", {R.STATIC_FORBIDDEN}),
    "attention_through_varlen": ("attention_prefill", {R.STATIC_FORBIDDEN}),
    "cross_entropy_through_attention": ("cross_entropy", {R.STATIC_FORBIDDEN}),
    "rms_norm_through_cdist": ("fused_add_rmsnorm", {R.STATIC_FORBIDDEN}),
    "sigmoid_through_softplus_derivative": ("swiglu", {R.STATIC_FORBIDDEN, R.STATIC_DYNAMIC}),
    "bytes_at_a_path_through_storage": ("softmax", {R.STATIC_IO}),
    "gemm_through_householder_reflectors": ("gemm_bf16", {R.STATIC_FORBIDDEN}),
    "sigmoid_through_two_class_softmax": ("swiglu", {R.STATIC_FORBIDDEN}),
    "sigmoid_through_a_loss": ("swiglu", {R.STATIC_FORBIDDEN}),
    "reflection_through_update_wrapper": ("softmax", {R.STATIC_IMPORT, R.STATIC_DYNAMIC}),
    "gemm_through_triton_testing_cublas": ("gemm_bf16", {R.STATIC_IMPORT}),
    "gemm_through_varlen_attention": ("gemm_bf16", {R.STATIC_FORBIDDEN}),
    "patch_elapsed_time": (GEMM, {R.TAMPERED, R.STATIC_MONKEYPATCH}),
    "patch_synchronize": (GEMM, {R.TAMPERED, R.STATIC_DYNAMIC}),
    "forge_input_hash": (GEMM, {R.INPUT_MODIFIED, R.STATIC_INTROSPECTION}),
    "read_seed": (GEMM, {R.STATIC_INTROSPECTION}),
    "answer_from_seed": (GEMM, {R.INCORRECT, R.STATIC_INTROSPECTION}),
    "read_reference_output": (GEMM, {R.STATIC_INTROSPECTION, R.INCORRECT}),
    "read_seed_environment": (GEMM, {R.STATIC_IO}),
    "timed_shapes_only": (GEMM, {R.INCORRECT}),
    "wrong_above_checked_sizes": (GEMM, {R.INCORRECT}),
    "softmax_zero_tail": ("softmax", {R.INCORRECT}),
    "softmax_wrong_between_pages": ("softmax", {R.INCORRECT}),
    "low_precision": (GEMM, {R.INCORRECT}),
    "partial_write": (GEMM, {R.UNWRITTEN}),
    "forge_result_channel": (GEMM, {R.STATIC_IO}),
    "setsid_daemon_rewrites_report": (GEMM, {R.STATIC_IO, R.INCORRECT}),
    "goal_tolerance_poisoning": (GEMM, {R.STATIC_IO, R.INCORRECT}),
    "crash_exception": (GEMM, {R.EXCEPTION}),
    "fake_exit_message": (GEMM, {R.EXCEPTION, R.INCORRECT, R.STATIC_DYNAMIC}),
    "frame_deep_json": (GEMM, {R.TAMPERED, R.STATIC_DYNAMIC}),
    "frame_big_integer": (GEMM, {R.TAMPERED, R.STATIC_DYNAMIC}),
    "frame_valid_out_of_turn": (GEMM, {R.TAMPERED, R.STATIC_DYNAMIC}),
    "flood_output": (GEMM, {R.IMPORT_ERROR, R.STATIC_DYNAMIC}),
    "forbidden_in_thread": (GEMM, {R.FORBIDDEN_CALL, R.STATIC_DYNAMIC}),
    "crash_sys_exit": (GEMM, {R.EARLY_EXIT, R.STATIC_INTROSPECTION}),
    "crash_os_exit": (GEMM, {R.EARLY_EXIT, R.STATIC_IO}),
    "crash_segfault": (GEMM, {R.CRASHED, R.STATIC_INTROSPECTION}),
    "hang": (GEMM, {R.TIMEOUT}),
}
KEPT_BY_OPEN = {R.STATIC_FORBIDDEN}
"""The source check's reasons the open policy (the default) keeps: a forbidden operator under any spelling."""
OPEN_ALLOWED: dict[str, str] = {
    "bytes_at_a_path_through_storage": "writes bytes into its own sandbox's cache, which nothing trusted loads",
    "env_write_knobs": "configures its own Triton: any code it loads is its own, judged when native",
    "native_through_triton_build": "builds native code (allowed); on a GPU the cuBLAS it looks up is a failing stub",
    "foreign_cubin_softmax": "its foreign GPU code runs only on a GPU (a gap: docs/threat-model.md)",
    "gemm_through_triton_testing_cublas": "Triton's cuBLAS binding runs only on a GPU, where cuBLAS is a stub",
    "cache_in_shm_file": "keeps results between calls: only timing on fresh inputs (a GPU) can tell",
    "read_seed": "finds no seed in its process: the harness never hands one over",
    "read_seed_environment": "finds no seed in its environment: the harness never hands one over",
    "reflection_through_update_wrapper": "reflection reaches only its own process, which decides nothing",
}
"""Hacks of CPU_HACKS that are correct on the CPU under the open policy, and why that gains them nothing there; the
Triton-only policy still rejects each for its reasons."""


def open_expected(reasons: set[Reason]) -> set[Reason]:
    """What a hack of CPU_HACKS must be rejected for under the open policy: the reasons found from outside."""
    return {r for r in reasons if not r.startswith("static") or r in KEPT_BY_OPEN}


CPU_TIMED_HACKS: dict[str, set[Reason]] = {
    "forge_cpu_times": {R.TAMPERED},
    "cache_by_content_timed": {R.CACHED_OUTPUT},
    "precompute_bound_sets": {R.CACHED_OUTPUT},
    "wrong_after_warmup": {R.INCORRECT},
    "library_op_when_warm": {R.STATIC_FORBIDDEN, R.FORBIDDEN_CALL},  # recorded only in the timing process
    "sabotage_baseline_inputs": {R.STATIC_DYNAMIC},
    "thread_exit_cpu_time": {R.STATIC_DYNAMIC},
    "wider_output_when_timed": {R.WRONG_DTYPE},
    "skip_work_before_timing": {R.INCORRECT},
    "blind_cpu_clock": {R.STATIC_DYNAMIC},
    "skip_ring_copy": {R.TIMING_ESCAPE},
}
"""Hacks on the demo goal that only the timing phase can catch, run with the timing protocol on the CPU."""
FORGERIES = {"forge_cpu_times": 0.5, "thread_exit_cpu_time": 0.5, "blind_cpu_clock": 2.0}
"""Hacks of CPU_TIMED_HACKS that forge or hide the times the worker's process reports, and the most speedup each may
show: no such time is scored, so under the open policy (no source check) each is timed by the harness's clock at
its real cost. The first two do a hundred times the baseline's work (their forgeries claimed 10x and all of it
hidden), the third one addcmul against the baseline's add (its forgery claimed 50x)."""
TIMED_HACK_OPTIONS = {"skip_work_before_timing": {"spot_check_p": 1.0}}
"""Timing options a hack of CPU_TIMED_HACKS runs with: every block judged, so a test of what is judged is not left
to the odds of one spot check."""
GPU_HACKS, GPU_EITHER = _gpu_check().GPU_HACKS, _gpu_check().EITHER
"""The GPU-only hacks and their reasons: the same table eval/h200_check.py runs on a GPU."""
ACCEPTED_ON_CPU = {"below_floor", "cache_by_content", "cache_by_sampled_content", "wrong_when_rushed"}
ACCEPTED_ON_CPU |= {"no_kernel_softmax", "graph_capture_skips_work", "swiglu_wrong_above_2_27"}
"""GPU hacks whose only trick is timing, compiling no kernel or a CUDA graph's capture: on the CPU (no timing, no
graphs, Triton interpreted) they compute the right answer."""
hack_goal = _gpu_check().hack_goal
TIMEOUTS = {"hang": 30.0}


def cpu_options(name: str, policy: str = "open") -> dict:
    return {"policy": policy} | ({"timeout_s": TIMEOUTS[name]} if name in TIMEOUTS else {})


def gpu_options(name: str) -> dict:
    return {"shapes": "timed", "only": [hack_goal(name)[1]], "domain_shapes": 0, "timing": {"budget_s": 1.0}}


@pytest.fixture(scope="module")
def cpu_suite(runs):
    """Start every untimed hack eval at once (the hang first: it waits out its timeout while the others run); each
    test then waits for its own."""
    for name in sorted(CPU_HACKS, key=lambda n: n not in TIMEOUTS):
        runs.submit(HACKS / name / "solution.py", CPU_HACKS[name][0], **cpu_options(name))
    for name in sorted(OPEN_ALLOWED):
        runs.submit(HACKS / name / "solution.py", CPU_HACKS[name][0], **cpu_options(name, "triton"))
    for name in sorted(ACCEPTED_ON_CPU):
        runs.submit(HACKS / name / "solution.py", hack_goal(name)[0])
    return runs


def test_every_hack_directory_is_in_the_suite():
    listed = set(CPU_HACKS) | set(CPU_TIMED_HACKS) | set(GPU_HACKS) | set(NATIVE_HACKS)
    assert {p.parent.name for p in HACKS.glob("*/solution.py")} == listed


@pytest.mark.parametrize("name", sorted(set(CPU_HACKS) - set(OPEN_ALLOWED)))
def test_hack_is_rejected_for_its_reason(cpu_suite, name):
    goal, reasons = CPU_HACKS[name]
    report = cpu_suite.get(HACKS / name / "solution.py", goal, **cpu_options(name))
    assert report.policy == "open"
    assert not report.accepted
    missing = open_expected(reasons) - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )


@pytest.mark.parametrize("name", sorted(OPEN_ALLOWED))
def test_the_triton_policy_rejects_what_the_open_policy_allows(cpu_suite, name):
    goal, reasons = CPU_HACKS[name]
    report = cpu_suite.get(HACKS / name / "solution.py", goal, **cpu_options(name, "triton"))
    assert report.policy == "triton"
    assert not report.accepted
    missing = reasons - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )


@pytest.mark.parametrize("name", sorted(CPU_TIMED_HACKS))
def test_timing_hack_is_caught_by_the_harness_from_outside(runs, timing_goal, name):
    runs.wait_idle()  # timed alone, one at a time: no other eval of this process runs meanwhile
    options = CPU_TIMING | {"timing": CPU_TIMING["timing"] | TIMED_HACK_OPTIONS.get(name, {})}
    report = runs.get(HACKS / name / "solution.py", timing_goal, **options)
    assert not report.accepted
    missing = CPU_TIMED_HACKS[name] - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_times_the_candidate_forges_gain_it_nothing(runs, timing_goal, name):
    runs.wait_idle()
    report = runs.get(HACKS / name / "solution.py", timing_goal, **(CPU_TIMING | {"policy": "open"}))
    timed = [s for s in report.shapes if s.candidate is not None]
    assert timed or not report.accepted, [f.detail for f in report.findings]
    for shape in timed:
        assert max(shape.speedup.values()) < FORGERIES[name], (name, shape.name, shape.speedup)


def test_a_candidate_cannot_slow_the_baseline_by_writing_its_inputs(runs, timing_goal):
    """The baseline's process reads inputs of its own, memory the candidate's process never maps: sabotaging the
    candidate's own copy while the baseline is timed gains nothing (this hack computes its sum twice: slower). Its
    helper thread races the harness's read-back of the inputs: where it loses (1 clean-clone CI run in 3 here), the
    timing stops with input_modified, which gains it nothing either."""
    runs.wait_idle()
    report = runs.get(HACKS / "sabotage_baseline_inputs" / "solution.py", timing_goal, **CPU_TIMING)
    speedups = [v for s in report.shapes for v in (s.speedup or {}).values()]
    caught = not report.accepted and Reason.INPUT_MODIFIED in report.reasons
    assert caught or (speedups and max(speedups) < 1.3), (speedups, report.reasons)


@pytest.mark.parametrize("name", sorted(ACCEPTED_ON_CPU))
def test_timing_only_hacks_are_correct_on_the_cpu(cpu_suite, name):
    """Their one trick is speed on inputs seen before, or compiling no kernel of their own: without timing and with
    Triton interpreted there is nothing to catch (and nothing else they get wrong), which is why the GPU suite has
    them."""
    report = cpu_suite.get(HACKS / name / "solution.py", hack_goal(name)[0])
    assert all(s.correct for s in report.shapes), report.reasons


def test_shape_specialised_hack_fails_only_at_drawn_or_top_shapes(cpu_suite):
    report = cpu_suite.get(HACKS / "timed_shapes_only" / "solution.py", GEMM, **cpu_options("timed_shapes_only"))
    assert all(s.correct for s in report.shapes if s.kind == "smoke")
    assert {s.kind for s in report.shapes if not s.correct} <= {"domain", "top"}


def test_a_kernel_wrong_only_above_the_old_sizes_fails_at_the_top_of_the_domain(cpu_suite):
    report = cpu_suite.get(
        HACKS / "wrong_above_checked_sizes" / "solution.py", GEMM, **cpu_options("wrong_above_checked_sizes")
    )
    assert [s.name for s in report.shapes if not s.correct] == ["top_K"]


def test_the_seed_is_nowhere_the_candidate_can_look(cpu_suite):
    report = cpu_suite.get(
        HACKS / "read_seed_environment" / "solution.py", GEMM, **cpu_options("read_seed_environment")
    )
    assert "SEEN:" in report.candidate_output_tail
    assert str(report.seed) not in report.candidate_output_tail
    assert all(s.correct for s in report.shapes)


def test_crash_verdicts_come_back_quickly_and_name_the_signal(cpu_suite):
    report = cpu_suite.get(HACKS / "crash_segfault" / "solution.py", GEMM, **cpu_options("crash_segfault"))
    assert any("SIGSEGV" in f.detail for f in report.findings if f.reason == R.CRASHED)
    hang = cpu_suite.get(HACKS / "hang" / "solution.py", GEMM, **cpu_options("hang"))
    assert hang.wall_s < TIMEOUTS["hang"] * 3


@pytest.fixture(scope="module")
def gpu_suite(runs):
    for name in GPU_HACKS:
        runs.submit(HACKS / name / "solution.py", hack_goal(name)[0], **gpu_options(name))
    return runs


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device: timing, streams and the physical floor")
@pytest.mark.parametrize("name", sorted(GPU_HACKS))
def test_gpu_hack_is_rejected_for_its_reason(gpu_suite, name):
    report = gpu_suite.get(HACKS / name / "solution.py", hack_goal(name)[0], **gpu_options(name))
    assert not report.accepted
    missing = GPU_HACKS[name] - set(report.reasons)
    either = GPU_EITHER.get(name)
    assert not either or either & set(report.reasons), f"{name}: none of {sorted(either or [])}: {report.reasons}"
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )
