// 2-D max / average pooling, one thread per output element, specialized by block size.
#include "common.cuh"

namespace {
template <int BLOCK, bool MAX>
__global__ void __launch_bounds__(BLOCK) pool_kernel(const float* x, float* y, int batch, int h, int w, int ch,
                                                     int window, int stride, int oh, int ow) {
  const size_t i = size_t(blockIdx.x) * BLOCK + threadIdx.x;
  if (i >= size_t(batch) * oh * ow * ch) return;
  const int c = i % ch, ox = (i / ch) % ow, oy = (i / (size_t(ch) * ow)) % oh;
  const int n = i / (size_t(ch) * ow * oh);
  float acc = MAX ? -3.4e38f : 0.f;
  for (int ky = 0; ky < window; ++ky)
    for (int kx = 0; kx < window; ++kx) {
      const float v = x[((size_t(n) * h + oy * stride + ky) * w + ox * stride + kx) * ch + c];
      acc = MAX ? fmaxf(acc, v) : acc + v;
    }
  y[i] = MAX ? acc : acc / float(window * window);
}

template <bool MAX>
struct Pool {
  template <int BLOCK>
  struct Launch {
    static cudaError_t run(const float* x, float* y, int b, int h, int w, int c, int win, int s, int oh, int ow) {
      const size_t total = size_t(b) * oh * ow * c;
      pool_kernel<BLOCK, MAX><<<tfref::blocks_for(total, BLOCK), BLOCK>>>(x, y, b, h, w, c, win, s, oh, ow);
      return cudaGetLastError();
    }
  };
};

template <bool MAX>
int pool(const float* x, float* y, int b, int h, int w, int c, int win, int s) {
  if (!x || !y || b <= 0 || c <= 0 || win <= 0 || s <= 0) return TFREF_BAD_ARGUMENT;
  const int oh = (h - win) / s + 1, ow = (w - win) / s + 1;
  if (oh <= 0 || ow <= 0) return TFREF_BAD_ARGUMENT;
  if (int st = tfref::ensure_device()) return st;
  const size_t nx = size_t(b) * h * w * c, ny = size_t(b) * oh * ow * c;
  tfref::DeviceBuffer dx, dy;
  TFREF_CUDA_CHECK(dx.alloc(nx));
  TFREF_CUDA_CHECK(dy.alloc(ny));
  TFREF_CUDA_CHECK(cudaMemcpy(dx.ptr, x, sizeof(float) * nx, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK((tfref::launch_by_size<Pool<MAX>::template Launch>(ny, dx.ptr, dy.ptr, b, h, w, c, win, s, oh, ow)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * ny, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
}  // namespace

extern "C" int tfref_cuda_max_pool2d(const float* x, float* y, int b, int h, int w, int c, int win, int s) {
  return pool<true>(x, y, b, h, w, c, win, s);
}
extern "C" int tfref_cuda_avg_pool2d(const float* x, float* y, int b, int h, int w, int c, int win, int s) {
  return pool<false>(x, y, b, h, w, c, win, s);
}
