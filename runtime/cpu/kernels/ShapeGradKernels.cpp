//===- ShapeGradKernels.cpp - Gradients of slice and pad ------------------===//
//
// graph.slice_grad and graph.pad_grad: the adjoints of the forward copies,
// computed with the forward kernels' index rules (ShapeKernels.cpp).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include <algorithm>
#include <string>

namespace strata::runtime::cpu {
namespace {

/// Calls fn(flat, coord) for every coordinate of `shape` in row-major order.
template <typename Fn>
void forEachCoord(const std::vector<int64_t> &shape, Fn fn) {
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  std::vector<int64_t> coord(shape.size(), 0); // scratch: rank-sized
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(flat, coord);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++coord[d] < shape[d])
        break;
      coord[d] = 0;
    }
  }
}

Status sliceGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.slice_grad";
  if (Status s = checkArity(ctx, kOp, 1, 1, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  std::vector<int64_t> offsets = ctx.attrs.getInts("offsets"),
                       sizes = ctx.attrs.getInts("sizes"),
                       steps = ctx.attrs.getInts("strides");
  int64_t rank = dx.rank();
  if (dx.dtype != dy.dtype || dy.shape != sizes ||
      static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return Status::error("graph.slice_grad: gradient " + dy.describe() +
                         " does not fit the slice of " + dx.describe());
  // The forward's rules (ShapeKernels.cpp): non-zero strides (negative
  // ones walk backwards), and the first and last element read in bounds.
  for (int64_t d = 0; d < rank; ++d) {
    if (steps[d] == 0 || sizes[d] < 0)
      return Status::error("graph.slice_grad: dim " + std::to_string(d) +
                           ": stride must be non-zero and size >= 0");
    int64_t last = offsets[d] + (sizes[d] - 1) * steps[d];
    if (sizes[d] > 0 && (offsets[d] < 0 || offsets[d] >= dx.shape[d] ||
                         last < 0 || last >= dx.shape[d]))
      return Status::error("graph.slice_grad: slice is out of bounds in dim " +
                           std::to_string(d));
  }
  std::vector<int64_t> strides = rowMajorStrides(dx.shape);
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *g = dy.as<T>();
    T *out = dx.as<T>();
    std::fill(out, out + dx.numel(), T(0));
    forEachCoord(dy.shape, [&](int64_t flat, const std::vector<int64_t> &c) {
      int64_t at = 0;
      for (int64_t d = 0; d < rank; ++d)
        at += (offsets[d] + c[d] * steps[d]) * strides[d];
      out[at] += g[flat];
    });
    return Status::ok();
  });
}

Status padGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.pad_grad";
  if (Status s = checkArity(ctx, kOp, 1, 1, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  std::vector<int64_t> pads = ctx.attrs.getInts("pads");
  std::string mode = ctx.attrs.getString("mode", "constant");
  int64_t rank = dx.rank();
  if (dx.dtype != dy.dtype || static_cast<int64_t>(pads.size()) != 2 * rank ||
      dy.rank() != rank)
    return Status::error("graph.pad_grad: gradient " + dy.describe() +
                         " does not fit " + dx.describe());
  for (int64_t d = 0; d < rank; ++d)
    if (dy.shape[d] != dx.shape[d] + pads[d] + pads[d + rank])
      return Status::error("graph.pad_grad: gradient " + dy.describe() +
                           " is not the padded " + dx.describe());
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return Status::error("graph.pad_grad: unknown mode \"" + mode + "\"");
  // Negative pads (a crop) need no source; positive ones need what the
  // forward needs: reflect pads < dim, edge a non-empty dim.
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = dx.shape[d], begin = pads[d], end = pads[d + rank];
    if ((mode == "reflect" &&
         ((begin > 0 && begin >= n) || (end > 0 && end >= n))) ||
        (mode == "edge" && n == 0 && (begin > 0 || end > 0)))
      return Status::error("graph.pad_grad: " + mode + " pads of dim " +
                           std::to_string(d) + " do not fit size " +
                           std::to_string(n));
  }
  bool constant = mode == "constant", edge = mode == "edge";
  std::vector<int64_t> strides = rowMajorStrides(dx.shape);
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *g = dy.as<T>();
    T *out = dx.as<T>();
    std::fill(out, out + dx.numel(), T(0));
    // Every output position, in order, adds into the input position the
    // forward copied it from (several of them under reflect and edge).
    forEachCoord(dy.shape, [&](int64_t flat, const std::vector<int64_t> &c) {
      int64_t at = 0;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t n = dx.shape[d], i = c[d] - pads[d];
        if (i < 0 || i >= n) {
          if (constant)
            return; // the fill value: no input element
          i = edge    ? std::clamp<int64_t>(i, 0, n - 1)
              : i < 0 ? -i
                      : 2 * (n - 1) - i;
        }
        at += i * strides[d];
      }
      out[at] += g[flat];
    });
    return Status::ok();
  });
}

} // namespace

void registerShapeGradKernels(KernelRegistry &registry) {
  registry.add("graph.slice_grad", sliceGradKernel);
  registry.add("graph.pad_grad", padGradKernel);
}

} // namespace strata::runtime::cpu
