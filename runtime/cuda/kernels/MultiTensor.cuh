//===- MultiTensor.cuh - Kernels over many tensors at once -----*- CUDA -*-===//
//
// Private to runtime/cuda: a multi-tensor instruction (graph.adamw_update,
// graph.sgd_update or graph.sum_squares over many parameters) launches one
// kernel per batch of up to kMaxBatchTensors tensors, their pointers passed
// by value (no device-side table to build or keep alive; a captured CUDA
// graph holds the parameters). Each tensor takes a run of the grid's
// blocks; a block finds its tensor by scanning the batch's prefix of block
// counts.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_MULTITENSOR_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_MULTITENSOR_CUH

#include "CudaKernelUtils.cuh"

#include <cstdint>

namespace strata::runtime::cuda {

/// Tensors per launch. A batch of AdamW's seven pointers per tensor stays
/// under the classic 4 KB kernel-parameter limit.
inline constexpr int kMaxBatchTensors = 32;

/// Which blocks of a launch belong to which tensor of its batch.
struct BatchBlocks {
  int count = 0;
  /// Tensor t owns blocks [first[t], first[t + 1]).
  int64_t first[kMaxBatchTensors + 1] = {};

  /// Appends a tensor of `blocks` blocks.
  __host__ void add(int64_t blocks) {
    first[count + 1] = first[count] + blocks;
    ++count;
  }
  __host__ int64_t total() const { return first[count]; }
  __device__ int tensorOf(int64_t block) const {
    int t = 0;
    while (block >= first[t + 1])
      ++t;
    return t;
  }
};

/// Calls launch(begin, end) for consecutive runs [begin, end) of at most
/// kMaxBatchTensors of `tensors` tensors; stops at the first error.
template <typename Fn> Status forEachBatch(size_t tensors, Fn &&launch) {
  for (size_t begin = 0; begin < tensors; begin += kMaxBatchTensors) {
    size_t end = begin + kMaxBatchTensors < tensors ? begin + kMaxBatchTensors
                                                    : tensors;
    if (Status s = launch(begin, end); !s)
      return s;
  }
  return Status::ok();
}

} // namespace strata::runtime::cuda

#endif // STRATA_RUNTIME_CUDA_KERNELS_MULTITENSOR_CUH
