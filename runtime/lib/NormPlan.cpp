//===- NormPlan.cpp - layer_norm's and batch_norm's checks ----------------===//

#include "strata/Runtime/NormPlan.h"

#include "strata/Runtime/KernelChecks.h"
#include "strata/Runtime/ShapePlans.h"

#include <initializer_list>
#include <string>
#include <vector>

namespace strata::runtime {
namespace {

Status sameDType(std::string_view op, const TensorView &ref,
                 std::initializer_list<const TensorView *> others) {
  for (const TensorView *t : others)
    if (t->dtype != ref.dtype)
      return Status::error(std::string(op) + ": " + t->describe() +
                           " does not have the element type of " +
                           ref.describe());
  return Status::ok();
}

using shape::product;

} // namespace

Status planLayerNorm(const KernelContext &ctx, LayerNormShape &out) {
  constexpr const char *kOp = "graph.layer_norm";
  if (Status s = checkArity(ctx, kOp, 2, 3, 1); !s)
    return s;
  if (Status s = requireAttributes(ctx, kOp, {"axis", "epsilon"}); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &scale = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  const TensorView &y = ctx.outputs[0];
  if (Status s = sameDType(kOp, x, {&scale, &y, bias ? bias : &x}); !s)
    return s;
  int64_t axis = ctx.attrs.getInt("axis");
  if (axis < 0 || axis >= x.rank())
    return Status::error("graph.layer_norm: axis " + std::to_string(axis) +
                         " must be in [0, " + std::to_string(x.rank()) + ")");
  std::vector<int64_t> normalized(x.shape.begin() + axis, x.shape.end());
  if (scale.shape != normalized || (bias && bias->shape != normalized) ||
      y.shape != x.shape)
    return Status::error("graph.layer_norm: scale and bias must have the "
                         "shape of the normalized dims of " +
                         x.describe());
  out.rows = product(x.shape, 0, size_t(axis));
  out.len = product(x.shape, size_t(axis), x.shape.size());
  out.epsilon = ctx.attrs.getFloat("epsilon");
  out.hasBias = bias != nullptr;
  return Status::ok();
}

Status planBatchNorm(const KernelContext &ctx, BatchNormShape &out) {
  constexpr const char *kOp = "graph.batch_norm";
  if (Status s = checkArity(ctx, kOp, 5, 5, 3); !s)
    return s;
  if (Status s = requireAttributes(ctx, kOp, {"epsilon", "momentum", "training"});
      !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  const TensorView *perChannel[] = {&ctx.inputs[1],  &ctx.inputs[2],
                                    &ctx.inputs[3],  &ctx.inputs[4],
                                    &ctx.outputs[1], &ctx.outputs[2]};
  const TensorView &y = ctx.outputs[0];
  if (x.rank() < 2)
    return Status::error("graph.batch_norm: input must have rank >= 2, got " +
                         x.describe());
  int64_t channels = x.shape[1];
  for (const TensorView *t : perChannel)
    if (t->dtype != x.dtype || t->shape != std::vector<int64_t>{channels})
      return Status::error("graph.batch_norm: per-channel operands and "
                           "results must be " +
                           std::string(name(x.dtype)) + "[" +
                           std::to_string(channels) + "], got " +
                           t->describe());
  if (y.dtype != x.dtype || y.shape != x.shape)
    return Status::error("graph.batch_norm: output must be " + x.describe() +
                         ", got " + y.describe());
  double epsilon = ctx.attrs.getFloat("epsilon");
  double momentum = ctx.attrs.getFloat("momentum");
  bool training = ctx.attrs.getBool("training");
  int64_t batch = x.shape[0];
  int64_t spatial = product(x.shape, 2, x.shape.size());
  int64_t count = batch * spatial;
  // torch.nn.functional.batch_norm raises the same for one value.
  if (training && count <= 1)
    return Status::error("graph.batch_norm: training needs more than 1 value "
                         "per channel, got " +
                         x.describe());
  out = {batch, channels, spatial, count, epsilon, momentum, training};
  return Status::ok();
}

Status planLayerNormGrad(const KernelContext &ctx, LayerNormGradPlan &out) {
  constexpr const char *kOp = "graph.layer_norm_grad";
  if (Status s = checkArity(ctx, kOp, 3, 3, 3); !s)
    return s;
  if (Status s = checkGradDTypes(kOp, ctx); !s)
    return s;
  if (Status s = requireAttributes(ctx, kOp, {"axis", "epsilon"}); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1],
                   &scale = ctx.inputs[2];
  int64_t axis = ctx.attrs.getInt("axis");
  if (axis < 0 || axis >= x.rank() || dy.shape != x.shape ||
      ctx.outputs[0].shape != x.shape)
    return Status::error("graph.layer_norm_grad: gradient " + dy.describe() +
                         " and result " + ctx.outputs[0].describe() +
                         " must have the shape of " + x.describe() +
                         ", axis in [0, rank)");
  std::vector<int64_t> normalized(x.shape.begin() + axis, x.shape.end());
  if (scale.shape != normalized || ctx.outputs[1].shape != normalized ||
      ctx.outputs[2].shape != normalized)
    return Status::error("graph.layer_norm_grad: scale " + scale.describe() +
                         " and its gradients must have the normalized dims "
                         "of " +
                         x.describe());
  out.rows = 1;
  for (int64_t d = 0; d < axis; ++d)
    out.rows *= x.shape[d];
  out.len = 1;
  for (int64_t d = axis; d < x.rank(); ++d)
    out.len *= x.shape[d];
  out.epsilon = ctx.attrs.getFloat("epsilon");
  return Status::ok();
}

Status planBatchNormGrad(const KernelContext &ctx, BatchNormGradPlan &out) {
  constexpr const char *kOp = "graph.batch_norm_grad";
  if (Status s = checkArity(ctx, kOp, 5, 5, 3); !s)
    return s;
  if (Status s = checkGradDTypes(kOp, ctx); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  if (Status s = requireAttributes(ctx, kOp, {"epsilon", "training"}); !s)
    return s;
  if (x.rank() < 2 || dy.shape != x.shape || ctx.outputs[0].shape != x.shape)
    return Status::error("graph.batch_norm_grad: gradient " + dy.describe() +
                         " and result " + ctx.outputs[0].describe() +
                         " must have the shape of " + x.describe() +
                         " (rank >= 2)");
  out.batch = x.shape[0];
  out.channels = x.shape[1];
  out.spatial = 1;
  for (int64_t d = 2; d < x.rank(); ++d)
    out.spatial *= x.shape[d];
  const TensorView *perChannel[] = {&ctx.inputs[2], &ctx.inputs[3],
                                    &ctx.inputs[4], &ctx.outputs[1],
                                    &ctx.outputs[2]};
  for (const TensorView *t : perChannel)
    if (t->shape != std::vector<int64_t>{out.channels})
      return Status::error("graph.batch_norm_grad: per-channel operand " +
                           t->describe() + " does not fit " + x.describe());
  out.training = ctx.attrs.getBool("training");
  out.epsilon = ctx.attrs.getFloat("epsilon");
  if (out.training && out.batch * out.spatial <= 1) // the forward refuses it
    return Status::error("graph.batch_norm_grad: training needs more than 1 "
                         "value per channel, got " +
                         x.describe());
  return Status::ok();
}

} // namespace strata::runtime
