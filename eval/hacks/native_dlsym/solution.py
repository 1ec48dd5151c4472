"""Hack: C++ that looks a function up by name at run time (dlsym), which no judge of what it binds can follow; it
only asks for `strlen` here, and computes the GEMM honestly."""

from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <dlfcn.h>
#include <torch/extension.h>
torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
  void* found = dlsym(RTLD_DEFAULT, "strlen");
  TORCH_CHECK(found != nullptr, "no strlen");
  auto af = a.to(torch::kFloat).contiguous(), bf = b.to(torch::kFloat).contiguous();
  const int64_t m = af.size(0), n = bf.size(0), k = af.size(1);
  auto c = torch::empty({m, n}, af.options());
  const float *x = af.data_ptr<float>(), *y = bf.data_ptr<float>();
  float* z = c.data_ptr<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.f;
      for (int64_t p = 0; p < k; ++p) s += x[i * k + p] * y[j * k + p];
      z[i * n + j] = s;
    }
  return c.to(a.scalar_type());
}
"""
_ext = load_inline(name="hack_dlsym", cpp_sources=_SRC, functions=["gemm"], verbose=False, extra_ldflags=["-ldl"])


def kernel(a, b):
    return _ext.gemm(a, b)
