// GPU kernel of TfextRowSoftmax (the op is defined in csrc/ops/row_softmax.cc): one thread
// block per row, block-wide max and sum reductions in shared memory. Layout as in
// bias_relu.cu.cc: self-contained device code, TensorFlow in the host pass only.
#if GOOGLE_CUDA

#include "tfext/device.cuh"

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

}  // namespace device
}  // namespace tfext

#ifndef __CUDA_ARCH__  // host pass: TensorFlow
#define EIGEN_USE_GPU
#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tfext/gpu.h"
#include "tfext/kernels.h"

namespace tfext {

template <typename T>
struct RowSoftmax<Eigen::GpuDevice, T> {
  tensorflow::Status operator()(const Eigen::GpuDevice& d, const T* x, T* y, int64_t rows,
                                int64_t cols) {
    TF_RETURN_IF_ERROR(CheckGpuElementCount(rows * cols));
    const int blocks = static_cast<int>(rows < 65535 ? rows : 65535);
    return tensorflow::GpuLaunchKernel(device::RowSoftmaxKernel<typename DeviceType<T>::type>, blocks,
                                       device::kSoftmaxThreads, 0, d.stream(), static_cast<int>(rows),
                                       static_cast<int>(cols), DevicePtr(x), DevicePtr(y));
  }
};

TFEXT_REGISTER_KERNELS("TfextRowSoftmax", RowSoftmaxOp, Eigen::GpuDevice, tensorflow::DEVICE_GPU)

}  // namespace tfext

#endif  // __CUDA_ARCH__
#endif  // GOOGLE_CUDA
