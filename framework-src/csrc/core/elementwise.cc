// Element-wise add, multiply and GELU (tanh approximation).
#include <cmath>

#include "../tfref.h"

extern "C" int tfref_elementwise(const float* a, const float* b, float* y, long n, int op) {
  if (!a || !y || n <= 0 || op < 0 || op > 2 || (op < 2 && !b)) return TFREF_BAD_ARGUMENT;
  for (long i = 0; i < n; ++i) {
    switch (op) {
      case 0: y[i] = a[i] + b[i]; break;
      case 1: y[i] = a[i] * b[i]; break;
      default: {
        const float v = a[i];
        y[i] = 0.5f * v * (1.f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
      }
    }
  }
  return TFREF_OK;
}
