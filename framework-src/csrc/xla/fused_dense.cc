// XLA-style fusion on the CPU: relu(x @ w + b) with the bias and activation applied
// while each output row is still in cache, instead of three passes over memory.
#include <cstddef>

#include "../tfref.h"

extern "C" int tfref_xla_fused_dense(const float* x, const float* w, const float* b, float* y,
                                     int m, int k, int n) {
  if (!x || !w || !b || !y || m <= 0 || k <= 0 || n <= 0) return TFREF_BAD_ARGUMENT;
  for (int i = 0; i < m; ++i) {
    float* row = y + static_cast<std::size_t>(i) * n;
    for (int j = 0; j < n; ++j) row[j] = b[j];
    for (int p = 0; p < k; ++p) {
      const float xv = x[static_cast<std::size_t>(i) * k + p];
      const float* wrow = w + static_cast<std::size_t>(p) * n;
      for (int j = 0; j < n; ++j) row[j] += xv * wrow[j];
    }
    for (int j = 0; j < n; ++j) row[j] = row[j] > 0.f ? row[j] : 0.f;
  }
  return TFREF_OK;
}
