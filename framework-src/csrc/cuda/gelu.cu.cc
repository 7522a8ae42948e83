// GPU kernel of TfextGelu (the op is defined in csrc/ops/gelu.cc). Layout as in
// bias_relu.cu.cc: self-contained device code, TensorFlow in the host pass only.
#if GOOGLE_CUDA

#include "tfext/device.cuh"

namespace tfext {
namespace device {

template <typename T>
__global__ void GeluKernel(int n, const T* __restrict__ x, T* __restrict__ y) {
  using A = typename Acc<T>::type;
  TFEXT_GRID_LOOP(i, n) {
    const A v = Load(x[i]);
    const A inner = A(kGeluScale) * (v + A(kGeluCubic) * v * v * v);
    y[i] = Store<T>(A(0.5) * v * (A(1) + tanh(inner)));
  }
}

template __global__ void GeluKernel<__half>(int, const __half*, __half*);
template __global__ void GeluKernel<float>(int, const float*, float*);
template __global__ void GeluKernel<double>(int, const double*, double*);

}  // namespace device
}  // namespace tfext

#ifndef __CUDA_ARCH__  // host pass: TensorFlow
#define EIGEN_USE_GPU
#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tfext/gpu.h"
#include "tfext/kernels.h"

namespace tfext {

template <typename T>
struct Gelu<Eigen::GpuDevice, T> {
  tensorflow::Status operator()(const Eigen::GpuDevice& d, const T* x, T* y, int64_t n) {
    TF_RETURN_IF_ERROR(CheckGpuElementCount(n));
    const tensorflow::GpuLaunchConfig cfg = tensorflow::GetGpuLaunchConfig(static_cast<int>(n), d);
    return tensorflow::GpuLaunchKernel(device::GeluKernel<typename DeviceType<T>::type>,
                                       cfg.block_count, cfg.thread_per_block, 0, d.stream(),
                                       static_cast<int>(n), DevicePtr(x), DevicePtr(y));
  }
};

TFEXT_REGISTER_KERNELS("TfextGelu", GeluOp, Eigen::GpuDevice, tensorflow::DEVICE_GPU)

}  // namespace tfext

#endif  // __CUDA_ARCH__
#endif  // GOOGLE_CUDA
