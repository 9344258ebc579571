//===- GemmPlan.cpp - The products' checks --------------------------------===//

#include "strata/Runtime/GemmPlan.h"

#include "strata/Runtime/KernelChecks.h"
#include "strata/Runtime/ShapePlans.h"
#include "strata/Runtime/Tensor.h"

#include <algorithm>
#include <climits>
#include <string>

namespace strata::runtime {

bool fitsBlas(std::initializer_list<int64_t> sizes) {
  return std::all_of(sizes.begin(), sizes.end(),
                     [](int64_t s) { return s >= 0 && s <= INT_MAX; });
}

bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

Status planMatmul(const KernelContext &ctx, MatmulPlan &out) {
  constexpr const char *kOp = "graph.matmul";
  if (Status s = checkArity(ctx, kOp, 2, 2, 1); !s)
    return s;
  const TensorView &lhs = ctx.inputs[0], &rhs = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  if (lhs.dtype != rhs.dtype || y.dtype != lhs.dtype)
    return Status::error(
        "graph.matmul: element types differ: " + lhs.describe() + ", " +
        rhs.describe() + " -> " + y.describe());
  if (lhs.rank() < 2 || rhs.rank() < 2)
    return Status::error("graph.matmul: operands must have rank >= 2, got " +
                         lhs.describe() + " and " + rhs.describe());
  out.m = lhs.shape[lhs.rank() - 2];
  out.k = lhs.shape.back();
  out.n = rhs.shape.back();
  out.lhsBatch.assign(lhs.shape.begin(), lhs.shape.end() - 2);
  out.rhsBatch.assign(rhs.shape.begin(), rhs.shape.end() - 2);
  if (rhs.shape[rhs.rank() - 2] != out.k ||
      !broadcastShapes(out.lhsBatch, out.rhsBatch, out.batch))
    return Status::error("graph.matmul: " + lhs.describe() + " x " +
                         rhs.describe() + " is not a matrix product");
  std::vector<int64_t> expected = out.batch;
  expected.push_back(out.m);
  expected.push_back(out.n);
  if (y.shape != expected)
    return Status::error("graph.matmul: result must have shape " +
                         shapeString(expected) + ", got " + y.describe());
  if (!fitsBlas({out.m, out.n, out.k}))
    return Status::error("graph.matmul: matrix sizes exceed BLAS int range");
  return Status::ok();
}

Status planLinear(const KernelContext &ctx, LinearPlan &out) {
  constexpr const char *kOp = "graph.linear";
  if (Status s = checkArity(ctx, kOp, 2, 3, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &w = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  const TensorView &y = ctx.outputs[0];
  if (w.dtype != x.dtype || y.dtype != x.dtype ||
      (bias && bias->dtype != x.dtype))
    return Status::error("graph.linear: operands and result must share one "
                         "element type");
  out.transposed = ctx.attrs.getBool("transpose_weight", false);
  out.hasBias = bias != nullptr;
  if (x.rank() < 1 || w.rank() != 2)
    return Status::error("graph.linear: input must have rank >= 1 and weight "
                         "rank 2, got " +
                         x.describe() + " and " + w.describe());
  out.k = w.shape[out.transposed ? 1 : 0];
  out.n = w.shape[out.transposed ? 0 : 1];
  if (x.shape.back() != out.k)
    return Status::error("graph.linear: input " + x.describe() +
                         " does not match weight " + w.describe() +
                         (out.transposed ? " (transposed)" : ""));
  if (bias && bias->shape != std::vector<int64_t>{out.n})
    return Status::error("graph.linear: bias must have shape [" +
                         std::to_string(out.n) + "], got " + bias->describe());
  std::vector<int64_t> expected = x.shape;
  expected.back() = out.n;
  if (y.shape != expected)
    return Status::error("graph.linear: result must have shape " +
                         shapeString(expected) + ", got " + y.describe());
  out.rows = shape::product(x.shape, 0, x.shape.size() - 1);
  if (!fitsBlas({out.rows, out.n, out.k}))
    return Status::error("graph.linear: matrix sizes exceed BLAS int range");
  return Status::ok();
}

Status planLinearGradWeight(const KernelContext &ctx,
                            LinearGradWeightPlan &out) {
  constexpr const char *kOp = "graph.linear_grad_weight";
  if (Status s = checkArity(ctx, kOp, 2, 2, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  const TensorView &dw = ctx.outputs[0];
  out.transposed = ctx.attrs.getBool("transpose_weight");
  if (dy.rank() < 1 || x.rank() != dy.rank() || x.dtype != dy.dtype ||
      dw.dtype != dy.dtype ||
      !std::equal(dy.shape.begin(), dy.shape.end() - 1, x.shape.begin()))
    return Status::error("graph.linear_grad_weight: gradient " +
                         dy.describe() + " and input " + x.describe() +
                         " do not fit");
  out.n = dy.shape.back();
  out.k = x.shape.back();
  out.m = shape::product(dy.shape, 0, dy.shape.size() - 1);
  if (!fitsBlas({out.m, out.n, out.k}))
    return Status::error("graph.linear_grad_weight: a GEMM dimension exceeds "
                         "the BLAS int range");
  if (dw.shape != (out.transposed ? std::vector<int64_t>{out.n, out.k}
                                  : std::vector<int64_t>{out.k, out.n}))
    return Status::error("graph.linear_grad_weight: result " + dw.describe() +
                         " does not fit gradient " + dy.describe() +
                         " and input " + x.describe());
  return Status::ok();
}

} // namespace strata::runtime
