//===- CudaProbe.cpp - What the CUDA backend library finds ----------------===//
//
// libStrataRuntimeCUDA.so, which strata-run loads at run time (never links),
// so that strata-run builds and runs everywhere and a machine without the
// CUDA runtime, a driver or a GPU gets "cuda backend unavailable: <why>".
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

extern "C" {

/// The number of CUDA devices, with the first one's name and compute
/// capability in `message`; or -1 with the CUDA runtime's reason.
__attribute__((visibility("default"))) int
strata_cuda_probe(char *message, size_t size) {
  // No driver at all says more than the runtime's "insufficient driver".
  // The CUDA emulation (runtime/cuda/emulation) needs none.
#if !defined(STRATA_CUDA_EMULATION)
  if (void *driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(driver);
  } else {
    std::snprintf(message, size, "no CUDA driver (%s)",
                  ::dlerror());
    return -1;
  }
#endif
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    std::snprintf(message, size, "%s (%s)", cudaGetErrorString(error),
                  cudaGetErrorName(error));
    return -1;
  }
  if (count == 0) {
    std::snprintf(message, size, "no CUDA device");
    return 0;
  }
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) {
    std::snprintf(message, size, "%d devices", count);
    return count;
  }
  std::snprintf(message, size, "%d device%s, the first %s (compute %d.%d, "
                "%.1f GiB)",
                count, count == 1 ? "" : "s", properties.name,
                properties.major, properties.minor,
                double(properties.totalGlobalMem) / (1024.0 * 1024 * 1024));
  return count;
}

} // extern "C"
