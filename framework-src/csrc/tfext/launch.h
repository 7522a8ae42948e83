// The GPU kernels' launchers, the one interface between nvcc's world (csrc/cuda/*.cu.cc:
// CUDA headers only) and TensorFlow's (csrc/gpu/*.cc, compiled by the host compiler).
// No TensorFlow header is ever compiled by nvcc: its host pass trips over the Abseil that
// newer TensorFlow releases bundle (TF 2.21 with nvcc 12.4, docs/explanation/release-26.11.md), and
// nvcc's per-capability device passes stay cheap.
#ifndef TFEXT_LAUNCH_H_
#define TFEXT_LAUNCH_H_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace tfext {
namespace device {

// Each returns the launch's error (cudaSuccess, or why the kernel did not start).
template <typename T>
cudaError_t LaunchBiasRelu(cudaStream_t stream, int n, int channels, const T* x, const T* bias, T* y);
template <typename T>
cudaError_t LaunchGelu(cudaStream_t stream, int n, const T* x, T* y);
template <typename T>
cudaError_t LaunchRowSoftmax(cudaStream_t stream, int rows, int cols, const T* x, T* y);

// Blocks for a grid-stride loop over n elements (any count is correct; this many keeps
// every multiprocessor busy without launching empty blocks for small tensors).
constexpr int kThreads = 256;
inline int GridBlocks(long long n) {
  const long long blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

}  // namespace device
}  // namespace tfext

#endif  // TFEXT_LAUNCH_H_
