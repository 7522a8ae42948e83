// TfextGelu: the tanh approximation of GELU (tf.nn.gelu(x, approximate=True)). The op's
// definition and its CPU kernel; the GPU kernel is csrc/cuda/gelu.cu.cc, the XLA lowering
// csrc/xla/gelu.cc.
#define EIGEN_USE_THREADS

#include <cmath>

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
    using A = typename Acc<T>::type;
    d.parallelFor(n, Eigen::TensorOpCost(sizeof(T), sizeof(T), 30),
                  [=](Eigen::Index begin, Eigen::Index end) {
                    for (Eigen::Index i = begin; i < end; ++i) {
                      const A v = static_cast<A>(x[i]);
                      const A inner = A(kGeluScale) * (v + A(kGeluCubic) * v * v * v);
                      y[i] = static_cast<T>(A(0.5) * v * (A(1) + std::tanh(inner)));
                    }
                  });
    return tensorflow::Status();
  }
};

TFEXT_REGISTER_KERNELS("TfextGelu", GeluOp, Eigen::ThreadPoolDevice, tensorflow::DEVICE_CPU)

}  // namespace tfext
