// Batch normalization (inference, per-channel statistics given) and layer normalization.
#include <cmath>
#include <cstddef>

#include "../tfref.h"

extern "C" int tfref_batch_norm(const float* x, const float* mean, const float* var, const float* gamma,
                                const float* beta, float* y, int rows, int cols, float eps) {
  if (!x || !mean || !var || !gamma || !beta || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = std::size_t(r) * cols + c;
      y[i] = gamma[c] * (x[i] - mean[c]) / std::sqrt(var[c] + eps) + beta[c];
    }
  return TFREF_OK;
}

extern "C" int tfref_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols,
                                float eps) {
  if (!x || !gamma || !beta || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  for (int r = 0; r < rows; ++r) {
    const float* in = x + std::size_t(r) * cols;
    double mean = 0, sq = 0;
    for (int c = 0; c < cols; ++c) mean += in[c];
    mean /= cols;
    for (int c = 0; c < cols; ++c) sq += (in[c] - mean) * (in[c] - mean);
    const double inv = 1.0 / std::sqrt(sq / cols + eps);
    for (int c = 0; c < cols; ++c) y[std::size_t(r) * cols + c] = float((in[c] - mean) * inv) * gamma[c] + beta[c];
  }
  return TFREF_OK;
}
