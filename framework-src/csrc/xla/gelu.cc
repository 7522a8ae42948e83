// XLA lowering of TfextGelu (compiled and linked only when TF_ENABLE_XLA=1):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as elementwise HLO.
#include "tfext/xla.h"
#include "tfext/constants.h"

namespace tfext {
namespace {

class GeluXlaOp : public tensorflow::XlaOpKernel {
 public:
  explicit GeluXlaOp(tensorflow::OpKernelConstruction* ctx) : XlaOpKernel(ctx) {}

  void Compile(tensorflow::XlaOpKernelContext* ctx) override {
    const xla::XlaOp x = ctx->Input(0);
    const xla::XlaOp inner =
        xla::ScalarLike(x, kGeluScale) * (x + xla::ScalarLike(x, kGeluCubic) * x * x * x);
    ctx->SetOutput(0, xla::ScalarLike(x, 0.5) * x * (xla::ScalarLike(x, 1.0) + xla::Tanh(inner)));
  }
};

REGISTER_XLA_OP(Name("TfextGelu"), GeluXlaOp);

}  // namespace
}  // namespace tfext
