// TfextGelu on the GPU (layout as in bias_relu.cc).
#if GOOGLE_CUDA

#define EIGEN_USE_GPU
#include "tfext/gpu.h"
#include "tfext/kernels.h"
#include "tfext/launch.h"

namespace tfext {

template <typename T>
struct Gelu<Eigen::GpuDevice, T> {
  tensorflow::Status operator()(const Eigen::GpuDevice& d, const T* x, T* y, int64_t n) {
    TF_RETURN_IF_ERROR(CheckGpuElementCount(n));
    return LaunchStatus(device::LaunchGelu(d.stream(), static_cast<int>(n), DevicePtr(x), DevicePtr(y)));
  }
};

TFEXT_REGISTER_KERNELS("TfextGelu", GeluOp, Eigen::GpuDevice, tensorflow::DEVICE_GPU)

}  // namespace tfext

#endif  // GOOGLE_CUDA
