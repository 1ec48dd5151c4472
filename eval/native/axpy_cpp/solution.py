"""A known-good native solution of the demo goal: axpy in C++, built with torch.utils.cpp_extension.load_inline."""

from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
torch::Tensor axpy(torch::Tensor x, torch::Tensor y, torch::Tensor alpha) {
  auto z = torch::empty_like(x);
  const float a = alpha.item<float>();
  const float* xp = x.data_ptr<float>();
  const float* yp = y.data_ptr<float>();
  float* zp = z.data_ptr<float>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) zp[i] = a * xp[i] + yp[i];
  return z;
}
"""
_ext = load_inline(name="axpy_ext", cpp_sources=_SRC, functions=["axpy"], verbose=False)


def kernel(x, y, alpha):
    return _ext.axpy(x.contiguous(), y.contiguous(), alpha)
