//===- ShapeKernels.cu - Shape manipulation and lookups on CUDA -----------===//
//
// graph.reshape ... graph.embedding, the counterparts of the CPU's
// ShapeKernels.cpp: ops that only move elements. They move elements as
// unsigned integers of the element's width, so they serve every dtype (f16
// and bf16 included) and keep NaN payloads. The CPU's shape checks run on
// the host first, with its messages; the index rules then travel by value.
//
// Not as on the CPU: gather and embedding cannot look at their indices on
// the host, so an index outside [-size, size) is not an error Status but
// NaN (0 for integers) in the elements it would have read; the NaN reaches
// the loss, as a bad label's does in cross_entropy, and the device stays
// usable (a trap would end the process's CUDA context). A result may not share memory with its operand except in
// trilu and where the CPU's copy is the identity (reshape, a full slice).
//
//===----------------------------------------------------------------------===//

#include "ElementwiseCommon.cuh"

#include "strata/Runtime/ShapePlans.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace strata::runtime::cuda {
namespace {

using namespace shape;

Status copyBytes(std::string_view op, const CudaStream &cs, void *dst,
                 const void *src, size_t bytes) {
  return cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                    cs.stream),
                    std::string(op) + ": cudaMemcpyAsync");
}

//===----------------------------------------------------------------------===//
// Strided copy
//===----------------------------------------------------------------------===//

template <typename W>
__global__ void __launch_bounds__(kBlock)
    stridedCopyKernel(const W *in, W *out, int64_t n, Dims plan, int64_t base) {
  STRATA_GRID_STRIDE(i, n) out[i] = in[stridedOffset(plan, base, i)];
}

/// Fills the dense `out` from `in` as the CPU's copyStrided does: the element
/// at result coordinate c is in's element `base + sum_d c[d] * strides[d]`.
Status copyStrided(std::string_view op, KernelContext &ctx,
                   const TensorView &in, TensorView &out,
                   const std::vector<int64_t> &strides, int64_t base) {
  int64_t n = out.numel();
  if (n == 0)
    return Status::ok();
  Dims plan;
  if (Status s = planStrided(op, out.shape, strides, plan); !s)
    return s;
  const CudaStream &cs = streamOf(ctx);
  return dispatchWidth(out.dtype, [&](auto tag) -> Status {
    using W = decltype(tag);
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, stridedCopyKernel<W>)
    (static_cast<const W *>(in.data), static_cast<W *>(out.data), n, plan,
     base);
    return launchStatus(std::string(op));
  });
}

//===----------------------------------------------------------------------===//
// Reshape, broadcast_to, transpose, slice
//===----------------------------------------------------------------------===//

Status reshapeKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.reshape";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  if (Status s = checkSameDType(op, x, y); !s)
    return s;
  if (x.numel() != y.numel())
    return Status::error(std::string(op) + ": element counts differ (" +
                         x.describe() + " vs " + y.describe() + ")");
  if (x.bytes() == 0 || x.data == y.data)
    return Status::ok();
  return copyBytes(op, streamOf(ctx), y.data, x.data, x.bytes());
}

Status broadcastToKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.broadcast_to";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  StridedCopy plan;
  if (Status s = planBroadcastTo(op, ctx.inputs[0], ctx.outputs[0], plan); !s)
    return s;
  return copyStrided(op, ctx, ctx.inputs[0], ctx.outputs[0], plan.strides,
                     plan.base);
}

Status transposeKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.transpose";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  StridedCopy plan;
  if (Status s = planTranspose(op, ctx.inputs[0], ctx.outputs[0], ctx.attrs,
                               plan);
      !s)
    return s;
  return copyStrided(op, ctx, ctx.inputs[0], ctx.outputs[0], plan.strides,
                     plan.base);
}

Status sliceKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.slice";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  StridedCopy plan;
  if (Status s = planSlice(op, ctx.inputs[0], ctx.outputs[0], ctx.attrs, plan);
      !s)
    return s;
  return copyStrided(op, ctx, ctx.inputs[0], ctx.outputs[0], plan.strides,
                     plan.base);
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

/// Moves one part of a concat (toWhole) or split (!toWhole): the part's
/// element e = (o, s), outer index o and position s in its slab of
/// `partSlab` elements, is element o * wholeSlab + offset + s of the whole.
template <typename W, bool ToWhole>
__global__ void __launch_bounds__(kBlock)
    partKernel(const W *src, W *dst, int64_t n, int64_t partSlab,
               int64_t wholeSlab, int64_t offset) {
  STRATA_GRID_STRIDE(e, n) {
    int64_t at = (e / partSlab) * wholeSlab + offset + e % partSlab;
    if constexpr (ToWhole)
      dst[at] = src[e];
    else
      dst[e] = src[at];
  }
}

/// One launch per part; `parts` are the concat's inputs or the split's
/// results, `whole` the other side.
template <bool ToWhole>
Status moveParts(std::string_view op, KernelContext &ctx,
                 std::span<const TensorView> parts, const TensorView &whole,
                 int64_t axis) {
  int64_t inner = product(whole.shape, axis + 1, whole.shape.size());
  int64_t wholeSlab = whole.shape[axis] * inner;
  const CudaStream &cs = streamOf(ctx);
  return dispatchWidth(whole.dtype, [&](auto tag) -> Status {
    using W = decltype(tag);
    int64_t offset = 0;
    for (const TensorView &part : parts) {
      int64_t n = part.numel(), partSlab = part.shape[axis] * inner;
      if (n > 0) {
        if constexpr (ToWhole)
          STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream,
                        partKernel<W, true>)
          (static_cast<const W *>(part.data), static_cast<W *>(whole.data), n,
           partSlab, wholeSlab, offset);
        else
          STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream,
                        partKernel<W, false>)
          (static_cast<const W *>(whole.data), static_cast<W *>(part.data), n,
           partSlab, wholeSlab, offset);
        if (Status s = launchStatus(std::string(op)); !s)
          return s;
      }
      offset += partSlab;
    }
    return Status::ok();
  });
}

Status concatKernel(KernelContext &ctx) {
  int64_t axis;
  if (Status s = planConcat(ctx, axis); !s)
    return s;
  TensorView &y = ctx.outputs[0];
  if (y.numel() == 0)
    return Status::ok();
  return moveParts<true>("graph.concat", ctx, ctx.inputs, y, axis);
}

Status splitKernel(KernelContext &ctx) {
  int64_t axis;
  if (Status s = planSplit(ctx, axis); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  if (x.numel() == 0)
    return Status::ok();
  return moveParts<false>("graph.split", ctx, ctx.outputs, x, axis);
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

struct PadPlan {
  int rank = 0;
  PadMode mode = PadMode::Constant;
  int64_t outSize[kMaxRank] = {};
  int64_t inSize[kMaxRank] = {};
  int64_t inStride[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};
};

/// Result element i: its source in the input under the CPU's rules, or
/// the fill where any coordinate is constant padding.
template <typename W>
__global__ void __launch_bounds__(kBlock)
    padKernel(const W *in, W *out, int64_t n, PadPlan p, W fill) {
  STRATA_GRID_STRIDE(i, n) {
    int64_t rest = i, offset = 0;
    bool isFill = false;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rest;
      if (d > 0) {
        c = rest % p.outSize[d];
        rest /= p.outSize[d];
      }
      int64_t s = c - p.begin[d], len = p.inSize[d];
      if (s < 0 || s >= len) {
        if (p.mode == PadMode::Constant) {
          isFill = true;
          break;
        }
        if (p.mode == PadMode::Edge)
          s = stdClamp<int64_t>(s, 0, len - 1);
        else // numpy/torch reflect: mirror about the edge, edge not repeated
          s = s < 0 ? -s : 2 * (len - 1) - s;
      }
      offset += s * p.inStride[d];
    }
    out[i] = isFill ? fill : in[offset];
  }
}

Status padKernelFn(KernelContext &ctx) {
  constexpr std::string_view op = "graph.pad";
  PadGeometry g;
  if (Status s = planPad(ctx, g); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  const std::vector<int64_t> &pads = g.pads, &shape = g.shape;
  int64_t rank = x.rank();
  int64_t n = y.numel();
  if (n == 0)
    return Status::ok();
  if (rank > kMaxRank)
    return tooManyDims(op, size_t(rank));
  PadPlan p;
  p.rank = int(rank);
  p.mode = g.mode;
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape);
  for (int64_t d = 0; d < rank; ++d) {
    p.outSize[d] = shape[d];
    p.inSize[d] = x.shape[d];
    p.inStride[d] = inStrides[d];
    p.begin[d] = pads[d];
  }
  const CudaStream &cs = streamOf(ctx);
  return dispatchWidth(y.dtype, [&](auto tag) -> Status {
    using W = decltype(tag);
    W value;
    std::memcpy(&value, g.fill, sizeof(W));
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, padKernel<W>)
    (static_cast<const W *>(x.data), static_cast<W *>(y.data), n, p, value);
    return launchStatus(std::string(op));
  });
}

//===----------------------------------------------------------------------===//
// Trilu
//===----------------------------------------------------------------------===//

/// Element e = (matrix, i, j): kept where torch.triu keeps j - i >= k
/// (upper) or torch.tril keeps j - i <= k, else zero (the all-zero pattern
/// in every dtype). Each element reads only itself: in place is safe.
template <typename W>
__global__ void __launch_bounds__(kBlock)
    triluKernel(const W *in, W *out, int64_t n, int64_t rows, int64_t cols,
                int64_t k, bool upper) {
  STRATA_GRID_STRIDE(e, n) {
    int64_t j = e % cols, i = (e / cols) % rows;
    bool keep = upper ? j >= stdClamp<int64_t>(i + k, 0, cols)
                      : j < stdClamp<int64_t>(i + k + 1, 0, cols);
    out[e] = keep ? in[e] : W(0);
  }
}

Status triluKernelFn(KernelContext &ctx) {
  constexpr std::string_view op = "graph.trilu";
  TriluGeometry g;
  if (Status s = planTrilu(ctx, g); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  int64_t n = x.numel();
  if (n == 0)
    return Status::ok();
  const bool upper = g.upper;
  const int64_t rows = g.rows, cols = g.cols, k = g.k;
  const CudaStream &cs = streamOf(ctx);
  return dispatchWidth(x.dtype, [&](auto tag) -> Status {
    using W = decltype(tag);
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, triluKernel<W>)
    (static_cast<const W *>(x.data), static_cast<W *>(y.data), n, rows, cols, k,
     upper);
    return launchStatus(std::string(op));
  });
}

//===----------------------------------------------------------------------===//
// Gather and embedding
//===----------------------------------------------------------------------===//

/// Result element e = (o, p, s): element s of block (o, idx[p]) of `in`,
/// `axisSize` blocks of `inner` elements per outer index. Negative indices
/// count from the end; one outside [-axisSize, axisSize) gives `poison`
/// (NaN for floats, 0 for integers) where it would have read: the CPU
/// refuses the instruction, but the device cannot read the indices up
/// front, and a trap would end the process's CUDA context (and leave the
/// other ranks waiting in NCCL). The NaN reaches the loss, as a bad label
/// does in cross_entropy.
template <typename W, typename I>
__global__ void __launch_bounds__(kBlock)
    gatherKernel(const W *in, const I *idx, W *out, int64_t n, int64_t count,
                 int64_t axisSize, int64_t inner, W poison) {
  STRATA_GRID_STRIDE(e, n) {
    int64_t s = e % inner, q = e / inner;
    int64_t p = q % count, o = q / count;
    int64_t v = static_cast<int64_t>(idx[p]);
    if (v < -axisSize || v >= axisSize) {
      out[e] = poison;
      continue;
    }
    v = v < 0 ? v + axisSize : v;
    out[e] = in[(o * axisSize + v) * inner + s];
  }
}

/// The bits of a quiet NaN of `t` in its width W; zero for integers.
template <typename W> W poisonOf(DType t) {
  switch (t) {
  case DType::F64:
    return W(0x7ff8000000000000ull);
  case DType::F32:
    return W(0x7fc00000u);
  case DType::BF16:
    return W(0x7fc0u);
  case DType::F16:
    return W(0x7e00u);
  default:
    return W(0);
  }
}

Status gatherBlocks(std::string_view op, KernelContext &ctx,
                    const TensorView &in, const TensorView &indices,
                    TensorView &out, int64_t axisSize, int64_t inner) {
  return dispatchIndex(indices.dtype, op, [&](auto indexTag) -> Status {
    using I = decltype(indexTag);
    int64_t n = out.numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &cs = streamOf(ctx);
    return dispatchWidth(in.dtype, [&](auto tag) -> Status {
      using W = decltype(tag);
      STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, gatherKernel<W, I>)
      (static_cast<const W *>(in.data), indices.as<I>(),
       static_cast<W *>(out.data), n, indices.numel(), axisSize, inner,
       poisonOf<W>(in.dtype));
      return launchStatus(std::string(op));
    });
  });
}

Status gatherKernelFn(KernelContext &ctx) {
  GatherGeometry g;
  if (Status s = planGather(ctx, g); !s)
    return s;
  return gatherBlocks("graph.gather", ctx, ctx.inputs[0], ctx.inputs[1],
                      ctx.outputs[0], g.axisSize, g.inner);
}

Status embeddingKernelFn(KernelContext &ctx) {
  GatherGeometry g;
  if (Status s = planEmbedding(ctx, g); !s)
    return s;
  return gatherBlocks("graph.embedding", ctx, ctx.inputs[0], ctx.inputs[1],
                      ctx.outputs[0], g.axisSize, g.inner);
}

} // namespace

void registerShapeKernels(KernelRegistry &registry) {
  registry.add("graph.reshape", reshapeKernel);
  registry.add("graph.broadcast_to", broadcastToKernel);
  registry.add("graph.transpose", transposeKernel);
  registry.add("graph.slice", sliceKernel);
  registry.add("graph.concat", concatKernel);
  registry.add("graph.split", splitKernel);
  registry.add("graph.pad", padKernelFn);
  registry.add("graph.trilu", triluKernelFn);
  registry.add("graph.gather", gatherKernelFn);
  registry.add("graph.embedding", embeddingKernelFn);
}

} // namespace strata::runtime::cuda
