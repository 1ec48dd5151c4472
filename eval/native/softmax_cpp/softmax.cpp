// Row softmax of a bf16 matrix: an online max and sum in float32, then one pass that writes bf16.
#include <torch/extension.h>

#include <cmath>
#include <limits>

torch::Tensor softmax_rows(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kBFloat16, "x must be a 2-D bf16 tensor");
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0), n = x.size(1);
  const at::BFloat16* in = x.data_ptr<at::BFloat16>();
  at::BFloat16* o = out.data_ptr<at::BFloat16>();
  for (int64_t r = 0; r < rows; ++r) {
    const at::BFloat16* row = in + r * n;
    float m = -std::numeric_limits<float>::infinity(), s = 0.f;
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(row[i]);
      if (v > m) {
        s = s * std::exp(m - v);
        m = v;
      }
      s += std::exp(v - m);
    }
    const float inv = 1.f / s;
    for (int64_t i = 0; i < n; ++i) o[r * n + i] = static_cast<at::BFloat16>(std::exp(static_cast<float>(row[i]) - m) * inv);
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("softmax_rows", &softmax_rows); }
