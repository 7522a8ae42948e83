// Element-wise add, multiply and GELU; vectorized by four where the size allows.
#include "common.cuh"

namespace {
__device__ __forceinline__ float apply(int op, float a, float b) {
  if (op == 0) return a + b;
  if (op == 1) return a * b;
  return 0.5f * a * (1.f + tanhf(0.7978845608f * (a + 0.044715f * a * a * a)));
}

template <int BLOCK, bool VEC4>
__global__ void __launch_bounds__(BLOCK) elementwise_kernel(const float* a, const float* b, float* y, long n, int op) {
  const long i = long(blockIdx.x) * BLOCK + threadIdx.x;
  if (VEC4) {
    if (i >= n / 4) return;
    const float4 va = reinterpret_cast<const float4*>(a)[i];
    const float4 vb = b ? reinterpret_cast<const float4*>(b)[i] : va;
    reinterpret_cast<float4*>(y)[i] =
        make_float4(apply(op, va.x, vb.x), apply(op, va.y, vb.y), apply(op, va.z, vb.z), apply(op, va.w, vb.w));
  } else {
    if (i >= n) return;
    y[i] = apply(op, a[i], b ? b[i] : 0.f);
  }
}

template <int BLOCK>
struct Elementwise {
  static cudaError_t run(const float* a, const float* b, float* y, long n, int op) {
    if (n % 4 == 0) {
      elementwise_kernel<BLOCK, true><<<tfref::blocks_for(n / 4, BLOCK), BLOCK>>>(a, b, y, n, op);
    } else {
      elementwise_kernel<BLOCK, false><<<tfref::blocks_for(n, BLOCK), BLOCK>>>(a, b, y, n, op);
    }
    return cudaGetLastError();
  }
};
}  // namespace

extern "C" int tfref_cuda_elementwise(const float* a, const float* b, float* y, long n, int op) {
  if (!a || !y || n <= 0 || op < 0 || op > 2 || (op < 2 && !b)) return TFREF_BAD_ARGUMENT;
  if (int st = tfref::ensure_device()) return st;
  tfref::DeviceBuffer da, db, dy;
  TFREF_CUDA_CHECK(da.alloc(n));
  TFREF_CUDA_CHECK(dy.alloc(n));
  TFREF_CUDA_CHECK(cudaMemcpy(da.ptr, a, sizeof(float) * n, cudaMemcpyHostToDevice));
  if (op < 2) {
    TFREF_CUDA_CHECK(db.alloc(n));
    TFREF_CUDA_CHECK(cudaMemcpy(db.ptr, b, sizeof(float) * n, cudaMemcpyHostToDevice));
  }
  TFREF_CUDA_CHECK((tfref::launch_by_size<Elementwise>(size_t(n), da.ptr, op < 2 ? db.ptr : nullptr, dy.ptr, n, op)));
  TFREF_CUDA_CHECK(cudaMemcpy(y, dy.ptr, sizeof(float) * n, cudaMemcpyDeviceToHost));
  return TFREF_OK;
}
