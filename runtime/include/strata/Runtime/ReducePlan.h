//===- ReducePlan.h - How a reduction walks its input, for every backend -*- C++ -*-===//
//
// graph.reduce_sum / reduce_mean / reduce_max split the input's dims into
// kept and reduced runs (size-1 dims dropped, neighbours of one kind
// merged). The CPU and CUDA kernels take that plan, and its checks and
// messages, from here. Plain data, so a CUDA kernel takes it by value.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_REDUCEPLAN_H
#define STRATA_RUNTIME_REDUCEPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>
#include <string_view>

namespace strata::runtime::reduce {

/// Room for the collapsed kept or reduced dims; those alternate after
/// collapsing, so this covers inputs of rank up to 31.
inline constexpr int kMaxRuns = 16;

/// Sizes and strides (in input elements) of a group of dims.
struct Runs {
  int count = 0;
  int64_t sizes[kMaxRuns] = {};
  int64_t strides[kMaxRuns] = {};
};

/// The input's dims split into kept and reduced runs, size-1 dims dropped
/// and neighbours of one kind merged (row-major, so they always merge).
struct ReducePlan {
  Runs kept, reduced;
  int64_t reduceCount = 1;
  /// True if the input's innermost non-trivial dim is kept: a kernel then
  /// walks contiguous rows and keeps one accumulator per row element.
  bool innerKept = false;
};

/// Checks the instruction (one operand, one result of the same type, axes
/// in range and distinct, the result shape with or without keepdims) and
/// plans it.
Status planReduce(std::string_view op, const KernelContext &ctx,
                  ReducePlan &plan);

} // namespace strata::runtime::reduce

#endif // STRATA_RUNTIME_REDUCEPLAN_H
