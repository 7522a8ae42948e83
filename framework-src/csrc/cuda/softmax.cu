// Row-wise softmax: one block per row, shared-memory reductions for max and sum.
#include "common.cuh"

namespace {
template <int THREADS>
__global__ void __launch_bounds__(THREADS) softmax_kernel(const float* x, float* y, int cols) {
  __shared__ float red[THREADS];
  const float* in = x + size_t(blockIdx.x) * cols;
  float* out = y + size_t(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += THREADS) mx = fmaxf(mx, in[c]);
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += THREADS) sum += expf(in[c] - mx);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  for (int c = threadIdx.x; c < cols; c += THREADS) out[c] = expf(in[c] - mx) / sum;
}

template <int THREADS>
struct Softmax {
  static cudaError_t run(const float* x, float* y, int rows, int cols) {
    softmax_kernel<THREADS><<<rows, THREADS>>>(x, y, cols);
    return cudaGetLastError();
  }
};
}  // namespace

extern "C" int tfref_cuda_softmax(const float* x, float* y, int rows, int cols) {
  if (!x || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  if (int s = tfref::ensure_device()) return s;
  const size_t total = size_t(rows) * cols;
  tfref::DeviceBuffer dx, dy;
  TFREF_CUDA_CHECK(dx.alloc(total));
  TFREF_CUDA_CHECK(dy.alloc(total));
  TFREF_CUDA_CHECK(cudaMemcpy(dx.ptr, x, sizeof(float) * total, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK((tfref::launch_by_size<Softmax>(size_t(cols) * 64, dx.ptr, dy.ptr, rows, cols)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * total, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
