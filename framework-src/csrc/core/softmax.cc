// Row-wise softmax, shifted by the row maximum for numerical stability.
#include <cmath>

#include <cstddef>

#include "../tfref.h"

extern "C" int tfref_softmax(const float* x, float* y, int rows, int cols) {
  if (!x || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  for (int r = 0; r < rows; ++r) {
    const float* in = x + static_cast<std::size_t>(r) * cols;
    float* out = y + static_cast<std::size_t>(r) * cols;
    float mx = in[0];
    for (int c = 1; c < cols; ++c) mx = in[c] > mx ? in[c] : mx;
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - mx);
      sum += out[c];
    }
    for (int c = 0; c < cols; ++c) out[c] = static_cast<float>(out[c] / sum);
  }
  return TFREF_OK;
}
