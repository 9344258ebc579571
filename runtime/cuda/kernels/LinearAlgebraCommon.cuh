//===- LinearAlgebraCommon.cuh - The gemms of the matrix products -*- CUDA -*-===//
//
// Private to LinearAlgebraKernels.cu: the host-side half of graph.matmul,
// graph.linear and graph.linear_grad_weight. Each op's checks are its CPU
// kernel's (runtime/cpu/kernels/LinearAlgebraKernels.cpp and
// NeuralNetGradKernels.cpp), message for message; what they leave is one
// column-major product as cuBLASLt takes it. Row-major C[m, n] = A B is
// column-major C^T = B^T A^T: the column-major view of a row-major [r, c]
// buffer is the c x r matrix of its transpose, so no operand moves.
//
// Host code only, no CUDA in here (the layouts can be checked without a GPU).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_LINEARALGEBRACOMMON_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_LINEARALGEBRACOMMON_CUH

#include "strata/Runtime/GemmPlan.h"
#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/KernelChecks.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace strata::runtime::cuda::linalg {

/// One column-major product D[mm x nn] = op(A)[mm x kk] op(B)[kk x nn]
/// (+ bias[mm] on every column), over `batch` matrices `stride*` elements
/// apart, once per entry of `calls` with the operands at those element
/// offsets. A and B are stored (aRows x aCols, lda), (bRows x bCols, ldb):
/// op(A) = A^T when transA, and so on.
struct GemmProblem {
  std::string op;
  /// The operands for messages: "f32[2x3] x f32[3x4]".
  std::string operands;
  DType dtype = DType::F32;
  /// Which inputs are cuBLASLt's A, B and the bias (-1: none); the result is
  /// output 0.
  int aInput = 0, bInput = 0, biasInput = -1;
  int64_t mm = 0, nn = 0, kk = 0;
  bool transA = false, transB = false;
  int64_t aRows = 0, aCols = 0, lda = 1;
  int64_t bRows = 0, bCols = 0, ldb = 1;
  int64_t ldd = 1;
  int64_t batch = 1, strideA = 0, strideB = 0, strideD = 0;
  struct Call {
    int64_t a = 0, b = 0, d = 0;
  };
  std::vector<Call> calls;
  /// Elements of the result: none, nothing to do; kk == 0, the result is
  /// zero (plus the bias).
  int64_t outElems = 0;
};


/// For every flat index of `out`, the flat index of `in` it reads under numpy
/// broadcasting (the CPU's broadcastIndexMap).
inline std::vector<int64_t> broadcastIndexMap(const std::vector<int64_t> &in,
                                              const std::vector<int64_t> &out) {
  int64_t total = 1;
  for (int64_t d : out)
    total *= d;
  std::vector<int64_t> map(static_cast<size_t>(total));
  std::vector<int64_t> inStrides = rowMajorStrides(in);
  size_t offset = out.size() - in.size();
  std::vector<int64_t> coord(out.size(), 0);
  int64_t src = 0;
  for (int64_t flat = 0; flat < total; ++flat) {
    map[flat] = src;
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      bool broadcast = d < static_cast<int64_t>(offset) || in[d - offset] == 1;
      int64_t step = broadcast ? 0 : inStrides[d - offset];
      if (++coord[d] < out[d]) {
        src += step;
        break;
      }
      src -= step * (out[d] - 1);
      coord[d] = 0;
    }
  }
  return map;
}

/// The element types the products run in: f32 and f64 (IEEE, or TF32 for
/// f32 when allowed), bf16 and fp16 (f32 accumulation, one rounding of the
/// result: mixed precision's narrow storage).
inline bool gemmType(DType t) {
  return t == DType::F32 || t == DType::F64 || isNarrowFloat(t);
}

/// The leading dimension a (rows x cols, ld) column-major matrix is staged
/// with, or `ld` when it is not. cuBLASLt's Hopper kernels move tiles with
/// the tensor memory accelerator, which needs every column to start on a
/// 16-byte boundary; a leading dimension whose bytes are not a multiple of
/// 16 (GPT-2's 50,257-word vocabulary) sends the product to slower kernels:
/// GPT-2 124M's head ran at 95 TFLOP/s against about 620 for its other
/// products (bf16, H200, 2026-11-27). So an operand or result with such a
/// leading dimension and at least `minElements` elements (smaller ones cost
/// little either way) goes through a stream-ordered copy whose leading
/// dimension is rounded up to 16 bytes; a negative `minElements` stages
/// none. One plain product only (no batch, one call).
inline int64_t stagedLeadingDim(const GemmProblem &p, int64_t rows,
                                int64_t cols, int64_t ld, size_t elementBytes,
                                int64_t minElements) {
  int64_t per = int64_t(16 / elementBytes);
  if (minElements < 0 || p.batch != 1 || p.calls.size() != 1 || per <= 1 ||
      ld % per == 0 || rows * cols < minElements)
    return ld;
  return (ld + per - 1) / per * per;
}

inline Status notSupported(std::string_view op, DType t) {
  return Status::error(std::string(op) + ": element type " +
                       std::string(name(t)) + " is not supported");
}

/// Row-major C[m, n] = A[m, k] op(W) with op(W) = W[k, n] or W[n, k]^T, as
/// column-major C^T[n x m] = op(W)^T A^T: cuBLASLt's A is W, its B is A.
inline void rowMajorProduct(GemmProblem &p, int64_t m, int64_t n, int64_t k,
                            bool transW) {
  p.mm = n;
  p.nn = m;
  p.kk = k;
  p.transA = transW;
  if (transW) { // W[n, k] row-major: the k x n matrix W^T, ld k.
    p.aRows = k;
    p.aCols = n;
    p.lda = std::max<int64_t>(k, 1);
  } else { // W[k, n] row-major: the n x k matrix W^T, ld n.
    p.aRows = n;
    p.aCols = k;
    p.lda = std::max<int64_t>(n, 1);
  }
  p.transB = false;
  p.bRows = k;
  p.bCols = m;
  p.ldb = std::max<int64_t>(k, 1);
  p.ldd = std::max<int64_t>(n, 1);
}

/// graph.matmul: [..., m, k] x [..., k, n] with numpy broadcasting of the
/// batch dims. A right matrix shared by every batch matrix is folded into
/// the rows (one product, as the CPU does); otherwise the batch matrices are
/// split into runs that cuBLASLt takes as one strided batch: the longest run
/// of the innermost batch dims along which both operands advance by a
/// constant, non-zero stride (all of them when the batch dims match). A
/// broadcast operand (batch stride 0) is not left to cuBLASLt's strided
/// batches: its runs are one matrix long, a call each.
inline Status buildMatmul(const KernelContext &ctx, GemmProblem &p) {
  constexpr const char *kOp = "graph.matmul";
  p.op = kOp;
  MatmulPlan plan;
  if (Status s = planMatmul(ctx, plan); !s)
    return s;
  const TensorView &lhs = ctx.inputs[0], &rhs = ctx.inputs[1];
  const TensorView &out = ctx.outputs[0];
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  const std::vector<int64_t> &lhsBatch = plan.lhsBatch,
                             &rhsBatch = plan.rhsBatch, &batch = plan.batch;
  if (!gemmType(lhs.dtype))
    return notSupported(kOp, lhs.dtype);

  p.operands = lhs.describe() + " x " + rhs.describe();
  p.dtype = lhs.dtype;
  p.aInput = 1; // the right matrix is cuBLASLt's A
  p.bInput = 0;
  p.outElems = out.numel();
  int64_t batchCount = 1;
  for (int64_t d : batch)
    batchCount *= d;
  int64_t rhsCount = 1;
  for (int64_t d : rhsBatch)
    rhsCount *= d;
  if (p.outElems == 0 || k == 0)
    return Status::ok();
  if (rhsCount == 1 && lhsBatch == batch && fitsBlas({batchCount * m})) {
    rowMajorProduct(p, batchCount * m, n, k, false);
    p.calls.push_back({});
    return Status::ok();
  }
  rowMajorProduct(p, m, n, k, false);
  std::vector<int64_t> lhsMap = broadcastIndexMap(lhsBatch, batch);
  std::vector<int64_t> rhsMap = broadcastIndexMap(rhsBatch, batch);
  // The longest run of batch matrices (a product of the innermost batch
  // dims) along which both maps are affine.
  auto affine = [&](const std::vector<int64_t> &map, int64_t run,
                    int64_t &stride) {
    stride = run > 1 ? map[1] - map[0] : 0;
    if (run > 1 && stride <= 0) // no broadcast batch stride: see above
      return false;
    for (int64_t i = 0; i < batchCount; ++i)
      if (map[i] != map[i - i % run] + (i % run) * stride)
        return false;
    return true;
  };
  int64_t run = 1, lhsStride = 0, rhsStride = 0;
  for (size_t first = 0; first <= batch.size(); ++first) {
    int64_t candidate = 1;
    for (size_t i = first; i < batch.size(); ++i)
      candidate *= batch[i];
    int64_t ls = 0, rs = 0;
    if (candidate <= INT_MAX && affine(lhsMap, candidate, ls) &&
        affine(rhsMap, candidate, rs)) {
      run = candidate;
      lhsStride = ls;
      rhsStride = rs;
      break;
    }
  }
  p.batch = run;
  p.strideA = rhsStride * k * n;
  p.strideB = lhsStride * m * k;
  p.strideD = m * n;
  for (int64_t o = 0; o < batchCount; o += run)
    p.calls.push_back({rhsMap[o] * k * n, lhsMap[o] * m * k, o * m * n});
  return Status::ok();
}

/// graph.linear: one product over the flattened leading dims, the bias
/// (when given) broadcast over the rows.
inline Status buildLinear(const KernelContext &ctx, GemmProblem &p) {
  constexpr const char *kOp = "graph.linear";
  p.op = kOp;
  LinearPlan plan;
  if (Status s = planLinear(ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &w = ctx.inputs[1];
  const TensorView *bias = plan.hasBias ? &ctx.inputs[2] : nullptr;
  const TensorView &y = ctx.outputs[0];
  const bool transposed = plan.transposed;
  const int64_t rows = plan.rows, n = plan.n, k = plan.k;
  if (!gemmType(x.dtype))
    return notSupported(kOp, x.dtype);

  p.operands = x.describe() + " x " + w.describe() +
               (transposed ? "^T" : "") +
               (bias ? " + " + bias->describe() : std::string());
  p.dtype = x.dtype;
  p.aInput = 1;
  p.bInput = 0;
  p.biasInput = bias ? 2 : -1;
  p.outElems = y.numel();
  if (p.outElems == 0 || k == 0)
    return Status::ok();
  rowMajorProduct(p, rows, n, k, transposed);
  p.calls.push_back({});
  return Status::ok();
}

/// graph.linear_grad_weight: dW[k, n] = x^T dy, or dW[n, k] = dy^T x with
/// transpose_weight, over the flattened leading dims (not accumulated).
/// Row-major C[P, Q] = A[M, P]^T B[M, Q] is column-major C^T[Q x P] =
/// B^T A: cuBLASLt's A is B's buffer (Q x M, ld Q), its B is A's buffer
/// (P x M, ld P) transposed.
inline Status buildLinearGradWeight(const KernelContext &ctx,
                                    GemmProblem &p) {
  constexpr const char *kOp = "graph.linear_grad_weight";
  p.op = kOp;
  LinearGradWeightPlan plan;
  if (Status s = planLinearGradWeight(ctx, plan); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  const TensorView &dw = ctx.outputs[0];
  const bool transposed = plan.transposed;
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  if (!gemmType(dy.dtype))
    return notSupported(kOp, dy.dtype);

  p.operands = dy.describe() + ", " + x.describe() +
               (transposed ? " (transposed)" : "");
  p.dtype = dy.dtype;
  p.outElems = dw.numel();
  // A = x, B = dy (dW[k, n]); A = dy, B = x (dW[n, k]).
  int aRow = transposed ? 0 : 1, bRow = transposed ? 1 : 0;
  int64_t pDim = transposed ? n : k, qDim = transposed ? k : n;
  p.aInput = bRow;
  p.bInput = aRow;
  if (p.outElems == 0 || m == 0)
    return Status::ok();
  p.mm = qDim;
  p.nn = pDim;
  p.kk = m;
  p.transA = false;
  p.aRows = qDim;
  p.aCols = m;
  p.lda = std::max<int64_t>(qDim, 1);
  p.transB = true;
  p.bRows = pDim;
  p.bCols = m;
  p.ldb = std::max<int64_t>(pDim, 1);
  p.ldd = std::max<int64_t>(qDim, 1);
  p.calls.push_back({});
  return Status::ok();
}

} // namespace strata::runtime::cuda::linalg

#endif // STRATA_RUNTIME_CUDA_KERNELS_LINEARALGEBRACOMMON_CUH
