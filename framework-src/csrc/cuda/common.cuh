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

}  // namespace tfref
#endif  // TFREF_CUDA_COMMON_CUH_
