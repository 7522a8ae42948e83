// The extension's CPU arithmetic (framework-src/csrc/cpu, declared in tfext/cpu.h) behind a
// plain interface, so that kernel_check.cu, which nvcc compiles, never reads Eigen: half
// travels as its 16 bits (Eigen::half and __half share a layout).
#ifndef TESTS_GPU_CPU_REFERENCE_H_
#define TESTS_GPU_CPU_REFERENCE_H_

#include <cstdint>

enum class DType { kHalf, kFloat, kDouble };

void CpuBiasRelu(DType t, const void* x, const void* bias, void* y, int64_t n, int64_t channels);
void CpuGelu(DType t, const void* x, void* y, int64_t n);
void CpuRowSoftmax(DType t, const void* x, void* y, int64_t rows, int64_t cols);

#endif  // TESTS_GPU_CPU_REFERENCE_H_
