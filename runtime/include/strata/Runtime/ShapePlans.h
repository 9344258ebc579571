//===- ShapePlans.h - What the shape kernels move, for every backend -*- C++ -*-===//
//
// The shape ops (broadcast_to, transpose, slice, concat/split parts, pad's
// fill value) are data movement whose plan — the checks, the strides, the
// offset — is the same on every backend; only the copy differs. The CPU and
// CUDA kernels both take the plan from here, so they agree on what is
// moved and reject a malformed instruction with the same message.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_SHAPEPLANS_H
#define STRATA_RUNTIME_SHAPEPLANS_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace strata::runtime::shape {

Status checkSameDType(std::string_view op, const TensorView &a,
                      const TensorView &b);
/// `t`'s shape is `expected`, or "<op>: expected result ..., got ...".
Status checkShape(std::string_view op, const TensorView &t,
                  const std::vector<int64_t> &expected);
Status checkAxis(std::string_view op, int64_t axis, int64_t rank);
/// Product of shape[begin, end).
int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end);
/// `part` matches `whole` in every dim but `axis` (concat, split).
Status checkPart(std::string_view op, const TensorView &part,
                 const TensorView &whole, int64_t axis);

/// A strided read: result element at coordinates c (row-major over the
/// result's shape) is input element base + sum_d c[d] * strides[d].
struct StridedCopy {
  std::vector<int64_t> strides;
  int64_t base = 0;
};

/// graph.broadcast_to (numpy rules: right-aligned, size-1 dims repeat),
/// graph.transpose (attribute perm) and graph.slice (offsets, sizes,
/// strides), after the dtype and shape checks.
Status planBroadcastTo(std::string_view op, const TensorView &x,
                       const TensorView &y, StridedCopy &out);
Status planTranspose(std::string_view op, const TensorView &x,
                     const TensorView &y, const KernelAttrs &attrs,
                     StridedCopy &out);
Status planSlice(std::string_view op, const TensorView &x, const TensorView &y,
                 const KernelAttrs &attrs, StridedCopy &out);

/// The bytes of one element of `dtype` holding `value` (pad's f64 value):
/// integers truncate toward zero and must fit; f16/bf16 only zero.
Status fillBytes(std::string_view op, DType dtype, double value,
                 unsigned char *fill);

enum class PadMode : int { Constant, Reflect, Edge };

/// graph.pad after every check (arity, dtype, attribute pads with two
/// entries per dim, mode constant / reflect / edge as torch allows them,
/// the result's shape): begin of dim d at pads[d], end at pads[d + rank];
/// for constant, the fill element (attribute value).
struct PadGeometry {
  PadMode mode = PadMode::Constant;
  std::vector<int64_t> pads;
  std::vector<int64_t> shape;
  unsigned char fill[8] = {};
};
Status planPad(const KernelContext &ctx, PadGeometry &out);

/// graph.concat (the inputs are the parts, the result the whole) and
/// graph.split (the other way round): the arity, attribute axis, every
/// part's shape against the whole's, and the parts' sizes along the axis
/// summing to the whole's. `axis` on success.
Status planConcat(const KernelContext &ctx, int64_t &axis);
Status planSplit(const KernelContext &ctx, int64_t &axis);

/// graph.trilu: rows and cols of the matrices (the last two dims), and k
/// clamped to +-(rows + cols), where every larger k keeps all or nothing
/// (so i + k cannot overflow).
struct TriluGeometry {
  int64_t rows = 0, cols = 0, k = 0;
  bool upper = false;
};
Status planTrilu(const KernelContext &ctx, TriluGeometry &out);

/// graph.gather (attribute axis) and graph.embedding (rows of a rank-2
/// table): the result is `outer` x indices x `inner`, reading blocks of
/// `inner` elements, `axisSize` of them per outer index.
struct GatherGeometry {
  int64_t outer = 1, axisSize = 0, inner = 1;
};
Status planGather(const KernelContext &ctx, GatherGeometry &out);
Status planEmbedding(const KernelContext &ctx, GatherGeometry &out);

/// graph.embedding_grad (dy, indices -> table gradient [V, D]) and
/// graph.gather_grad (dy, indices -> dx; attribute axis): dy's rows,
/// `outer` x `count` (the indices) x `inner`, scatter-add into
/// `outer` x `rows` x `inner`.
struct ScatterGeometry {
  int64_t outer = 1, rows = 0, inner = 1, count = 0;
};
Status planEmbeddingGrad(const KernelContext &ctx, ScatterGeometry &out);
Status planGatherGrad(const KernelContext &ctx, ScatterGeometry &out);

/// graph.slice_grad (dy -> dx: zeros, dy added at the forward's slice):
/// attributes offsets, sizes and strides, one per dim of dx, the slice
/// inside dx as the forward requires.
struct SliceGradGeometry {
  std::vector<int64_t> offsets, sizes, steps;
};
Status planSliceGrad(const KernelContext &ctx, SliceGradGeometry &out);

/// graph.pad_grad (dy -> dx): attribute pads (begin of every dim, then
/// end) and mode, as the forward allowed them.
struct PadGradGeometry {
  std::vector<int64_t> pads;
  PadMode mode = PadMode::Constant;
};
Status planPadGrad(const KernelContext &ctx, PadGradGeometry &out);

} // namespace strata::runtime::shape

#endif // STRATA_RUNTIME_SHAPEPLANS_H
