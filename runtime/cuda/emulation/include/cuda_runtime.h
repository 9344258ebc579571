//===- cuda_runtime.h - CUDA C++ as host C++, for the emulation -*- C++ -*-===//
//
// Part of Strata's CUDA emulation (see ../Emulation.h). The CUDA language
// the kernels use, as host C++: the execution-space qualifiers are empty,
// __shared__ variables are statics (the emulation runs one block at a time),
// the built-in index variables are globals the grid runner sets before it
// resumes each CUDA thread, and the intrinsics the kernels call are host
// functions. A kernel launch is STRATA_LAUNCH (kernels/CudaKernelUtils.cuh),
// which here calls launch() below instead of the <<<>>> syntax.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_CUDA_EMULATION_CUDA_RUNTIME_H
#define STRATA_CUDA_EMULATION_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#include <cstring>
// CUDA's math functions, overloaded for float and double, in the global
// namespace as nvcc has them.
#include <math.h>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

/// The CUDA thread the grid runner is running (one at a time).
extern dim3 threadIdx;
extern dim3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

namespace strata::cuda_emulation {

/// A launch's configuration; `kernel` is the kernel's host address (the key
/// of cudaFuncSetAttribute).
struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t sharedBytes = 0;
  cudaStream_t stream = nullptr;
  const void *kernel = nullptr;
};

/// Checks `config` as CUDA would (a bad one sets the error cudaGetLastError
/// returns and launches nothing) and enqueues the grid: `thread` runs once
/// per CUDA thread, every block's threads as fibers.
void launchGrid(const LaunchConfig &config, std::function<void()> thread);

/// The barriers and the warp exchange, for the running CUDA thread.
void syncThreads();
void syncWarp();
/// Lane `lane + delta`'s value of the 8-byte slot, the running lane's own
/// when that lane is past the warp (width 32).
uint64_t shuffleDown(uint64_t bits, unsigned delta, int width);
/// The running block's dynamic shared memory.
unsigned char *dynamicShared();

template <typename... Params> struct Launcher {
  LaunchConfig config;
  void (*kernel)(Params...);
  /// Copies the arguments (converted to the kernel's parameter types, as
  /// <<<>>> does) and enqueues the grid.
  template <typename... Args> void operator()(Args &&...args) const {
    auto params = std::make_shared<std::tuple<std::decay_t<Params>...>>(
        std::forward<Args>(args)...);
    auto *k = kernel;
    launchGrid(config, [k, params] { std::apply(k, *params); });
  }
};

template <typename... Params>
Launcher<Params...> launch(dim3 grid, dim3 block, size_t sharedBytes,
                           cudaStream_t stream, void (*kernel)(Params...)) {
  return {{grid, block, sharedBytes, stream,
           reinterpret_cast<const void *>(kernel)},
          kernel};
}

} // namespace strata::cuda_emulation

inline void __syncthreads() { strata::cuda_emulation::syncThreads(); }
inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) {
  strata::cuda_emulation::syncWarp();
}
template <typename T>
T __shfl_down_sync(unsigned /*mask*/, T value, unsigned delta, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = strata::cuda_emulation::shuffleDown(bits, delta, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

#endif // STRATA_CUDA_EMULATION_CUDA_RUNTIME_H
