//===- ConvolutionKernels.cpp - Convolution and pooling on the CPU --------===//
//
// graph.conv, graph.max_pool and graph.avg_pool over any number of spatial
// dims (channels in dim 1). Convolution is im2col plus one GEMM per batch
// element and group, as PyTorch's slow_conv2d; pooling is a direct loop
// over each window clipped to the input. Windows, output sizes and
// divisors follow PyTorch, generalized to separate begin and end pads.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/WindowPlan.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace strata::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Windows
//===----------------------------------------------------------------------===//

using window::Window;

/// Steps `idx` through the box [lo, hi) in row-major order; false once the
/// box is exhausted (idx is then back at lo).
bool nextIndex(std::vector<int64_t> &idx, const std::vector<int64_t> &lo,
               const std::vector<int64_t> &hi) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < hi[d])
      return true;
    idx[d] = lo[d];
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

void gemm(int m, int n, int k, const float *a, const float *b, float beta,
          float *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k,
              b, n, beta, c, n);
}

void gemm(int m, int n, int k, const double *a, const double *b, double beta,
          double *c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, k, b,
              n, beta, c, n);
}

/// Unfolds the [cg, in...] channels of one group into col[cg * K, P]: row
/// (c, k...) holds, for every output position, the input element that
/// kernel tap meets there, or 0 in the padding.
template <typename T>
void im2col(const T *x, int64_t cg, const Window &w, T *col) {
  size_t n = w.spatial, last = n - 1;
  std::vector<int64_t> inStrides = rowMajorStrides(w.in); // scratch: rank-sized
  std::vector<int64_t> zero(n, 0), tap(n, 0), offset(n), pos(n, 0);
  std::vector<int64_t> outerHi(w.out);
  outerHi[last] = 1; // the last dim is the inner loop
  int64_t outLast = w.out[last], inLast = w.in[last], sLast = w.strides[last];
  for (int64_t c = 0; c < cg; ++c) {
    const T *plane = x + c * w.inPlane;
    do {
      // Input coordinate of this tap at output position o: o * s + offset.
      for (size_t d = 0; d < n; ++d)
        offset[d] = tap[d] * w.dilations[d] - w.padBegin[d];
      std::fill(pos.begin(), pos.end(), 0);
      do {
        bool inside = true;
        int64_t base = 0;
        for (size_t d = 0; d < last; ++d) {
          int64_t i = pos[d] * w.strides[d] + offset[d];
          inside = inside && i >= 0 && i < w.in[d];
          base += i * inStrides[d];
        }
        for (int64_t o = 0; o < outLast; ++o) {
          int64_t i = o * sLast + offset[last];
          *col++ = inside && i >= 0 && i < inLast ? plane[base + i] : T(0);
        }
      } while (nextIndex(pos, zero, outerHi));
    } while (nextIndex(tap, zero, w.kernel));
  }
}

Status convKernel(KernelContext &ctx) {
  const std::string op = "graph.conv";
  window::ConvGeometry geometry;
  if (Status s = window::planConv(ctx, geometry); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() == 3 ? &ctx.inputs[2] : nullptr;
  TensorView &y = ctx.outputs[0];
  const Window &w = geometry.w;
  const int64_t groups = geometry.groups, m = geometry.m, cg = geometry.cg,
                mg = geometry.mg, taps = geometry.taps;
  const int64_t kc = cg * taps, p = w.outPlane;
  // A 1x1 kernel with unit strides and no padding reads the input as is.
  bool pointwise = taps == 1;
  for (size_t d = 0; d < w.spatial; ++d)
    pointwise = pointwise && w.strides[d] == 1 && w.padBegin[d] == 0 &&
                w.padEnd[d] == 0;

  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *in = x.as<T>();
    const T *weight = wt.as<T>();
    T *out = y.as<T>();
    int64_t batch = x.shape[0];
    if (y.numel() == 0)
      return Status::ok();
    // As PyTorch's slow_conv2d: the output starts as the bias (or zero) and
    // the GEMM accumulates onto it.
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t o = 0; o < m; ++o)
        std::fill_n(out + (n * m + o) * p, p,
                    bias ? bias->as<T>()[o] : T(0));
    if (kc == 0)
      return Status::ok();
    // scratch: the unfolded input of one group, cg * K x P elements.
    std::vector<T> col(pointwise ? 0 : static_cast<size_t>(kc * p));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t g = 0; g < groups; ++g) {
        const T *xg = in + (n * x.shape[1] + g * cg) * w.inPlane;
        const T *cols = xg;
        if (!pointwise) {
          im2col(xg, cg, w, col.data());
          cols = col.data();
        }
        gemm(static_cast<int>(mg), static_cast<int>(p), static_cast<int>(kc),
             weight + g * mg * kc, cols, T(1), out + (n * m + g * mg) * p);
      }
    }
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//


/// Calls fn(inputOffset, outputOffset, start) for every output position of
/// one plane, where start[d] is the input coordinate of the window's first
/// tap (negative inside the begin padding).
template <typename Fn> void forEachWindow(const Window &w, Fn fn) {
  size_t n = w.spatial;
  std::vector<int64_t> zero(n, 0), pos(n, 0), start(n); // scratch: rank-sized
  int64_t flat = 0;
  if (w.outPlane == 0)
    return;
  do {
    for (size_t d = 0; d < n; ++d)
      start[d] = pos[d] * w.strides[d] - w.padBegin[d];
    fn(flat++, start);
  } while (nextIndex(pos, zero, w.out));
}

Status maxPoolKernel(KernelContext &ctx) {
  const std::string op = "graph.max_pool";
  Window w;
  if (Status s = window::planPool(op, ctx, /*withDilations=*/true, w); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    size_t n = w.spatial;
    std::vector<int64_t> inStrides = rowMajorStrides(w.in);
    std::vector<int64_t> lo(n), hi(n), tap(n); // scratch: rank-sized
    int64_t planes = x.shape[0] * x.shape[1];
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T *in = x.as<T>() + plane * w.inPlane;
      T *out = ctx.outputs[0].as<T>() + plane * w.outPlane;
      forEachWindow(w, [&](int64_t o, const std::vector<int64_t> &start) {
        // Taps [lo, hi) of each dim land inside the input; padding is
        // skipped, so it never wins (PyTorch pads with -inf).
        bool empty = false;
        for (size_t d = 0; d < n; ++d) {
          int64_t dil = w.dilations[d];
          lo[d] = start[d] < 0 ? (-start[d] + dil - 1) / dil : 0;
          int64_t room = w.in[d] - start[d]; // taps need start + k*dil < in
          hi[d] = room <= 0 ? 0 : std::min(w.kernel[d], (room + dil - 1) / dil);
          empty = empty || lo[d] >= hi[d];
        }
        T best = -std::numeric_limits<T>::infinity();
        if (!empty) {
          tap = lo;
          do {
            int64_t at = 0;
            for (size_t d = 0; d < n; ++d)
              at += (start[d] + tap[d] * w.dilations[d]) * inStrides[d];
            T v = in[at];
            // PyTorch's max_pool: the first maximum in window order wins,
            // and a NaN wins over everything.
            if (v > best || std::isnan(v)) {
              best = v;
              if (std::isnan(v))
                break;
            }
          } while (nextIndex(tap, lo, hi));
        }
        out[o] = best;
      });
    }
    return Status::ok();
  });
}

Status avgPoolKernel(KernelContext &ctx) {
  const std::string op = "graph.avg_pool";
  Window w;
  if (Status s = window::planPool(op, ctx, /*withDilations=*/false, w); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  bool countIncludePad = ctx.attrs.getBool("count_include_pad", false);
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    size_t n = w.spatial;
    std::vector<int64_t> inStrides = rowMajorStrides(w.in);
    std::vector<int64_t> lo(n), hi(n), idx(n); // scratch: rank-sized
    int64_t planes = x.shape[0] * x.shape[1];
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T *in = x.as<T>() + plane * w.inPlane;
      T *out = ctx.outputs[0].as<T>() + plane * w.outPlane;
      forEachWindow(w, [&](int64_t o, const std::vector<int64_t> &start) {
        // PyTorch's avg_pool: count_include_pad divides by the window
        // clipped to the padded input (not the ceil_mode overhang);
        // otherwise by the input elements in it. A window without input
        // elements gives 0.
        int64_t padded = 1, real = 1;
        bool empty = false;
        for (size_t d = 0; d < n; ++d) {
          int64_t end = std::min(start[d] + w.kernel[d], w.in[d] + w.padEnd[d]);
          padded *= end - start[d];
          lo[d] = std::max<int64_t>(start[d], 0);
          hi[d] = std::min(end, w.in[d]);
          empty = empty || lo[d] >= hi[d];
          real *= hi[d] - lo[d];
        }
        if (empty) {
          out[o] = T(0);
          return;
        }
        double sum = 0;
        idx = lo;
        do {
          int64_t at = 0;
          for (size_t d = 0; d < n; ++d)
            at += idx[d] * inStrides[d];
          sum += in[at];
        } while (nextIndex(idx, lo, hi));
        out[o] = T(sum / double(countIncludePad ? padded : real));
      });
    }
    return Status::ok();
  });
}


//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// The adjoint of im2col: adds col[cg * K, P] back into the [cg, in...]
/// channels (taps in the padding are dropped).
template <typename T>
void col2im(const T *col, int64_t cg, const Window &w, T *x) {
  size_t n = w.spatial;
  std::vector<int64_t> inStrides = rowMajorStrides(w.in); // scratch
  std::vector<int64_t> zero(n, 0), tap(n, 0), pos(n, 0);
  for (int64_t c = 0; c < cg; ++c) {
    T *plane = x + c * w.inPlane;
    do {
      std::fill(pos.begin(), pos.end(), 0);
      do {
        bool inside = true;
        int64_t at = 0;
        for (size_t d = 0; d < n; ++d) {
          int64_t i = pos[d] * w.strides[d] + tap[d] * w.dilations[d] -
                      w.padBegin[d];
          inside = inside && i >= 0 && i < w.in[d];
          at += i * inStrides[d];
        }
        T v = *col++;
        if (inside)
          plane[at] += v;
      } while (nextIndex(pos, zero, w.out));
    } while (nextIndex(tap, zero, w.kernel));
  }
}

/// graph.conv_grad_input (dy, weight) -> dx and graph.conv_grad_weight
/// (dy, x) -> dw: the products of the forward's GEMM transposed, over the
/// same im2col columns.
Status convGradKernel(KernelContext &ctx, bool wantInput) {
  const std::string op =
      wantInput ? "graph.conv_grad_input" : "graph.conv_grad_weight";
  window::ConvGeometry geometry;
  if (Status s = window::planConvGrad(ctx, wantInput, geometry); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = wantInput ? ctx.outputs[0] : ctx.inputs[1];
  const TensorView &wt = wantInput ? ctx.inputs[1] : ctx.outputs[0];
  const Window &w = geometry.w;
  const int64_t groups = geometry.groups, m = geometry.m, cg = geometry.cg,
                mg = geometry.mg;
  const int64_t kc = cg * geometry.taps, p = w.outPlane;
  return dispatchFloat(dy.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    T *out = ctx.outputs[0].as<T>();
    std::fill(out, out + ctx.outputs[0].numel(), T(0));
    // scratch: the unfolded input (or its gradient) of one group.
    std::vector<T> col(static_cast<size_t>(kc * p));
    for (int64_t n = 0; n < x.shape[0]; ++n)
      for (int64_t g = 0; g < groups; ++g) {
        const T *dyg = dy.as<T>() + (n * m + g * mg) * p;
        int64_t xOffset = (n * x.shape[1] + g * cg) * w.inPlane;
        if (wantInput) {
          gemmEx<T>(true, false, kc, p, mg, wt.as<T>() + g * mg * kc, kc, dyg,
                    p, col.data(), p);
          col2im(col.data(), cg, w, out + xOffset);
        } else {
          im2col(x.as<T>() + xOffset, cg, w, col.data());
          gemmEx<T>(false, true, mg, kc, p, dyg, p, col.data(), p,
                    out + g * mg * kc, kc, /*accumulate=*/true);
        }
      }
    return Status::ok();
  });
}

/// graph.max_pool_grad (dy, x) -> dx: each window's gradient goes to its
/// first maximum, the element the forward picked.
Status maxPoolGradKernel(KernelContext &ctx) {
  const std::string op = "graph.max_pool_grad";
  Window w;
  if (Status s = window::planMaxPoolGrad(ctx, w); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  TensorView &dx = ctx.outputs[0];
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    size_t n = w.spatial;
    std::vector<int64_t> inStrides = rowMajorStrides(w.in);
    std::vector<int64_t> lo(n), hi(n), tap(n); // scratch: rank-sized
    T *dout = dx.as<T>();
    std::fill(dout, dout + dx.numel(), T(0));
    for (int64_t plane = 0, planes = x.shape[0] * x.shape[1]; plane < planes;
         ++plane) {
      const T *in = x.as<T>() + plane * w.inPlane;
      const T *g = dy.as<T>() + plane * w.outPlane;
      T *d = dout + plane * w.inPlane;
      forEachWindow(w, [&](int64_t o, const std::vector<int64_t> &start) {
        bool empty = false;
        for (size_t k = 0; k < n; ++k) {
          int64_t dil = w.dilations[k];
          lo[k] = start[k] < 0 ? (-start[k] + dil - 1) / dil : 0;
          int64_t room = w.in[k] - start[k];
          hi[k] = room <= 0 ? 0 : std::min(w.kernel[k], (room + dil - 1) / dil);
          empty = empty || lo[k] >= hi[k];
        }
        if (empty)
          return;
        T best = -std::numeric_limits<T>::infinity();
        int64_t bestAt = -1;
        tap = lo;
        do {
          int64_t at = 0;
          for (size_t k = 0; k < n; ++k)
            at += (start[k] + tap[k] * w.dilations[k]) * inStrides[k];
          T v = in[at];
          if (v > best || std::isnan(v) || bestAt < 0) {
            best = v;
            bestAt = at;
            if (std::isnan(v))
              break;
          }
        } while (nextIndex(tap, lo, hi));
        d[bestAt] += g[o];
      });
    }
    return Status::ok();
  });
}

/// graph.avg_pool_grad (dy) -> dx: each window's gradient spread over its
/// input elements with the forward's divisor.
Status avgPoolGradKernel(KernelContext &ctx) {
  const std::string op = "graph.avg_pool_grad";
  Window w;
  if (Status s = window::planAvgPoolGrad(ctx, w); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  TensorView &dx = ctx.outputs[0];
  bool countIncludePad = ctx.attrs.getBool("count_include_pad", false);
  return dispatchFloat(dy.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    size_t n = w.spatial;
    std::vector<int64_t> inStrides = rowMajorStrides(w.in);
    std::vector<int64_t> lo(n), hi(n), idx(n); // scratch: rank-sized
    T *dout = dx.as<T>();
    std::fill(dout, dout + dx.numel(), T(0));
    for (int64_t plane = 0, planes = dx.shape[0] * dx.shape[1]; plane < planes;
         ++plane) {
      const T *g = dy.as<T>() + plane * w.outPlane;
      T *d = dout + plane * w.inPlane;
      forEachWindow(w, [&](int64_t o, const std::vector<int64_t> &start) {
        int64_t padded = 1, real = 1;
        bool empty = false;
        for (size_t k = 0; k < n; ++k) {
          int64_t end = std::min(start[k] + w.kernel[k], w.in[k] + w.padEnd[k]);
          padded *= end - start[k];
          lo[k] = std::max<int64_t>(start[k], 0);
          hi[k] = std::min(end, w.in[k]);
          empty = empty || lo[k] >= hi[k];
          real *= hi[k] - lo[k];
        }
        if (empty)
          return;
        T share = static_cast<T>(double(g[o]) /
                                 double(countIncludePad ? padded : real));
        idx = lo;
        do {
          int64_t at = 0;
          for (size_t k = 0; k < n; ++k)
            at += idx[k] * inStrides[k];
          d[at] += share;
        } while (nextIndex(idx, lo, hi));
      });
    }
    return Status::ok();
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
  registry.add("graph.max_pool_grad", maxPoolGradKernel);
  registry.add("graph.avg_pool_grad", avgPoolGradKernel);
}

} // namespace strata::runtime::cpu
