"""CUDA and Triton inside the sandbox: run_command compiles and runs a Triton kernel under bwrap."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.server import SingleSession, build_server
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig
from tests.support import bwrap_missing

BWRAP_MISSING = bwrap_missing()

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or ""),
]

KERNEL = """
import torch, triton, triton.language as tl

@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

n = 1 << 20
x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
out = torch.empty_like(x)
add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
torch.cuda.synchronize()
assert torch.equal(out, x + y)
print("triton ok", torch.cuda.get_device_name(), triton.__version__)
"""


def test_a_triton_kernel_compiles_and_runs_inside_the_sandbox(gemm_goal, tmp_path):
    ws = tmp_path / "ws"
    session = Session.open(
        gemm_goal,
        SessionConfig(workspace_dir=ws, transcripts_dir=tmp_path / "tr", sandbox="bwrap"),
        wrap=Bwrap(ws, [tmp_path / "tr"]).wrap,
    )

    async def go():
        with anyio.fail_after(300):
            async with Client(build_server(gemm_goal, SingleSession(session), sandboxed=True)) as client:
                await client.call_tool("write_file", {"path": "add.py", "content": KERNEL})
                ran = await client.call_tool("run_command", {"command": "id -u; nvidia-smi -L; python add.py"})
                return ran.structured_content

    try:
        out = anyio.run(go)
    finally:
        session.close("test finished")
    assert out["exit_code"] == 0, out["stderr"]
    assert "triton ok" in out["stdout"] and "GPU 0" in out["stdout"]
