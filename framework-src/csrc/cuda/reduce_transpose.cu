// Row sums (one block per row, accumulator type chosen by row length) and a tiled
// 2-D transpose through shared memory.
#include "common.cuh"

namespace {
template <int BLOCK, typename Acc>
__global__ void __launch_bounds__(BLOCK) reduce_sum_kernel(const float* x, float* y, int cols) {
  __shared__ Acc part[BLOCK];
  const float* in = x + size_t(blockIdx.x) * cols;
  Acc acc = 0;
  for (int c = threadIdx.x; c < cols; c += BLOCK) acc += in[c];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = float(part[0]);
}

template <int BLOCK>
struct ReduceSum {
  static cudaError_t run(const float* x, float* y, int rows, int cols) {
    if (cols > 4096) {
      reduce_sum_kernel<BLOCK, double><<<rows, BLOCK>>>(x, y, cols);
    } else {
      reduce_sum_kernel<BLOCK, float><<<rows, BLOCK>>>(x, y, cols);
    }
    return cudaGetLastError();
  }
};

constexpr int T = 32;
__global__ void transpose_kernel(const float* x, float* y, int rows, int cols) {
  __shared__ float tile[T][T + 1];
  int c = blockIdx.x * T + threadIdx.x, r = blockIdx.y * T + threadIdx.y;
  if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = x[size_t(r) * cols + c];
  __syncthreads();
  c = blockIdx.y * T + threadIdx.x;
  r = blockIdx.x * T + threadIdx.y;
  if (r < cols && c < rows) y[size_t(r) * rows + c] = tile[threadIdx.x][threadIdx.y];
}
}  // namespace

extern "C" int tfref_cuda_reduce_sum(const float* x, float* y, int rows, int cols) {
  if (!x || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  if (int st = tfref::ensure_device()) return st;
  tfref::DeviceBuffer dx, dy;
  TFREF_CUDA_CHECK(dx.alloc(size_t(rows) * cols));
  TFREF_CUDA_CHECK(dy.alloc(rows));
  TFREF_CUDA_CHECK(cudaMemcpy(dx.ptr, x, sizeof(float) * rows * cols, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK((tfref::launch_by_size<ReduceSum>(size_t(cols), dx.ptr, dy.ptr, rows, cols)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * rows, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}

extern "C" int tfref_cuda_transpose(const float* x, float* y, int rows, int cols) {
  if (!x || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  if (int st = tfref::ensure_device()) return st;
  const size_t n = size_t(rows) * cols;
  tfref::DeviceBuffer dx, dy;
  TFREF_CUDA_CHECK(dx.alloc(n));
  TFREF_CUDA_CHECK(dy.alloc(n));
  TFREF_CUDA_CHECK(cudaMemcpy(dx.ptr, x, sizeof(float) * n, cudaMemcpyHostToDevice));
  dim3 threads(T, T), blocks((cols + T - 1) / T, (rows + T - 1) / T);
  transpose_kernel<<<blocks, threads>>>(dx.ptr, dy.ptr, rows, cols);
  TFREF_CUDA_CHECK(cudaGetLastError());
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * n, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
