"""A known-good native solution of attention_decode: CUDA C++ through load_inline. One block of four warps per
(sequence, query head); each warp walks a quarter of the valid cache positions with an online softmax in float32
(a warp-wide dot product per position, each lane holding D/32 of q and of the output), and the block merges the
four warps' maxima, sums and outputs at the end."""

from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor decode(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor lens);"
_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>

namespace {
constexpr int WARPS = 4, MAXT = 8;  // D <= 32 * MAXT

__global__ void decode_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                              const __nv_bfloat16* __restrict__ v, const int* __restrict__ lens,
                              __nv_bfloat16* __restrict__ out, int hq, int hkv, int smax, int d, float scale) {
  const int h = blockIdx.x, b = blockIdx.y, kvh = h / (hq / hkv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t_count = (d + 31) / 32;
  const __nv_bfloat16* qrow = q + ((size_t)b * hq + h) * d;
  const size_t base = ((size_t)b * hkv + kvh) * smax * d;
  float qv[MAXT], acc[MAXT];
  for (int t = 0; t < MAXT; ++t) {
    const int i = lane + 32 * t;
    qv[t] = (t < t_count && i < d) ? __bfloat162float(qrow[i]) : 0.f;
    acc[t] = 0.f;
  }
  float m = -INFINITY, s = 0.f;
  const int n = lens[b];
  for (int p = warp; p < n; p += WARPS) {
    const __nv_bfloat16* kp = k + base + (size_t)p * d;
    float dot = 0.f;
    for (int t = 0; t < t_count; ++t) {
      const int i = lane + 32 * t;
      if (i < d) dot += qv[t] * __bfloat162float(kp[i]);
    }
    for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffff, dot, off);
    const float score = dot * scale, mx = fmaxf(m, score);
    const float factor = __expf(m - mx), w = __expf(score - mx);
    s = s * factor + w;
    const __nv_bfloat16* vp = v + base + (size_t)p * d;
    for (int t = 0; t < t_count; ++t) {
      const int i = lane + 32 * t;
      acc[t] = acc[t] * factor + (i < d ? w * __bfloat162float(vp[i]) : 0.f);
    }
    m = mx;
  }
  __shared__ float wm[WARPS], ws[WARPS], wacc[WARPS][32 * MAXT];
  if (lane == 0) {
    wm[warp] = m;
    ws[warp] = s;
  }
  for (int t = 0; t < t_count; ++t) wacc[warp][lane + 32 * t] = acc[t];
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, wm[w]);
  float total = 0.f;
  for (int w = 0; w < WARPS; ++w) total += wm[w] == -INFINITY ? 0.f : ws[w] * __expf(wm[w] - mx);
  __nv_bfloat16* orow = out + ((size_t)b * hq + h) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.f;
    for (int w = 0; w < WARPS; ++w) o += wm[w] == -INFINITY ? 0.f : wacc[w][i] * __expf(wm[w] - mx);
    orow[i] = __float2bfloat16(o / total);
  }
}
}  // namespace

torch::Tensor decode(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor lens) {
  TORCH_CHECK(q.is_cuda() && q.scalar_type() == torch::kBFloat16, "q must be a bf16 CUDA tensor");
  auto qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  auto lc = lens.to(torch::kInt).contiguous();
  const int b = qc.size(0), hq = qc.size(1), d = qc.size(2), hkv = kc.size(1), smax = kc.size(2);
  TORCH_CHECK(d <= 32 * MAXT && hq % hkv == 0, "head size above 256 or heads not grouped");
  auto out = torch::empty_like(qc);
  if (b == 0) return out;
  dim3 grid(hq, b);
  decode_kernel<<<grid, 32 * WARPS, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __nv_bfloat16*>(qc.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(kc.data_ptr()),
      reinterpret_cast<const __nv_bfloat16*>(vc.data_ptr()), lc.data_ptr<int>(),
      reinterpret_cast<__nv_bfloat16*>(out.data_ptr()), hq, hkv, smax, d, 1.f / sqrtf((float)d));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""
_ext = load_inline(
    name="attention_decode_cuda", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["decode"], verbose=False
)


def kernel(q, k_cache, v_cache, cache_lens):
    return _ext.decode(q, k_cache, v_cache, cache_lens)
