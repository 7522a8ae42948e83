// XLA-style fusion on the GPU: one kernel computes relu(x @ w + b) per output element.
#include "../cuda/common.cuh"

namespace {
__global__ void fused_dense_kernel(const float* x, const float* w, const float* b, float* y, int m, int k, int n) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = b[col];
  for (int p = 0; p < k; ++p) acc += x[row * k + p] * w[p * n + col];
  y[row * n + col] = acc > 0.f ? acc : 0.f;
}
}  // namespace

extern "C" int tfref_xla_cuda_fused_dense(const float* x, const float* w, const float* b, float* y,
                                          int m, int k, int n) {
  if (!x || !w || !b || !y || m <= 0 || k <= 0 || n <= 0) return TFREF_BAD_ARGUMENT;
  if (int s = tfref::ensure_device()) return s;
  tfref::DeviceBuffer dx, dw, db, dy;
  TFREF_CUDA_CHECK(dx.alloc(size_t(m) * k));
  TFREF_CUDA_CHECK(dw.alloc(size_t(k) * n));
  TFREF_CUDA_CHECK(db.alloc(n));
  TFREF_CUDA_CHECK(dy.alloc(size_t(m) * n));
  TFREF_CUDA_CHECK(cudaMemcpy(dx.ptr, x, sizeof(float) * m * k, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK(cudaMemcpy(dw.ptr, w, sizeof(float) * k * n, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK(cudaMemcpy(db.ptr, b, sizeof(float) * n, cudaMemcpyHostToDevice));
  dim3 threads(16, 16), blocks((n + 15) / 16, (m + 15) / 16);
  fused_dense_kernel<<<blocks, threads>>>(dx.ptr, dw.ptr, db.ptr, dy.ptr, m, k, n);
  TFREF_CUDA_CHECK(cudaGetLastError());
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * m * n, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
