//===- CudaKernelUtils.cuh - Shared helpers of the CUDA kernels -*- CUDA -*-===//
//
// Private to runtime/cuda: element-type dispatch (the same dtypes the CPU
// kernels take, so the CPU kernel stays the specification), grid sizing,
// and the checks both backends share (strata/Runtime/KernelChecks.h).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_CUDAKERNELUTILS_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_CUDAKERNELUTILS_CUH

#include "CudaKernels.h"
#include "CudaStream.h"

#include "strata/Runtime/KernelChecks.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

/// A kernel launch: STRATA_LAUNCH(grid, block, sharedBytes, stream,
/// kernel)(arguments...) is kernel<<<grid, block, sharedBytes,
/// stream>>>(arguments...) under nvcc; compiled as host C++ against the CUDA
/// emulation (runtime/cuda/emulation) it enqueues the grid there. The kernel
/// comes last so that its template arguments' commas may stand unprotected.
/// STRATA_DYNAMIC_SHARED(alignment, name) declares the block's dynamic
/// shared memory as `unsigned char name[]`.
#if defined(STRATA_CUDA_EMULATION)
#define STRATA_LAUNCH(grid, block, sharedBytes, stream, ...)                   \
  ::strata::cuda_emulation::launch(grid, block, sharedBytes, stream,           \
                                   __VA_ARGS__)
#define STRATA_DYNAMIC_SHARED(alignment, name)                                 \
  unsigned char *name = ::strata::cuda_emulation::dynamicShared()
#else
#define STRATA_LAUNCH(grid, block, sharedBytes, stream, ...)                   \
  __VA_ARGS__<<<grid, block, sharedBytes, stream>>>
#define STRATA_DYNAMIC_SHARED(alignment, name)                                 \
  extern __shared__ __align__(alignment) unsigned char name[]
#endif

namespace strata::runtime::cuda {

/// Threads per block of the grid-stride kernels.
inline constexpr int kBlock = 256;

/// Blocks for a grid-stride loop over n elements: enough to fill the GPU a
/// few times over, never more than n needs.
inline unsigned gridFor(const CudaStream &s, int64_t n) {
  int64_t needed = (n + kBlock - 1) / kBlock;
  int64_t cap = int64_t(s.multiProcessors) * 8;
  return unsigned(std::max<int64_t>(1, std::min(needed, cap)));
}

/// Calls fn(T{}) with T the C++ type of float dtype `t` (f32, f64), as the
/// CPU's dispatchFloat does.
template <typename Fn>
Status dispatchFloat(DType t, std::string_view op, Fn &&fn) {
  switch (t) {
  case DType::F32:
    return fn(float{});
  case DType::F64:
    return fn(double{});
  default:
    return Status::error(std::string(op) + ": element type " +
                         std::string(name(t)) + " is not supported");
  }
}

/// Calls fn(T{}) for every storable dtype (i1 as uint8_t).
template <typename Fn>
Status dispatchAll(DType t, std::string_view op, Fn &&fn) {
  switch (t) {
  case DType::F32: return fn(float{});
  case DType::F64: return fn(double{});
  case DType::I64: return fn(int64_t{});
  case DType::I32: return fn(int32_t{});
  case DType::I16: return fn(int16_t{});
  case DType::I8: return fn(int8_t{});
  case DType::I1: return fn(uint8_t{});
  default:
    return Status::error(std::string(op) + ": element type " +
                         std::string(name(t)) + " is not supported");
  }
}

/// Calls fn(I{}) with I the C++ type of an index dtype.
template <typename Fn>
Status dispatchIndex(DType t, std::string_view op, Fn &&fn) {
  switch (t) {
  case DType::I64: return fn(int64_t{});
  case DType::I32: return fn(int32_t{});
  case DType::I16: return fn(int16_t{});
  case DType::I8: return fn(int8_t{});
  default:
    return Status::error(std::string(op) +
                         ": indices must be i64, i32, i16 or i8, got " +
                         std::string(name(t)));
  }
}

/// Up to this many dimensions travel to a kernel by value (shapes and
/// strides of broadcasts, transposes, slices); more is an error.
inline constexpr int kMaxRank = 8;

struct Dims {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
};

/// A launch's stream-ordered scratch buffers (cudaMallocAsync: captured
/// into a CUDA graph as allocation nodes), freed in stream order whatever
/// happens. Outside the memory plan.
class StreamBuffers {
public:
  explicit StreamBuffers(cudaStream_t stream) : stream_(stream) {}
  ~StreamBuffers() {
    for (void *p : buffers_)
      cudaFreeAsync(p, stream_);
  }
  StreamBuffers(const StreamBuffers &) = delete;
  StreamBuffers &operator=(const StreamBuffers &) = delete;

  /// `bytes` (at least one) of device memory, for `what` (the error says).
  Status allocate(size_t bytes, const std::string &what, void *&out) {
    out = nullptr;
    if (Status s = cudaStatus(
            cudaMallocAsync(&out, std::max<size_t>(bytes, 1), stream_),
            what + ": cudaMallocAsync");
        !s)
      return s;
    buffers_.push_back(out);
    return Status::ok();
  }

  cudaStream_t stream() const { return stream_; }

private:
  cudaStream_t stream_;
  std::vector<void *> buffers_;
};

} // namespace strata::runtime::cuda

#endif // STRATA_RUNTIME_CUDA_KERNELS_CUDAKERNELUTILS_CUH
