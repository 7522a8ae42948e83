// Device discovery: 0 when no driver or GPU is present (never an error).
#include "common.cuh"

extern "C" int tfref_cuda_device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}
