// 2-D max and average pooling over NHWC, square window, no padding.
#include <cstddef>

#include "../tfref.h"

namespace {
template <bool kMax>
int pool(const float* x, float* y, int batch, int height, int width, int ch, int window, int stride) {
  if (!x || !y || batch <= 0 || ch <= 0 || window <= 0 || stride <= 0) return TFREF_BAD_ARGUMENT;
  const int oh = (height - window) / stride + 1, ow = (width - window) / stride + 1;
  if (oh <= 0 || ow <= 0) return TFREF_BAD_ARGUMENT;
  for (int n = 0; n < batch; ++n)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int c = 0; c < ch; ++c) {
          float acc = kMax ? -3.4e38f : 0.f;
          for (int ky = 0; ky < window; ++ky)
            for (int kx = 0; kx < window; ++kx) {
              const float v = x[((std::size_t(n) * height + oy * stride + ky) * width + ox * stride + kx) * ch + c];
              acc = kMax ? (v > acc ? v : acc) : acc + v;
            }
          y[((std::size_t(n) * oh + oy) * ow + ox) * ch + c] = kMax ? acc : acc / float(window * window);
        }
  return TFREF_OK;
}
}  // namespace

extern "C" int tfref_max_pool2d(const float* x, float* y, int b, int h, int w, int c, int win, int s) {
  return pool<true>(x, y, b, h, w, c, win, s);
}
extern "C" int tfref_avg_pool2d(const float* x, float* y, int b, int h, int w, int c, int win, int s) {
  return pool<false>(x, y, b, h, w, c, win, s);
}
