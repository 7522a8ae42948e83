// The CPU kernels' arithmetic, the one interface between TensorFlow's world (csrc/ops/*.cc:
// REGISTER_OP, the kernel classes, the CPU registrations) and the arithmetic itself
// (csrc/cpu/*.cc). A csrc/cpu unit reads Eigen/Core (for Eigen::half) and the standard
// library, never TensorFlow's headers nor Eigen's tensor and thread-pool modules: it
// compiles in under half a second, where a unit reading TensorFlow's framework headers
// spends seconds parsing them (docs/PERFORMANCE.md), so a patch to an op's arithmetic
// recompiles at once. The same split as the GPU side's (tfext/launch.h).
#ifndef TFEXT_CPU_H_
#define TFEXT_CPU_H_

#include <cstdint>
#include <functional>

#include "Eigen/Core"

namespace tfext {

// Arithmetic type: half is computed in float, float in float, double in double.
template <typename T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};

namespace cpu {

// Runs fn(begin, end) over shards of [0, n) on the op's thread pool, given the cost of one
// element (bytes loaded, bytes stored, compute cycles) to size the shards by. The kernel
// passes its device's (tfext/kernels.h: ParallelForOn).
using Shard = std::function<void(int64_t begin, int64_t end)>;
using ParallelFor = std::function<void(int64_t n, double bytes_loaded, double bytes_stored,
                                       double compute_cycles, const Shard& fn)>;

// T is Eigen::half, float or double (csrc/cpu/<op>.cc instantiates the three).
template <typename T>
void BiasRelu(const ParallelFor& parallel_for, const T* x, const T* bias, T* y, int64_t n,
              int64_t channels);
template <typename T>
void Gelu(const ParallelFor& parallel_for, const T* x, T* y, int64_t n);
template <typename T>
void RowSoftmax(const ParallelFor& parallel_for, const T* x, T* y, int64_t rows, int64_t cols);

}  // namespace cpu
}  // namespace tfext

#endif  // TFEXT_CPU_H_
