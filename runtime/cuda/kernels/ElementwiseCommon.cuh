//===- ElementwiseCommon.cuh - Helpers of the data-movement kernels -*- CUDA -*-===//
//
// Private to the elementwise, elementwise-gradient, shape, shape-gradient and
// reduction families (ElementwiseKernels.cu ... ReductionKernels.cu): the
// grid-stride loop, numpy broadcasting and strided copies described by
// value. The per-element math (mathExp, stdMax, unaryFormula, ...) is the
// CPU's, from strata/Runtime/ElementwiseFormulas.h.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_ELEMENTWISECOMMON_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_ELEMENTWISECOMMON_CUH

#include "CudaKernelUtils.cuh"

#include "strata/Runtime/ElementwiseFormulas.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace strata::runtime::cuda {

/// Every element index of [0, n), 64-bit, over the whole grid.
#define STRATA_GRID_STRIDE(i, n)                                               \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);     \
       i += int64_t(gridDim.x) * blockDim.x)

//===----------------------------------------------------------------------===//
// Host-side checks the CPU kernels leave to the compiler
//===----------------------------------------------------------------------===//

/// The CPU kernel writes `count` elements of `dtype` into `out` without
/// looking; a device kernel must not write past a buffer, so it checks
/// (an artifact the compiler verified always passes).
inline Status checkResultFits(std::string_view op, const TensorView &out,
                              DType dtype, const std::vector<int64_t> &shape) {
  TensorView want;
  want.dtype = dtype;
  want.shape = shape;
  if (out.dtype == dtype && out.numel() == want.numel())
    return Status::ok();
  return Status::error(std::string(op) + ": expected result " +
                       want.describe() + ", got " + out.describe());
}

inline Status checkSameElementType(std::string_view op, const TensorView &a,
                                   const TensorView &b) {
  if (a.dtype == b.dtype)
    return Status::ok();
  return Status::error(std::string(op) + ": element types differ (" +
                       a.describe() + " vs " + b.describe() + ")");
}

inline Status tooManyDims(std::string_view op, size_t dims) {
  return Status::error(std::string(op) + ": " + std::to_string(dims) +
                       " dims after merging, more than the " +
                       std::to_string(kMaxRank) + " the CUDA kernels take");
}

//===----------------------------------------------------------------------===//
// Broadcasting: up to three operands against one result shape
//===----------------------------------------------------------------------===//

inline constexpr int kMaxOperands = 3;

/// The result's dims (size-1 dims dropped, dims every operand walks as one
/// merged) and, per operand, its stride in each (0: broadcast).
struct Broadcast {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxOperands][kMaxRank] = {};
};

/// Plans numpy broadcasting of `ins` (right-aligned) to `out` with the
/// index rule of the CPU's broadcastIndexMap. An operand of one element
/// broadcasts to anything (the CPU's scalar fast path); any other operand
/// must broadcast by numpy's rules, which the CPU assumes and the device,
/// reading by computed offsets, checks.
inline Status planBroadcast(std::string_view op,
                            const std::vector<const TensorView *> &ins,
                            const TensorView &out, Broadcast &plan) {
  size_t rank = out.shape.size();
  size_t count = ins.size();
  // Per result dim, every operand's stride.
  std::vector<std::vector<int64_t>> strides(rank,
                                            std::vector<int64_t>(count, 0));
  for (size_t k = 0; k < count; ++k) {
    const TensorView &in = *ins[k];
    if (in.shape == out.shape) {
      std::vector<int64_t> s = rowMajorStrides(in.shape);
      for (size_t d = 0; d < rank; ++d)
        strides[d][k] = s[d];
      continue;
    }
    if (in.numel() == 1)
      continue; // all zero
    std::string bad = std::string(op) + ": cannot broadcast " + in.describe() +
                      " to " + out.describe();
    if (in.shape.size() > rank)
      return Status::error(bad);
    std::vector<int64_t> s = rowMajorStrides(in.shape);
    size_t lead = rank - in.shape.size();
    for (size_t d = 0; d < in.shape.size(); ++d) {
      if (in.shape[d] == out.shape[d + lead])
        strides[d + lead][k] = in.shape[d] == 1 ? 0 : s[d];
      else if (in.shape[d] != 1)
        return Status::error(bad);
    }
  }
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> merged;
  for (size_t d = 0; d < rank; ++d) {
    if (out.shape[d] == 1)
      continue;
    bool mergeable = !sizes.empty();
    for (size_t k = 0; mergeable && k < count; ++k)
      mergeable = merged.back()[k] == strides[d][k] * out.shape[d];
    if (mergeable) {
      sizes.back() *= out.shape[d];
      merged.back() = strides[d];
      continue;
    }
    sizes.push_back(out.shape[d]);
    merged.push_back(strides[d]);
  }
  if (sizes.size() > size_t(kMaxRank))
    return tooManyDims(op, sizes.size());
  plan = Broadcast();
  plan.rank = int(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    plan.size[d] = sizes[d];
    for (size_t k = 0; k < count; ++k)
      plan.stride[k][d] = merged[d][k];
  }
  return Status::ok();
}

/// The offsets in the first `Count` operands of result element `i`.
template <int Count>
__device__ inline void broadcastOffsets(const Broadcast &b, int64_t i,
                                        int64_t (&offset)[Count]) {
#pragma unroll
  for (int k = 0; k < Count; ++k)
    offset[k] = 0;
  for (int d = b.rank - 1; d >= 0; --d) {
    int64_t c = i;
    if (d > 0) {
      c = i % b.size[d];
      i /= b.size[d];
    }
#pragma unroll
    for (int k = 0; k < Count; ++k)
      offset[k] += c * b.stride[k][d];
  }
}

//===----------------------------------------------------------------------===//
// Byte moves
//===----------------------------------------------------------------------===//

/// Calls fn(W{}) with W an unsigned integer as wide as one element of
/// `dtype`: the shape kernels move elements as bits (every dtype, NaN
/// payloads kept), as the CPU's memcpy does.
template <typename Fn> Status dispatchWidth(DType dtype, Fn &&fn) {
  switch (byteWidth(dtype)) {
  case 1: return fn(uint8_t{});
  case 2: return fn(uint16_t{});
  case 4: return fn(uint32_t{});
  case 8: return fn(uint64_t{});
  default:
    return Status::error("element type " + std::string(name(dtype)) +
                         " has no width");
  }
}

/// The offset in the input of result element `i` of a strided copy:
/// base + sum c[d] * d.stride[d] over the result coordinate c in d.size.
__device__ inline int64_t stridedOffset(const Dims &d, int64_t base,
                                        int64_t i) {
  int64_t offset = base;
  for (int k = d.rank - 1; k > 0; --k) {
    offset += (i % d.size[k]) * d.stride[k];
    i /= d.size[k];
  }
  if (d.rank > 0)
    offset += i * d.stride[0];
  return offset;
}

/// The CPU's copyStrided plan: the result's dims with size-1 dims dropped
/// and dims that walk the input as one merged.
inline Status planStrided(std::string_view op, const std::vector<int64_t> &shape,
                          const std::vector<int64_t> &strides, Dims &plan) {
  std::vector<int64_t> sizes, steps;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!sizes.empty() && steps.back() == strides[d] * shape[d]) {
      sizes.back() *= shape[d];
      steps.back() = strides[d];
      continue;
    }
    sizes.push_back(shape[d]);
    steps.push_back(strides[d]);
  }
  if (sizes.size() > size_t(kMaxRank))
    return tooManyDims(op, sizes.size());
  plan = Dims();
  plan.rank = int(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    plan.size[d] = sizes[d];
    plan.stride[d] = steps[d];
  }
  return Status::ok();
}

} // namespace strata::runtime::cuda

#endif // STRATA_RUNTIME_CUDA_KERNELS_ELEMENTWISECOMMON_CUH
