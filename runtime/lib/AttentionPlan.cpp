//===- AttentionPlan.cpp - Attention's checks -----------------------------===//

#include "strata/Runtime/AttentionPlan.h"

#include "strata/Runtime/KernelChecks.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

namespace strata::runtime {
namespace {

/// The mask's strides over the scores [..., s, t] (0 where it broadcasts)
/// into `strides`; false when it does not broadcast to them.
bool maskStridesOf(const TensorView &mask, const std::vector<int64_t> &batch,
                   int64_t s, int64_t t, std::vector<int64_t> &strides) {
  std::vector<int64_t> scores = batch;
  scores.push_back(s);
  scores.push_back(t);
  int64_t rank = int64_t(scores.size());
  strides.assign(size_t(rank), 0);
  if (mask.rank() > rank)
    return false;
  std::vector<int64_t> own = rowMajorStrides(mask.shape);
  int64_t offset = rank - mask.rank();
  for (int64_t i = 0; i < mask.rank(); ++i) {
    int64_t md = mask.shape[i], sd = scores[offset + i];
    if (md != sd && md != 1)
      return false;
    strides[offset + i] = md == 1 ? 0 : own[i];
  }
  return true;
}

/// The plan's fields once the checks passed.
void fill(const KernelContext &ctx, DType dtype, std::vector<int64_t> batch,
          int64_t s, int64_t t, int64_t d, int64_t dv, bool hasMask,
          std::vector<int64_t> maskStrides, double ratio, AttentionPlan &g) {
  g.dtype = dtype;
  g.batches = 1;
  for (int64_t dim : batch)
    g.batches *= dim;
  g.batchShape = std::move(batch);
  g.s = s;
  g.t = t;
  g.d = d;
  g.dv = dv;
  g.hasMask = hasMask;
  g.maskStrides = std::move(maskStrides);
  g.ratio = ratio;
  g.causal = ctx.attrs.getBool("causal", false);
  g.scale = ctx.attrs.getFloat("scale");
  g.headsInner = ctx.attrs.getBool("heads_inner", false);
  g.heads = g.headsInner ? g.batchShape.back() : 1;
  g.keepProbabilities = ctx.attrs.getBool("keep_probabilities", false);
}

/// The probabilities' checks: [batch..., s, t] (the scores' order) in the
/// element type.
Status checkProbabilities(const char *op, const TensorView &p, DType dtype,
                          const std::vector<int64_t> &batch, int64_t s,
                          int64_t t) {
  std::vector<int64_t> expected = batch;
  expected.push_back(s);
  expected.push_back(t);
  if (p.shape != expected || p.dtype != dtype)
    return Status::error(std::string(op) + ": probabilities " + p.describe() +
                         " must have the scores' shape and the element type");
  return Status::ok();
}

/// An operand's shape as the checks see it: [..., H, S, D] with
/// heads_inner ([..., S, H, D] in memory), the shape itself otherwise.
std::vector<int64_t> logicalShape(const KernelContext &ctx,
                                  const std::vector<int64_t> &shape) {
  std::vector<int64_t> out = shape;
  if (ctx.attrs.getBool("heads_inner", false) && out.size() >= 3)
    std::swap(out[out.size() - 3], out[out.size() - 2]);
  return out;
}

/// Query, key and value as both kernels' checks see them: their logical
/// shapes (logicalShape), the sizes and the batch dims.
struct Operands {
  std::vector<int64_t> ks, vs, batch;
  int64_t s = 0, t = 0, d = 0, dv = 0;
};

/// Query, key and value must share one rank of at least 2 (3 with
/// heads_inner); `o` on success. Whether their dims fit is the caller's.
Status readOperands(const KernelContext &ctx, const char *op,
                    const TensorView &q, const TensorView &k,
                    const TensorView &v, Operands &o) {
  int64_t rank = q.rank();
  int64_t least = ctx.attrs.getBool("heads_inner", false) ? 3 : 2;
  if (rank < least || k.rank() != rank || v.rank() != rank)
    return Status::error(std::string(op) + ": query, key and value must "
                         "have one rank >= " + std::to_string(least));
  std::vector<int64_t> qs = logicalShape(ctx, q.shape);
  o.ks = logicalShape(ctx, k.shape);
  o.vs = logicalShape(ctx, v.shape);
  o.s = qs[rank - 2];
  o.d = qs[rank - 1];
  o.t = o.ks[rank - 2];
  o.dv = o.vs[rank - 1];
  o.batch.assign(qs.begin(), qs.end() - 2);
  return Status::ok();
}

} // namespace

Status planAttention(const KernelContext &ctx, AttentionPlan &g) {
  constexpr const char *kOp = "graph.attention";
  bool keep = ctx.attrs.getBool("keep_probabilities", false);
  if (Status s = checkArity(ctx, kOp, 3, 4, keep ? 2 : 1); !s)
    return s;
  if (!ctx.attrs.has("scale"))
    return Status::error("graph.attention: missing attribute 'scale'");
  const TensorView &q = ctx.inputs[0], &k = ctx.inputs[1], &v = ctx.inputs[2];
  const TensorView *mask = ctx.inputs.size() > 3 ? &ctx.inputs[3] : nullptr;
  const TensorView &out = ctx.outputs[0];
  if (k.dtype != q.dtype || v.dtype != q.dtype || out.dtype != q.dtype ||
      (mask && mask->dtype != q.dtype))
    return Status::error("graph.attention: operands and result must share "
                         "one element type");
  Operands o;
  if (Status st = readOperands(ctx, kOp, q, k, v, o); !st)
    return st;
  const int64_t rank = q.rank(), s = o.s, t = o.t, d = o.d, dv = o.dv;
  const std::vector<int64_t> &ks = o.ks, &vs = o.vs;
  std::vector<int64_t> batchShape = std::move(o.batch);
  if (!std::equal(batchShape.begin(), batchShape.end(), ks.begin()) ||
      !std::equal(batchShape.begin(), batchShape.end(), vs.begin()) ||
      ks[rank - 1] != d || vs[rank - 2] != t)
    return Status::error("graph.attention: query " + q.describe() + ", key " +
                         k.describe() + " and value " + v.describe() +
                         " do not fit");
  std::vector<int64_t> expected = batchShape;
  expected.push_back(s);
  expected.push_back(dv);
  if (logicalShape(ctx, out.shape) != expected)
    return Status::error("graph.attention: result shape does not fit, got " +
                         out.describe());
  std::vector<int64_t> maskStrides(rank, 0);
  if (mask && !maskStridesOf(*mask, batchShape, s, t, maskStrides))
    return Status::error("graph.attention: mask " + mask->describe() +
                         " does not broadcast to the scores");
  double ratio = ctx.attrs.getFloat("dropout_ratio", 0.0);
  if (!(ratio >= 0 && ratio < 1))
    return Status::error("graph.attention: dropout_ratio must be in [0, 1)");
  for (int64_t dim : {s, t, d, dv})
    if (dim > INT_MAX)
      return Status::error("graph.attention: sizes exceed BLAS int range");
  if (keep)
    if (Status st = checkProbabilities(kOp, ctx.outputs[1], q.dtype,
                                       batchShape, s, t);
        !st)
      return st;
  fill(ctx, q.dtype, std::move(batchShape), s, t, d, dv, mask != nullptr,
       std::move(maskStrides), ratio, g);
  return Status::ok();
}

Status planAttentionGrad(const KernelContext &ctx, AttentionPlan &g) {
  constexpr const char *kOp = "graph.attention_grad";
  // keep_probabilities: the forward's probabilities come last.
  size_t keep = ctx.attrs.getBool("keep_probabilities", false) ? 1 : 0;
  if (Status s = checkArity(ctx, kOp, 4 + keep, 5 + keep, 3); !s)
    return s;
  if (Status s = checkGradDTypes(kOp, ctx); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &q = ctx.inputs[1], &k = ctx.inputs[2],
                   &v = ctx.inputs[3];
  const TensorView *mask =
      ctx.inputs.size() > 4 + keep ? &ctx.inputs[4] : nullptr;
  if (Status s = requireAttributes(ctx, kOp, {"scale"}); !s)
    return s;
  Operands o;
  if (Status st = readOperands(ctx, kOp, q, k, v, o); !st)
    return st;
  const int64_t rank = q.rank(), s = o.s, t = o.t, d = o.d, dv = o.dv;
  const std::vector<int64_t> &ks = o.ks, &vs = o.vs;
  std::vector<int64_t> batchShape = std::move(o.batch);
  std::vector<int64_t> outShape = batchShape;
  outShape.push_back(s);
  outShape.push_back(dv);
  if (!std::equal(batchShape.begin(), batchShape.end(), ks.begin()) ||
      !std::equal(batchShape.begin(), batchShape.end(), vs.begin()) ||
      ks[rank - 1] != d || vs[rank - 2] != t ||
      logicalShape(ctx, dy.shape) != outShape ||
      ctx.outputs[0].shape != q.shape ||
      ctx.outputs[1].shape != k.shape || ctx.outputs[2].shape != v.shape)
    return Status::error("graph.attention_grad: gradient " + dy.describe() +
                         ", query " + q.describe() + ", key " + k.describe() +
                         " and value " + v.describe() +
                         " do not fit (results: their operands' shapes)");
  for (int64_t dim : {s, t, d, dv})
    if (dim > INT_MAX)
      return Status::error("graph.attention_grad: sizes exceed BLAS int range");
  std::vector<int64_t> maskStrides(rank, 0);
  if (mask && !maskStridesOf(*mask, batchShape, s, t, maskStrides))
    return Status::error("graph.attention_grad: mask does not broadcast");
  double ratio = ctx.attrs.getFloat("dropout_ratio", 0.0);
  if (!(ratio >= 0 && ratio < 1))
    return Status::error("graph.attention_grad: dropout_ratio must be in "
                         "[0, 1)");
  if (keep)
    if (Status st = checkProbabilities(kOp, ctx.inputs.back(), q.dtype,
                                       batchShape, s, t);
        !st)
      return st;
  fill(ctx, q.dtype, std::move(batchShape), s, t, d, dv, mask != nullptr,
       std::move(maskStrides), ratio, g);
  g.probabilities = keep ? int64_t(ctx.inputs.size()) - 1 : -1;
  return Status::ok();
}

MaskLayout maskLayout(const AttentionPlan &plan) {
  MaskLayout out;
  size_t rank = plan.maskStrides.size();
  if (rank < 2)
    return out;
  out.row = plan.maskStrides[rank - 2];
  out.col = plan.maskStrides[rank - 1];
  for (size_t i = 0; i + 2 < rank; ++i) {
    int64_t size = plan.batchShape[i], stride = plan.maskStrides[i];
    if (size == 1)
      continue;
    if (!out.sizes.empty() && out.strides.back() == stride * size) {
      out.sizes.back() *= size;
      out.strides.back() = stride;
      continue;
    }
    out.sizes.push_back(size);
    out.strides.push_back(stride);
  }
  return out;
}

} // namespace strata::runtime
