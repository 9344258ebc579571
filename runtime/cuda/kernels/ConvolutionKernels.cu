//===- ConvolutionKernels.cu - Convolution and pooling on CUDA -------------===//
//
// graph.conv, graph.max_pool, graph.avg_pool and their gradients, the
// counterparts of runtime/cpu/kernels/ConvolutionKernels.cpp: the same
// windows (any number of spatial dims up to 6, separate begin and end pads,
// ceil_mode, dilations), checks and messages.
//
// No scatter and no atomics:
//  - conv, conv_grad_input, conv_grad_weight: implicit GEMMs
//    (ConvImplicitGemm.cuh), the im2col operand gathered as its tile
//    loads, a long sum split over blocks by shape alone (reproducible);
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

#include "ConvImplicitGemm.cuh"
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

using conv_gemm::kMaxSpatial;
using conv_gemm::Window;
static_assert(kMaxSpatial == kMaxRank - 2, "a window is a rank's spatial dims");

using conv_gemm::windowOf;

using conv_gemm::unflatten;

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
  int64_t padded[kMaxSpatial], offset[kMaxSpatial];
  for (int d = 0; d < w.spatial; ++d) {
    padded[d] = ic[d] + w.padBegin[d];
    offset[d] = k[d] * w.dilation[d];
  }
  return conv_gemm::outputAt(w, padded, offset);
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

using conv_gemm::convOpName;

template <conv_gemm::Pass P, typename S>
__global__ void __launch_bounds__(conv_gemm::kThreads)
    convGemmKernel(conv_gemm::Params<S> p) {
  // 128-byte aligned: WMMA fragments need 32 (MmaLayout's offsets assume
  // the base is).
  STRATA_DYNAMIC_SHARED(128, shared);
  conv_gemm::gemmBlock<P>(p, blockIdx.x, threadIdx.x, shared);
}

template <conv_gemm::Pass P, typename S>
__global__ void convAddSplits(conv_gemm::Params<S> p, int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    conv_gemm::addSplits<P>(p, e);
}

/// Enqueues pass P over tensors of storage type S (float, double,
/// mma::Bf16, mma::Fp16).
template <conv_gemm::Pass P, typename S>
Status launchConv(KernelContext &ctx, const conv_gemm::Conv &c,
                  const conv_gemm::Gemm &gemm) {
  using T = typename conv_gemm::Params<S>::T;
  const std::string op = convOpName(P);
  if (ctx.outputs[0].numel() == 0)
    return Status::ok();
  conv_gemm::Params<S> p;
  p.c = c;
  p.gemm = gemm;
  conv_gemm::bindOperands(P, ctx, p);
  const CudaStream &s = streamOf(ctx);
  int64_t partials = gemm.partialElements(c.groups);
  if (partials > 0) {
    const DeviceScratch *scratch;
    if (Status st = scratchOf(ctx, op, size_t(partials) * sizeof(T), scratch);
        !st)
      return st;
    p.partial = scratch->at<T>(0);
  }
  int64_t blocks = gemm.blocks(c.groups);
  if (blocks > 0) {
    STRATA_LAUNCH(unsigned(blocks), conv_gemm::kThreads,
                  conv_gemm::sharedBytes<S>(), s.stream, convGemmKernel<P, S>)
    (p);
    if (Status st = launchStatus(op); !st)
      return st;
  }
  if (partials > 0) {
    int64_t n = c.groups * gemm.M * gemm.N;
    STRATA_LAUNCH(gridFor(s, n), kBlock, 0, s.stream, convAddSplits<P, S>)
    (p, n);
    return launchStatus(op);
  }
  return Status::ok();
}

/// graph.conv (x, weight[, bias]) -> y, graph.conv_grad_input (dy, weight)
/// -> dx and graph.conv_grad_weight (dy, x) -> dw.
template <conv_gemm::Pass P> Status convKernel(KernelContext &ctx) {
  conv_gemm::Conv c;
  conv_gemm::Gemm gemm;
  if (Status s = conv_gemm::planPass(ctx, P, c, gemm); !s)
    return s;
  return dispatchFloat(ctx.outputs[0].dtype, convOpName(P),
                       [&](auto tag) -> Status {
                         return launchConv<P, decltype(tag)>(ctx, c, gemm);
                       });
}

/// The scratch of a split sum, made at load.
template <conv_gemm::Pass P>
Status prepareConv(KernelContext &ctx, std::shared_ptr<void> &prepared) {
  conv_gemm::Conv c;
  conv_gemm::Gemm gemm;
  // A bad instruction fails with its message when it runs.
  if (!conv_gemm::planPass(ctx, P, c, gemm) || ctx.outputs[0].numel() == 0)
    return Status::ok();
  int64_t partials = gemm.partialElements(c.groups);
  if (partials == 0)
    return Status::ok();
  size_t element = ctx.outputs[0].dtype == DType::F64 ? 8 : 4;
  return makeScratch(convOpName(P), size_t(partials) * element, prepared);
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
  return windowOf(op, plan, w);
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
    STRATA_LAUNCH(gridFor(s, n), kBlock, 0, s.stream, maxPoolForward<T>)
    (w, x.as<T>(), ctx.outputs[0].as<T>(), n);
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
    STRATA_LAUNCH(gridFor(s, n), kBlock, 0, s.stream, avgPoolForward<T>)
    (w, x.as<T>(), ctx.outputs[0].as<T>(), countIncludePad, n);
    return launchStatus(op);
  });
}

/// The CPU's checks of graph.max_pool_grad (dy, x) -> dx.
Status checkMaxPoolGrad(const KernelContext &ctx, Window &w) {
  window::Window plan;
  if (Status s = window::planMaxPoolGrad(ctx, plan); !s)
    return s;
  return windowOf("graph.max_pool_grad", plan, w);
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
      STRATA_LAUNCH(gridFor(s, windows), kBlock, 0, s.stream, maxPoolPick<T>)
      (w, x.as<T>(), picked, windows);
      if (Status st = launchStatus(op); !st)
        return st;
    }
    // No windows: every tap misses (outputOfTap finds no output position),
    // so the gradient is zero; `picked` is never read.
    STRATA_LAUNCH(gridFor(s, n), kBlock, 0, s.stream, maxPoolGrad<T>)
    (w, dy.as<T>(), picked, dx.as<T>(), n);
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
  if (Status s = windowOf(op, plan, w); !s)
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
    STRATA_LAUNCH(gridFor(s, n), kBlock, 0, s.stream, avgPoolGrad<T>)
    (w, dy.as<T>(), dx.as<T>(), countIncludePad, n);
    return launchStatus(op);
  });
}

} // namespace

/// bf16 / fp16 convolutions whose operands and result share the type:
/// loaded narrow, summed in f32, rounded once (the adapter's numbers,
/// without its f32 copies).
template <conv_gemm::Pass P>
Status runNarrowConv(KernelContext &ctx, bool &handled) {
  DType t = ctx.outputs.empty() ? DType::F32 : ctx.outputs[0].dtype;
  handled = isNarrowFloat(t) &&
            std::all_of(ctx.inputs.begin(), ctx.inputs.end(),
                        [&](const TensorView &v) { return v.dtype == t; });
  if (!handled)
    return Status::ok();
  conv_gemm::Conv c;
  conv_gemm::Gemm gemm;
  if (Status s = conv_gemm::planPass(ctx, P, c, gemm); !s)
    return s;
  return t == DType::BF16 ? launchConv<P, mma::Bf16>(ctx, c, gemm)
                          : launchConv<P, mma::Fp16>(ctx, c, gemm);
}

Status runNarrowConv(KernelContext &ctx, bool &handled) {
  return runNarrowConv<conv_gemm::Pass::Forward>(ctx, handled);
}
Status runNarrowConvGradInput(KernelContext &ctx, bool &handled) {
  return runNarrowConv<conv_gemm::Pass::GradInput>(ctx, handled);
}
Status runNarrowConvGradWeight(KernelContext &ctx, bool &handled) {
  return runNarrowConv<conv_gemm::Pass::GradWeight>(ctx, handled);
}

void registerConvolutionKernels(KernelRegistry &registry) {
  using conv_gemm::Pass;
  registry.add("graph.conv", convKernel<Pass::Forward>,
               prepareConv<Pass::Forward>);
  registry.add("graph.max_pool", maxPoolKernel);
  registry.add("graph.avg_pool", avgPoolKernel);
  registry.add("graph.conv_grad_input", convKernel<Pass::GradInput>,
               prepareConv<Pass::GradInput>);
  registry.add("graph.conv_grad_weight", convKernel<Pass::GradWeight>,
               prepareConv<Pass::GradWeight>);
  registry.add("graph.max_pool_grad", maxPoolGradKernel, prepareMaxPoolGrad);
  registry.add("graph.avg_pool_grad", avgPoolGradKernel);
}

} // namespace strata::runtime::cuda
