// TfextGelu's CPU arithmetic: the tanh approximation of GELU, elementwise. Its op and CPU
// registration are csrc/ops/gelu.cc (tfext/cpu.h says why apart).
#include <cmath>

#include "tfext/constants.h"
#include "tfext/cpu.h"

namespace tfext {
namespace cpu {

template <typename T>
void Gelu(const ParallelFor& parallel_for, const T* x, T* y, int64_t n) {
  using A = typename Acc<T>::type;
  parallel_for(n, sizeof(T), sizeof(T), 30,
               [=](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   const A v = static_cast<A>(x[i]);
                   const A inner = A(kGeluScale) * (v + A(kGeluCubic) * v * v * v);
                   y[i] = static_cast<T>(A(0.5) * v * (A(1) + std::tanh(inner)));
                 }
               });
}

template void Gelu(const ParallelFor&, const Eigen::half*, Eigen::half*, int64_t);
template void Gelu(const ParallelFor&, const float*, float*, int64_t);
template void Gelu(const ParallelFor&, const double*, double*, int64_t);

}  // namespace cpu
}  // namespace tfext
