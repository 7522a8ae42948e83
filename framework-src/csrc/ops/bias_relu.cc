// TfextBiasRelu: relu(bias_add(x, bias)) in one pass. The op's definition and its CPU
// kernel, whose arithmetic is csrc/cpu/bias_relu.cc; the GPU kernel is
// csrc/cuda/bias_relu.cu.cc, the XLA lowering csrc/xla/bias_relu.cc.
#define EIGEN_USE_THREADS

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tfext/kernels.h"

namespace tfext {

using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfextBiasRelu")
    .Input("x: T")
    .Input("bias: T")
    .Output("y: T")
    .Attr("T: {half, float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, bias, out;
      DimensionHandle channels;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &bias));
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(x, -1), c->Dim(bias, 0), &channels));
      TF_RETURN_IF_ERROR(c->ReplaceDim(x, -1, channels, &out));
      c->set_output(0, out);
      return tensorflow::Status();
    })
    .Doc(R"doc(
y = max(x + bias, 0), bias added along the last dimension of x
(tf.nn.relu(tf.nn.bias_add(x, bias))).
)doc");

template <typename T>
struct BiasRelu<Eigen::ThreadPoolDevice, T> {
  tensorflow::Status operator()(const Eigen::ThreadPoolDevice& d, const T* x, const T* bias, T* y,
                                int64_t n, int64_t channels) {
    cpu::BiasRelu(ParallelForOn(d), x, bias, y, n, channels);
    return tensorflow::Status();
  }
};

TFEXT_REGISTER_KERNELS("TfextBiasRelu", BiasReluOp, Eigen::ThreadPoolDevice, tensorflow::DEVICE_CPU)

}  // namespace tfext
