//===- OptimizerPlan.cpp - The optimizer updates' checks ------------------===//

#include "strata/Runtime/OptimizerPlan.h"

#include <string>

namespace strata::runtime {

Status planUpdate(const KernelContext &ctx, std::string_view op,
                  size_t perParameter, size_t resultsPerParameter,
                  UpdatePlan &plan) {
  std::string name(op);
  size_t tensors = ctx.inputs.size() < 3 ? 0 : ctx.inputs.size() - 3;
  if (tensors == 0 || tensors % perParameter != 0 ||
      ctx.outputs.size() != tensors / perParameter * resultsPerParameter)
    return Status::error(
        name + ": expected " + std::to_string(perParameter) +
        " tensors per parameter and 3 scalars, and " +
        std::to_string(resultsPerParameter) +
        " results per parameter, got " + std::to_string(ctx.inputs.size()) +
        " operands and " + std::to_string(ctx.outputs.size()) + " results");
  plan.parameters = tensors / perParameter;
  plan.perParameter = perParameter;
  plan.resultsPerParameter = resultsPerParameter;
  plan.scalars = tensors;
  plan.dtype = ctx.inputs[0].dtype;
  if (!isFloat(plan.dtype))
    return Status::error(name + ": the parameter " + ctx.inputs[0].describe() +
                         " is not a float tensor");
  for (size_t p = 0; p < plan.parameters; ++p) {
    const TensorView &param = plan.operand(ctx, p, 0);
    if (param.dtype != plan.dtype)
      return Status::error(name + ": parameter " + std::to_string(p) + " " +
                           param.describe() +
                           " does not share the first parameter's dtype " +
                           ctx.inputs[0].describe());
    for (size_t i = 1; i < perParameter; ++i) {
      const TensorView &t = plan.operand(ctx, p, i);
      if (t.shape != param.shape || t.dtype != param.dtype)
        return Status::error(name + ": " + t.describe() +
                             " does not match the parameter " +
                             param.describe());
    }
    for (size_t i = 0; i < resultsPerParameter; ++i) {
      const TensorView &out = ctx.outputs[p * resultsPerParameter + i];
      if (out.shape != param.shape || out.dtype != param.dtype)
        return Status::error(name + ": result " + out.describe() +
                             " does not match the parameter " +
                             param.describe());
    }
  }
  const TensorView &l = ctx.inputs[tensors], &s = ctx.inputs[tensors + 1],
                   &g = ctx.inputs[tensors + 2];
  if (l.dtype != DType::F64 || l.numel() != 1 || s.dtype != DType::I64 ||
      s.numel() != 1 || g.dtype != DType::F32 || g.numel() != 1)
    return Status::error(name +
                         ": lr must be an f64 scalar, step "
                         "an i64 scalar and grad_scale an f32 scalar");
  return Status::ok();
}

Status checkSumSquares(const KernelContext &ctx) {
  constexpr const char *kOp = "graph.sum_squares";
  if (ctx.inputs.empty() || ctx.outputs.size() != ctx.inputs.size())
    return Status::error(std::string(kOp) +
                         ": expected one scalar result per operand, got " +
                         std::to_string(ctx.inputs.size()) + " operands and " +
                         std::to_string(ctx.outputs.size()) + " results");
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorView &x = ctx.inputs[i], &out = ctx.outputs[i];
    if (out.numel() != 1 || !isFloat(out.dtype))
      return Status::error(std::string(kOp) +
                           ": the result must be a float scalar, got " +
                           out.describe());
    if (!isFloat(x.dtype))
      return Status::error(std::string(kOp) + ": " + x.describe() +
                           " is not a float tensor");
    if (x.dtype != ctx.inputs[0].dtype || out.dtype != ctx.outputs[0].dtype)
      return Status::error(std::string(kOp) + ": operand " +
                           std::to_string(i) + " " + x.describe() + " -> " +
                           out.describe() + " differs in dtype from operand 0 " +
                           ctx.inputs[0].describe() + " -> " +
                           ctx.outputs[0].describe());
  }
  return Status::ok();
}

} // namespace strata::runtime
