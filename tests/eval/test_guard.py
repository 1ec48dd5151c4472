"""The guard: replaced functions and trace hooks are tampering; threads count only if the candidate left them."""

from __future__ import annotations

import subprocess
import sys
import threading

import torch

from jg_mcp.eval.candidate.guard import Guard
from jg_mcp.eval.reasons import Reason


def test_a_replaced_timer_or_torch_function_is_named():
    guard = Guard.capture(torch, {})
    original = torch.cuda.Event.elapsed_time
    try:
        torch.cuda.Event.elapsed_time = lambda self, end: 0.0
        found = guard.tampering()
    finally:
        torch.cuda.Event.elapsed_time = original
    assert [f.detail for f in found] == ["`torch.cuda.Event.elapsed_time` was replaced"]
    assert guard.tampering() == []


def test_a_trace_hook_is_tampering():
    guard = Guard.capture(torch, {})
    sys.setprofile(lambda *a: None)
    try:
        found = guard.tampering()
    finally:
        sys.setprofile(None)
    assert [f.reason for f in found] == [Reason.TAMPERED]


def test_threads_started_by_harness_code_are_absorbed_but_later_ones_are_found():
    guard = Guard.capture(torch, {})
    stop = threading.Event()
    harness = threading.Thread(target=stop.wait, name="compiler-pool")
    harness.start()
    guard.absorb_threads()
    assert guard.new_threads() == []
    candidate = threading.Thread(target=stop.wait, name="candidate-worker")
    candidate.start()
    try:
        [finding] = guard.new_threads()
    finally:
        stop.set()
        harness.join()
        candidate.join()
    assert finding.reason == Reason.THREADS_LEFT and "candidate-worker" in finding.detail


def test_a_child_process_left_running_is_found():
    guard = Guard.capture(torch, {})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        [finding] = guard.new_threads()
    finally:
        proc.kill()
        proc.wait()
    assert finding.reason == Reason.THREADS_LEFT and str(proc.pid) in finding.detail
    assert guard.new_threads() == []
