// XLA lowering of TfextBiasRelu (compiled and linked only when TF_ENABLE_XLA=1): the op
// becomes max(x + broadcast(bias), 0) in HLO, which XLA can fuse with its neighbours.
#include "tfext/xla.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tfext {
namespace {

class BiasReluXlaOp : public tensorflow::XlaOpKernel {
 public:
  explicit BiasReluXlaOp(tensorflow::OpKernelConstruction* ctx) : XlaOpKernel(ctx) {}

  void Compile(tensorflow::XlaOpKernelContext* ctx) override {
    const tensorflow::TensorShape x_shape = ctx->InputShape(0);
    const tensorflow::TensorShape bias_shape = ctx->InputShape(1);
    OP_REQUIRES(ctx, x_shape.dims() >= 1,
                tensorflow::errors::InvalidArgument("x must have rank >= 1, got shape ",
                                                    x_shape.DebugString()));
    OP_REQUIRES(ctx, tensorflow::TensorShapeUtils::IsVector(bias_shape),
                tensorflow::errors::InvalidArgument("bias must be 1-D, got shape ",
                                                    bias_shape.DebugString()));
    const int last = x_shape.dims() - 1;
    OP_REQUIRES(ctx, bias_shape.dim_size(0) == x_shape.dim_size(last),
                tensorflow::errors::InvalidArgument("bias has ", bias_shape.dim_size(0),
                                                    " elements, the last dimension of x has ",
                                                    x_shape.dim_size(last)));
    // Equal ranks broadcast implicitly; otherwise bias maps onto x's last dimension.
    const std::vector<tensorflow::int64> dims =
        last == 0 ? std::vector<tensorflow::int64>{} : std::vector<tensorflow::int64>{last};
    const xla::XlaOp sum = xla::Add(ctx->Input(0), ctx->Input(1), dims);
    ctx->SetOutput(0, xla::Max(sum, xla::ZerosLike(sum)));
  }
};

REGISTER_XLA_OP(Name("TfextBiasRelu"), BiasReluXlaOp);

}  // namespace
}  // namespace tfext
