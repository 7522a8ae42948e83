// Host-side helpers for the GPU op kernels (csrc/gpu/*.cc, compiled by the host compiler).
#ifndef TFEXT_GPU_H_
#define TFEXT_GPU_H_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>

#include "tensorflow/core/lib/core/errors.h"
#include "tfext/kernels.h"

namespace tfext {

// The element type the device code uses for a TensorFlow element type (same layout).
template <typename T>
struct DeviceType {
  using type = T;
};
template <>
struct DeviceType<Eigen::half> {
  using type = __half;
};
static_assert(sizeof(Eigen::half) == sizeof(__half), "Eigen::half and __half must share a layout");

template <typename T>
const typename DeviceType<T>::type* DevicePtr(const T* p) {
  return reinterpret_cast<const typename DeviceType<T>::type*>(p);
}
template <typename T>
typename DeviceType<T>::type* DevicePtr(T* p) {
  return reinterpret_cast<typename DeviceType<T>::type*>(p);
}

// The kernels index elements with int (as GpuLaunchConfig counts them): refuse more.
inline tensorflow::Status CheckGpuElementCount(int64_t n) {
  if (n > std::numeric_limits<int>::max()) {
    return tensorflow::errors::InvalidArgument("tensor of ", n,
                                               " elements is too large for the GPU kernel");
  }
  return tensorflow::Status();
}

// A launcher's answer as the op's status (what TensorFlow's GpuLaunchKernel reports).
inline tensorflow::Status LaunchStatus(cudaError_t err) {
  if (err == cudaSuccess) return tensorflow::Status();
  return tensorflow::errors::Internal("the GPU kernel did not launch: ", cudaGetErrorString(err));
}

}  // namespace tfext

#endif  // TFEXT_GPU_H_
