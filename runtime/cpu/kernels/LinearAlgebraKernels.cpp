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

#include "strata/Runtime/GemmPlan.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace strata::runtime::cpu {
namespace {

Status matmulKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.matmul";
  MatmulPlan plan;
  if (Status s = planMatmul(ctx, plan); !s)
    return s;
  const TensorView &lhs = ctx.inputs[0], &rhs = ctx.inputs[1];
  TensorView &out = ctx.outputs[0];
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  const std::vector<int64_t> &lhsBatch = plan.lhsBatch,
                             &rhsBatch = plan.rhsBatch, &batch = plan.batch;

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
  LinearPlan plan;
  if (Status s = planLinear(ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &w = ctx.inputs[1];
  const TensorView *bias = plan.hasBias ? &ctx.inputs[2] : nullptr;
  TensorView &y = ctx.outputs[0];
  const bool transposed = plan.transposed;
  const int64_t rows = plan.rows, n = plan.n, k = plan.k;

  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    T *out = y.as<T>();
    if (!bias) {
      gemm<T>(transposed, rows, n, k, x.as<T>(), w.as<T>(), out);
      return Status::ok();
    }
    // The bias first, then the product added to it (torch's addmm): one
    // pass over y fewer than the product and then the bias, and BLAS need
    // not zero y first.
    const T *pb = bias->as<T>();
    parallelFor(rows, rowGrain(n) * 4, [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r)
        std::copy(pb, pb + n, out + r * n);
    });
    gemm<T>(transposed, rows, n, k, x.as<T>(), w.as<T>(), out,
            /*accumulate=*/true);
    return Status::ok();
  });
}

} // namespace

void registerLinearAlgebraKernels(KernelRegistry &registry) {
  registry.add("graph.matmul", matmulKernel);
  registry.add("graph.linear", linearKernel);
}

} // namespace strata::runtime::cpu
