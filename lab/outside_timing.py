"""Probe (GPU): can the harness time a worker's block with its own CUDA events, ordered against the worker's work
through interprocess events, as docs/decisions/2026-12-06-time-decided-outside.md proposes?

One harness process and one worker process (plain, then inside bubblewrap with its own pid namespace). Per block
the harness's stream sleeps behind a gate, writes the block's inputs from its own staging memory, records its start
event and an interprocess `go` event; the worker's stream waits for `go`, runs the calls (each output copied into a
ring slot the harness maps), records its own events around them and an interprocess `done` event; the harness's
stream waits for `done`, records its end event and copies the last slot into private memory. Printed per callable:
the worker's block time by its own events, the harness's, their difference (what ordering across processes costs),
whether the gate held, and an early `done` (recorded on a side stream before the calls): what the harness's clock
then saw and how much of the snapshot still held poison.

    python lab/outside_timing.py --out DIR [--sandbox plain,bwrap]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch.multiprocessing.reductions import reduce_tensor

SETS = 8
"""Input sets per block, rotated call by call: enough bytes that each call reads inputs out of L2."""
BLOCKS = 7
MAX_CALLS = 300
"""At most this many calls a block: two launches each stay within a stream's queue while its work waits for `go`."""
POISON = float("nan")


def send(sock: socket.socket, obj: object) -> None:
    data = pickle.dumps(obj)
    sock.sendall(struct.pack("!I", len(data)) + data)


def recv(sock: socket.socket) -> object:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise EOFError("peer closed")
        head += chunk
    size, data = struct.unpack("!I", head)[0], b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("peer closed")
        data += chunk
    return pickle.loads(data)


def callables() -> dict[str, tuple]:
    """name: (make one input set, the call); both sides build the same."""
    dev = "cuda"

    def gemm_in():
        return [torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16) for _ in range(2)]

    def softmax_in():
        return [torch.randn(4096, 8192, device=dev, dtype=torch.bfloat16)]

    def small_in():
        return [torch.randn(64, 4096, device=dev, dtype=torch.bfloat16)]

    return {
        "gemm_4096": (gemm_in, lambda a, b: a @ b),
        "softmax_4096x8192": (softmax_in, lambda x: torch.softmax(x, -1)),
        "silu_64x4096": (small_in, lambda x: torch.nn.functional.silu(x)),
    }


def worker(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    torch.cuda.init()
    stream = torch.cuda.Stream()
    fns = callables()
    state: dict = {}
    while True:
        msg = recv(sock)
        kind = msg[0]
        if kind == "bind":
            _, name, go_h, done_h, ins, ring = msg
            state = {
                "name": name,
                "go": torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), go_h),
                "done": torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), done_h),
                "ins": [[fn(*args) for fn, args in group] for group in ins],
                "ring": [fn(*args) for fn, args in ring],
            }
            send(sock, ("bound",))
        elif kind == "block":
            _, calls, early = msg
            fn = fns[state["name"]][1]
            w0, w1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                stream.wait_event(state["go"])
                if early:
                    side = torch.cuda.Stream()
                    side.wait_event(state["go"])
                    state["done"].record(side)
                w0.record(stream)
                for i in range(calls):
                    out = fn(*state["ins"][i % len(state["ins"])])
                    state["ring"][i % len(state["ring"])].copy_(out)
                w1.record(stream)
                if not early:
                    state["done"].record(stream)
            send(sock, ("queued",))
            stream.synchronize()
            send(sock, ("ran", w0.elapsed_time(w1)))
        elif kind == "quit":
            return


def start_worker(sandbox: str) -> tuple[subprocess.Popen, socket.socket]:
    mine, theirs = socket.socketpair()
    argv = [sys.executable, os.path.abspath(__file__), "--worker", str(theirs.fileno())]
    if sandbox == "bwrap":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise RuntimeError("bwrap is not on PATH")
        argv = [bwrap, "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent", *argv]
    proc = subprocess.Popen(argv, pass_fds=[theirs.fileno()])
    theirs.close()
    return proc, mine


def measure(sock: socket.socket, name: str, make, fn) -> dict:
    """The harness's side for one callable: bind, size a block to ~20 ms, then honest and early-done blocks."""
    torch.manual_seed(0)
    ins = [make() for _ in range(SETS)]
    staging = [[t.clone() for t in group] for group in ins]
    like = fn(*ins[0])
    flat = torch.empty(SETS * like.numel(), dtype=like.dtype, device="cuda")
    ring = [part.view(like.shape) for part in flat.split(like.numel())]  # one buffer: a read across all slots
    picks = torch.randint(0, flat.numel(), (4096,), device="cuda")
    go = torch.cuda.Event(interprocess=True)
    done = torch.cuda.Event(interprocess=True)
    go.record()
    done.record()
    torch.cuda.synchronize()
    send(
        sock,
        (
            "bind",
            name,
            go.ipc_handle(),
            done.ipc_handle(),
            [[reduce_tensor(t) for t in g] for g in ins],
            [reduce_tensor(t) for t in ring],
        ),
    )
    assert recv(sock) == ("bound",)
    s = torch.cuda.Stream()
    snap = torch.empty_like(ring[0])
    est0, est1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    est0.record()
    for i in range(20):
        fn(*ins[i % SETS])
    est1.record()
    torch.cuda.synchronize()
    per_call = est0.elapsed_time(est1) / 20
    calls = max(8, min(MAX_CALLS, int(20.0 / max(per_call, 1e-3))))
    rows = []
    for block in range(BLOCKS + 2):
        early = block >= BLOCKS
        for r in ring:
            r.fill_(POISON)
        torch.cuda.synchronize()
        h0, h1, h2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        gate = 2.0 + calls * 0.05
        host0 = time.perf_counter()
        with torch.cuda.stream(s):
            torch.cuda._sleep(int(gate * 2_500_000))
            for dst, src in zip(ins, staging, strict=True):
                for d, t in zip(dst, src, strict=True):
                    d.copy_(t)
            h0.record(s)
            go.record(s)
        send(sock, ("block", calls, early))
        assert recv(sock) == ("queued",)
        with torch.cuda.stream(s):
            s.wait_event(done)
            h1.record(s)
            snap.copy_(ring[(calls - 1) % SETS])
            picked = flat.index_select(0, picks)  # a kernel of the harness's own: it needs the GPU, not the queue
            h2.record(s)
        held = not h0.query()
        s.synchronize()
        host_ms = (time.perf_counter() - host0) * 1e3
        kind, worker_ms = recv(sock)
        poisoned = float(torch.isnan(snap.float()).float().mean())
        read_poisoned = float(torch.isnan(picked.float()).float().mean())
        rows.append(
            {
                "early": early,
                "calls": calls,
                "gate_ms": gate,
                "gate_held": held,
                "worker_ms": worker_ms,
                "harness_ms": h0.elapsed_time(h1),
                "host_ms": host_ms,
                "snapshot_poisoned": poisoned,
                "harness_after_read_ms": h0.elapsed_time(h2),
                "read_poisoned": read_poisoned,
            }
        )
    honest = [r for r in rows[1:BLOCKS] if not r["early"]]
    med = lambda k, rs: statistics.median(r[k] for r in rs)  # noqa: E731
    return {
        "callable": name,
        "calls": calls,
        "per_call_us_worker": 1e3 * med("worker_ms", honest) / calls,
        "per_call_us_harness": 1e3 * med("harness_ms", honest) / calls,
        "overhead_us_per_block": 1e3 * (med("harness_ms", honest) - med("worker_ms", honest)),
        "overhead_us_spread": 1e3
        * (
            max(r["harness_ms"] - r["worker_ms"] for r in honest)
            - min(r["harness_ms"] - r["worker_ms"] for r in honest)
        ),
        "gate_held": all(r["gate_held"] for r in honest),
        "early_harness_over_honest": med("harness_ms", [r for r in rows if r["early"]]) / med("harness_ms", honest),
        "early_poisoned": [r["snapshot_poisoned"] for r in rows if r["early"]],
        "per_call_us_after_read": 1e3 * med("harness_after_read_ms", honest) / calls,
        "early_after_read_over_honest": med("harness_after_read_ms", [r for r in rows if r["early"]])
        / med("harness_after_read_ms", honest),
        "early_read_poisoned": [r["read_poisoned"] for r in rows if r["early"]],
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--sandbox", default="plain,bwrap")
    parser.add_argument("--worker", type=int)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {"gpu": torch.cuda.get_device_name(), "runs": {}}
    for sandbox in args.sandbox.split(","):
        got: list = []
        results["runs"][sandbox] = got
        try:
            proc, sock = start_worker(sandbox)
        except Exception as exc:
            got.append({"error": f"{type(exc).__name__}: {exc}"})
            continue
        try:
            for name, (make, fn) in callables().items():
                try:
                    got.append(measure(sock, name, make, fn))
                except Exception as exc:
                    got.append({"callable": name, "error": f"{type(exc).__name__}: {exc}"[:500]})
                    break
        finally:
            try:
                send(sock, ("quit",))
            except OSError:
                pass
            proc.wait(timeout=30)
        (args.out / "outside_timing.json").write_text(json.dumps(results, indent=1))
    head = "sandbox | callable | calls | us/call worker | us/call harness (after a read) | overhead us/block (spread)"
    print(f"| {head} | gate held | early: harness/honest (after a read) | early: poisoned snapshot, read |")
    print("| --- " * 9 + "|")
    for sandbox, got in results["runs"].items():
        for r in got:
            if "error" in r:
                print(f"| {sandbox} | {r.get('callable', '-')} | error: {r['error'][:200]} |")
                continue
            pairs = zip(r["early_poisoned"], r["early_read_poisoned"], strict=True)
            poisoned = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in pairs)
            print(
                f"| {sandbox} | {r['callable']} | {r['calls']} | {r['per_call_us_worker']:.2f} | "
                f"{r['per_call_us_harness']:.2f} ({r['per_call_us_after_read']:.2f}) | "
                f"{r['overhead_us_per_block']:.1f} ({r['overhead_us_spread']:.1f}) | {r['gate_held']} | "
                f"{r['early_harness_over_honest']:.3f} ({r['early_after_read_over_honest']:.3f}) | {poisoned} |"
            )
    (args.out / "outside_timing.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
