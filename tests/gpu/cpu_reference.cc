// cpu_reference.h's functions: csrc/cpu's templates, run as one shard on this thread.
#include "cpu_reference.h"

#include "tfext/cpu.h"

static_assert(sizeof(Eigen::half) == 2, "Eigen::half must be the 16 bits of an IEEE half");

namespace {

// The extension shards over TensorFlow's thread pool; every element is computed on its own
// (softmax: every row), so one shard over [0, n) gives the same values.
const tfext::cpu::ParallelFor kSerial = [](int64_t n, double, double, double,
                                           const tfext::cpu::Shard& fn) { fn(0, n); };

// Calls f(T()) with T the element type t names.
template <typename F>
void Dispatch(DType t, F f) {
  switch (t) {
    case DType::kHalf: return f(Eigen::half());
    case DType::kFloat: return f(float());
    case DType::kDouble: return f(double());
  }
}

}  // namespace

void CpuBiasRelu(DType t, const void* x, const void* bias, void* y, int64_t n, int64_t channels) {
  Dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    tfext::cpu::BiasRelu<T>(kSerial, static_cast<const T*>(x), static_cast<const T*>(bias),
                            static_cast<T*>(y), n, channels);
  });
}

void CpuGelu(DType t, const void* x, void* y, int64_t n) {
  Dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    tfext::cpu::Gelu<T>(kSerial, static_cast<const T*>(x), static_cast<T*>(y), n);
  });
}

void CpuRowSoftmax(DType t, const void* x, void* y, int64_t rows, int64_t cols) {
  Dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    tfext::cpu::RowSoftmax<T>(kSerial, static_cast<const T*>(x), static_cast<T*>(y), rows, cols);
  });
}
