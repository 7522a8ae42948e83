// Direct convolution: one thread per output element (n, oy, ox, o).
#include "common.cuh"

namespace {
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) conv2d_kernel(const float* x, const float* f, float* y, int batch, int height, int width,
                              int in_ch, int kh, int kw, int out_ch, int stride, int pad, int oh, int ow) {
  const size_t idx = size_t(blockIdx.x) * BLOCK + threadIdx.x;
  const size_t total = size_t(batch) * oh * ow * out_ch;
  if (idx >= total) return;
  const int o = idx % out_ch;
  const int ox = (idx / out_ch) % ow;
  const int oy = (idx / (size_t(out_ch) * ow)) % oh;
  const int n = idx / (size_t(out_ch) * ow * oh);
  float acc = 0.f;
  for (int ky = 0; ky < kh; ++ky) {
    const int iy = oy * stride + ky - pad;
    if (iy < 0 || iy >= height) continue;
    for (int kx = 0; kx < kw; ++kx) {
      const int ix = ox * stride + kx - pad;
      if (ix < 0 || ix >= width) continue;
      const float* in = x + ((size_t(n) * height + iy) * width + ix) * in_ch;
      const float* fk = f + (size_t(ky) * kw + kx) * in_ch * out_ch;
      for (int c = 0; c < in_ch; ++c) acc += in[c] * fk[size_t(c) * out_ch + o];
    }
  }
  y[idx] = acc;
}

template <int BLOCK>
struct Conv2d {
  static cudaError_t run(const float* x, const float* f, float* y, int batch, int height, int width, int in_ch,
                         int kh, int kw, int out_ch, int stride, int pad, int oh, int ow, size_t total) {
    conv2d_kernel<BLOCK><<<tfref::blocks_for(total, BLOCK), BLOCK>>>(x, f, y, batch, height, width, in_ch, kh, kw,
                                                                    out_ch, stride, pad, oh, ow);
    return cudaGetLastError();
  }
};
}  // namespace

extern "C" int tfref_cuda_conv2d(const float* x, const float* f, float* y, int batch, int height, int width,
                                 int in_ch, int kh, int kw, int out_ch, int stride, int pad) {
  if (!x || !f || !y || batch <= 0 || in_ch <= 0 || out_ch <= 0 || stride <= 0 || pad < 0) {
    return TFREF_BAD_ARGUMENT;
  }
  const int oh = (height + 2 * pad - kh) / stride + 1, ow = (width + 2 * pad - kw) / stride + 1;
  if (oh <= 0 || ow <= 0) return TFREF_BAD_ARGUMENT;
  if (int s = tfref::ensure_device()) return s;
  const size_t nx = size_t(batch) * height * width * in_ch, nf = size_t(kh) * kw * in_ch * out_ch;
  const size_t ny = size_t(batch) * oh * ow * out_ch;
  tfref::DeviceBuffer dx, df, dy;
  TFREF_CUDA_CHECK(dx.alloc(nx));
  TFREF_CUDA_CHECK(df.alloc(nf));
  TFREF_CUDA_CHECK(dy.alloc(ny));
  TFREF_CUDA_CHECK(cudaMemcpy(dx.ptr, x, sizeof(float) * nx, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK(cudaMemcpy(df.ptr, f, sizeof(float) * nf, cudaMemcpyHostToDevice));
  TFREF_CUDA_CHECK((tfref::launch_by_size<Conv2d>(ny, dx.ptr, df.ptr, dy.ptr, batch, height, width, in_ch, kh, kw,
                                                  out_ch, stride, pad, oh, ow, ny)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * ny, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
