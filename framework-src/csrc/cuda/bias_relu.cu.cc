// GPU kernel of TfextBiasRelu (the op is defined in csrc/ops/bias_relu.cc).
//
// Layout of every csrc/cuda/*.cu.cc: the device code first, self-contained (device.cuh,
// CUDA headers only), so nvcc's per-capability device passes stay cheap; then, in nvcc's
// host pass only (#ifndef __CUDA_ARCH__), TensorFlow: the functor launching the kernel on
// the op's stream and the DEVICE_GPU registration. The kernel templates are instantiated
// explicitly, outside that section, so both passes see the same instantiations.
#if GOOGLE_CUDA

#include "tfext/device.cuh"

namespace tfext {
namespace device {

template <typename T>
__global__ void BiasReluKernel(int n, int channels, const T* __restrict__ x,
                               const T* __restrict__ bias, T* __restrict__ y) {
  using A = typename Acc<T>::type;
  TFEXT_GRID_LOOP(i, n) {
    const A v = Load(x[i]) + Load(bias[i % channels]);
    y[i] = Store<T>(v > A(0) ? v : A(0));
  }
}

template __global__ void BiasReluKernel<__half>(int, int, const __half*, const __half*, __half*);
template __global__ void BiasReluKernel<float>(int, int, const float*, const float*, float*);
template __global__ void BiasReluKernel<double>(int, int, const double*, const double*, double*);

}  // namespace device
}  // namespace tfext

#ifndef __CUDA_ARCH__  // host pass: TensorFlow
#define EIGEN_USE_GPU
#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tfext/gpu.h"
#include "tfext/kernels.h"

namespace tfext {

template <typename T>
struct BiasRelu<Eigen::GpuDevice, T> {
  tensorflow::Status operator()(const Eigen::GpuDevice& d, const T* x, const T* bias, T* y,
                                int64_t n, int64_t channels) {
    TF_RETURN_IF_ERROR(CheckGpuElementCount(n));
    const tensorflow::GpuLaunchConfig cfg = tensorflow::GetGpuLaunchConfig(static_cast<int>(n), d);
    return tensorflow::GpuLaunchKernel(device::BiasReluKernel<typename DeviceType<T>::type>,
                                       cfg.block_count, cfg.thread_per_block, 0, d.stream(),
                                       static_cast<int>(n), static_cast<int>(channels),
                                       DevicePtr(x), DevicePtr(bias), DevicePtr(y));
  }
};

TFEXT_REGISTER_KERNELS("TfextBiasRelu", BiasReluOp, Eigen::GpuDevice, tensorflow::DEVICE_GPU)

}  // namespace tfext

#endif  // __CUDA_ARCH__
#endif  // GOOGLE_CUDA
