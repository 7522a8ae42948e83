// y = max(x + bias, 0), bias broadcast over rows.
#include <cstddef>

#include "../tfref.h"

extern "C" int tfref_bias_relu(const float* x, const float* bias, float* y, int rows, int cols) {
  if (!x || !bias || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float v = x[static_cast<std::size_t>(r) * cols + c] + bias[c];
      y[static_cast<std::size_t>(r) * cols + c] = v > 0.f ? v : 0.f;
    }
  return TFREF_OK;
}
