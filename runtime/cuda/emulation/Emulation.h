//===- Emulation.h - The CUDA emulation's internal interface ----*- C++ -*-===//
//
// Strata's CUDA emulation runs the cuda backend's own sources (CudaDevice.cpp
// and every kernel in runtime/cuda/kernels) as host C++ on the CPU, so that
// the conformance suite and end-to-end runs exercise that code without a GPU.
// The fake toolkit headers in include/ declare the CUDA runtime, cuBLASLt,
// NCCL and CUB functions the backend calls; the .cpp files beside this one
// implement them over host memory:
//  - a stream is a queue of host closures, executed lazily at the next
//    synchronizing call in an order the events allow (Runtime.cpp);
//  - a kernel grid runs one block at a time, every CUDA thread of the block a
//    fiber, switched at __syncthreads / __syncwarp (Grid.cpp);
//  - cuBLASLt's matmul is a plain loop honouring the descriptors
//    (CublasLt.cpp); NCCL's collectives work between the ranks of one host
//    (Nccl.cpp).
// This header is what those files share.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_EMULATION_EMULATION_H
#define STRATA_RUNTIME_CUDA_EMULATION_EMULATION_H

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

namespace strata::cuda_emulation {

/// Runs `work` in stream order on `stream` (nullptr: the legacy default
/// stream): now, lazily at the next synchronization, or at every replay of
/// a graph when `stream` is being captured. `what` names the work in
/// diagnostics. Returns the error the enqueue itself hits (an invalidated
/// capture), never one of `work`.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work,
                    const char *what);

/// Records an asynchronous error, as a failing kernel would: returned by the
/// next synchronizing call (and cudaGetLastError), with `message` printed to
/// stderr once.
void fail(cudaError_t error, const std::string &message);

} // namespace strata::cuda_emulation

#endif // STRATA_RUNTIME_CUDA_EMULATION_EMULATION_H
