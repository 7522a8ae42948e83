// TfextRowSoftmax on the GPU (layout as in bias_relu.cc).
#if GOOGLE_CUDA

#define EIGEN_USE_GPU
#include "tfext/gpu.h"
#include "tfext/kernels.h"
#include "tfext/launch.h"

namespace tfext {

template <typename T>
struct RowSoftmax<Eigen::GpuDevice, T> {
  tensorflow::Status operator()(const Eigen::GpuDevice& d, const T* x, T* y, int64_t rows,
                                int64_t cols) {
    TF_RETURN_IF_ERROR(CheckGpuElementCount(rows * cols));
    return LaunchStatus(device::LaunchRowSoftmax(d.stream(), static_cast<int>(rows), static_cast<int>(cols),
                                                 DevicePtr(x), DevicePtr(y)));
  }
};

TFEXT_REGISTER_KERNELS("TfextRowSoftmax", RowSoftmaxOp, Eigen::GpuDevice, tensorflow::DEVICE_GPU)

}  // namespace tfext

#endif  // GOOGLE_CUDA
