// y = max(x + bias, 0), one thread per element.
#include "common.cuh"

namespace {
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) bias_relu_kernel(const float* x, const float* bias, float* y, size_t total,
                                                          int cols) {
  const size_t i = size_t(blockIdx.x) * BLOCK + threadIdx.x;
  if (i >= total) return;
  const float v = x[i] + bias[i % cols];
  y[i] = v > 0.f ? v : 0.f;
}

template <int BLOCK>
struct BiasRelu {
  static cudaError_t run(const float* x, const float* b, float* y, size_t total, int cols) {
    bias_relu_kernel<BLOCK><<<tfref::blocks_for(total, BLOCK), BLOCK>>>(x, b, y, total, cols);
    return cudaGetLastError();
  }
};
}  // namespace

extern "C" int tfref_cuda_bias_relu(const float* x, const float* bias, float* y, int rows, int cols) {
  if (!x || !bias || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  if (int s = tfref::ensure_device()) return s;
  const size_t total = size_t(rows) * cols;
  tfref::DeviceBuffer dx, db, dy;
  TFREF_CUDA_CHECK(dx.alloc(total));
  TFREF_CUDA_CHECK(db.alloc(cols));
  TFREF_CUDA_CHECK(dy.alloc(total));
  TFREF_CUDA_CHECK(cudaMemcpy(dx.ptr, x, sizeof(float) * total, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK(cudaMemcpy(db.ptr, bias, sizeof(float) * cols, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK((tfref::launch_by_size<BiasRelu>(total, dx.ptr, db.ptr, dy.ptr, total, cols)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * total, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
