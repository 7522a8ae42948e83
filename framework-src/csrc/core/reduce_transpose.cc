// Row sums and 2-D transpose.
#include <cstddef>

#include "../tfref.h"

extern "C" int tfref_reduce_sum(const float* x, float* y, int rows, int cols) {
  if (!x || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  for (int r = 0; r < rows; ++r) {
    double acc = 0;
    for (int c = 0; c < cols; ++c) acc += x[std::size_t(r) * cols + c];
    y[r] = float(acc);
  }
  return TFREF_OK;
}

extern "C" int tfref_transpose(const float* x, float* y, int rows, int cols) {
  if (!x || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) y[std::size_t(c) * rows + r] = x[std::size_t(r) * cols + c];
  return TFREF_OK;
}
