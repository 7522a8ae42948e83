// Device-side helpers for csrc/cuda/*.cu.cc. CUDA headers only -- no TensorFlow, no Eigen:
// nvcc runs its device front end (cicc) once per compute capability over everything the
// device pass sees, and TensorFlow's GPU headers cost ~9 s of that per capability, so the
// device code is kept self-contained and TensorFlow is included in the host pass only.
#ifndef TFEXT_DEVICE_CUH_
#define TFEXT_DEVICE_CUH_

#include <cuda_fp16.h>

#include "tfext/constants.h"

namespace tfext {
namespace device {

// Arithmetic type: half is computed in float, float in float, double in double.
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<__half> {
  using type = float;
};

__device__ __forceinline__ float Load(__half v) { return __half2float(v); }
__device__ __forceinline__ float Load(float v) { return v; }
__device__ __forceinline__ double Load(double v) { return v; }

template <typename T>
__device__ __forceinline__ T Store(typename Acc<T>::type v) {
  return v;
}
template <>
__device__ __forceinline__ __half Store<__half>(float v) {
  return __float2half(v);
}

}  // namespace device
}  // namespace tfext

// Grid-stride loop over [0, n).
#define TFEXT_GRID_LOOP(i, n)                                                  \
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += blockDim.x * gridDim.x)

#endif  // TFEXT_DEVICE_CUH_
