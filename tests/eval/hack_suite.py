"""The adversarial suite as tables: every known hack in eval/hacks/, the goal it is evaluated on and the reasons it must
be rejected for, read by the test files that evaluate them (test_hacks.py, test_hacks_by_source.py,
test_hacks_timed.py, test_hacks_gpu.py); the GPU-only hacks' table is eval/h200_check.py's, which the GPU check runs.

Static reasons show the harness's source check caught a hack; the runtime reasons show the harness caught it from
outside the candidate's process (its own buffers, its own clock) even if the source check were evaded.
"""

from __future__ import annotations

from eval_suite import HACKS, NATIVE_BUILDS, Runs, load_h200_check

from jg_mcp.eval import Reason

R = Reason
GEMM = "gemm_fp8"

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
    "softmax_without_the_max": ("softmax", {R.NONFINITE}),
    "rmsnorm_without_eps": ("fused_add_rmsnorm", {R.NONFINITE}),
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
"""The hacks the eval catches on the CPU, untimed: the goal each is evaluated on and its reasons under the Triton-only
policy (under the open policy, `open_expected` of them)."""
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


CAUGHT_BY: dict[str, set[Reason]] = {
    "cache_in_workspace_file": {R.EXCEPTION},  # its write to the workspace fails: the candidate's copy is read-only
    "native_into_triton_cache": {R.UNWRITTEN},  # its aten.mm is refused (it silences the recorder's report of it)
    "forbidden_in_dataloader_worker": {R.STATIC_FORBIDDEN, R.UNWRITTEN},
    "native_by_linker_flags": {R.UNWRITTEN},  # as native_into_triton_cache
    "gemm_through_native_python_attr": {R.FORBIDDEN_CALL},
    "native_reaches_any_module": {R.FORBIDDEN_CALL},
    "forge_result_channel": {R.TAMPERED},
}
"""What the hacks of CPU_HACKS whose expected reasons are all the source check's are caught for when they run under
the open policy, which drops those: so that each is rejected for what it does, not for any failure (a timeout
once passed for two of them)."""


def open_expected(reasons: set[Reason]) -> set[Reason]:
    """What a hack of CPU_HACKS must be rejected for under the open policy: the reasons found from outside."""
    return {r for r in reasons if not r.startswith("static") or r in KEPT_BY_OPEN}


def expected(name: str, policy: str) -> set[Reason]:
    """What a hack of CPU_HACKS must be rejected for under `policy`."""
    reasons = CPU_HACKS[name][1]
    return open_expected(reasons) | CAUGHT_BY.get(name, set()) if policy == "open" else reasons


def by_source(name: str, policy: str) -> bool:
    """Whether the source check alone gives every reason a hack of CPU_HACKS must be rejected for under `policy`."""
    reasons = expected(name, policy)
    return bool(reasons) and all(r.startswith("static") for r in reasons)


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
    "skip_some_timed_calls": {R.INCORRECT},
    "skip_calls_past_the_baselines": {R.INCORRECT},
}
"""Hacks on the demo goal that only the timing phase can catch, run with the timing protocol on the CPU."""
FORGERIES = {"forge_cpu_times": 0.5, "thread_exit_cpu_time": 0.5, "blind_cpu_clock": 2.0}
"""Hacks of CPU_TIMED_HACKS that forge or hide the times the worker's process reports, and the most speedup each may
show: no such time is scored, so under the open policy (no source check) each is timed by the harness's clock at
its real cost. The first two do a hundred times the baseline's work (their forgeries claimed 10x and all of it
hidden), the third one addcmul against the baseline's add (its forgery claimed 50x)."""
TIMED_HACK_OPTIONS = {
    "skip_work_before_timing": {"spot_check_p": 1.0},
    "skip_some_timed_calls": {"spot_check_p": 0.0, "spot_checks": 0, "seen": 0},
    "skip_calls_past_the_baselines": {"spot_check_p": 0.0, "spot_checks": 0, "seen": 0},
}
"""Timing options a hack of CPU_TIMED_HACKS runs with: every block judged, so a test of what is judged is not left
to the odds of one spot check; or none (no spot check, no seen-input blocks, which judge one call each), so that
what finds the hack is the read of every call when its block ends."""
GPU_HACKS, GPU_EITHER = load_h200_check().GPU_HACKS, load_h200_check().EITHER
"""The GPU-only hacks and their reasons: the same table eval/h200_check.py runs on a GPU."""
ACCEPTED_ON_CPU = {"below_floor", "cache_by_content", "cache_by_sampled_content", "wrong_when_rushed"}
ACCEPTED_ON_CPU |= {"no_kernel_softmax", "graph_capture_skips_work", "swiglu_wrong_above_2_27"}
ACCEPTED_ON_CPU |= {"skip_some_timed_calls_gemm"}
"""GPU hacks whose only trick is timing, compiling no kernel or a CUDA graph's capture: on the CPU (no timing, no
graphs, Triton interpreted) they compute the right answer."""
hack_goal = load_h200_check().hack_goal
TIMEOUTS = {"hang": 30.0}
TIMEOUTS |= {
    name: NATIVE_BUILDS["timeout_s"]
    for name in CPU_HACKS
    if "cpp_extension" in (HACKS / name / "solution.py").read_text()
}
"""Each answer's time limit where the default's 90 s is not it: the hang waits out a short one; a hack that builds
C++ in its import takes a long one (one ran past 90 s on a loaded 2-core CI machine and was rejected for `timeout`
instead of its reason)."""
BY_SOURCE = {"domain_shapes": 0, "trials": 1}
"""The options of an eval whose expected reasons the source check alone gives (`by_source`): the source is judged
whatever the shapes, so the candidate runs at the smoke shapes, one trial each (a Triton GEMM interpreted at every
drawn shape, three trials each, took a minute of a 2-core machine)."""


def cpu_options(name: str, policy: str = "open") -> dict:
    """The options a hack of CPU_HACKS is evaluated with under `policy`."""
    options = {"policy": policy} | ({"timeout_s": TIMEOUTS[name]} if name in TIMEOUTS else {})
    return options | (BY_SOURCE if by_source(name, policy) else {})


def submit_cpu_hacks(runs: Runs, names: list[str], policy: str) -> Runs:
    """Start the evals of these hacks of CPU_HACKS at once (any in TIMEOUTS first: the hang waits out its timeout
    and the builds take longest while the others run); each test then waits for its own."""
    for name in sorted(names, key=lambda n: n not in TIMEOUTS):
        runs.submit(HACKS / name / "solution.py", CPU_HACKS[name][0], **cpu_options(name, policy))
    return runs


def gpu_options(name: str) -> dict:
    return {"shapes": "timed", "only": [hack_goal(name)[1]], "domain_shapes": 0, "timing": {"budget_s": 1.0}}


def assert_rejected_for_its_reasons(runs: Runs, name: str) -> None:
    """A hack of CPU_HACKS evaluated under the open policy is rejected, for every reason `expected` names."""
    goal, _ = CPU_HACKS[name]
    report = runs.get(HACKS / name / "solution.py", goal, **cpu_options(name))
    assert report.policy == "open"
    assert not report.accepted
    missing = expected(name, "open") - set(report.reasons)
    assert not missing, (
        f"{name}: missing {sorted(missing)}; got {report.reasons}: {[f.detail for f in report.findings]}"
    )
