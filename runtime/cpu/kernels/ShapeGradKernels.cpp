//===- ShapeGradKernels.cpp - Gradients of slice and pad ------------------===//
//
// graph.slice_grad and graph.pad_grad: the adjoints of the forward copies,
// computed with the forward kernels' index rules (ShapeKernels.cpp).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/ShapePlans.h"

#include <algorithm>
#include <string>

namespace strata::runtime::cpu {
namespace {

using namespace shape;

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
  SliceGradGeometry g;
  if (Status s = planSliceGrad(ctx, g); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  const std::vector<int64_t> &offsets = g.offsets, &steps = g.steps;
  int64_t rank = dx.rank();
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
  PadGradGeometry g;
  if (Status s = planPadGrad(ctx, g); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  const std::vector<int64_t> &pads = g.pads;
  int64_t rank = dx.rank();
  bool constant = g.mode == PadMode::Constant, edge = g.mode == PadMode::Edge;
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
