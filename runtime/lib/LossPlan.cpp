//===- LossPlan.cpp - graph.cross_entropy's checks ------------------------===//

#include "strata/Runtime/LossPlan.h"

#include "strata/Runtime/KernelChecks.h"
#include "strata/Runtime/ShapePlans.h"

#include <string>
#include <vector>

namespace strata::runtime {
namespace {

using shape::product;

} // namespace

Status planCrossEntropy(const KernelContext &ctx, CrossEntropyShape &out) {
  if (Status s = checkArity(ctx, "graph.cross_entropy", 2, 3, 1); !s)
    return s;
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1];
  const TensorView *weight = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  const TensorView &loss = ctx.outputs[0];
  if (loss.dtype != logits.dtype || (weight && weight->dtype != logits.dtype))
    return Status::error("graph.cross_entropy: logits, weight and loss must "
                         "share one element type");
  if (isFloat(labels.dtype))
    return Status::error("graph.cross_entropy: labels must be integers, got " +
                         labels.describe());
  if (logits.rank() < 2)
    return Status::error("graph.cross_entropy: logits must have rank >= 2 "
                         "[N, C, ...], got " +
                         logits.describe());
  int64_t classes = logits.shape[1];
  std::vector<int64_t> labelShape{logits.shape[0]};
  labelShape.insert(labelShape.end(), logits.shape.begin() + 2,
                    logits.shape.end());
  if (labels.shape != labelShape)
    return Status::error("graph.cross_entropy: labels " + labels.describe() +
                         " do not fit logits " + logits.describe());
  if (weight && weight->shape != std::vector<int64_t>{classes})
    return Status::error("graph.cross_entropy: weight must have shape [" +
                         std::to_string(classes) + "], got " +
                         weight->describe());
  std::string reduction = ctx.attrs.getString("reduction", "mean");
  bool none = reduction == "none";
  if (!none && reduction != "mean" && reduction != "sum")
    return Status::error("graph.cross_entropy: reduction must be \"mean\", "
                         "\"sum\" or \"none\", got \"" +
                         reduction + "\"");
  if (loss.shape != (none ? labelShape : std::vector<int64_t>{}))
    return Status::error("graph.cross_entropy: loss has the wrong shape " +
                         loss.describe());
  out.batch = logits.shape[0];
  out.classes = classes;
  out.positions = labels.numel();
  out.spatial = out.positions / (out.batch > 0 ? out.batch : 1);
  out.none = none;
  out.sum = reduction == "sum";
  out.hasWeight = weight != nullptr;
  out.hasIgnore = ctx.attrs.has("ignore_index");
  out.ignoreIndex = ctx.attrs.getInt("ignore_index");
  return Status::ok();
}

Status planCrossEntropyGrad(const KernelContext &ctx,
                            CrossEntropyShape &out) {
  constexpr const char *kOp = "graph.cross_entropy_grad";
  if (Status s = checkArity(ctx, kOp, 3, 4, 1); !s)
    return s;
  const TensorView &dloss = ctx.inputs[0], &logits = ctx.inputs[1],
                   &labels = ctx.inputs[2];
  const TensorView *weight = ctx.inputs.size() > 3 ? &ctx.inputs[3] : nullptr;
  const TensorView &dx = ctx.outputs[0];
  if (logits.rank() < 2 || dx.shape != logits.shape ||
      dx.dtype != logits.dtype || dloss.dtype != logits.dtype ||
      (weight && weight->dtype != logits.dtype))
    return Status::error("graph.cross_entropy_grad: the loss gradient, "
                         "weight and result must have the type of logits " +
                         logits.describe() +
                         " [N, C, ...], the result its "
                         "shape");
  int64_t batch = logits.shape[0], classes = logits.shape[1];
  int64_t spatial = product(logits.shape, 2, logits.shape.size());
  std::string reduction = ctx.attrs.getString("reduction", "mean");
  bool none = reduction == "none";
  if (!none && reduction != "mean" && reduction != "sum")
    return Status::error("graph.cross_entropy_grad: reduction must be "
                         "\"mean\", \"sum\" or \"none\", got \"" +
                         reduction + "\"");
  std::vector<int64_t> labelShape{batch};
  labelShape.insert(labelShape.end(), logits.shape.begin() + 2,
                    logits.shape.end());
  if (labels.shape != labelShape || isFloat(labels.dtype) ||
      (none ? dloss.shape != labelShape : dloss.numel() != 1))
    return Status::error("graph.cross_entropy_grad: labels " +
                         labels.describe() + " or loss gradient " +
                         dloss.describe() + " do not fit " + logits.describe());
  if (weight && weight->shape != std::vector<int64_t>{classes})
    return Status::error("graph.cross_entropy_grad: weight must have shape [" +
                         std::to_string(classes) + "], got " +
                         weight->describe());
  out.batch = batch;
  out.classes = classes;
  out.spatial = spatial;
  out.positions = batch * spatial;
  out.none = none;
  out.sum = reduction == "sum";
  out.hasWeight = weight != nullptr;
  out.hasIgnore = ctx.attrs.has("ignore_index");
  out.ignoreIndex = ctx.attrs.getInt("ignore_index");
  return Status::ok();
}

} // namespace strata::runtime
