//===- ConvolutionKernels.cu - Convolution and pooling on CUDA -------------===//
//
// graph.conv, graph.max_pool, graph.avg_pool and their gradients, the
// counterparts of runtime/cpu/kernels/ConvolutionKernels.cpp: the same
// windows (any number of spatial dims up to 6, separate begin and end pads,
// ceil_mode, dilations), checks and messages.
//
// Direct kernels, one thread per result element, no scatter and no atomics:
//  - conv: a thread per output element sums its window over the group's
//    channels (in the element type, as the CPU's GEMM), then adds the bias;
//  - conv_grad_input: a thread per input element gathers every (output
//    position, kernel tap) that reads it;
//  - conv_grad_weight: a block per weight element reduces over the batch
//    and the output positions (a fixed tree: reproducible);
//  - max_pool, avg_pool: a thread per output element walks its window;
//  - max_pool_grad: a thread per output element finds the element its
//    window picked (the CPU's first maximum) into scratch; then a thread per
//    input element adds, in output order, the gradients of the windows that
//    picked it: the CPU's additions in its order, so bit-identical;
//  - avg_pool_grad: a thread per input element adds the shares of the
//    windows over it in output order, also bit-identical.
//
// The per-element functions are __host__ __device__ so they can be checked
// against the CPU kernels without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"
#include "NormalizationCommon.cuh"

#include "strata/Runtime/WindowPlan.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace strata::runtime::cuda {
namespace {

using namespace norm;

//===----------------------------------------------------------------------===//
// Windows
//===----------------------------------------------------------------------===//

/// Spatial dims a kernel takes by value.
constexpr int kMaxSpatial = kMaxRank - 2;

/// A sliding window over the spatial dims of an [N, C, x...] tensor, by
/// value for the kernels.
struct Window {
  int spatial = 0;
  int64_t in[kMaxSpatial] = {}, out[kMaxSpatial] = {}, kernel[kMaxSpatial] = {};
  int64_t stride[kMaxSpatial] = {}, padBegin[kMaxSpatial] = {};
  int64_t padEnd[kMaxSpatial] = {}, dilation[kMaxSpatial] = {};
  int64_t inPlane = 1, outPlane = 1, taps = 1;
};

/// A shared plan's window (WindowPlan.h), by value.
Status byValue(const std::string &op, const window::Window &plan, Window &w) {
  if (plan.spatial > size_t(kMaxSpatial))
    return Status::error(op + ": more than " + std::to_string(kMaxSpatial) +
                         " spatial dims are not supported on CUDA");
  w = Window();
  w.spatial = int(plan.spatial);
  for (size_t d = 0; d < plan.spatial; ++d) {
    w.in[d] = plan.in[d];
    w.out[d] = plan.out[d];
    w.kernel[d] = plan.kernel[d];
    w.stride[d] = plan.strides[d];
    w.padBegin[d] = plan.padBegin[d];
    w.padEnd[d] = plan.padEnd[d];
    w.dilation[d] = plan.dilations[d];
    w.inPlane *= w.in[d];
    w.outPlane *= w.out[d];
    w.taps *= w.kernel[d];
  }
  return Status::ok();
}


/// Row-major coordinates of `flat` in `dims`.
__host__ __device__ inline void unflatten(int64_t flat, const int64_t *dims,
                                          int n, int64_t *coord) {
  for (int d = n - 1; d >= 0; --d) {
    coord[d] = flat % dims[d];
    flat /= dims[d];
  }
}

/// Steps `idx` to the next tap of [0, hi) in row-major order.
__host__ __device__ inline void nextTap(int64_t *idx, const int64_t *hi,
                                        int n) {
  for (int d = n - 1; d >= 0; --d) {
    if (++idx[d] < hi[d])
      return;
    idx[d] = 0;
  }
}

/// Steps `idx` through [0, hi) in reverse row-major order (from hi - 1).
__host__ __device__ inline void previousTap(int64_t *idx, const int64_t *hi,
                                            int n) {
  for (int d = n - 1; d >= 0; --d) {
    if (idx[d]-- > 0)
      return;
    idx[d] = hi[d] - 1;
  }
}

/// The flat output position whose tap `k` reads input coordinate `ic`, or
/// -1 when none does (off the stride grid or outside the output).
__host__ __device__ inline int64_t outputOfTap(const Window &w,
                                               const int64_t *ic,
                                               const int64_t *k) {
  int64_t flat = 0;
  for (int d = 0; d < w.spatial; ++d) {
    int64_t num = ic[d] + w.padBegin[d] - k[d] * w.dilation[d];
    if (num < 0 || num % w.stride[d] != 0)
      return -1;
    int64_t o = num / w.stride[d];
    if (o >= w.out[d])
      return -1;
    flat = flat * w.out[d] + o;
  }
  return flat;
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

struct ConvShape {
  Window w;
  int64_t batch = 0, channels = 0, m = 0, groups = 1, cg = 0, mg = 0;
};

/// A conv's shape from the shared checks (WindowPlan.h's planConv /
/// planConvGrad) and its input `x`, for the kernels.
Status convShapeOf(const std::string &op, const TensorView &x,
                   const window::ConvGeometry &g, ConvShape &c) {
  if (Status s = byValue(op, g.w, c.w); !s)
    return s;
  c.batch = x.shape[0];
  c.channels = x.shape[1];
  c.m = g.m;
  c.groups = g.groups;
  c.cg = g.cg;
  c.mg = g.mg;
  return Status::ok();
}

/// Output element e of [N, M, out...].
template <typename T>
__host__ __device__ inline T convOutput(const ConvShape &c, const T *x,
                                        const T *wt, const T *bias, int64_t e) {
  const Window &w = c.w;
  int64_t pos = e % w.outPlane, o = e / w.outPlane % c.m,
          nb = e / (w.outPlane * c.m);
  int64_t g = o / c.mg;
  int64_t oc[kMaxSpatial], k[kMaxSpatial] = {};
  unflatten(pos, w.out, w.spatial, oc);
  const T *xg = x + (nb * c.channels + g * c.cg) * w.inPlane;
  const T *wo = wt + o * c.cg * w.taps;
  T acc = T(0);
  for (int64_t t = 0; t < w.taps; ++t, nextTap(k, w.kernel, w.spatial)) {
    bool inside = true;
    int64_t at = 0;
    for (int d = 0; d < w.spatial; ++d) {
      int64_t i = oc[d] * w.stride[d] + k[d] * w.dilation[d] - w.padBegin[d];
      inside = inside && i >= 0 && i < w.in[d];
      at = at * w.in[d] + i;
    }
    if (!inside)
      continue;
    for (int64_t ch = 0; ch < c.cg; ++ch)
      acc += xg[ch * w.inPlane + at] * wo[ch * w.taps + t];
  }
  return acc + (bias ? bias[o] : T(0));
}

/// Input-gradient element e of [N, C, in...]: every (output position, tap)
/// that reads it, over the group's output channels.
template <typename T>
__host__ __device__ inline T convGradInputElement(const ConvShape &c,
                                                  const T *dy, const T *wt,
                                                  int64_t e) {
  const Window &w = c.w;
  int64_t ipos = e % w.inPlane, ci = e / w.inPlane % c.channels,
          nb = e / (w.inPlane * c.channels);
  int64_t g = ci / c.cg, ch = ci % c.cg;
  int64_t ic[kMaxSpatial], k[kMaxSpatial] = {};
  unflatten(ipos, w.in, w.spatial, ic);
  T acc = T(0);
  for (int64_t t = 0; t < w.taps; ++t, nextTap(k, w.kernel, w.spatial)) {
    int64_t opos = outputOfTap(w, ic, k);
    if (opos < 0)
      continue;
    for (int64_t oc = 0; oc < c.mg; ++oc) {
      int64_t o = g * c.mg + oc;
      acc += dy[(nb * c.m + o) * w.outPlane + opos] *
             wt[(o * c.cg + ch) * w.taps + t];
    }
  }
  return acc;
}

/// Weight-gradient element e of [M, C/g, k...]: its terms q = first,
/// first + step, ... of the N * P (batch, output position) pairs.
template <typename T>
__host__ __device__ inline T convGradWeightPart(const ConvShape &c,
                                                const T *dy, const T *x,
                                                int64_t e, int64_t first,
                                                int64_t step) {
  const Window &w = c.w;
  int64_t t = e % w.taps, ch = e / w.taps % c.cg, o = e / (w.taps * c.cg);
  int64_t g = o / c.mg;
  int64_t k[kMaxSpatial], oc[kMaxSpatial];
  unflatten(t, w.kernel, w.spatial, k);
  T acc = T(0);
  for (int64_t q = first, n = c.batch * w.outPlane; q < n; q += step) {
    int64_t nb = q / w.outPlane, opos = q % w.outPlane;
    unflatten(opos, w.out, w.spatial, oc);
    bool inside = true;
    int64_t at = 0;
    for (int d = 0; d < w.spatial; ++d) {
      int64_t i = oc[d] * w.stride[d] + k[d] * w.dilation[d] - w.padBegin[d];
      inside = inside && i >= 0 && i < w.in[d];
      at = at * w.in[d] + i;
    }
    if (inside)
      acc += dy[(nb * c.m + o) * w.outPlane + opos] *
             x[(nb * c.channels + g * c.cg + ch) * w.inPlane + at];
  }
  return acc;
}

template <typename T>
__global__ void convForward(ConvShape c, const T *x, const T *wt,
                            const T *bias, T *y, int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    y[e] = convOutput(c, x, wt, bias, e);
}

template <typename T>
__global__ void convGradInput(ConvShape c, const T *dy, const T *wt, T *dx,
                              int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    dx[e] = convGradInputElement(c, dy, wt, e);
}

template <typename T>
__global__ void convGradWeight(ConvShape c, const T *dy, const T *x, T *dw,
                               int64_t n) {
  for (int64_t e = blockIdx.x; e < n; e += gridDim.x) {
    T part = convGradWeightPart(c, dy, x, e, threadIdx.x, blockDim.x);
    T sum = blockSum(part);
    if (threadIdx.x == 0)
      dw[e] = sum;
  }
}

Status convKernel(KernelContext &ctx) {
  const std::string op = "graph.conv";
  window::ConvGeometry g;
  if (Status s = window::planConv(ctx, g); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() == 3 ? &ctx.inputs[2] : nullptr;
  TensorView &y = ctx.outputs[0];
  ConvShape c;
  if (Status s = convShapeOf(op, x, g, c); !s)
    return s;
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = y.numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    convForward<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(
        c, x.as<T>(), wt.as<T>(), bias ? bias->as<T>() : nullptr, y.as<T>(),
        n);
    return launchStatus(op);
  });
}

/// graph.conv_grad_input (dy, weight) -> dx and graph.conv_grad_weight
/// (dy, x) -> dw.
Status convGradKernel(KernelContext &ctx, bool wantInput) {
  const std::string op =
      wantInput ? "graph.conv_grad_input" : "graph.conv_grad_weight";
  window::ConvGeometry g;
  if (Status s = window::planConvGrad(ctx, wantInput, g); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = wantInput ? ctx.outputs[0] : ctx.inputs[1];
  const TensorView &wt = wantInput ? ctx.inputs[1] : ctx.outputs[0];
  ConvShape c;
  if (Status s = convShapeOf(op, x, g, c); !s)
    return s;
  return dispatchFloat(dy.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = ctx.outputs[0].numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    if (wantInput)
      convGradInput<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(
          c, dy.as<T>(), wt.as<T>(), ctx.outputs[0].as<T>(), n);
    else
      convGradWeight<T><<<rowGrid(n), kBlock, 0, s.stream>>>(
          c, dy.as<T>(), x.as<T>(), ctx.outputs[0].as<T>(), n);
    return launchStatus(op);
  });
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Max-pool window of output element e (plane e / outPlane): its value, and
/// in `bestAt` the plane offset of the element it picked (-1: an empty
/// window). `grad` selects the gradient's rule (the first tap always
/// counts), otherwise the forward's; both pick the CPU's element.
template <typename T>
__host__ __device__ inline T maxPoolWindow(const Window &w, const T *x,
                                           int64_t e, bool grad,
                                           int64_t &bestAt) {
  int64_t plane = e / w.outPlane, o = e % w.outPlane;
  const T *in = x + plane * w.inPlane;
  int64_t oc[kMaxSpatial], start[kMaxSpatial], lo[kMaxSpatial],
      hi[kMaxSpatial], tap[kMaxSpatial];
  unflatten(o, w.out, w.spatial, oc);
  bool empty = false;
  for (int d = 0; d < w.spatial; ++d) {
    start[d] = oc[d] * w.stride[d] - w.padBegin[d];
    int64_t dil = w.dilation[d];
    lo[d] = start[d] < 0 ? (-start[d] + dil - 1) / dil : 0;
    int64_t room = w.in[d] - start[d];
    hi[d] = room <= 0 ? 0 : std::min(w.kernel[d], (room + dil - 1) / dil);
    empty = empty || lo[d] >= hi[d];
    tap[d] = lo[d];
  }
  T best = -std::numeric_limits<T>::infinity();
  bestAt = -1;
  if (empty)
    return best;
  while (true) {
    int64_t at = 0;
    for (int d = 0; d < w.spatial; ++d)
      at = at * w.in[d] + start[d] + tap[d] * w.dilation[d];
    T v = in[at];
    bool isNaN = v != v;
    if (v > best || isNaN || (grad && bestAt < 0)) {
      best = v;
      bestAt = at;
      if (isNaN)
        break;
    }
    // Next tap of the box [lo, hi).
    int d = w.spatial - 1;
    for (; d >= 0; --d) {
      if (++tap[d] < hi[d])
        break;
      tap[d] = lo[d];
    }
    if (d < 0)
      break;
  }
  return best;
}

/// Input-gradient element e (plane e / inPlane) of max_pool: the gradients
/// of the windows that picked it, added in output order.
template <typename T>
__host__ __device__ inline T maxPoolGradElement(const Window &w, const T *g,
                                                const int64_t *picked,
                                                int64_t e) {
  int64_t plane = e / w.inPlane, ipos = e % w.inPlane;
  int64_t ic[kMaxSpatial], k[kMaxSpatial];
  unflatten(ipos, w.in, w.spatial, ic);
  for (int d = 0; d < w.spatial; ++d)
    k[d] = w.kernel[d] - 1;
  const T *gp = g + plane * w.outPlane;
  const int64_t *pp = picked + plane * w.outPlane;
  T acc = T(0);
  // Taps in reverse order visit the windows over ipos in output order.
  for (int64_t t = 0; t < w.taps; ++t, previousTap(k, w.kernel, w.spatial)) {
    int64_t o = outputOfTap(w, ic, k);
    if (o >= 0 && pp[o] == ipos)
      acc += gp[o];
  }
  return acc;
}

/// The CPU's avg-pool divisor of output position o and whether its window
/// holds an input element; with `sum`, the double sum of those elements.
template <typename T>
__host__ __device__ inline bool avgPoolWindow(const Window &w, const T *in,
                                              int64_t o, bool countIncludePad,
                                              double *sum, int64_t &divisor) {
  int64_t oc[kMaxSpatial], lo[kMaxSpatial], hi[kMaxSpatial], idx[kMaxSpatial];
  unflatten(o, w.out, w.spatial, oc);
  int64_t padded = 1, real = 1;
  bool empty = false;
  for (int d = 0; d < w.spatial; ++d) {
    int64_t start = oc[d] * w.stride[d] - w.padBegin[d];
    int64_t end = std::min(start + w.kernel[d], w.in[d] + w.padEnd[d]);
    padded *= end - start;
    lo[d] = std::max<int64_t>(start, 0);
    hi[d] = std::min(end, w.in[d]);
    empty = empty || lo[d] >= hi[d];
    real *= hi[d] - lo[d];
    idx[d] = lo[d];
  }
  divisor = countIncludePad ? padded : real;
  if (empty || !sum)
    return !empty;
  double s = 0;
  while (true) {
    int64_t at = 0;
    for (int d = 0; d < w.spatial; ++d)
      at = at * w.in[d] + idx[d];
    s += double(in[at]);
    int d = w.spatial - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < hi[d])
        break;
      idx[d] = lo[d];
    }
    if (d < 0)
      break;
  }
  *sum = s;
  return true;
}

template <typename T>
__host__ __device__ inline T avgPoolOutput(const Window &w, const T *x,
                                           bool countIncludePad, int64_t e) {
  int64_t plane = e / w.outPlane, o = e % w.outPlane;
  double sum = 0;
  int64_t divisor = 1;
  if (!avgPoolWindow(w, x + plane * w.inPlane, o, countIncludePad, &sum,
                     divisor))
    return T(0);
  return T(sum / double(divisor));
}

/// Input-gradient element e of avg_pool: the shares of the windows over it,
/// added in output order.
template <typename T>
__host__ __device__ inline T avgPoolGradElement(const Window &w, const T *g,
                                                bool countIncludePad,
                                                int64_t e) {
  int64_t plane = e / w.inPlane, ipos = e % w.inPlane;
  int64_t ic[kMaxSpatial], k[kMaxSpatial];
  unflatten(ipos, w.in, w.spatial, ic);
  for (int d = 0; d < w.spatial; ++d)
    k[d] = w.kernel[d] - 1;
  const T *gp = g + plane * w.outPlane;
  T acc = T(0);
  for (int64_t t = 0; t < w.taps; ++t, previousTap(k, w.kernel, w.spatial)) {
    int64_t o = outputOfTap(w, ic, k);
    if (o < 0)
      continue;
    int64_t divisor = 1;
    // A window over an input element is never empty.
    avgPoolWindow<T>(w, nullptr, o, countIncludePad, nullptr, divisor);
    acc += static_cast<T>(double(gp[o]) / double(divisor));
  }
  return acc;
}

template <typename T>
__global__ void maxPoolForward(Window w, const T *x, T *y, int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    int64_t at;
    y[e] = maxPoolWindow(w, x, e, false, at);
  }
}

template <typename T>
__global__ void maxPoolPick(Window w, const T *x, int64_t *picked, int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    int64_t at;
    maxPoolWindow(w, x, e, true, at);
    picked[e] = at;
  }
}

template <typename T>
__global__ void maxPoolGrad(Window w, const T *g, const int64_t *picked, T *dx,
                            int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    dx[e] = maxPoolGradElement(w, g, picked, e);
}

template <typename T>
__global__ void avgPoolForward(Window w, const T *x, T *y, bool countIncludePad,
                               int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    y[e] = avgPoolOutput(w, x, countIncludePad, e);
}

template <typename T>
__global__ void avgPoolGrad(Window w, const T *g, T *dx, bool countIncludePad,
                            int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    dx[e] = avgPoolGradElement(w, g, countIncludePad, e);
}

/// A pool's window (WindowPlan.h's planPool), by value.
Status readPoolWindow(const std::string &op, const KernelContext &ctx,
                      bool withDilations, Window &w) {
  window::Window plan;
  if (Status s = window::planPool(op, ctx, withDilations, plan); !s)
    return s;
  return byValue(op, plan, w);
}

Status maxPoolKernel(KernelContext &ctx) {
  const std::string op = "graph.max_pool";
  Window w;
  if (Status s = readPoolWindow(op, ctx, /*withDilations=*/true, w); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = ctx.outputs[0].numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    maxPoolForward<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(
        w, x.as<T>(), ctx.outputs[0].as<T>(), n);
    return launchStatus(op);
  });
}

Status avgPoolKernel(KernelContext &ctx) {
  const std::string op = "graph.avg_pool";
  Window w;
  if (Status s = readPoolWindow(op, ctx, /*withDilations=*/false, w); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  bool countIncludePad = ctx.attrs.getBool("count_include_pad", false);
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = ctx.outputs[0].numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    avgPoolForward<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(
        w, x.as<T>(), ctx.outputs[0].as<T>(), countIncludePad, n);
    return launchStatus(op);
  });
}

/// The CPU's checks of graph.max_pool_grad (dy, x) -> dx.
Status checkMaxPoolGrad(const KernelContext &ctx, Window &w) {
  window::Window plan;
  if (Status s = window::planMaxPoolGrad(ctx, plan); !s)
    return s;
  return byValue("graph.max_pool_grad", plan, w);
}

Status maxPoolGradKernel(KernelContext &ctx) {
  const std::string op = "graph.max_pool_grad";
  Window w;
  if (Status s = checkMaxPoolGrad(ctx, w); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  TensorView &dx = ctx.outputs[0];
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = dx.numel(), windows = dy.numel();
    if (n == 0)
      return Status::ok();
    int64_t *picked = nullptr;
    const CudaStream &s = streamOf(ctx);
    if (windows > 0) {
      const DeviceScratch *scratch;
      if (Status st =
              scratchOf(ctx, op, size_t(windows) * sizeof(int64_t), scratch);
          !st)
        return st;
      picked = scratch->at<int64_t>(0);
      maxPoolPick<T><<<gridFor(s, windows), kBlock, 0, s.stream>>>(
          w, x.as<T>(), picked, windows);
      if (Status st = launchStatus(op); !st)
        return st;
    }
    // No windows: every tap misses (outputOfTap finds no output position),
    // so the gradient is zero; `picked` is never read.
    maxPoolGrad<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(w, dy.as<T>(),
                                                           picked, dx.as<T>(), n);
    return launchStatus(op);
  });
}

Status prepareMaxPoolGrad(KernelContext &ctx, std::shared_ptr<void> &prepared) {
  Window w;
  if (!checkMaxPoolGrad(ctx, w) || ctx.inputs[0].numel() == 0 ||
      ctx.outputs[0].numel() == 0)
    return Status::ok();
  return makeScratch("graph.max_pool_grad",
                     size_t(ctx.inputs[0].numel()) * sizeof(int64_t), prepared);
}

Status avgPoolGradKernel(KernelContext &ctx) {
  const std::string op = "graph.avg_pool_grad";
  window::Window plan;
  Window w;
  if (Status s = window::planAvgPoolGrad(ctx, plan); !s)
    return s;
  if (Status s = byValue(op, plan, w); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  bool countIncludePad = ctx.attrs.getBool("count_include_pad", false);
  return dispatchFloat(dy.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = dx.numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    avgPoolGrad<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(
        w, dy.as<T>(), dx.as<T>(), countIncludePad, n);
    return launchStatus(op);
  });
}

} // namespace

void registerConvolutionKernels(KernelRegistry &registry) {
  registry.add("graph.conv", convKernel);
  registry.add("graph.max_pool", maxPoolKernel);
  registry.add("graph.avg_pool", avgPoolKernel);
  registry.add("graph.conv_grad_input",
               [](KernelContext &ctx) { return convGradKernel(ctx, true); });
  registry.add("graph.conv_grad_weight",
               [](KernelContext &ctx) { return convGradKernel(ctx, false); });
  registry.add("graph.max_pool_grad", maxPoolGradKernel, prepareMaxPoolGrad);
  registry.add("graph.avg_pool_grad", avgPoolGradKernel);
}

} // namespace strata::runtime::cuda
