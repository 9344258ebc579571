//===- AttentionPlan.h - Attention's checks, for every backend -*- C++ -*-===//
//
// graph.attention (query, key, value, an optional additive mask) and
// graph.attention_grad (the output's gradient first) check their operands
// and attributes here, in the CPU kernels' order and with their messages,
// and get the shapes every kernel loops over. Both backends' kernels call
// these (the CUDA kernels had a copy of each).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_ATTENTIONPLAN_H
#define STRATA_RUNTIME_ATTENTIONPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>
#include <vector>

namespace strata::runtime {

struct AttentionPlan {
  DType dtype = DType::F32;
  /// q [..., S, D], k [..., T, D], v [..., T, Dv]; `batches` is the
  /// product of the batch dims.
  std::vector<int64_t> batchShape;
  int64_t batches = 0, s = 0, t = 0, d = 0, dv = 0;
  bool hasMask = false;
  /// Strides of the mask over the scores [..., S, T]; 0 where it broadcasts.
  std::vector<int64_t> maskStrides;
  double ratio = 0, scale = 0;
  bool causal = false;
  /// heads_inner: q [..., S, H, D], k [..., T, H, D], v [..., T, H, Dv]
  /// and the result [..., S, H, Dv]. `batchShape` is then [..., H] (the
  /// scores' batch dims, as without it) and batch matrix b = (outer, head)
  /// reads rows `heads` rows apart.
  bool headsInner = false;
  int64_t heads = 1;
  /// keep_probabilities: the forward writes the softmax probabilities
  /// [..., H, S, T] (before dropout, 0 where a key is hidden) into its
  /// second result; the gradient reads them from its last operand
  /// (`probabilities`, an input index) instead of making them again.
  bool keepProbabilities = false;
  int64_t probabilities = -1;

  /// Where batch matrix b starts in a tensor of its `rows` rows of `width`
  /// (q, dy, the result: S rows; k, v: T), in elements.
  int64_t offset(int64_t b, int64_t rows, int64_t width) const {
    return headsInner ? ((b / heads) * rows * heads + b % heads) * width
                      : b * rows * width;
  }
  /// The distance between a batch matrix's rows of `width`, in elements.
  int64_t ld(int64_t width) const { return headsInner ? heads * width : width; }
};

/// The mask's layout for kernels: its batch dims with size-1 dims dropped
/// and dims merged where the strides allow, so batch matrix b's offset is
/// the sum of b's coordinates in `sizes` times `strides`; then
/// i * row + j * col for score (i, j).
struct MaskLayout {
  std::vector<int64_t> sizes, strides;
  int64_t row = 0, col = 0;
};
MaskLayout maskLayout(const AttentionPlan &plan);

/// graph.attention's checks; `plan` on success.
Status planAttention(const KernelContext &ctx, AttentionPlan &plan);

/// graph.attention_grad's checks (every float operand and every result of
/// the gradient's element type); `plan` on success.
Status planAttentionGrad(const KernelContext &ctx, AttentionPlan &plan);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_ATTENTIONPLAN_H
