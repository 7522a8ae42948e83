// GPU kernel of TfextGelu (the op is defined in csrc/ops/gelu.cc). Layout as in
// bias_relu.cu.cc: device code and its launcher, no TensorFlow.
#if GOOGLE_CUDA

#include "tfext/device.cuh"
#include "tfext/launch.h"

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

// The launcher csrc/gpu/gelu.cc calls on the op's stream (tfext/launch.h).
template <typename T>
cudaError_t LaunchGelu(cudaStream_t stream, int n, const T* x, T* y) {
  GeluKernel<T><<<GridBlocks(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

template cudaError_t LaunchGelu<__half>(cudaStream_t, int, const __half*, __half*);
template cudaError_t LaunchGelu<float>(cudaStream_t, int, const float*, float*);
template cudaError_t LaunchGelu<double>(cudaStream_t, int, const double*, double*);

}  // namespace device
}  // namespace tfext

#endif  // GOOGLE_CUDA
