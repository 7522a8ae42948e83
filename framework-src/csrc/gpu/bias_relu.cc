// TfextBiasRelu on the GPU: the functor that launches csrc/cuda/bias_relu.cu.cc's kernel on
// the op's stream, and the DEVICE_GPU registration. Compiled by the host compiler, never
// by nvcc (tfext/launch.h says why).
#if GOOGLE_CUDA

#define EIGEN_USE_GPU
#include "tfext/gpu.h"
#include "tfext/kernels.h"
#include "tfext/launch.h"

namespace tfext {

template <typename T>
struct BiasRelu<Eigen::GpuDevice, T> {
  tensorflow::Status operator()(const Eigen::GpuDevice& d, const T* x, const T* bias, T* y,
                                int64_t n, int64_t channels) {
    TF_RETURN_IF_ERROR(CheckGpuElementCount(n));
    return LaunchStatus(device::LaunchBiasRelu(d.stream(), static_cast<int>(n), static_cast<int>(channels),
                                               DevicePtr(x), DevicePtr(bias), DevicePtr(y)));
  }
};

TFEXT_REGISTER_KERNELS("TfextBiasRelu", BiasReluOp, Eigen::GpuDevice, tensorflow::DEVICE_GPU)

}  // namespace tfext

#endif  // GOOGLE_CUDA
