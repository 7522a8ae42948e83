// C = A (m x k) * B (k x n), blocked over k so the inner loop streams rows of B.
#include <cstring>

#include <cstddef>

#include "../tfref.h"

extern "C" int tfref_matmul(const float* a, const float* b, float* c, int m, int k, int n) {
  if (!a || !b || !c || m <= 0 || k <= 0 || n <= 0) return TFREF_BAD_ARGUMENT;
  std::memset(c, 0, sizeof(float) * static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    float* crow = c + static_cast<std::size_t>(i) * n;
    for (int p = 0; p < k; ++p) {
      const float av = a[static_cast<std::size_t>(i) * k + p];
      const float* brow = b + static_cast<std::size_t>(p) * n;
      for (int j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
  return TFREF_OK;
}
