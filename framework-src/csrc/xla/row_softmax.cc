// XLA lowering of TfextRowSoftmax (compiled and linked only when TF_ENABLE_XLA=1):
// reduce-max, exp(x - max), reduce-sum, divide; half is computed in float, as the CPU and
// GPU kernels do.
#include "tfext/xla.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tfext {
namespace {

class RowSoftmaxXlaOp : public tensorflow::XlaOpKernel {
 public:
  explicit RowSoftmaxXlaOp(tensorflow::OpKernelConstruction* ctx) : XlaOpKernel(ctx) {}

  void Compile(tensorflow::XlaOpKernelContext* ctx) override {
    const tensorflow::TensorShape shape = ctx->InputShape(0);
    OP_REQUIRES(ctx, tensorflow::TensorShapeUtils::IsMatrix(shape),
                tensorflow::errors::InvalidArgument("logits must be 2-D, got shape ",
                                                    shape.DebugString()));
    const bool widen = ctx->input_type(0) == tensorflow::DT_HALF;
    const tensorflow::DataType acc = widen ? tensorflow::DT_FLOAT : ctx->input_type(0);
    const xla::PrimitiveType acc_xla = widen ? xla::F32 : ctx->input_xla_type(0);
    xla::XlaBuilder* b = ctx->builder();

    xla::XlaOp x = ctx->Input(0);
    if (widen) x = xla::ConvertElementType(x, xla::F32);
    const xla::XlaOp max = xla::Reduce(x, xla::MinValue(b, acc_xla), *ctx->GetOrCreateMax(acc), {1});
    const xla::XlaOp e = xla::Exp(xla::Sub(x, max, {0}));
    const xla::XlaOp sum = xla::Reduce(e, xla::Zero(b, acc_xla), *ctx->GetOrCreateAdd(acc), {1});
    xla::XlaOp y = xla::Div(e, sum, {0});
    if (widen) y = xla::ConvertElementType(y, ctx->input_xla_type(0));
    ctx->SetOutput(0, y);
  }
};

REGISTER_XLA_OP(Name("TfextRowSoftmax"), RowSoftmaxXlaOp);

}  // namespace
}  // namespace tfext
