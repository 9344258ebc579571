//===- ShapeGradKernels.cu - Gradients of slice and pad on CUDA -----------===//
//
// graph.slice_grad and graph.pad_grad, the counterparts of the CPU's
// ShapeGradKernels.cpp. The CPU zeroes dx and adds every dy element into
// the dx element the forward copied it from; here one thread per dx element
// gathers the dy elements that land on it (no atomics, no races), in the
// order the CPU adds them (dy's row-major order), starting from zero, so
// the sums round as the CPU's do.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseCommon.cuh"

#include "strata/Runtime/ShapePlans.h"

#include <string>

namespace strata::runtime::cuda {
namespace {

using namespace shape;

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

struct SliceGradPlan {
  int rank = 0;
  int64_t dxSize[kMaxRank] = {};
  int64_t offset[kMaxRank] = {};
  int64_t step[kMaxRank] = {};
  int64_t size[kMaxRank] = {};
  int64_t dyStride[kMaxRank] = {};
};

/// dx element e: the dy element the slice read from it (one at most: a
/// non-zero stride reads every position once), or zero.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    sliceGradKernel(const T *g, T *out, int64_t n, SliceGradPlan p) {
  STRATA_GRID_STRIDE(e, n) {
    int64_t rest = e, at = 0;
    bool read = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rest;
      if (d > 0) {
        c = rest % p.dxSize[d];
        rest /= p.dxSize[d];
      }
      int64_t q = c - p.offset[d];
      if (q % p.step[d] != 0) {
        read = false;
        break;
      }
      int64_t k = q / p.step[d];
      if (k < 0 || k >= p.size[d]) {
        read = false;
        break;
      }
      at += k * p.dyStride[d];
    }
    out[e] = read ? T(0) + g[at] : T(0);
  }
}

Status sliceGradKernelFn(KernelContext &ctx) {
  constexpr const char *kOp = "graph.slice_grad";
  SliceGradGeometry g;
  if (Status s = planSliceGrad(ctx, g); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  const std::vector<int64_t> &offsets = g.offsets, &sizes = g.sizes,
                             &steps = g.steps;
  int64_t rank = dx.rank();
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = dx.numel();
    if (n == 0)
      return Status::ok();
    if (rank > kMaxRank)
      return tooManyDims(kOp, size_t(rank));
    SliceGradPlan p;
    p.rank = int(rank);
    std::vector<int64_t> dyStrides = rowMajorStrides(dy.shape);
    for (int64_t d = 0; d < rank; ++d) {
      p.dxSize[d] = dx.shape[d];
      p.offset[d] = offsets[d];
      p.step[d] = steps[d];
      p.size[d] = sizes[d];
      p.dyStride[d] = dyStrides[d];
    }
    const CudaStream &cs = streamOf(ctx);
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, sliceGradKernel<T>)
    (dy.as<T>(), dx.as<T>(), n, p);
    return launchStatus(kOp);
  });
}

//===----------------------------------------------------------------------===//
// pad_grad
//===----------------------------------------------------------------------===//

struct PadGradPlan {
  int rank = 0;
  PadMode mode = PadMode::Constant;
  int64_t dxSize[kMaxRank] = {};
  int64_t dySize[kMaxRank] = {};
  int64_t dyStride[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};
};

/// Per dim of one dx coordinate: the dy coordinates the forward copied from
/// it, as three ranges in increasing order (the left pad [0, begin), the
/// copy itself [begin, begin + n), the right pad [begin + n, N)).
struct Sources {
  int64_t start[3];
  int64_t count[3];
  __device__ int64_t total() const { return count[0] + count[1] + count[2]; }
  /// The k-th dy coordinate, k < total().
  __device__ int64_t at(int64_t k) const {
    if (k < count[0])
      return start[0] + k;
    k -= count[0];
    if (k < count[1])
      return start[1] + k;
    return start[2] + (k - count[1]);
  }
};

/// [lo, hi) clipped to [0, N), as range `r` of `s`.
__device__ inline void setRange(Sources &s, int r, int64_t lo, int64_t hi,
                                int64_t N) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > N ? N : hi;
  s.start[r] = lo;
  s.count[r] = hi > lo ? hi - lo : 0;
}

/// The dy coordinates o in [0, N) whose forward source is dx coordinate i
/// of a dim of size n padded by `begin` in front: the CPU's mapping
/// (i = o - begin; outside [0, n): none for constant, clamp for edge,
/// mirror for reflect) inverted.
__device__ inline Sources sourcesOf(PadMode mode, int64_t i, int64_t n,
                                    int64_t N, int64_t begin) {
  Sources s;
  for (int r = 0; r < 3; ++r) {
    s.start[r] = 0;
    s.count[r] = 0;
  }
  // The copy: o = begin + i.
  setRange(s, 1, begin + i, begin + i + 1, N);
  if (mode == PadMode::Edge) {
    if (i == 0) // every o < begin clamps to 0
      setRange(s, 0, 0, begin, N);
    if (i == n - 1) // every o >= begin + n clamps to n - 1
      setRange(s, 2, begin + n, N, N);
  } else if (mode == PadMode::Reflect) {
    // Left: o < begin reads begin - o, so o = begin - i for i > 0.
    if (i > 0)
      setRange(s, 0, begin - i, begin - i + 1, N);
    // Right: o >= begin + n reads 2 (n - 1) - (o - begin), so
    // o = begin + 2 (n - 1) - i for i <= n - 2.
    if (i <= n - 2)
      setRange(s, 2, begin + 2 * (n - 1) - i, begin + 2 * (n - 1) - i + 1, N);
  }
  return s;
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    padGradKernel(const T *g, T *out, int64_t n, PadGradPlan p) {
  STRATA_GRID_STRIDE(e, n) {
    Sources src[kMaxRank];
    int64_t rest = e;
    bool none = false;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rest;
      if (d > 0) {
        c = rest % p.dxSize[d];
        rest /= p.dxSize[d];
      }
      src[d] = sourcesOf(p.mode, c, p.dxSize[d], p.dySize[d], p.begin[d]);
      none = none || src[d].total() == 0;
    }
    T acc = T(0);
    if (!none) {
      // Every combination, the last dim fastest: dy's row-major order.
      int64_t k[kMaxRank] = {};
      while (true) {
        int64_t at = 0;
        for (int d = 0; d < p.rank; ++d)
          at += src[d].at(k[d]) * p.dyStride[d];
        acc += g[at];
        int d = p.rank - 1;
        for (; d >= 0; --d) {
          if (++k[d] < src[d].total())
            break;
          k[d] = 0;
        }
        if (d < 0)
          break;
      }
    }
    out[e] = acc;
  }
}

Status padGradKernelFn(KernelContext &ctx) {
  constexpr const char *kOp = "graph.pad_grad";
  PadGradGeometry g;
  if (Status s = planPadGrad(ctx, g); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  const std::vector<int64_t> &pads = g.pads;
  int64_t rank = dx.rank();
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = dx.numel();
    if (n == 0)
      return Status::ok();
    if (rank > kMaxRank)
      return tooManyDims(kOp, size_t(rank));
    PadGradPlan p;
    p.rank = int(rank);
    p.mode = g.mode;
    std::vector<int64_t> dyStrides = rowMajorStrides(dy.shape);
    for (int64_t d = 0; d < rank; ++d) {
      p.dxSize[d] = dx.shape[d];
      p.dySize[d] = dy.shape[d];
      p.dyStride[d] = dyStrides[d];
      p.begin[d] = pads[d];
    }
    const CudaStream &cs = streamOf(ctx);
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, padGradKernel<T>)
    (dy.as<T>(), dx.as<T>(), n, p);
    return launchStatus(kOp);
  });
}

} // namespace

void registerShapeGradKernels(KernelRegistry &registry) {
  registry.add("graph.slice_grad", sliceGradKernelFn);
  registry.add("graph.pad_grad", padGradKernelFn);
}

} // namespace strata::runtime::cuda
