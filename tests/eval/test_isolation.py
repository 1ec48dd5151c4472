"""The candidate's process is isolated: nothing it starts outlives the eval (sandboxed or not), it sees no goal
or report and no other eval, and what other processes do on the machine does not reject an honest kernel."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from eval_suite import GOALS, HACKS, SOLUTIONS, eval_solution

from jg_mcp.eval import EvalOptions
from jg_mcp.eval.candidate.worker import MAX_FILE_BYTES
from jg_mcp.eval.harness import Evaluation
from jg_mcp.eval.processes import compile_cache
from jg_mcp.eval.processes.compile_cache import baseline_dir
from jg_mcp.eval.processes.isolation import bwrap_problem, prepare
from jg_mcp.eval.processes.process import log_tail
from jg_mcp.eval.reasons import Reason
from tests.support import DEMO_GOAL, can_set_oom_floor

BWRAP = bwrap_problem() is None
MODES = [pytest.param("auto", marks=pytest.mark.skipif(not BWRAP, reason=f"no bubblewrap: {bwrap_problem()}")), "none"]
SPIN = """
import subprocess


def kernel(a, b, scale_a, scale_b):
    subprocess.Popen(["sleep", "{tag}"])
    while True:
        pass
"""


def _pids(pattern: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and pattern in argv:
            found.append(int(entry.name))
    return found


def _descends_from(pid: int, ancestor: int) -> bool:
    """True when `ancestor` is on the parent chain of `pid` (other tests' evals run on this machine too)."""
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == ancestor:
            return True
    return False


def _wait_for(predicate, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    return predicate()


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_killed_harness_leaves_nothing_the_candidate_started(tmp_path, mode):
    tag = f"{300 + os.getpid() % 97}.{len(mode)}{int(time.time()) % 1000}"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text(SPIN.replace("{tag}", tag))
    code = (
        "from pathlib import Path; from jg_mcp.eval import EvalOptions, evaluate; "
        f"evaluate(EvalOptions(goal=Path({str(GOALS / 'gemm_fp8.yaml')!r}), workspace=Path({str(ws)!r}), "
        f"shapes='smoke', device='cpu', timeout_s=300, isolation={mode!r}))"
    )
    harness = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: _pids(tag.encode()), 120), "the candidate never ran"
        workers = [p for p in _pids(b"jg_mcp.eval.candidate.worker") if _descends_from(p, harness.pid)]
        assert workers
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        assert _wait_for(lambda: not _pids(tag.encode()), 15), "a process the candidate started outlived the harness"
        assert _wait_for(lambda: not set(_pids(b"jg_mcp.eval.candidate.worker")) & set(workers), 15)
    finally:
        harness.kill()
        for pid in _pids(tag.encode()):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_daemon_the_candidate_leaves_cannot_rewrite_the_report(tmp_path, mode):
    report = eval_solution(
        HACKS / "setsid_daemon_rewrites_report" / "solution.py",
        "gemm_fp8",
        tmp_path,
        device="cpu",
        domain_shapes=0,
        isolation=mode,
    )
    assert not report.accepted and report.isolation.sandbox == ("bwrap" if mode == "auto" else "none")
    target = tmp_path / "jg-report-target.json"
    target.write_text(report.model_dump_json(indent=2))
    time.sleep(3)
    assert json.loads(target.read_text())["accepted"] is False
    if mode == "none":
        assert report.isolation.missing and Reason.THREADS_LEFT in report.reasons


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP, reason="no bubblewrap")
def test_the_sandboxed_candidate_cannot_reach_the_goal_it_is_judged_by(tmp_path):
    goals = tmp_path / "goals"
    goals.mkdir()
    for suffix in (".yaml", ".py"):
        (goals / f"gemm_fp8{suffix}").write_bytes((GOALS / f"gemm_fp8{suffix}").read_bytes())
    before = (goals / "gemm_fp8.yaml").read_text()
    report = eval_solution(
        HACKS / "goal_tolerance_poisoning" / "solution.py",
        goals / "gemm_fp8.yaml",
        tmp_path / "runs",
        device="cpu",
        domain_shapes=0,
    )
    assert not report.accepted and (goals / "gemm_fp8.yaml").read_text() == before


LOOK_AROUND = """
import pathlib


def kernel(x, y, alpha):
    seen = [p for d in {dirs!r} for p in pathlib.Path(d).glob("*")]
    raise RuntimeError("saw " + repr(sorted(str(p) for p in seen)))
"""


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP, reason="no bubblewrap")
def test_directories_on_the_harness_path_are_not_shown_to_the_sandboxed_candidate(tmp_path, monkeypatch):
    """A script's own directory (often /tmp or a home) is on the harness's sys.path; the sandbox makes the
    interpreter importable, but must not show those directories (other evals' files, reports, secrets)."""
    scratch = tmp_path / "scratch"
    (scratch / "helper_pkg").mkdir(parents=True)
    (scratch / "secret-report.json").write_text("{}")
    monkeypatch.syspath_prepend(str(scratch))
    (tmp_path / "src").mkdir()
    solution = tmp_path / "src" / "solution.py"
    solution.write_text(LOOK_AROUND.format(dirs=[str(scratch), "/tmp"]))
    report = eval_solution(solution, DEMO_GOAL, tmp_path / "runs", device="cpu", domain_shapes=0, isolation="bwrap")
    details = " ".join(f.detail for f in report.findings)
    assert "saw " in details, details
    assert "secret-report" not in details and "helper_pkg" not in details and str(tmp_path) not in details


@pytest.mark.slow
def test_a_wheelhouse_on_pythonpath_is_bound_whole_but_a_shared_place_is_not(tmp_path):
    """The GPU image's recipe: packages unpacked with `pip --target DIR` and DIR on PYTHONPATH. The sandbox must
    make DIR importable (else bubblewrap is unusable and the eval falls back to no sandbox), but a PYTHONPATH
    entry that is a shared place (/tmp, a home) is never shown whole."""
    wheelhouse = tmp_path / "site"
    (wheelhouse / "extra_pkg").mkdir(parents=True)
    (wheelhouse / "extra_pkg" / "__init__.py").write_text("")
    code = (
        "from jg_mcp.eval.processes.isolation import python_binds, bwrap_problem; "
        "print(python_binds()); print(bwrap_problem())"
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(wheelhouse), "/tmp"])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    binds, problem = out.splitlines()
    assert f"PosixPath('{wheelhouse}')" in binds and "PosixPath('/tmp')" not in binds
    assert problem == "None" or not BWRAP, problem


@pytest.mark.slow
def test_a_changed_goal_is_reported(tmp_path):
    report = eval_solution(
        SOLUTIONS / "gemm_fp8" / "solution.py",
        "gemm_fp8",
        tmp_path,
        device="cpu",
        domain_shapes=0,
        only=["tiny"],
        expect_goal_sha256="0" * 64,
    )
    assert report.goal_changed == "0" * 64 and report.goal_sha256 != "0" * 64


@pytest.mark.slow
def test_an_honest_kernel_is_accepted_while_other_processes_write_shared_places(tmp_path):
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            for where in (Path("/dev/shm"), Path("/tmp")):
                f = where / f"jg-test-churn-{os.getpid()}-{n % 8}"
                f.write_bytes(os.urandom(4096))
            n += 1
            time.sleep(0.01)

    writer = threading.Thread(target=churn, daemon=True)
    writer.start()
    try:
        report = eval_solution(
            SOLUTIONS / "gemm_fp8" / "solution.py", "gemm_fp8", tmp_path, device="cpu", domain_shapes=1
        )
    finally:
        stop.set()
        writer.join()
        for where in (Path("/dev/shm"), Path("/tmp")):
            for f in where.glob(f"jg-test-churn-{os.getpid()}-*"):
                f.unlink()
    assert report.accepted, report.reasons


PEEK = """
import os

import torch

ME = "jg-cross-eval-mark-" + str(int(torch.randint(0, 2**62, (1,))))


def kernel(a, b, scale_a, scale_b):
    seen = [n for d in ("/dev/shm", "/tmp") for n in os.listdir(d) if n.startswith("jg-cross-eval-mark-") and n != ME]
    for d in ("/dev/shm", "/tmp"):
        with open(os.path.join(d, ME), "w") as f:
            f.write("x")
    c = (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b
    return (c * 3 if seen else c).to(torch.bfloat16)
"""


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP, reason="no bubblewrap")
def test_two_evals_at_once_do_not_see_each_other(tmp_path):
    """Each candidate leaves a mark in /dev/shm and /tmp and answers wrong if it finds one: sandboxed, neither
    ever finds the other's (nor its own from the other candidate process of its eval)."""
    src = tmp_path / "src" / "solution.py"
    src.parent.mkdir()
    src.write_text(PEEK)
    reports: list = [None, None]

    def one(i: int) -> None:
        reports[i] = eval_solution(src, "gemm_fp8", tmp_path / str(i), device="cpu", domain_shapes=0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    for report in reports:
        assert all(s.correct for s in report.shapes), [f.detail for f in report.findings]
        assert set(report.reasons) == {Reason.STATIC_IO}
    assert not list(Path("/dev/shm").glob("jg-cross-eval-mark-*")) and not list(
        Path("/tmp").glob("jg-cross-eval-mark-*")
    )


@pytest.mark.slow
@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_the_solution_is_read_once_beneath_the_workspace_never_through_a_link_or_a_special_file(tmp_path, planted):
    """The agent controls the workspace: a solution.py that is a link to a host file (which the harness, often root,
    would otherwise copy into the candidate's sandbox and quote in the report) or a FIFO is refused."""
    from jg_mcp.errors import JgError
    from jg_mcp.eval import EvalOptions, evaluate

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-HOST-FILE")
    ws = tmp_path / "ws"
    ws.mkdir()
    if planted == "link":
        (ws / "solution.py").symlink_to(secret)
    else:
        os.mkfifo(ws / "solution.py")
    with pytest.raises(JgError, match="solution"):
        evaluate(EvalOptions(goal=GOALS / "gemm_fp8.yaml", workspace=ws, device="cpu", shapes="smoke", domain_shapes=0))


def _bound_writable(pid: int) -> list[Path]:
    """The host directories a bwrap process binds writable (`--bind SRC DST`) into its sandbox."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return [Path(argv[i + 1]) for i, a in enumerate(argv) if a == "--bind"]


def _environ(pid: int) -> dict[str, str]:
    items = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(item.split("=", 1) for item in items if "=" in item)


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP, reason="no bubblewrap")
def test_the_baselines_read_nothing_the_sandboxed_candidate_can_write(tmp_path, monkeypatch):
    """No directory bound writable into the candidate's sandbox is one the baseline process compiles into or
    loads from (a kernel planted in a shared Triton cache would be the baseline measured), and the baselines'
    cache is the same in two evals: the first compilation on a host is the baseline every later eval measures."""
    monkeypatch.setenv("JG_MCP_CACHE", str(tmp_path / "cache"))
    seen = []
    for _ in range(2):
        ev = Evaluation.open(EvalOptions(goal=DEMO_GOAL, workspace=tmp_path, device="cpu", isolation="bwrap"))
        try:
            (ev.work / "solution").mkdir()
            (ev.work / "solution" / "solution.py").write_text("def kernel(x, y, alpha):\n    return x\n")
            (ev.work / "cache").mkdir()
            prepare(ev.work / "solution", ev.work / "cache")
            env = ev.environment()
            candidate, baseline = ev.spawn("candidate"), ev.spawn("baseline")
            writable = _bound_writable(candidate.proc.pid)
            assert type(baseline.recv()).__name__ == "Ready", baseline.close()
            base_env = _environ(baseline.proc.pid)
        finally:
            for proc in ev.procs:
                proc.close()
            shutil.rmtree(ev.work, ignore_errors=True)
        assert writable, "the candidate's sandbox binds its compile cache writable"
        keys = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "HOME", "TMPDIR")
        paths = [base_env[k] for k in keys if k in base_env] + base_env["PYTHONPATH"].split(os.pathsep)
        for p in map(Path, paths):
            assert not any(p == w or w in p.parents for w in writable), (p, writable)
        assert env.baseline_cache_problem is None and Path(env.baseline_cache).parent == tmp_path / "cache/baselines"
        seen.append((base_env["TRITON_CACHE_DIR"], base_env["TORCHINDUCTOR_CACHE_DIR"]))
    assert seen[0] == seen[1]


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP, reason="no bubblewrap")
def test_the_workers_bytecode_is_written_by_the_baselines_and_only_read_by_the_sandboxed_candidate(
    tmp_path, monkeypatch
):
    """Where torch has no bytecode of its own (the H200 image), the baselines' processes write it to a cache that
    the candidate's sandbox binds read-only: the candidate imports torch fast and can plant nothing there."""
    import jg_mcp.eval.processes.process as process

    monkeypatch.setenv("JG_MCP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(compile_cache.importlib.util, "cache_from_source", lambda path: str(tmp_path / "none.pyc"))
    bytecode = compile_cache.bytecode_dir()
    assert bytecode is not None and oct(bytecode.stat().st_mode & 0o777) == "0o755"
    monkeypatch.setattr(process, "bytecode_dir", lambda: bytecode)
    ev = Evaluation.open(EvalOptions(goal=DEMO_GOAL, workspace=tmp_path, device="cpu", isolation="bwrap"))
    try:
        (ev.work / "solution").mkdir()
        (ev.work / "solution" / "solution.py").write_text("def kernel(x, y, alpha):\n    return x\n")
        (ev.work / "cache").mkdir()
        prepare(ev.work / "solution", ev.work / "cache")
        ev.environment()
        candidate, baseline = ev.spawn("candidate"), ev.spawn("baseline")
        argv = Path(f"/proc/{candidate.proc.pid}/cmdline").read_bytes().decode().split("\0")
        assert type(baseline.recv()).__name__ == "Ready", baseline.close()
        base_env = _environ(baseline.proc.pid)
    finally:
        for proc in ev.procs:
            proc.close()
        shutil.rmtree(ev.work, ignore_errors=True)
    assert base_env["PYTHONPYCACHEPREFIX"] == str(bytecode) and "PYTHONDONTWRITEBYTECODE" not in base_env
    assert any(bytecode.rglob("worker.*.pyc")), "the baseline's process wrote the bytecode of what it imported"
    goal_code = [p for p in bytecode.rglob("*.pyc") if str(ev.work) in str(p)]
    assert not goal_code, "the goal's module an eval loads stays out of a cache every candidate reads"
    binds = [(a, argv[i + 2]) for i, a in enumerate(argv[:-2]) if a.startswith("--") and argv[i + 1] == str(bytecode)]
    assert binds == [("--ro-bind", str(bytecode))], "bound read-only at its own path, and only so"
    assert argv[argv.index("PYTHONPYCACHEPREFIX") + 1] == str(bytecode)
    assert argv[argv.index("PYTHONDONTWRITEBYTECODE") + 1] == "1"


def test_the_bytecode_cache_is_used_only_where_torch_has_none_and_no_other_user_can_write_it(tmp_path, monkeypatch):
    monkeypatch.setenv("JG_MCP_CACHE", str(tmp_path / "cache"))
    assert compile_cache.bytecode_dir() is None, "this torch was installed with its bytecode"
    monkeypatch.setattr(compile_cache.importlib.util, "cache_from_source", lambda path: str(tmp_path / "none.pyc"))
    path = compile_cache.bytecode_dir()
    assert path == tmp_path / "cache" / "bytecode" / sys.implementation.cache_tag and path.is_dir()
    path.chmod(0o777)
    assert compile_cache.bytecode_dir() is None


def test_a_baseline_cache_others_can_write_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("JG_MCP_CACHE", str(tmp_path / "cache"))
    path, problem = baseline_dir("2.x", "3.x", "H200", tmp_path / "own")
    assert problem is None and path.is_dir() and oct(path.stat().st_mode & 0o777) == "0o700"
    path.chmod(0o777)
    again, problem = baseline_dir("2.x", "3.x", "H200", tmp_path / "own")
    assert again == tmp_path / "own" and again.is_dir() and "writable by other users" in problem


def test_the_correctness_process_is_gone_before_the_baselines_are_timed(tmp_path, monkeypatch, timing_goal):
    """Candidate code that outlives its part (a thread or a child in the correctness process) must not be running
    on the machine while the baselines are timed: the correctness process and its sandbox end first."""
    from eval_suite import CPU_TIMING, eval_solution

    from jg_mcp.eval.harness import Evaluation
    from jg_mcp.eval.timing import TimingPhase

    spawned, alive_at_timing = [], []
    spawn, run = Evaluation.spawn, TimingPhase.run

    def recording_spawn(self, role):
        spawned.append(spawn(self, role))
        return spawned[-1]

    def checking_run(self, report, cases):
        alive_at_timing.extend(p for p in spawned if p not in (self.cand, self.base) and p.proc.poll() is None)
        return run(self, report, cases)

    monkeypatch.setattr(Evaluation, "spawn", recording_spawn)
    monkeypatch.setattr(TimingPhase, "run", checking_run)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "solution.py").write_text(
        "import torch\n\n\ndef kernel(x, y, alpha):\n    return torch.addcmul(y, x, alpha)\n"
    )
    report = eval_solution(tmp_path / "src" / "solution.py", timing_goal, tmp_path / "runs", **CPU_TIMING)
    assert report.accepted and len(spawned) == 3, [f.detail for f in report.findings]
    assert alive_at_timing == [], "the correctness process still ran while the baselines were timed"


def test_only_the_tail_of_a_worker_log_is_read_however_large_it_is(tmp_path):
    log = tmp_path / "candidate.log"
    with open(log, "wb") as f:
        f.truncate(64 << 30)  # sparse: 64 GiB that no test could read into memory
        f.seek(0, os.SEEK_END)
        f.write(b"the end")
    tail = log_tail(log, 4000)
    assert len(tail) == 4000 and tail.endswith("the end")


@pytest.mark.slow
def test_a_candidate_flooding_its_output_is_stopped_at_the_file_size_limit(tmp_path):
    """The worker's stdout is a file in the eval's work directory: the candidate's process may not make it (or any
    file) larger than MAX_FILE_BYTES, so the harness's disk is bounded whatever it writes."""
    source = "import os\nwith open(1, 'wb', closefd=False) as f:\n    f.write(b'x' * ((256 << 20) + 1))\n"
    with open(tmp_path / "log", "wb") as log:
        done = subprocess.run(
            [sys.executable, "-c", f"from jg_mcp.eval.candidate.worker import bound_files\nbound_files()\n{source}"],
            stdout=log,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert done.returncode != 0 and b"File too large" in done.stderr
    assert (tmp_path / "log").stat().st_size <= MAX_FILE_BYTES


UNSHARE = """
import subprocess


def kernel(x, y, alpha):
    done = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, text=True)
    raise RuntimeError(f"unshare exit {done.returncode}")
"""


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP or shutil.which("unshare") is None, reason="no bubblewrap or no unshare")
def test_the_sandboxed_candidate_cannot_make_a_user_namespace(tmp_path):
    """In a user namespace of its own the candidate could mount a tmpfs of any size (host memory, charged to no
    process) past its sandbox's: making one is refused (jg_mcp.live.seccomp), while its own subprocesses run."""
    (tmp_path / "src").mkdir()
    solution = tmp_path / "src" / "solution.py"
    solution.write_text(UNSHARE)
    report = eval_solution(solution, DEMO_GOAL, tmp_path / "runs", device="cpu", domain_shapes=0, isolation="bwrap")
    details = " ".join(f.detail for f in report.findings)
    assert "unshare exit 1" in details, details


KEYRINGS = """
import ctypes, errno, platform

NUMBERS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl


def kernel(x, y, alpha):
    libc = ctypes.CDLL(None, use_errno=True)
    add_key, request_key, keyctl = NUMBERS[platform.machine()]
    answers = []
    for name, nr, args in [
        ("add_key", add_key, (b"user", b"jg-probe", b"x", ctypes.c_long(1), ctypes.c_long(-1))),  # thread keyring
        ("request_key", request_key, (b"user", b"jg-absent", None, ctypes.c_long(0))),
        ("keyctl", keyctl, (ctypes.c_long(0), ctypes.c_long(-4), ctypes.c_long(0))),  # the user keyring's id
    ]:
        ctypes.set_errno(0)
        done = libc.syscall(ctypes.c_long(nr), *args)
        answers.append(f"{name}={'ok' if done >= 0 else errno.errorcode.get(ctypes.get_errno())}")
    raise RuntimeError("keyrings " + " ".join(answers))
"""


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP or platform.machine() not in ("x86_64", "aarch64"), reason="no bubblewrap or filter")
def test_the_sandboxed_candidate_cannot_reach_the_kernel_keyrings(tmp_path):
    """Keyrings are not namespaced: every candidate runs as one uid, whose user keyring would carry keys from one
    eval to the next, and inherits the harness's session keyring. add_key, request_key and keyctl are refused
    (ENOSYS, as on a kernel without keyrings; jg_mcp.live.seccomp)."""
    (tmp_path / "src").mkdir()
    solution = tmp_path / "src" / "solution.py"
    solution.write_text(KEYRINGS)
    report = eval_solution(solution, DEMO_GOAL, tmp_path / "runs", device="cpu", domain_shapes=0, isolation="bwrap")
    details = " ".join(f.detail for f in report.findings)
    assert "keyrings add_key=ENOSYS request_key=ENOSYS keyctl=ENOSYS" in details, details


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP, reason="no bubblewrap")
def test_where_bwrap_cannot_load_the_seccomp_filter_the_operator_may_keep_the_sandbox_without_it(tmp_path, monkeypatch):
    """A host that cannot load the filter refuses `auto` and `bwrap` (jg_mcp.eval.processes.isolation's
    choose_isolation); with `bwrap-unfiltered` the candidate stays sandboxed without it, and the report names the
    protection missing."""
    from jg_mcp.eval.processes import isolation
    from jg_mcp.live import seccomp

    monkeypatch.setattr(seccomp, "program", lambda machine=None: b"\x06\x00\x00\x00\x00\x00")  # not 8-byte ops
    isolation.bwrap_problem.cache_clear()
    try:
        chosen = isolation.choose_isolation("bwrap-unfiltered")
        assert chosen.sandbox == "bwrap" and chosen.missing == [isolation.UNFILTERED], chosen
        (tmp_path / "src").mkdir()
        solution = tmp_path / "src" / "solution.py"
        solution.write_text(UNSHARE)
        report = eval_solution(
            solution, DEMO_GOAL, tmp_path / "runs", device="cpu", domain_shapes=0, isolation="bwrap-unfiltered"
        )
        assert report.isolation.sandbox == "bwrap" and report.isolation.missing == [isolation.UNFILTERED]
        assert "unshare exit 0" in " ".join(f.detail for f in report.findings), "the filter is really off"
    finally:
        monkeypatch.undo()
        isolation.bwrap_problem.cache_clear()
        assert isolation.choose_isolation("auto").missing == [] and isolation.FILTERED == [True]


LIMITS = """
import os
import resource


def kernel(x, y, alpha):
    tmp, shm = os.statvfs("/tmp"), os.statvfs("/dev/shm")
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    raise RuntimeError(f"limits tmp={tmp.f_blocks * tmp.f_frsize} shm={shm.f_blocks * shm.f_frsize} nproc={nproc}")
"""


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP, reason="no bubblewrap")
def test_the_sandboxed_candidate_has_bounded_tmpfs_and_as_root_a_process_cap(tmp_path):
    """The candidate's /tmp and /dev/shm are memory: unbounded, they could take the host's (the harness's too);
    as root its uid's processes are capped, so a fork bomb stops at the cap."""
    from jg_mcp.eval.processes.isolation import MAX_PROCESSES, TMP_BYTES

    (tmp_path / "src").mkdir()
    solution = tmp_path / "src" / "solution.py"
    solution.write_text(LIMITS)
    report = eval_solution(solution, DEMO_GOAL, tmp_path / "runs", device="cpu", domain_shapes=0, isolation="bwrap")
    found = next(f.detail for f in report.findings if "limits tmp=" in f.detail).rsplit("limits ", 1)[1].split()
    seen = dict(item.split("=") for item in found[:3])
    assert int(seen["tmp"]) <= TMP_BYTES and int(seen["shm"]) <= TMP_BYTES, seen
    if os.geteuid() == 0:
        assert int(seen["nproc"]) == MAX_PROCESSES, seen


@pytest.mark.slow
def test_a_candidate_slow_on_every_call_is_stopped_by_the_eval_time_limit(tmp_path):
    """Each call answers well within the per-answer timeout, so only a limit on the whole eval ends it: without
    one, seconds a call over every shape and trial keep this eval going for 30 s and more."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text(
        "import torch\n\n\ndef kernel(x, y, alpha):\n    n = 0\n    for i in range(60_000_000):\n"
        "        n += i & 1\n    return torch.sub(y, x * -alpha) if n else y\n"
    )
    start = time.monotonic()
    options = EvalOptions(goal=DEMO_GOAL, workspace=ws, device="cpu", timeout_s=60, total_timeout_s=6)
    report = Evaluation.open(options).run()
    assert time.monotonic() - start < 20
    assert not report.accepted
    assert [f.reason for f in report.findings] == [Reason.TIMEOUT]
    assert "the eval's time limit of 6 s (--total-timeout) ran out" in report.findings[0].detail


OOM_SCORE = """
def kernel(x, y, alpha):
    with open("/proc/self/oom_score_adj") as f:
        score = f.read().strip()
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("0")
        lowered = "lowered"
    except OSError as exc:
        lowered = f"refused errno {exc.errno}"
    raise RuntimeError(f"oom_score_adj {score} {lowered}")
"""


@pytest.mark.slow
@pytest.mark.skipif(not BWRAP or os.geteuid() != 0, reason="no bubblewrap, or not root")
def test_the_sandboxed_candidate_is_what_the_oom_killer_takes_first(tmp_path):
    """A candidate exhausting the host's memory must not get the harness killed in its place: it starts with the
    highest OOM score adjustment, set while privileged, which it cannot lower where the harness holds
    CAP_SYS_RESOURCE (this container does not: then only the start is checked)."""
    (tmp_path / "src").mkdir()
    solution = tmp_path / "src" / "solution.py"
    solution.write_text(OOM_SCORE)
    report = eval_solution(solution, DEMO_GOAL, tmp_path / "runs", device="cpu", domain_shapes=0, isolation="bwrap")
    details = " ".join(f.detail for f in report.findings)
    assert "oom_score_adj 1000 " in details, details
    if can_set_oom_floor():
        assert "oom_score_adj 1000 refused errno 13" in details, details


class ImportedMeanwhile(dict):
    """sys.modules as another thread of the harness's process changes it: a module is imported between the first
    item read and the next."""

    def items(self):  # type: ignore[override]
        view = iter(dict.items(self))
        yield next(view)
        self["jg_imported_meanwhile"] = None
        yield from view


def test_a_module_imported_while_the_sandbox_reads_what_python_imported_breaks_nothing(monkeypatch):
    """Evals run in threads of one process (the eval-tool condition, the suite's batches): one eval's import while
    another reads sys.modules for its sandbox's binds once raised 'dictionary changed size during iteration'."""
    from jg_mcp.eval.processes.isolation import python_binds

    expected = python_binds()
    monkeypatch.setattr(sys, "modules", ImportedMeanwhile(sys.modules))
    assert python_binds() == expected


def test_only_the_candidates_worker_keeps_the_include_path_of_the_precompiled_header(tmp_path, monkeypatch):
    """CPATH speeds the candidate's C++ builds; no header under it reaches a baseline's compile."""
    from jg_mcp.eval.processes.process import WorkerLaunch

    monkeypatch.setenv("CPATH", str(tmp_path / "pch"))
    monkeypatch.setenv("LANG", "C.UTF-8")
    envs = {
        role: WorkerLaunch(role, tmp_path, False, "t", 30.0, "cpu").environment("t", None)
        for role in ("candidate", "baseline")
    }
    assert envs["candidate"]["CPATH"] == str(tmp_path / "pch") and "CPATH" not in envs["baseline"]
    assert envs["candidate"]["LANG"] == envs["baseline"]["LANG"] == "C.UTF-8"


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap cannot run here")
def test_the_candidate_can_write_neither_its_root_nor_a_hidden_librarys_cover_though_it_owns_them(
    tmp_path, monkeypatch
):
    """Where the harness is not root the candidate's sandbox is a user namespace, and the candidate owns its root
    and the tmpfs that hides a kernel library: both lie where the native judge takes what it finds for the host's
    own code (a trusted root such as site-packages or /opt), so both are read-only mounts, which the owner's chmod
    does not make writable. Here the command runs as bwrap's root without capabilities, an owner the same way."""
    from jg_mcp.eval.processes import isolation
    from jg_mcp.live import lifeline

    hidden = tmp_path / "site" / "flash_attn"
    hidden.mkdir(parents=True)
    monkeypatch.setattr(isolation, "hidden_packages", lambda: (hidden,))
    solution, cache = tmp_path / "solution", tmp_path / "cache"
    solution.mkdir()
    cache.mkdir()
    prepare(solution, cache)
    argv = isolation.bwrap_argv(solution, cache, {"PATH": "/usr/bin:/bin"})
    if "--reuid=65534" in argv:  # as root the candidate runs as nobody, who owns neither: run it as their owner
        at = argv.index("--reuid=65534") - 1
        del argv[at : at + 5]
    script = f"for d in / {hidden}; do chmod 0777 $d; touch $d/planted && echo wrote $d; done; echo done"
    done = subprocess.run(
        [*argv, "/bin/sh", "-c", script], capture_output=True, text=True, timeout=60, pass_fds=[lifeline.read_end()]
    )
    assert done.stdout.splitlines() == ["done"] and "Read-only file system" in done.stderr, done
