// GPU kernel of TfextBiasRelu (the op is defined in csrc/ops/bias_relu.cc).
//
// Layout of every csrc/cuda/*.cu.cc: device code, self-contained (device.cuh, CUDA headers
// only), so nvcc's per-capability device passes stay cheap, and a launcher (tfext/launch.h)
// with its explicit instantiations. No TensorFlow: the functor that calls the launcher on
// the op's stream, and the DEVICE_GPU registration, are in csrc/gpu/<op>.cc, which the
// host compiler builds.
#if GOOGLE_CUDA

#include "tfext/device.cuh"
#include "tfext/launch.h"

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

// The launcher csrc/gpu/bias_relu.cc calls on the op's stream (tfext/launch.h).
template <typename T>
cudaError_t LaunchBiasRelu(cudaStream_t stream, int n, int channels, const T* x, const T* bias, T* y) {
  BiasReluKernel<T><<<GridBlocks(n), kThreads, 0, stream>>>(n, channels, x, bias, y);
  return cudaGetLastError();
}

template cudaError_t LaunchBiasRelu<__half>(cudaStream_t, int, int, const __half*, const __half*, __half*);
template cudaError_t LaunchBiasRelu<float>(cudaStream_t, int, int, const float*, const float*, float*);
template cudaError_t LaunchBiasRelu<double>(cudaStream_t, int, int, const double*, const double*, double*);

}  // namespace device
}  // namespace tfext

#endif  // GOOGLE_CUDA
