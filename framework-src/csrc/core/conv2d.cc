// 2-D convolution, NHWC input, HWIO filter, symmetric zero padding.
#include <cstddef>

#include "../tfref.h"

extern "C" int tfref_conv2d_output_size(int in, int k, int stride, int pad) {
  if (stride <= 0) return -1;
  return (in + 2 * pad - k) / stride + 1;
}

extern "C" int tfref_conv2d(const float* x, const float* f, float* y, int batch, int height, int width,
                            int in_ch, int kh, int kw, int out_ch, int stride, int pad) {
  if (!x || !f || !y || batch <= 0 || in_ch <= 0 || out_ch <= 0 || stride <= 0 || pad < 0) {
    return TFREF_BAD_ARGUMENT;
  }
  const int oh = tfref_conv2d_output_size(height, kh, stride, pad);
  const int ow = tfref_conv2d_output_size(width, kw, stride, pad);
  if (oh <= 0 || ow <= 0) return TFREF_BAD_ARGUMENT;
  for (int n = 0; n < batch; ++n)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        float* out = y + ((static_cast<std::size_t>(n) * oh + oy) * ow + ox) * out_ch;
        for (int o = 0; o < out_ch; ++o) out[o] = 0.f;
        for (int ky = 0; ky < kh; ++ky) {
          const int iy = oy * stride + ky - pad;
          if (iy < 0 || iy >= height) continue;
          for (int kx = 0; kx < kw; ++kx) {
            const int ix = ox * stride + kx - pad;
            if (ix < 0 || ix >= width) continue;
            const float* in = x + ((static_cast<std::size_t>(n) * height + iy) * width + ix) * in_ch;
            const float* fk = f + (static_cast<std::size_t>(ky) * kw + kx) * in_ch * out_ch;
            for (int c = 0; c < in_ch; ++c) {
              const float v = in[c];
              const float* frow = fk + static_cast<std::size_t>(c) * out_ch;
              for (int o = 0; o < out_ch; ++o) out[o] += v * frow[o];
            }
          }
        }
      }
  return TFREF_OK;
}
