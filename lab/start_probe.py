"""Where a fresh process's first calls spend their time: Triton's helper compiles (cuda_utils, launcher) and a
torch.compile baseline's first call with a warm cache, with and without Inductor's compile-worker pool."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, sys, time, importlib.util
t0 = time.perf_counter()
import torch, triton
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t1 = time.perf_counter()
out = {"import_init_s": t1 - t0}
mode = sys.argv[1]
gate = torch.randn(4096, 14336, device="cuda", dtype=torch.bfloat16)
up = torch.randn_like(gate)
torch.cuda.synchronize()
if mode == "triton":
    t = time.perf_counter()
    triton.runtime.driver.active.utils
    out["cuda_utils_s"] = time.perf_counter() - t
    spec = importlib.util.spec_from_file_location("solution", sys.argv[2])
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    t = time.perf_counter()
    mod.kernel(gate, up); torch.cuda.synchronize()
    out["first_call_s"] = time.perf_counter() - t
    t = time.perf_counter()
    mod.kernel(gate, up); torch.cuda.synchronize()
    out["second_call_s"] = time.perf_counter() - t
else:
    spec = importlib.util.spec_from_file_location("goal", sys.argv[2])
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    t = time.perf_counter()
    import torch._dynamo, torch._inductor.compile_fx
    out["import_inductor_s"] = time.perf_counter() - t
    t = time.perf_counter()
    mod.baseline_compiled(gate, up); torch.cuda.synchronize()
    out["first_call_s"] = time.perf_counter() - t
    t = time.perf_counter()
    mod.baseline_compiled(gate[:2048], up[:2048]); torch.cuda.synchronize()
    out["second_shape_s"] = time.perf_counter() - t
print(json.dumps(out))
"""


def child(mode: str, path: Path, cache: Path, **extra: str) -> dict:
    env = os.environ | {"TRITON_CACHE_DIR": str(cache / "triton"), "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor")}
    env |= extra
    got = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], env=env, capture_output=True, text=True)
    if got.returncode:
        return {"error": got.stderr[-800:]}
    return json.loads(got.stdout.strip().splitlines()[-1])


def main() -> None:
    out_dir = Path(sys.argv[1])
    sol, goal = ROOT / "eval/solutions/swiglu/solution.py", ROOT / "goals/swiglu.py"
    tmp = Path(tempfile.mkdtemp())
    rows = {}
    rows["triton_fresh"] = child("triton", sol, tmp / "a")
    rows["triton_warm"] = child("triton", sol, tmp / "a")
    seeded = tmp / "b" / "triton"
    for so in (tmp / "a" / "triton").glob("*/cuda_utils*.so"):
        (seeded / so.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(so, seeded / so.parent.name / so.name)
    rows["triton_seeded_cuda_utils"] = child("triton", sol, tmp / "b")
    rows["inductor_cold_pool"] = child("inductor", goal, tmp / "c")
    rows["inductor_warm_pool"] = child("inductor", goal, tmp / "c")
    rows["inductor_warm_1thread"] = child("inductor", goal, tmp / "c", TORCHINDUCTOR_COMPILE_THREADS="1")
    rows["inductor_cold_1thread"] = child("inductor", goal, tmp / "d", TORCHINDUCTOR_COMPILE_THREADS="1")
    rows["inductor_warm_1thread_again"] = child("inductor", goal, tmp / "d", TORCHINDUCTOR_COMPILE_THREADS="1")
    rows["inductor_warm_pool_again"] = child("inductor", goal, tmp / "d")
    rows["cache_files"] = sorted(str(p.relative_to(tmp)) for p in (tmp / "a" / "triton").rglob("*.so"))
    for name, row in rows.items():
        print(f"{name:32} {json.dumps(row)[:400]}")
    (out_dir / "start_probe.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
