// Tiled matrix multiply: each block computes a TILE x TILE piece of C from shared memory.
#include "common.cuh"

namespace {
template <int TILE>
__global__ void __launch_bounds__(TILE * TILE) matmul_kernel(const float* a, const float* b, float* c, int m, int k, int n) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int t = 0; t < (k + TILE - 1) / TILE; ++t) {
    const int ak = t * TILE + threadIdx.x;
    const int bk = t * TILE + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row < m && ak < k) ? a[row * k + ak] : 0.f;
    bs[threadIdx.y][threadIdx.x] = (bk < k && col < n) ? b[bk * n + col] : 0.f;
    __syncthreads();
    for (int i = 0; i < TILE; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

// Tile size by problem size: 8x8 tiles keep small matrices busy, 32x32 reuse more.
template <int TILE>
cudaError_t launch(const float* a, const float* b, float* c, int m, int k, int n) {
  dim3 threads(TILE, TILE), blocks((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
  matmul_kernel<TILE><<<blocks, threads>>>(a, b, c, m, k, n);
  return cudaGetLastError();
}
}  // namespace

extern "C" int tfref_cuda_matmul(const float* a, const float* b, float* c, int m, int k, int n) {
  if (!a || !b || !c || m <= 0 || k <= 0 || n <= 0) return TFREF_BAD_ARGUMENT;
  if (int s = tfref::ensure_device()) return s;
  tfref::DeviceBuffer da, db, dc;
  TFREF_CUDA_CHECK(da.alloc(size_t(m) * k));
  TFREF_CUDA_CHECK(db.alloc(size_t(k) * n));
  TFREF_CUDA_CHECK(dc.alloc(size_t(m) * n));
  TFREF_CUDA_CHECK(cudaMemcpy(da.ptr, a, sizeof(float) * m * k, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK(cudaMemcpy(db.ptr, b, sizeof(float) * k * n, cudaMemcpyHostToDevice));
  const size_t work = size_t(m) * n;
  const cudaError_t launched = work < 4096 ? launch<8>(da.ptr, db.ptr, dc.ptr, m, k, n)
                               : work < (1u << 20) ? launch<16>(da.ptr, db.ptr, dc.ptr, m, k, n)
                                                  : launch<32>(da.ptr, db.ptr, dc.ptr, m, k, n);
  TFREF_CUDA_CHECK(launched);
  TFREF_CUDA_CHECK(cudaMemcpy(c, dc.ptr, sizeof(float) * m * n, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
