// TfextRowSoftmax's CPU arithmetic: a numerically stable softmax of each row. Its op and
// CPU registration are csrc/ops/row_softmax.cc (tfext/cpu.h says why apart).
#include <algorithm>
#include <cmath>

#include "tfext/cpu.h"

namespace tfext {
namespace cpu {

template <typename T>
void RowSoftmax(const ParallelFor& parallel_for, const T* x, T* y, int64_t rows, int64_t cols) {
  using A = typename Acc<T>::type;
  parallel_for(rows, cols * sizeof(T), cols * sizeof(T), 25.0 * cols,
               [=](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   const T* in = x + r * cols;
                   T* out = y + r * cols;
                   A m = static_cast<A>(in[0]);
                   for (int64_t j = 1; j < cols; ++j) m = std::max(m, static_cast<A>(in[j]));
                   A sum = 0;
                   for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<A>(in[j]) - m);
                   const A inv = A(1) / sum;
                   for (int64_t j = 0; j < cols; ++j)
                     out[j] = static_cast<T>(std::exp(static_cast<A>(in[j]) - m) * inv);
                 }
               });
}

template void RowSoftmax(const ParallelFor&, const Eigen::half*, Eigen::half*, int64_t,
                         int64_t);
template void RowSoftmax(const ParallelFor&, const float*, float*, int64_t, int64_t);
template void RowSoftmax(const ParallelFor&, const double*, double*, int64_t, int64_t);

}  // namespace cpu
}  // namespace tfext
