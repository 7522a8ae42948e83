// TfextBiasRelu's CPU arithmetic: y = max(x + bias, 0), bias along the last dimension.
// Its op and CPU registration are csrc/ops/bias_relu.cc (tfext/cpu.h says why apart).
#include "tfext/cpu.h"

namespace tfext {
namespace cpu {

template <typename T>
void BiasRelu(const ParallelFor& parallel_for, const T* x, const T* bias, T* y, int64_t n,
              int64_t channels) {
  using A = typename Acc<T>::type;
  parallel_for(n, 2 * sizeof(T), sizeof(T), 2,
               [=](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   const A v = static_cast<A>(x[i]) + static_cast<A>(bias[i % channels]);
                   y[i] = static_cast<T>(v > A(0) ? v : A(0));
                 }
               });
}

template void BiasRelu(const ParallelFor&, const Eigen::half*, const Eigen::half*,
                       Eigen::half*, int64_t, int64_t);
template void BiasRelu(const ParallelFor&, const float*, const float*, float*, int64_t,
                       int64_t);
template void BiasRelu(const ParallelFor&, const double*, const double*, double*,
                       int64_t, int64_t);

}  // namespace cpu
}  // namespace tfext
