// The op kernels shared by the CPU and the GPU builds. Each op's arithmetic is a functor,
// Functor<Device, T>, defined once per device: the CPU specialisations live in
// csrc/ops/<op>.cc (with REGISTER_OP and the CPU registration) and call csrc/cpu/<op>.cc's
// arithmetic, the GPU ones live in csrc/gpu/<op>.cc (with the DEVICE_GPU registration) and
// launch csrc/cuda/<op>.cu.cc's kernels. The kernel classes below only
// validate their inputs, allocate the output and call the functor.
//
// Define EIGEN_USE_THREADS (CPU) or EIGEN_USE_GPU (GPU) before including this header.
#ifndef TFEXT_KERNELS_H_
#define TFEXT_KERNELS_H_

#include <cstdint>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tfext/constants.h"
#include "tfext/cpu.h"

// Registers OpClass<DeviceT, T> for op `op_name` on `device_type` (tensorflow::DEVICE_CPU or
// DEVICE_GPU) for each element type the ops accept. REGISTER_KERNEL_BUILDER names its
// registrations with __COUNTER__, so the three in one expansion do not clash.
#define TFEXT_REGISTER_KERNEL_(op_name, OpClass, DeviceT, device_type, T)            \
  REGISTER_KERNEL_BUILDER(Name(op_name).Device(device_type).TypeConstraint<T>("T"), \
                          OpClass<DeviceT, T>);
#define TFEXT_REGISTER_KERNELS(op_name, OpClass, DeviceT, device_type)         \
  TFEXT_REGISTER_KERNEL_(op_name, OpClass, DeviceT, device_type, Eigen::half) \
  TFEXT_REGISTER_KERNEL_(op_name, OpClass, DeviceT, device_type, float)       \
  TFEXT_REGISTER_KERNEL_(op_name, OpClass, DeviceT, device_type, double)

namespace tfext {

#ifdef EIGEN_USE_THREADS
// The CPU arithmetic's parallel loop (tfext/cpu.h) on DEVICE's thread pool.
inline cpu::ParallelFor ParallelForOn(const Eigen::ThreadPoolDevice& device) {
  return [&device](int64_t n, double bytes_loaded, double bytes_stored, double compute_cycles,
                   const cpu::Shard& fn) {
    device.parallelFor(n, Eigen::TensorOpCost(bytes_loaded, bytes_stored, compute_cycles),
                       [&fn](Eigen::Index begin, Eigen::Index end) { fn(begin, end); });
  };
}
#endif

// y[i] = max(x[i] + bias[i % channels], 0), x holding n elements.
template <typename Device, typename T>
struct BiasRelu {
  tensorflow::Status operator()(const Device& d, const T* x, const T* bias, T* y, int64_t n,
                                int64_t channels);
};

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise over n elements.
template <typename Device, typename T>
struct Gelu {
  tensorflow::Status operator()(const Device& d, const T* x, T* y, int64_t n);
};

// Numerically stable softmax of each row of a rows x cols matrix.
template <typename Device, typename T>
struct RowSoftmax {
  tensorflow::Status operator()(const Device& d, const T* x, T* y, int64_t rows, int64_t cols);
};

template <typename Device, typename T>
class BiasReluOp : public tensorflow::OpKernel {
 public:
  explicit BiasReluOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(tensorflow::OpKernelContext* c) override {
    const tensorflow::Tensor& x = c->input(0);
    const tensorflow::Tensor& bias = c->input(1);
    OP_REQUIRES(c, x.dims() >= 1,
                tensorflow::errors::InvalidArgument("x must have rank >= 1, got shape ",
                                                    x.shape().DebugString()));
    OP_REQUIRES(c, tensorflow::TensorShapeUtils::IsVector(bias.shape()),
                tensorflow::errors::InvalidArgument("bias must be 1-D, got shape ",
                                                    bias.shape().DebugString()));
    const int64_t channels = x.dim_size(x.dims() - 1);
    OP_REQUIRES(c, bias.dim_size(0) == channels,
                tensorflow::errors::InvalidArgument(
                    "bias has ", bias.dim_size(0), " elements, the last dimension of x has ", channels));
    tensorflow::Tensor* y = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, x.shape(), &y));
    if (x.NumElements() == 0) return;
    OP_REQUIRES_OK(c, (BiasRelu<Device, T>()(c->eigen_device<Device>(), x.flat<T>().data(),
                                             bias.flat<T>().data(), y->flat<T>().data(),
                                             x.NumElements(), channels)));
  }
};

template <typename Device, typename T>
class GeluOp : public tensorflow::OpKernel {
 public:
  explicit GeluOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(tensorflow::OpKernelContext* c) override {
    const tensorflow::Tensor& x = c->input(0);
    tensorflow::Tensor* y = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, x.shape(), &y));
    if (x.NumElements() == 0) return;
    OP_REQUIRES_OK(c, (Gelu<Device, T>()(c->eigen_device<Device>(), x.flat<T>().data(),
                                         y->flat<T>().data(), x.NumElements())));
  }
};

template <typename Device, typename T>
class RowSoftmaxOp : public tensorflow::OpKernel {
 public:
  explicit RowSoftmaxOp(tensorflow::OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(tensorflow::OpKernelContext* c) override {
    const tensorflow::Tensor& x = c->input(0);
    OP_REQUIRES(c, tensorflow::TensorShapeUtils::IsMatrix(x.shape()),
                tensorflow::errors::InvalidArgument("logits must be 2-D, got shape ",
                                                    x.shape().DebugString()));
    tensorflow::Tensor* y = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, x.shape(), &y));
    if (x.NumElements() == 0) return;
    OP_REQUIRES_OK(c, (RowSoftmax<Device, T>()(c->eigen_device<Device>(), x.flat<T>().data(),
                                               y->flat<T>().data(), x.dim_size(0), x.dim_size(1))));
  }
};

}  // namespace tfext

#endif  // TFEXT_KERNELS_H_
