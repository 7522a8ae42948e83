// Shared helpers of the CUDA kernels: device buffers that free themselves, and a
// macro that turns any CUDA error into the API's status code.
#ifndef TFREF_CUDA_COMMON_CUH_
#define TFREF_CUDA_COMMON_CUH_
#include <cuda_runtime.h>

#include <cstddef>

#include "../tfref.h"

#define TFREF_CUDA_CHECK(expr)                   \
  do {                                           \
    if ((expr) != cudaSuccess) {                 \
      return TFREF_CUDA_ERROR;                   \
    }                                            \
  } while (0)

namespace tfref {

struct DeviceBuffer {
  float* ptr = nullptr;
  cudaError_t alloc(size_t count) { return cudaMalloc(reinterpret_cast<void**>(&ptr), count * sizeof(float)); }
  ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
};

inline int ensure_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return TFREF_NO_DEVICE;
  return TFREF_OK;
}

inline int blocks_for(size_t n, int threads) { return static_cast<int>((n + threads - 1) / threads); }

// Kernels are specialized by block size; launchers pick the specialization that
// fits the problem (small problems waste fewer idle threads in small blocks).
template <template <int> class Launch, typename... Args>
cudaError_t launch_by_size(size_t work, Args... args) {
  if (work < (1u << 12)) return Launch<64>::run(args...);
  if (work < (1u << 16)) return Launch<128>::run(args...);
  if (work < (1u << 20)) return Launch<256>::run(args...);
  return Launch<512>::run(args...);
}

}  // namespace tfref
#endif  // TFREF_CUDA_COMMON_CUH_
