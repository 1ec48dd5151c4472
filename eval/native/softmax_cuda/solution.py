"""A known-good native solution of softmax: CUDA C++ through load_inline. One block per row: an online max and
sum over the row in float32 (each thread over a stride, then the block combines them), then one pass that writes
exp(x - max) / sum in bf16."""

from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor softmax_rows(torch::Tensor x);"
_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>

namespace {
constexpr int THREADS = 1024;

__device__ void combine(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  s = (m == -INFINITY ? 0.f : s * __expf(m - mx)) + (m2 == -INFINITY ? 0.f : s2 * __expf(m2 - mx));
  m = mx;
}

__global__ void softmax_kernel(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, long n) {
  const __nv_bfloat16* row = x + blockIdx.x * n;
  __nv_bfloat16* out = y + blockIdx.x * n;
  float m = -INFINITY, s = 0.f;
  for (long i = threadIdx.x; i < n; i += THREADS) {
    const float v = __bfloat162float(row[i]);
    if (v > m) {
      s = (m == -INFINITY ? 0.f : s * __expf(m - v));
      m = v;
    }
    s += __expf(v - m);
  }
  for (int off = 16; off > 0; off /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffff, m, off), s2 = __shfl_xor_sync(0xffffffff, s, off);
    combine(m, s, m2, s2);
  }
  __shared__ float ms[32], ss[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    ms[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = ms[lane];
    s = ss[lane];
    for (int off = 16; off > 0; off /= 2) {
      const float m2 = __shfl_xor_sync(0xffffffff, m, off), s2 = __shfl_xor_sync(0xffffffff, s, off);
      combine(m, s, m2, s2);
    }
    if (lane == 0) {
      ms[0] = m;
      ss[0] = s;
    }
  }
  __syncthreads();
  const float mx = ms[0], inv = 1.f / ss[0];
  for (long i = threadIdx.x; i < n; i += THREADS) {
    out[i] = __float2bfloat16(__expf(__bfloat162float(row[i]) - mx) * inv);
  }
}
}  // namespace

torch::Tensor softmax_rows(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kBFloat16, "x must be a 2-D bf16 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  if (xc.size(0) == 0) return y;
  softmax_kernel<<<xc.size(0), THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __nv_bfloat16*>(xc.data_ptr()), reinterpret_cast<__nv_bfloat16*>(y.data_ptr()),
      xc.size(1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
_ext = load_inline(
    name="softmax_rows_cuda", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["softmax_rows"], verbose=False
)


def kernel(x):
    return _ext.softmax_rows(x)
