//===- ReducePlan.cpp - How a reduction walks its input, for every backend ===//

#include "strata/Runtime/ReducePlan.h"
#include "strata/Runtime/KernelChecks.h"

#include <string>
#include <vector>

namespace strata::runtime::reduce {

Status planReduce(std::string_view op, const KernelContext &ctx,
                  ReducePlan &plan) {
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  if (x.dtype != y.dtype)
    return Status::error(std::string(op) + ": element types differ (" +
                         x.describe() + " vs " + y.describe() + ")");
  std::vector<bool> reduced(x.shape.size(), false); // scratch
  for (int64_t axis : ctx.attrs.getInts("axes")) {
    if (axis < 0 || axis >= x.rank())
      return Status::error(std::string(op) + ": axis " + std::to_string(axis) +
                           " must be in [0, " + std::to_string(x.rank()) + ")");
    if (reduced[axis])
      return Status::error(std::string(op) + ": axis " + std::to_string(axis) +
                           " repeats");
    reduced[axis] = true;
  }
  // The result shape of inferReduceType; keepdims defaults to true.
  bool keepdims = ctx.attrs.getBool("keepdims", true);
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (!reduced[d])
      shape.push_back(x.shape[d]);
    else if (keepdims)
      shape.push_back(1);
  if (shape != y.shape) {
    TensorView expected = y;
    expected.shape = shape;
    return Status::error(std::string(op) + ": expected result " +
                         expected.describe() + ", got " + y.describe());
  }

  std::vector<int64_t> strides = rowMajorStrides(x.shape);
  int lastKind = -1; // 0 kept, 1 reduced
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (x.shape[d] == 1)
      continue;
    Runs &runs = reduced[d] ? plan.reduced : plan.kept;
    int kind = reduced[d] ? 1 : 0;
    if (kind == lastKind) {
      runs.sizes[runs.count - 1] *= x.shape[d];
      runs.strides[runs.count - 1] = strides[d];
      continue;
    }
    if (runs.count == kMaxRuns)
      return Status::error(std::string(op) + ": input rank " +
                           std::to_string(x.rank()) + " is too large");
    runs.sizes[runs.count] = x.shape[d];
    runs.strides[runs.count] = strides[d];
    ++runs.count;
    lastKind = kind;
  }
  for (int i = 0; i < plan.reduced.count; ++i)
    plan.reduceCount *= plan.reduced.sizes[i];
  plan.innerKept = lastKind == 0 && plan.reduced.count > 0;
  return Status::ok();
}

} // namespace strata::runtime::reduce
