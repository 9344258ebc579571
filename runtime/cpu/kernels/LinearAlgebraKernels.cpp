//===- LinearAlgebraKernels.cpp - Matrix products on the CPU --------------===//
//
// graph.matmul (batched, numpy broadcasting of the batch dims) and
// graph.linear (one gemm over the flattened leading dims, bias added after,
// as PyTorch's addmm rounds it). Both call OpenBLAS sgemm/dgemm, which
// accumulate in the element type as PyTorch's CPU gemm does.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace strata::runtime::cpu {
namespace {

/// BLAS takes int sizes.
bool fitsBlas(std::initializer_list<int64_t> sizes) {
  return std::all_of(sizes.begin(), sizes.end(),
                     [](int64_t s) { return s >= 0 && s <= INT_MAX; });
}

/// numpy broadcast of two shapes; false if they do not broadcast.
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

Status matmulKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.matmul";
  if (Status s = checkArity(ctx, kOp, 2, 2, 1); !s)
    return s;
  const TensorView &lhs = ctx.inputs[0], &rhs = ctx.inputs[1];
  TensorView &out = ctx.outputs[0];
  if (lhs.dtype != rhs.dtype || out.dtype != lhs.dtype)
    return Status::error(
        "graph.matmul: element types differ: " + lhs.describe() + ", " +
        rhs.describe() + " -> " + out.describe());
  if (lhs.rank() < 2 || rhs.rank() < 2)
    return Status::error("graph.matmul: operands must have rank >= 2, got " +
                         lhs.describe() + " and " + rhs.describe());
  int64_t m = lhs.shape[lhs.rank() - 2], k = lhs.shape.back();
  int64_t n = rhs.shape.back();
  std::vector<int64_t> lhsBatch(lhs.shape.begin(), lhs.shape.end() - 2);
  std::vector<int64_t> rhsBatch(rhs.shape.begin(), rhs.shape.end() - 2);
  std::vector<int64_t> batch;
  if (rhs.shape[rhs.rank() - 2] != k ||
      !broadcastShapes(lhsBatch, rhsBatch, batch))
    return Status::error("graph.matmul: " + lhs.describe() + " x " +
                         rhs.describe() + " is not a matrix product");
  std::vector<int64_t> expected = batch;
  expected.push_back(m);
  expected.push_back(n);
  if (out.shape != expected)
    return Status::error("graph.matmul: result must have shape " +
                         shapeString(expected) + ", got " + out.describe());
  if (!fitsBlas({m, n, k}))
    return Status::error("graph.matmul: matrix sizes exceed BLAS int range");

  return dispatchFloat(lhs.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *a = lhs.as<T>(), *b = rhs.as<T>();
    T *c = out.as<T>();
    int64_t batchCount = 1;
    for (int64_t d : batch)
      batchCount *= d;
    int64_t rhsCount = 1;
    for (int64_t d : rhsBatch)
      rhsCount *= d;
    // One shared right matrix: fold the batch into the rows, one gemm (what
    // torch.matmul does for [..., M, K] x [K, N]).
    if (rhsCount == 1 && lhsBatch == batch && fitsBlas({batchCount * m})) {
      gemm<T>(false, batchCount * m, n, k, a, b, c);
      return Status::ok();
    }
    // scratch: batch index maps, one entry per batch matrix.
    std::vector<int64_t> lhsMap = broadcastIndexMap(lhsBatch, batch);
    std::vector<int64_t> rhsMap = broadcastIndexMap(rhsBatch, batch);
    for (int64_t i = 0; i < batchCount; ++i)
      gemm<T>(false, m, n, k, a + lhsMap[i] * m * k, b + rhsMap[i] * k * n,
              c + i * m * n);
    return Status::ok();
  });
}

Status linearKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.linear";
  if (Status s = checkArity(ctx, kOp, 2, 3, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &w = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  TensorView &y = ctx.outputs[0];
  if (w.dtype != x.dtype || y.dtype != x.dtype ||
      (bias && bias->dtype != x.dtype))
    return Status::error("graph.linear: operands and result must share one "
                         "element type");
  bool transposed = ctx.attrs.getBool("transpose_weight", false);
  if (x.rank() < 1 || w.rank() != 2)
    return Status::error("graph.linear: input must have rank >= 1 and weight "
                         "rank 2, got " +
                         x.describe() + " and " + w.describe());
  int64_t k = w.shape[transposed ? 1 : 0], n = w.shape[transposed ? 0 : 1];
  if (x.shape.back() != k)
    return Status::error("graph.linear: input " + x.describe() +
                         " does not match weight " + w.describe() +
                         (transposed ? " (transposed)" : ""));
  if (bias && bias->shape != std::vector<int64_t>{n})
    return Status::error("graph.linear: bias must have shape [" +
                         std::to_string(n) + "], got " + bias->describe());
  std::vector<int64_t> expected = x.shape;
  expected.back() = n;
  if (y.shape != expected)
    return Status::error("graph.linear: result must have shape " +
                         shapeString(expected) + ", got " + y.describe());
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < x.rank(); ++i)
    rows *= x.shape[i];
  if (!fitsBlas({rows, n, k}))
    return Status::error("graph.linear: matrix sizes exceed BLAS int range");

  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    T *out = y.as<T>();
    gemm<T>(transposed, rows, n, k, x.as<T>(), w.as<T>(), out);
    if (bias) {
      const T *pb = bias->as<T>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j)
          out[r * n + j] += pb[j];
    }
    return Status::ok();
  });
}

} // namespace

void registerLinearAlgebraKernels(KernelRegistry &registry) {
  registry.add("graph.matmul", matmulKernel);
  registry.add("graph.linear", linearKernel);
}

} // namespace strata::runtime::cpu
