//===- GemmPlan.h - The products' checks, for every backend -----*- C++ -*-===//
//
// graph.matmul, graph.linear and graph.linear_grad_weight check their
// operands here, in the CPU kernels' order and with their messages, and get
// the GEMM sizes each backend's kernel (OpenBLAS on the CPU, cuBLASLt on
// CUDA) runs. The element type is checked for equality only: each backend
// says which types it multiplies.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_GEMMPLAN_H
#define STRATA_RUNTIME_GEMMPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace strata::runtime {

/// Whether every size fits BLAS's (and cuBLASLt's) int: 0 to INT_MAX.
bool fitsBlas(std::initializer_list<int64_t> sizes);

/// numpy's broadcast of two shapes into `out`; false if they do not.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out);

/// graph.matmul: [..., M, K] x [..., K, N] -> [batch..., M, N], the batch
/// dims broadcast.
struct MatmulPlan {
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> lhsBatch, rhsBatch, batch;
};
Status planMatmul(const KernelContext &ctx, MatmulPlan &out);

/// graph.linear: x [..., K] times weight [K, N] (or [N, K] transposed),
/// plus an optional bias [N]: `rows` rows of the flattened leading dims.
struct LinearPlan {
  int64_t rows = 0, n = 0, k = 0;
  bool transposed = false, hasBias = false;
};
Status planLinear(const KernelContext &ctx, LinearPlan &out);

/// graph.linear_grad_weight: dy [..., N] and x [..., K] -> dW [K, N] (or
/// [N, K] transposed), summed over the m rows of the leading dims.
struct LinearGradWeightPlan {
  int64_t m = 0, n = 0, k = 0;
  bool transposed = false;
};
Status planLinearGradWeight(const KernelContext &ctx,
                            LinearGradWeightPlan &out);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_GEMMPLAN_H
