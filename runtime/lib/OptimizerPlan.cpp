//===- OptimizerPlan.cpp - The optimizer updates' checks ------------------===//

#include "strata/Runtime/OptimizerPlan.h"

#include <string>

namespace strata::runtime {

Status checkUpdateTensors(const KernelContext &ctx, std::string_view op,
                          size_t tensors) {
  const TensorView &p = ctx.inputs[0];
  for (size_t i = 1; i < tensors; ++i)
    if (ctx.inputs[i].shape != p.shape || ctx.inputs[i].dtype != p.dtype)
      return Status::error(std::string(op) + ": " + ctx.inputs[i].describe() +
                           " does not match the parameter " + p.describe());
  for (const TensorView &out : ctx.outputs)
    if (out.shape != p.shape || out.dtype != p.dtype)
      return Status::error(std::string(op) + ": result " + out.describe() +
                           " does not match the parameter " + p.describe());
  return Status::ok();
}

Status checkUpdateScalars(const KernelContext &ctx, std::string_view op,
                          size_t first) {
  const TensorView &l = ctx.inputs[first], &s = ctx.inputs[first + 1],
                   &g = ctx.inputs[first + 2];
  if (l.dtype != DType::F64 || l.numel() != 1 || s.dtype != DType::I64 ||
      s.numel() != 1 || g.dtype != DType::F32 || g.numel() != 1)
    return Status::error(std::string(op) +
                         ": lr must be an f64 scalar, step "
                         "an i64 scalar and grad_scale an f32 scalar");
  return Status::ok();
}

} // namespace strata::runtime
