//===- AttentionKernels.cpp - Scaled-dot-product attention on the CPU -----===//
//
// graph.attention, evaluated as PyTorch's explicit ("math") formula
//   s = (q @ k^T) * scale + mask; s[i, j > i] = -inf if causal
//   p = dropout(softmax(s, -1)); out = p @ v
// one batch matrix at a time, in the same order of roundings (heads_inner
// reads the same rows where they lie, heads apart): the products
// are gemms in the element type, the softmax sums in double (f32 scores'
// exponentials in float, vectorized: expAndSum). A row with
// every score -inf (fully masked) gives NaN, as torch.softmax of an all -inf
// row does (-inf - -inf), and so a NaN output row.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/AttentionPlan.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

namespace strata::runtime::cpu {

// The probabilities are dropped by graph.dropout's rule (dropoutKeeps in
// KernelUtils.h), their flat index in [..., S, T] being the counter.

namespace {

Status attentionKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.attention";
  AttentionPlan plan;
  if (Status st = planAttention(ctx, plan); !st)
    return st;
  const TensorView &q = ctx.inputs[0], &k = ctx.inputs[1], &v = ctx.inputs[2];
  const TensorView *mask = plan.hasMask ? &ctx.inputs[3] : nullptr;
  TensorView &out = ctx.outputs[0];
  const int64_t rank = q.rank(), s = plan.s, t = plan.t, d = plan.d,
                dv = plan.dv;
  const std::vector<int64_t> &batchShape = plan.batchShape;
  const std::vector<int64_t> &maskStrides = plan.maskStrides;
  const double ratio = plan.ratio, scale = plan.scale;
  const bool causal = plan.causal;
  const int64_t ldD = plan.ld(d), ldV = plan.ld(dv);
  const int64_t blockRows = attentionRows(causal);

  return dispatchFloat(q.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *pq = q.as<T>(), *pk = k.as<T>(), *pv = v.as<T>();
    const T *pm = mask ? mask->as<T>() : nullptr;
    T *po = out.as<T>();
    // keep_probabilities: the probabilities are made in the second result
    // (dropped, when there is dropout, in the scratch: the result keeps
    // them before it).
    T *kept = plan.keepProbabilities ? ctx.outputs[1].as<T>() : nullptr;
    const T tScale = static_cast<T>(scale);
    const T dropScale = T(1) / T(1 - ratio);
    int64_t batches = 1;
    for (int64_t dim : batchShape)
      batches *= dim;
    // Batch matrices are independent: blocks of them run on the pool, each
    // with its own scratch (the scores of one matrix and one row's
    // exponentials, kept so each is computed once).
    parallelFor(batches, 1, [&](int64_t first, int64_t last) {
      std::vector<T> p(static_cast<size_t>(!kept || ratio > 0 ? s * t : 0));
      std::vector<T> e(static_cast<size_t>(t));
      for (int64_t b = first; b < last; ++b) {
        // The probabilities' rows (t apart), and the rows p @ v reads.
        T *probs = kept ? kept + b * s * t : p.data();
        T *used = kept && ratio > 0 ? p.data() : probs;
        int64_t maskBase = mask ? maskOffset(batchShape, maskStrides, b) : 0;
        // Batch matrix b's rows: ldD and ldV apart (heads_inner: the
        // heads' rows interleave).
        const T *qb = pq + plan.offset(b, s, d), *kb = pk + plan.offset(b, t, d),
                *vb = pv + plan.offset(b, t, dv);
        T *ob = po + plan.offset(b, s, dv);
        // Blocks of query rows: under a causal mask, rows [i0, i1) see keys
        // [0, i1) only, so the products skip the keys past the block.
        for (int64_t i0 = 0; i0 < s; i0 += blockRows) {
          int64_t i1 = std::min(s, i0 + blockRows), rows = i1 - i0;
          int64_t keys = causal ? std::min(t, i1) : t;
          gemmEx<T>(false, true, rows, keys, d, qb + i0 * ldD, ldD, kb, ldD,
                    probs + i0 * t, t);
          for (int64_t i = i0; i < i1; ++i) {
            T *row = probs + i * t;
            attentionRowProbabilities(
                row, i, keys, tScale, pm,
                pm ? maskBase + i * maskStrides[rank - 2] : 0,
                pm ? maskStrides[rank - 1] : 0, causal, e.data());
            // The kept row's keys past the block: hidden, so 0 (NaN in a
            // row with every key hidden, as softmax gives it).
            if (kept)
              std::fill(row + keys, row + t,
                        keys > 0 && row[0] != row[0] ? row[0] : T(0));
            if (ratio > 0) {
              T *dropped = used + i * t;
              for (int64_t j = 0; j < keys; ++j) {
                uint64_t index = static_cast<uint64_t>((b * s + i) * t + j);
                dropped[j] = row[j] * (dropoutKeeps(seedOf(ctx), index, ratio)
                                           ? dropScale
                                           : T(0));
              }
            }
          }
          gemmEx<T>(false, false, rows, dv, keys, used + i0 * t, t, vb, ldV,
                    ob + i0 * ldV, ldV);
        }
      }
    });
    return Status::ok();
  });
}

} // namespace

STRATA_VECTOR_DISPATCHED void
attentionRowProbabilitiesF32(float *row, int64_t i, int64_t keys, float scale,
                             const float *mask, int64_t maskRow,
                             int64_t maskStride, bool causal, float *e) {
  attentionRowProbabilitiesBody(row, i, keys, scale, mask, maskRow, maskStride,
                                causal, e);
}

void registerAttentionKernels(KernelRegistry &registry) {
  registry.add("graph.attention", attentionKernel);
}

} // namespace strata::runtime::cpu
