// TfextGelu: the tanh approximation of GELU (tf.nn.gelu(x, approximate=True)). The op's
// definition and its CPU kernel, whose arithmetic is csrc/cpu/gelu.cc; the GPU kernel is
// csrc/cuda/gelu.cu.cc, the XLA lowering csrc/xla/gelu.cc.
#define EIGEN_USE_THREADS

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tfext/kernels.h"

namespace tfext {

REGISTER_OP("TfextGelu")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {half, float, double}")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), elementwise
(tf.nn.gelu(x, approximate=True)).
)doc");

template <typename T>
struct Gelu<Eigen::ThreadPoolDevice, T> {
  tensorflow::Status operator()(const Eigen::ThreadPoolDevice& d, const T* x, T* y, int64_t n) {
    cpu::Gelu(ParallelForOn(d), x, y, n);
    return tensorflow::Status();
  }
};

TFEXT_REGISTER_KERNELS("TfextGelu", GeluOp, Eigen::ThreadPoolDevice, tensorflow::DEVICE_CPU)

}  // namespace tfext
