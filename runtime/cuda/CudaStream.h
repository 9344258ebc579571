//===- CudaStream.h - What a CUDA kernel launches on ------------*- C++ -*-===//
//
// Private to runtime/cuda. The CUDA device hands every kernel, as
// KernelContext::stream, its CudaStream for the schedule stream the
// instruction runs on: the cudaStream_t, that stream's cuBLASLt handle and
// workspace, and the device's properties kernels size their grids by. A
// kernel enqueues its work there and returns; it never synchronizes.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_CUDASTREAM_H
#define STRATA_RUNTIME_CUDA_CUDASTREAM_H

#include "strata/Runtime/Kernel.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

namespace strata::runtime::cuda {

/// Failures of work the host does in stream order (cudaLaunchHostFunc: the
/// SSD tier's reads and writes), reported by the device's next
/// synchronize.
struct HostWorkErrors {
  std::mutex mutex;
  std::string first;
  void add(const std::string &message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (first.empty())
      first = message;
  }
};

struct CudaStream {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  /// cuBLASLt's workspace for this stream (one per stream: two streams'
  /// matmuls may run at once).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  int multiProcessors = 1;
  /// Shared memory a block may opt in to (the device property
  /// sharedMemPerBlockOptin), read once.
  size_t sharedPerBlockOptin = 48 * 1024;
  int ordinal = 0;
  /// f32 matmuls may use TF32 tensor cores (strata-run --tf32).
  bool tf32 = false;
  /// Pinned host memory the SSD tier's moves on this stream pass through,
  /// a chunk at a time (the stream orders its uses).
  void *bounce = nullptr;
  size_t bounceBytes = 0;
  HostWorkErrors *hostErrors = nullptr;
  /// The device's NCCL communicators by channel and group kind (at
  /// channel * kGroups + Topology.h's Group), as ncclComm_t; null where the
  /// run has none (one rank).
  void *const *collectives = nullptr;
};

/// The CudaStream of a launch (ctx.stream is never null on this backend).
inline const CudaStream &streamOf(const KernelContext &ctx) {
  return *static_cast<const CudaStream *>(ctx.stream);
}

/// The NCCL communicator (an ncclComm_t) of a collective's group on its
/// stream's channel, or null.
inline void *communicatorOf(const KernelContext &ctx) {
  const CudaStream &s = streamOf(ctx);
  return s.collectives ? s.collectives[ctx.channel * kGroups + int(ctx.group)]
                       : nullptr;
}

/// "<what>: <CUDA's name for the error> (<its description>)".
inline Status cudaStatus(cudaError_t error, const std::string &what) {
  if (error == cudaSuccess)
    return Status::ok();
  return Status::error(what + ": " + cudaGetErrorName(error) + " (" +
                       cudaGetErrorString(error) + ")");
}

/// A kernel launch's configuration error, if any (cudaGetLastError after
/// the <<<>>>; the kernel's own failures surface at the synchronize).
inline Status launchStatus(const std::string &op) {
  return cudaStatus(cudaGetLastError(), op + ": kernel launch");
}

inline Status cublasStatus(cublasStatus_t status, const std::string &what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(what + ": cuBLASLt status " +
                       std::to_string(int(status)) + " (" +
                       cublasLtGetStatusName(status) + ": " +
                       cublasLtGetStatusString(status) + ")");
}

} // namespace strata::runtime::cuda

#endif // STRATA_RUNTIME_CUDA_CUDASTREAM_H
