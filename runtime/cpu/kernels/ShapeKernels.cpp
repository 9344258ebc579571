//===- ShapeKernels.cpp - Shape manipulation and lookups on the CPU -------===//
//
// graph.reshape ... graph.embedding: ops that only move elements. They copy
// bytes of the element width, so they serve every dtype (f16 and bf16
// included) without a per-type instantiation and keep NaN payloads intact.
// Shapes are checked against the op's shape rules before any byte moves, so
// an inconsistent instruction is an error Status, not a wild write.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/ShapePlans.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace strata::runtime::cpu {
namespace {

using Bytes = unsigned char;
using namespace shape;

const Bytes *bytesOf(const TensorView &t) {
  return static_cast<const Bytes *>(t.data);
}
Bytes *bytesOf(TensorView &t) { return static_cast<Bytes *>(t.data); }

//===----------------------------------------------------------------------===//
// Strided copy
//===----------------------------------------------------------------------===//

/// Copies `n` elements of W bytes, `step` source elements apart.
template <size_t W>
void copyRowOf(Bytes *dst, const Bytes *src, int64_t n, int64_t step) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * W, src + i * step * static_cast<int64_t>(W), W);
}

void copyRow(Bytes *dst, const Bytes *src, int64_t n, int64_t step, size_t w) {
  if (step == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * w);
    return;
  }
  // A fixed width lets the compiler turn each element into one move.
  switch (w) {
  case 1:
    return copyRowOf<1>(dst, src, n, step);
  case 2:
    return copyRowOf<2>(dst, src, n, step);
  case 4:
    return copyRowOf<4>(dst, src, n, step);
  default:
    return copyRowOf<8>(dst, src, n, step);
  }
}

/// Fills the dense `out` from `in`: the element at output coordinate c is
/// in's element `base + sum_d c[d] * strides[d]` (strides in elements; 0
/// broadcasts, negative walks backwards). Transpose, slice and broadcast_to
/// are all this copy with different strides.
void copyStrided(const TensorView &in, TensorView &out,
                 const std::vector<int64_t> &strides, int64_t base) {
  if (out.numel() == 0)
    return;
  // scratch: the output dims with size-1 dims dropped and dims that walk the
  // input as one merged, so the inner loop is as long as it can be.
  std::vector<int64_t> sizes, steps;
  for (size_t d = 0; d < out.shape.size(); ++d) {
    if (out.shape[d] == 1)
      continue;
    if (!sizes.empty() && steps.back() == strides[d] * out.shape[d]) {
      sizes.back() *= out.shape[d];
      steps.back() = strides[d];
      continue;
    }
    sizes.push_back(out.shape[d]);
    steps.push_back(strides[d]);
  }
  size_t w = byteWidth(out.dtype);
  const Bytes *src = bytesOf(in);
  Bytes *dst = bytesOf(out);
  if (sizes.empty()) {
    std::memcpy(dst, src + base * static_cast<int64_t>(w), w);
    return;
  }
  int64_t inner = sizes.back(), innerStep = steps.back();
  int64_t outerRank = static_cast<int64_t>(sizes.size()) - 1;
  int64_t rows = out.numel() / inner;
  std::vector<int64_t> coord(outerRank, 0); // scratch: odometer
  int64_t offset = base;
  for (int64_t row = 0; row < rows; ++row) {
    copyRow(dst, src + offset * static_cast<int64_t>(w), inner, innerStep, w);
    dst += inner * static_cast<int64_t>(w);
    for (int64_t d = outerRank - 1; d >= 0; --d) {
      offset += steps[d];
      if (++coord[d] < sizes[d])
        break;
      offset -= steps[d] * sizes[d];
      coord[d] = 0;
    }
  }
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
  // Row-major, so the bytes are already in order; memmove in case the
  // runtime ever aliases the two.
  if (x.bytes() && x.data != y.data)
    std::memmove(y.data, x.data, x.bytes());
  return Status::ok();
}

Status broadcastToKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.broadcast_to";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  StridedCopy plan;
  if (Status s = planBroadcastTo(op, ctx.inputs[0], ctx.outputs[0], plan); !s)
    return s;
  copyStrided(ctx.inputs[0], ctx.outputs[0], plan.strides, plan.base);
  return Status::ok();
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
  copyStrided(ctx.inputs[0], ctx.outputs[0], plan.strides, plan.base);
  return Status::ok();
}

Status sliceKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.slice";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  StridedCopy plan;
  if (Status s = planSlice(op, ctx.inputs[0], ctx.outputs[0], ctx.attrs, plan);
      !s)
    return s;
  copyStrided(ctx.inputs[0], ctx.outputs[0], plan.strides, plan.base);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

Status concatKernel(KernelContext &ctx) {
  int64_t axis;
  if (Status s = planConcat(ctx, axis); !s)
    return s;
  TensorView &y = ctx.outputs[0];
  if (y.numel() == 0)
    return Status::ok();
  // Each input contributes one contiguous slab per outer index.
  size_t w = byteWidth(y.dtype);
  int64_t outer = product(y.shape, 0, axis);
  int64_t inner = product(y.shape, axis + 1, y.shape.size());
  Bytes *dst = bytesOf(y);
  for (int64_t o = 0; o < outer; ++o)
    for (const TensorView &x : ctx.inputs) {
      size_t slab = static_cast<size_t>(x.shape[axis] * inner) * w;
      if (slab)
        std::memcpy(dst, bytesOf(x) + o * slab, slab);
      dst += slab;
    }
  return Status::ok();
}

Status splitKernel(KernelContext &ctx) {
  int64_t axis;
  if (Status s = planSplit(ctx, axis); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  if (x.numel() == 0)
    return Status::ok();
  size_t w = byteWidth(x.dtype);
  int64_t outer = product(x.shape, 0, axis);
  int64_t inner = product(x.shape, axis + 1, x.shape.size());
  const Bytes *src = bytesOf(x);
  for (int64_t o = 0; o < outer; ++o)
    for (TensorView &y : ctx.outputs) {
      size_t slab = static_cast<size_t>(y.shape[axis] * inner) * w;
      if (slab)
        std::memcpy(bytesOf(y) + o * slab, src, slab);
      src += slab;
    }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

Status padKernel(KernelContext &ctx) {
  PadGeometry g;
  if (Status s = planPad(ctx, g); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  const std::vector<int64_t> &pads = g.pads, &shape = g.shape;
  int64_t rank = x.rank();
  bool constant = g.mode == PadMode::Constant, edge = g.mode == PadMode::Edge;
  const Bytes *fill = g.fill;
  if (y.numel() == 0)
    return Status::ok();
  size_t w = byteWidth(y.dtype);
  if (rank == 0) {
    std::memcpy(y.data, x.data, w);
    return Status::ok();
  }

  // scratch: per dim, the source coordinate of every output coordinate, or
  // -1 where the constant goes.
  std::vector<std::vector<int64_t>> source(rank);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t begin = pads[d], n = x.shape[d];
    for (int64_t o = 0; o < shape[d]; ++o) {
      int64_t i = o - begin;
      if (i < 0 || i >= n) {
        if (constant)
          i = -1;
        else if (edge)
          i = std::clamp<int64_t>(i, 0, n - 1);
        else // numpy/torch reflect: mirror about the edge, edge not repeated.
          i = i < 0 ? -i : 2 * (n - 1) - i;
      }
      source[d].push_back(i);
    }
  }
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape);
  int64_t cols = shape.back();
  const std::vector<int64_t> &colSource = source.back();
  const Bytes *src = bytesOf(x);
  Bytes *dst = bytesOf(y);
  std::vector<int64_t> coord(rank - 1, 0); // scratch: odometer over rows
  for (int64_t row = 0, rows = y.numel() / cols; row < rows; ++row) {
    // The row's source offset, or -1 if any outer coordinate is padding.
    int64_t offset = 0;
    for (int64_t d = 0; d < rank - 1 && offset >= 0; ++d) {
      int64_t i = source[d][coord[d]];
      offset = i < 0 ? -1 : offset + i * inStrides[d];
    }
    for (int64_t j = 0; j < cols; ++j, dst += w) {
      int64_t i = colSource[j];
      if (offset < 0 || i < 0)
        std::memcpy(dst, fill, w);
      else
        std::memcpy(dst, src + (offset + i) * static_cast<int64_t>(w), w);
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++coord[d] < shape[d])
        break;
      coord[d] = 0;
    }
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Trilu
//===----------------------------------------------------------------------===//

Status triluKernel(KernelContext &ctx) {
  TriluGeometry g;
  if (Status s = planTrilu(ctx, g); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  if (x.numel() == 0)
    return Status::ok();
  const bool upper = g.upper;
  const int64_t rows = g.rows, cols = g.cols, k = g.k;
  size_t w = byteWidth(x.dtype);
  size_t rowBytes = static_cast<size_t>(cols) * w;
  const Bytes *src = bytesOf(x);
  Bytes *dst = bytesOf(y);
  for (int64_t r = 0, n = x.numel() / cols; r < n; ++r) {
    int64_t i = r % rows;
    // torch.triu keeps j - i >= k, torch.tril keeps j - i <= k; the rest
    // becomes zero, which is the all-zero pattern in every dtype.
    int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
    int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
    const Bytes *s = src + r * rowBytes;
    Bytes *d = dst + r * rowBytes;
    std::memset(d, 0, static_cast<size_t>(lo) * w);
    if (hi > lo)
      std::memmove(d + lo * w, s + lo * w, static_cast<size_t>(hi - lo) * w);
    std::memset(d + std::max(hi, lo) * w, 0,
                static_cast<size_t>(cols - std::max(hi, lo)) * w);
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Gather and embedding
//===----------------------------------------------------------------------===//

/// Copies blocks of `inner` elements: for every outer index o and every
/// index i, block (o, idx[i]) of `in` (with `axisSize` blocks per outer
/// index) to block (o, i) of `out`. Negative indices count from the end (ONNX
/// Gather); any index outside [-axisSize, axisSize) is an error, reported
/// before anything is written.
Status gatherBlocks(std::string_view op, const TensorView &in,
                    const TensorView &indices, TensorView &out, int64_t outer,
                    int64_t axisSize, int64_t inner) {
  return dispatchIndex(indices.dtype, op, [&](auto tag) -> Status {
    using I = decltype(tag);
    const I *idx = indices.as<I>();
    int64_t count = indices.numel();
    for (int64_t p = 0; p < count; ++p) {
      int64_t v = idx[p];
      if (v < -axisSize || v >= axisSize)
        return Status::error(std::string(op) + ": index " + std::to_string(v) +
                             " is out of range for size " +
                             std::to_string(axisSize));
    }
    if (out.numel() == 0)
      return Status::ok();
    size_t block = static_cast<size_t>(inner) * byteWidth(in.dtype);
    const Bytes *src = bytesOf(in);
    Bytes *dst = bytesOf(out);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t p = 0; p < count; ++p, dst += block) {
        int64_t v = idx[p];
        v = v < 0 ? v + axisSize : v;
        std::memcpy(dst, src + (o * axisSize + v) * block, block);
      }
    return Status::ok();
  });
}

Status gatherKernel(KernelContext &ctx) {
  GatherGeometry g;
  if (Status s = planGather(ctx, g); !s)
    return s;
  return gatherBlocks("graph.gather", ctx.inputs[0], ctx.inputs[1],
                      ctx.outputs[0], g.outer, g.axisSize, g.inner);
}

Status embeddingKernel(KernelContext &ctx) {
  GatherGeometry g;
  if (Status s = planEmbedding(ctx, g); !s)
    return s;
  return gatherBlocks("graph.embedding", ctx.inputs[0], ctx.inputs[1],
                      ctx.outputs[0], g.outer, g.axisSize, g.inner);
}

} // namespace

void registerShapeKernels(KernelRegistry &registry) {
  registry.add("graph.reshape", reshapeKernel);
  registry.add("graph.broadcast_to", broadcastToKernel);
  registry.add("graph.transpose", transposeKernel);
  registry.add("graph.slice", sliceKernel);
  registry.add("graph.concat", concatKernel);
  registry.add("graph.split", splitKernel);
  registry.add("graph.pad", padKernel);
  registry.add("graph.trilu", triluKernel);
  registry.add("graph.gather", gatherKernel);
  registry.add("graph.embedding", embeddingKernel);
}

} // namespace strata::runtime::cpu
