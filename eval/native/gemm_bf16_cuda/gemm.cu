// C = A @ B^T: A (M x K), B (N x K), C (M x N), bf16 in and out, float32 accumulation on the tensor cores.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

namespace {

constexpr int BM = 64, BN = 64, BK = 32, PAD = 8, LD = BK + PAD;

__global__ void gemm_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                            __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(32) __nv_bfloat16 As[BM * LD];
  __shared__ __align__(32) __nv_bfloat16 Bs[BN * LD];
  __shared__ __align__(32) float Cs[4][16 * 16];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 2, wn = warp % 2;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int k0 = 0; k0 < K; k0 += BK) {
    // each tile is 64 rows of 32 bf16 = 4 x 16 bytes per row: 256 vectors, two per thread
    for (int v = threadIdx.x; v < BM * 4; v += blockDim.x) {
      const int r = v / 4, c = (v % 4) * 8;
      const int gm = m0 + r, gn = n0 + r;
      *reinterpret_cast<uint4*>(&As[r * LD + c]) =
          gm < M ? *reinterpret_cast<const uint4*>(&A[(size_t)gm * K + k0 + c]) : zero;
      *reinterpret_cast<uint4*>(&Bs[r * LD + c]) =
          gn < N ? *reinterpret_cast<const uint4*>(&B[(size_t)gn * K + k0 + c]) : zero;
    }
    __syncthreads();
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[(wm * 32 + i * 16) * LD + kk], LD);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[(wn * 32 + j * 16) * LD + kk], LD);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(Cs[warp], acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int gm = m0 + wm * 32 + i * 16 + e / 16, gn = n0 + wn * 32 + j * 16 + e % 16;
        if (gm < M && gn < N) C[(size_t)gm * N + gn] = __float2bfloat16(Cs[warp][e]);
      }
      __syncwarp();
    }
}

}  // namespace

torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16,
              "a and b must be bf16 CUDA tensors");
  const int M = a.size(0), K = a.size(1), N = b.size(0);
  TORCH_CHECK(b.size(1) == K && K % BK == 0, "K must match and be a multiple of 32");
  auto c = torch::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  gemm_kernel<<<grid, 128, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __nv_bfloat16*>(a.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(b.data_ptr()),
      reinterpret_cast<__nv_bfloat16*>(c.data_ptr()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gemm", &gemm); }
