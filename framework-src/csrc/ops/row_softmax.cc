// TfextRowSoftmax: softmax over the last axis of a matrix (tf.nn.softmax(x, axis=-1) for
// 2-D x). The op's definition and its CPU kernel, whose arithmetic is
// csrc/cpu/row_softmax.cc; the GPU kernel is csrc/cuda/row_softmax.cu.cc, the XLA lowering
// csrc/xla/row_softmax.cc.
#define EIGEN_USE_THREADS

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
    cpu::RowSoftmax(ParallelForOn(d), x, y, rows, cols);
    return tensorflow::Status();
  }
};

TFEXT_REGISTER_KERNELS("TfextRowSoftmax", RowSoftmaxOp, Eigen::ThreadPoolDevice, tensorflow::DEVICE_CPU)

}  // namespace tfext
