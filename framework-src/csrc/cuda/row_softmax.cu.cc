// GPU kernel of TfextRowSoftmax (the op is defined in csrc/ops/row_softmax.cc): one thread
// block per row, block-wide max and sum reductions in shared memory. Layout as in
// bias_relu.cu.cc: device code and its launcher, no TensorFlow.
#if GOOGLE_CUDA

#include "tfext/device.cuh"
#include "tfext/launch.h"

namespace tfext {
namespace device {

constexpr int kSoftmaxThreads = 256;  // a power of two, for the tree reductions

template <typename A, bool kMax>
__device__ A BlockReduce(A v, A* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const A other = scratch[threadIdx.x + stride];
      scratch[threadIdx.x] = kMax ? (other > scratch[threadIdx.x] ? other : scratch[threadIdx.x])
                                  : scratch[threadIdx.x] + other;
    }
    __syncthreads();
  }
  const A result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

template <typename T>
__global__ void RowSoftmaxKernel(int rows, int cols, const T* __restrict__ x, T* __restrict__ y) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kSoftmaxThreads];
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + static_cast<long long>(r) * cols;
    T* out = y + static_cast<long long>(r) * cols;
    A m = Load(in[0]);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
      const A v = Load(in[j]);
      m = v > m ? v : m;
    }
    m = BlockReduce<A, true>(m, scratch);
    A sum = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += exp(Load(in[j]) - m);
    const A inv = A(1) / BlockReduce<A, false>(sum, scratch);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = Store<T>(exp(Load(in[j]) - m) * inv);
  }
}

template __global__ void RowSoftmaxKernel<__half>(int, int, const __half*, __half*);
template __global__ void RowSoftmaxKernel<float>(int, int, const float*, float*);
template __global__ void RowSoftmaxKernel<double>(int, int, const double*, double*);

// The launcher csrc/gpu/row_softmax.cc calls on the op's stream (tfext/launch.h).
template <typename T>
cudaError_t LaunchRowSoftmax(cudaStream_t stream, int rows, int cols, const T* x, T* y) {
  RowSoftmaxKernel<T><<<rows < 65535 ? rows : 65535, kSoftmaxThreads, 0, stream>>>(rows, cols, x, y);
  return cudaGetLastError();
}

template cudaError_t LaunchRowSoftmax<__half>(cudaStream_t, int, int, const __half*, __half*);
template cudaError_t LaunchRowSoftmax<float>(cudaStream_t, int, int, const float*, float*);
template cudaError_t LaunchRowSoftmax<double>(cudaStream_t, int, int, const double*, double*);

}  // namespace device
}  // namespace tfext

#endif  // GOOGLE_CUDA
