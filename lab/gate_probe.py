"""Probe (GPU): does the harness's gate (jg_mcp/eval/gate.py) see another process's kernel? The gate alone, then
with a second process spinning on the GPU (torch.cuda._sleep on its own stream), with that process stopped
(SIGSTOP, as the harness stops the candidate), and once it is gone.

    python lab/gate_probe.py OUT.json
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import torch

from jg_mcp.eval.gate import BUSY_GAP_MS, Gate

HOG = "import torch; torch.cuda.init(); print('up', flush=True); torch.cuda._sleep(int(8e9)); torch.cuda.synchronize()"


def gaps(gate: Gate, count: int, ms: float) -> list[tuple[float, float]]:
    """The longest gap each of `count` gates of `ms` saw, and how long each took by events."""
    out = []
    for _ in range(count):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        gate.hold(ms)
        end.record()
        end.synchronize()
        out.append((round(gate.gap_ms(), 4), round(start.elapsed_time(end), 3)))
    return out


def main() -> int:
    gate = Gate()
    rows: dict = {"idle": gaps(gate, 5, 2.0)}
    hog = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
    assert hog.stdout is not None and hog.stdout.readline().strip() == "up"
    time.sleep(0.2)
    rows["beside_a_spinning_process"] = gaps(gate, 5, 2.0)
    for ms in (5.0, 10.0, 20.0, 40.0):
        rows[f"beside_{ms:g}ms"] = gaps(gate, 3, ms)
    os.kill(hog.pid, signal.SIGSTOP)  # as the harness stops the candidate while a baseline is timed
    time.sleep(0.05)
    rows["stopped_10ms"] = gaps(gate, 5, 10.0)
    os.kill(hog.pid, signal.SIGCONT)
    time.sleep(0.05)
    rows["beside_again_10ms"] = gaps(gate, 3, 10.0)
    hog.kill()
    hog.wait()
    time.sleep(0.5)
    rows["after"] = gaps(gate, 5, 2.0)
    rows["busy_gap_ms"] = BUSY_GAP_MS
    rows["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(rows))
    with open(sys.argv[1], "w") as f:
        json.dump(rows, f, indent=1)
    busy = any(g > BUSY_GAP_MS for key, got in rows.items() if key.startswith("beside_") for g, _ in got)
    idle = all(g <= BUSY_GAP_MS for g, _ in rows["idle"] + rows["after"])
    return 0 if busy and idle else 1


if __name__ == "__main__":
    sys.exit(main())
