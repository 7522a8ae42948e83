// Batch normalization (per-channel, inference) and layer normalization (one block per
// row, shared-memory reductions), specialized by block size and accumulator type.
#include "common.cuh"

namespace {
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) batch_norm_kernel(const float* x, const float* mean, const float* var,
                                                           const float* gamma, const float* beta, float* y,
                                                           size_t total, int cols, float eps) {
  const size_t i = size_t(blockIdx.x) * BLOCK + threadIdx.x;
  if (i >= total) return;
  const int c = i % cols;
  y[i] = gamma[c] * (x[i] - mean[c]) * rsqrtf(var[c] + eps) + beta[c];
}

template <int BLOCK, typename Acc>
__global__ void __launch_bounds__(BLOCK) layer_norm_kernel(const float* x, const float* gamma, const float* beta,
                                                           float* y, int cols, float eps) {
  __shared__ Acc sum[BLOCK], sq[BLOCK];
  const float* in = x + size_t(blockIdx.x) * cols;
  Acc s = 0, q = 0;
  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    s += in[c];
    q += Acc(in[c]) * in[c];
  }
  sum[threadIdx.x] = s;
  sq[threadIdx.x] = q;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) {
      sum[threadIdx.x] += sum[threadIdx.x + k];
      sq[threadIdx.x] += sq[threadIdx.x + k];
    }
    __syncthreads();
  }
  const Acc mean = sum[0] / cols;
  const Acc inv = rsqrt(sq[0] / cols - mean * mean + Acc(eps));
  for (int c = threadIdx.x; c < cols; c += BLOCK)
    y[size_t(blockIdx.x) * cols + c] = float((in[c] - mean) * inv) * gamma[c] + beta[c];
}

template <int BLOCK>
struct BatchNorm {
  static cudaError_t run(const float* x, const float* m, const float* v, const float* g, const float* b, float* y,
                         size_t total, int cols, float eps) {
    batch_norm_kernel<BLOCK><<<tfref::blocks_for(total, BLOCK), BLOCK>>>(x, m, v, g, b, y, total, cols, eps);
    return cudaGetLastError();
  }
};

template <int BLOCK>
struct LayerNorm {
  static cudaError_t run(const float* x, const float* g, const float* b, float* y, int rows, int cols, float eps) {
    // Long rows accumulate in double: float sums lose the variance of wide activations.
    if (cols > 4096) {
      layer_norm_kernel<BLOCK, double><<<rows, BLOCK>>>(x, g, b, y, cols, eps);
    } else {
      layer_norm_kernel<BLOCK, float><<<rows, BLOCK>>>(x, g, b, y, cols, eps);
    }
    return cudaGetLastError();
  }
};

struct Copy {
  const float* host;
  size_t n;
};

template <size_t N>
int upload(tfref::DeviceBuffer (&bufs)[N], const Copy (&copies)[N]) {
  for (size_t i = 0; i < N; ++i) {
    TFREF_CUDA_CHECK(bufs[i].alloc(copies[i].n));
    TFREF_CUDA_CHECK(cudaMemcpy(bufs[i].ptr, copies[i].host, sizeof(float) * copies[i].n, cudaMemcpyHostToDevice));
  }
  return TFREF_OK;
}
}  // namespace

extern "C" int tfref_cuda_batch_norm(const float* x, const float* mean, const float* var, const float* gamma,
                                     const float* beta, float* y, int rows, int cols, float eps) {
  if (!x || !mean || !var || !gamma || !beta || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  if (int st = tfref::ensure_device()) return st;
  const size_t total = size_t(rows) * cols;
  tfref::DeviceBuffer in[5], dy;
  const Copy copies[5] = {{x, total}, {mean, size_t(cols)}, {var, size_t(cols)}, {gamma, size_t(cols)},
                          {beta, size_t(cols)}};
  if (int st = upload(in, copies)) return st;
  TFREF_CUDA_CHECK(dy.alloc(total));
  TFREF_CUDA_CHECK((tfref::launch_by_size<BatchNorm>(total, in[0].ptr, in[1].ptr, in[2].ptr, in[3].ptr, in[4].ptr,
                                                     dy.ptr, total, cols, eps)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * total, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}

extern "C" int tfref_cuda_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int rows,
                                     int cols, float eps) {
  if (!x || !gamma || !beta || !y || rows <= 0 || cols <= 0) return TFREF_BAD_ARGUMENT;
  if (int st = tfref::ensure_device()) return st;
  const size_t total = size_t(rows) * cols;
  tfref::DeviceBuffer in[3], dy;
  const Copy copies[3] = {{x, total}, {gamma, size_t(cols)}, {beta, size_t(cols)}};
  if (int st = upload(in, copies)) return st;
  TFREF_CUDA_CHECK(dy.alloc(total));
  TFREF_CUDA_CHECK((tfref::launch_by_size<LayerNorm>(size_t(cols), in[0].ptr, in[1].ptr, in[2].ptr, dy.ptr, rows,
                                                     cols, eps)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * total, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
