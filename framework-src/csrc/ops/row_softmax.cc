// TfextRowSoftmax: softmax over the last axis of a matrix (tf.nn.softmax(x, axis=-1) for
// 2-D x). The op's definition and its CPU kernel; the GPU kernel is
// csrc/cuda/row_softmax.cu.cc, the XLA lowering csrc/xla/row_softmax.cc.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tfext/kernels.h"

namespace tfext {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfextRowSoftmax")
    .Input("logits: T")
    .Output("y: T")
    .Attr("T: {half, float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle logits;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &logits));
      c->set_output(0, logits);
      return tensorflow::Status();
    })
    .Doc(R"doc(
Softmax of each row of a matrix: y[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i),
m_i = max_k x[i, k] (tf.nn.softmax(x, axis=-1)).
)doc");

template <typename T>
struct RowSoftmax<Eigen::ThreadPoolDevice, T> {
  tensorflow::Status operator()(const Eigen::ThreadPoolDevice& d, const T* x, T* y, int64_t rows,
                                int64_t cols) {
    using A = typename Acc<T>::type;
    d.parallelFor(rows, Eigen::TensorOpCost(cols * sizeof(T), cols * sizeof(T), 25.0 * cols),
                  [=](Eigen::Index begin, Eigen::Index end) {
                    for (Eigen::Index r = begin; r < end; ++r) {
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
    return tensorflow::Status();
  }
};

TFEXT_REGISTER_KERNELS("TfextRowSoftmax", RowSoftmaxOp, Eigen::ThreadPoolDevice, tensorflow::DEVICE_CPU)

}  // namespace tfext
