// C API of the reference framework's kernels. Every function returns 0 on success
// and a negative status otherwise. Tensors are dense float32, row-major; images are
// NHWC and convolution filters HWIO, as in TensorFlow's defaults.
#ifndef TFREF_H_
#define TFREF_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TFREF_OK 0
#define TFREF_BAD_ARGUMENT -1
#define TFREF_CUDA_ERROR -2
#define TFREF_NO_DEVICE -3

// CPU kernels (libtfref_core.so)
int tfref_matmul(const float* a, const float* b, float* c, int m, int k, int n);
int tfref_conv2d(const float* x, const float* f, float* y, int batch, int height, int width,
                 int in_ch, int kh, int kw, int out_ch, int stride, int pad);
int tfref_bias_relu(const float* x, const float* bias, float* y, int rows, int cols);
int tfref_softmax(const float* x, float* y, int rows, int cols);
int tfref_conv2d_output_size(int in, int k, int stride, int pad);

// CUDA kernels (libtfref_cuda.so): same contracts, host pointers in and out.
int tfref_cuda_device_count(void);
int tfref_cuda_matmul(const float* a, const float* b, float* c, int m, int k, int n);
int tfref_cuda_conv2d(const float* x, const float* f, float* y, int batch, int height, int width,
                      int in_ch, int kh, int kw, int out_ch, int stride, int pad);
int tfref_cuda_bias_relu(const float* x, const float* bias, float* y, int rows, int cols);
int tfref_cuda_softmax(const float* x, float* y, int rows, int cols);

// More CPU ops (libtfref_core.so). Pooling is 2-D over NHWC with a square window.
int tfref_max_pool2d(const float* x, float* y, int batch, int height, int width, int ch, int window, int stride);
int tfref_avg_pool2d(const float* x, float* y, int batch, int height, int width, int ch, int window, int stride);
int tfref_batch_norm(const float* x, const float* mean, const float* var, const float* gamma, const float* beta,
                     float* y, int rows, int cols, float eps);
int tfref_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols, float eps);
// op: 0 add, 1 multiply, 2 gelu(a) (b unused)
int tfref_elementwise(const float* a, const float* b, float* y, long n, int op);
int tfref_reduce_sum(const float* x, float* y, int rows, int cols);
int tfref_transpose(const float* x, float* y, int rows, int cols);

// The same on the GPU (libtfref_cuda.so).
int tfref_cuda_max_pool2d(const float* x, float* y, int batch, int height, int width, int ch, int window, int stride);
int tfref_cuda_avg_pool2d(const float* x, float* y, int batch, int height, int width, int ch, int window, int stride);
int tfref_cuda_batch_norm(const float* x, const float* mean, const float* var, const float* gamma, const float* beta,
                          float* y, int rows, int cols, float eps);
int tfref_cuda_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols,
                          float eps);
int tfref_cuda_elementwise(const float* a, const float* b, float* y, long n, int op);
int tfref_cuda_reduce_sum(const float* x, float* y, int rows, int cols);
int tfref_cuda_transpose(const float* x, float* y, int rows, int cols);

// XLA-style fusion (libtfref_xla.so, only when built with TF_ENABLE_XLA=1):
// relu(x @ w + b) in one pass, without materializing x @ w.
int tfref_xla_fused_dense(const float* x, const float* w, const float* b, float* y, int m, int k, int n);
int tfref_xla_cuda_fused_dense(const float* x, const float* w, const float* b, float* y, int m, int k, int n);

#ifdef __cplusplus
}
#endif
#endif  // TFREF_H_
