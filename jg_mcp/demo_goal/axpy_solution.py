import torch
import triton
import triton.language as tl


@triton.jit
def _axpy(x_ptr, y_ptr, alpha_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    alpha = tl.load(alpha_ptr)
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, alpha * x + y, mask=mask)


def kernel(x, y, alpha):
    z = torch.empty_like(x)
    n = x.numel()
    _axpy[(triton.cdiv(n, 1024),)](x, y, alpha, z, n, BLOCK=1024)
    return z
