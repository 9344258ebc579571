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
#include "kernels/ConvWinograd.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/WindowPlan.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
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

/// The outputs o in [0, out) whose input coordinate o * stride + offset
/// lies in [0, in), as [lo, hi) (lo >= hi when none does).
inline std::pair<int64_t, int64_t> insideRange(int64_t out, int64_t in,
                                               int64_t stride, int64_t offset) {
  int64_t lo = offset < 0 ? (-offset + stride - 1) / stride : 0;
  int64_t room = in - offset; // o * stride < room
  int64_t hi = room <= 0 ? 0 : std::min(out, (room + stride - 1) / stride);
  return {std::min(lo, out), hi};
}

/// im2col of a 2-D window (the common case): the rows of each tap copied
/// whole, the padding filled with zeros, without the N-d index stepping.
template <typename T>
void im2col2d(const T *x, int64_t cg, const Window &w, T *col, int64_t ld) {
  const int64_t outH = w.out[0], outW = w.out[1], inH = w.in[0],
                inW = w.in[1], strideH = w.strides[0], strideW = w.strides[1];
  for (int64_t c = 0; c < cg; ++c) {
    const T *plane = x + c * w.inPlane;
    for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
      for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
        int64_t offH = kh * w.dilations[0] - w.padBegin[0];
        int64_t offW = kw * w.dilations[1] - w.padBegin[1];
        auto [lo, hi] = insideRange(outW, inW, strideW, offW);
        hi = std::max(lo, hi);
        for (int64_t y = 0; y < outH; ++y) {
          T *row = col + y * outW;
          int64_t i = y * strideH + offH;
          if (i < 0 || i >= inH) {
            std::fill(row, row + outW, T(0));
            continue;
          }
          const T *src = plane + i * inW + offW;
          std::fill(row, row + lo, T(0));
          if (strideW == 1)
            std::copy(src + lo, src + hi, row + lo);
          else
            for (int64_t o = lo; o < hi; ++o)
              row[o] = src[o * strideW];
          std::fill(row + hi, row + outW, T(0));
        }
        col += ld;
      }
  }
}

/// col2im of a 2-D window: each tap's rows added back whole, in im2col's
/// (tap, position) order, so every element of dx sums its terms as the
/// N-d loop does.
template <typename T>
void col2im2d(const T *col, int64_t cg, const Window &w, T *x, int64_t ld) {
  const int64_t outH = w.out[0], outW = w.out[1], inH = w.in[0],
                inW = w.in[1], strideH = w.strides[0], strideW = w.strides[1];
  for (int64_t c = 0; c < cg; ++c) {
    T *plane = x + c * w.inPlane;
    for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
      for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
        int64_t offH = kh * w.dilations[0] - w.padBegin[0];
        int64_t offW = kw * w.dilations[1] - w.padBegin[1];
        auto [lo, hi] = insideRange(outW, inW, strideW, offW);
        for (int64_t y = 0; y < outH; ++y) {
          int64_t i = y * strideH + offH;
          if (i < 0 || i >= inH)
            continue;
          const T *row = col + y * outW;
          T *dst = plane + i * inW + offW;
          if (strideW == 1)
            for (int64_t o = lo; o < hi; ++o)
              dst[o] += row[o];
          else
            for (int64_t o = lo; o < hi; ++o)
              dst[o * strideW] += row[o];
        }
        col += ld;
      }
  }
}

/// Unfolds the [cg, in...] channels of one group into col[cg * K, P]: row
/// (c, k...) holds, for every output position, the input element that
/// kernel tap meets there, or 0 in the padding. Rows are `ld` elements
/// apart (P: packed; more: one sample's columns of a batch's).
template <typename T>
void im2col(const T *x, int64_t cg, const Window &w, T *col, int64_t ld) {
  if (w.spatial == 2)
    return im2col2d(x, cg, w, col, ld);
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
        // Outputs [lo, hi) of the last dim read inside the input.
        auto [lo, hi] = insideRange(outLast, inLast, sLast, offset[last]);
        if (!inside)
          lo = hi = outLast;
        std::fill(col, col + lo, T(0));
        const T *src = plane + base + offset[last];
        for (int64_t o = lo; o < hi; ++o)
          col[o] = src[o * sLast];
        std::fill(col + std::max(lo, hi), col + outLast, T(0));
        col += outLast;
      } while (nextIndex(pos, zero, outerHi));
      col += ld - w.outPlane;
    } while (nextIndex(tap, zero, w.kernel));
  }
}

/// Samples per GEMM: small output planes (the deep layers of a CNN) make
/// thin GEMMs, so the columns of several samples go side by side into one,
/// [cg * K, nb * P], up to 256 columns and 16 MiB of them.
int64_t samplesPerGemm(int64_t batch, int64_t kc, int64_t p, size_t elemSize) {
  if (p <= 0 || kc <= 0)
    return 1;
  int64_t nb = std::max<int64_t>(1, 256 / p);
  int64_t byMemory = std::max<int64_t>(
      1, int64_t(16) * 1024 * 1024 / (kc * p * int64_t(elemSize)));
  return std::max<int64_t>(1, std::min({nb, byMemory, batch}));
}

/// im2col of samples [n0, n0 + nb) of group g into col[cg * K, nb * P],
/// a block of channels at a time on the pool.
template <typename T>
void im2colBatch(const T *in, int64_t channels, int64_t n0, int64_t nb,
                 int64_t g, int64_t cg, int64_t taps, const Window &w, T *col) {
  int64_t ld = nb * w.outPlane;
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (taps * w.outPlane));
  parallelFor(nb * cg, grain, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      int64_t j = u / cg, c = u % cg;
      const T *xc = in + ((n0 + j) * channels + g * cg + c) * w.inPlane;
      im2col(xc, 1, w, col + c * taps * ld + j * w.outPlane, ld);
    }
  });
}

/// Copies rows [g * mg, (g + 1) * mg) of samples [n0, n0 + nb) of a
/// [N, M, P] tensor into (to = true) or out of a [mg, nb * P] block.
template <typename T>
void gatherRows(T *tensor, int64_t m, int64_t n0, int64_t nb, int64_t g,
                int64_t mg, int64_t p, T *block, bool to) {
  parallelFor(nb * mg, std::max<int64_t>(1, kElementwiseGrain / p),
              [&](int64_t first, int64_t last) {
                for (int64_t u = first; u < last; ++u) {
                  int64_t j = u / mg, o = u % mg;
                  T *row = tensor + ((n0 + j) * m + g * mg + o) * p;
                  T *b = block + o * nb * p + j * p;
                  if (to)
                    std::copy(row, row + p, b);
                  else
                    std::copy(b, b + p, row);
                }
              });
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
    if constexpr (std::is_same_v<T, float>)
      if (winogradApplies(geometry, batch, /*gradWeight=*/false)) {
        winogradConv3x3(conv3x3Shape(geometry, batch), in, weight,
                        bias ? bias->as<T>() : nullptr, out);
        return Status::ok();
      }
    // As PyTorch's slow_conv2d: the output starts as the bias and the GEMM
    // accumulates onto it. Without a bias the GEMM writes the output
    // outright (the same values: x + 0 is x).
    bool accumulate = bias != nullptr || kc == 0;
    if (accumulate)
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t o = 0; o < m; ++o)
          std::fill_n(out + (n * m + o) * p, p,
                      bias ? bias->as<T>()[o] : T(0));
    if (kc == 0)
      return Status::ok();
    int64_t nb = samplesPerGemm(batch, kc, p, sizeof(T));
    if (pointwise && nb == 1) {
      // The input is the GEMM's right operand as it stands.
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t g = 0; g < groups; ++g)
          gemmEx<T>(false, false, mg, p, kc, weight + g * mg * kc, kc,
                    in + (n * x.shape[1] + g * cg) * w.inPlane, p,
                    out + (n * m + g * mg) * p, p, accumulate);
      return Status::ok();
    }
    // scratch: the unfolded input of nb samples of one group (cg * K x
    // nb * P) and, when nb > 1, their output rows side by side.
    std::vector<T> col(static_cast<size_t>(kc * nb * p));
    std::vector<T> block(nb > 1 ? static_cast<size_t>(mg * nb * p) : 0);
    for (int64_t n0 = 0; n0 < batch; n0 += nb) {
      int64_t count = std::min(nb, batch - n0), ld = count * p;
      for (int64_t g = 0; g < groups; ++g) {
        im2colBatch(in, x.shape[1], n0, count, g, cg, geometry.taps, w,
                    col.data());
        T *dst = out + (n0 * m + g * mg) * p;
        if (count > 1) {
          if (accumulate)
            gatherRows(out, m, n0, count, g, mg, p, block.data(), true);
          dst = block.data();
        }
        gemmEx<T>(false, false, mg, ld, kc, weight + g * mg * kc, kc,
                  col.data(), ld, dst, ld, accumulate);
        if (count > 1)
          gatherRows(out, m, n0, count, g, mg, p, block.data(), false);
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

/// The adjoint of im2col: adds col[cg * K, P] (rows `ld` apart) back into
/// the [cg, in...] channels (taps in the padding are dropped).
template <typename T>
void col2im(const T *col, int64_t cg, const Window &w, T *x, int64_t ld) {
  if (w.spatial == 2)
    return col2im2d(col, cg, w, x, ld);
  size_t n = w.spatial, last = n - 1;
  std::vector<int64_t> inStrides = rowMajorStrides(w.in); // scratch
  std::vector<int64_t> zero(n, 0), tap(n, 0), offset(n), pos(n, 0);
  std::vector<int64_t> outerHi(w.out);
  outerHi[last] = 1; // the last dim is the inner loop
  int64_t outLast = w.out[last], inLast = w.in[last], sLast = w.strides[last];
  for (int64_t c = 0; c < cg; ++c) {
    T *plane = x + c * w.inPlane;
    do {
      for (size_t d = 0; d < n; ++d)
        offset[d] = tap[d] * w.dilations[d] - w.padBegin[d];
      std::fill(pos.begin(), pos.end(), 0);
      // Every element of dx gets its terms in the order of the flat
      // (tap, position) loop, as before the last dim became the inner loop.
      do {
        bool inside = true;
        int64_t base = 0;
        for (size_t d = 0; d < last; ++d) {
          int64_t i = pos[d] * w.strides[d] + offset[d];
          inside = inside && i >= 0 && i < w.in[d];
          base += i * inStrides[d];
        }
        if (inside) {
          auto [lo, hi] = insideRange(outLast, inLast, sLast, offset[last]);
          T *dst = plane + base + offset[last];
          for (int64_t o = lo; o < hi; ++o)
            dst[o * sLast] += col[o];
        }
        col += outLast;
      } while (nextIndex(pos, zero, outerHi));
      col += ld - w.outPlane;
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
    const int64_t batch = x.shape[0], channels = x.shape[1],
                  taps = geometry.taps;
    if constexpr (std::is_same_v<T, float>)
      if (winogradApplies(geometry, batch, /*gradWeight=*/!wantInput)) {
        Conv3x3Shape s = conv3x3Shape(geometry, batch);
        if (wantInput)
          winogradConv3x3GradInput(s, dy.as<T>(), wt.as<T>(), out);
        else
          winogradConv3x3GradWeight(s, dy.as<T>(), x.as<T>(), out);
        return Status::ok();
      }
    // dx gathers col2im's sums, so it starts at zero; dw is written by the
    // first samples' GEMM and accumulated onto by the rest.
    if (wantInput || batch == 0)
      std::fill(out, out + ctx.outputs[0].numel(), T(0));
    int64_t nb = samplesPerGemm(batch, kc, p, sizeof(T));
    // scratch: the unfolded input (or its gradient) of nb samples of one
    // group, and their dy rows side by side when nb > 1.
    std::vector<T> col(static_cast<size_t>(kc * nb * p));
    std::vector<T> block(nb > 1 ? static_cast<size_t>(mg * nb * p) : 0);
    T *dyAll = const_cast<T *>(dy.as<T>());
    for (int64_t n0 = 0; n0 < batch; n0 += nb) {
      int64_t count = std::min(nb, batch - n0), ld = count * p;
      for (int64_t g = 0; g < groups; ++g) {
        const T *dyg = dyAll + (n0 * m + g * mg) * p;
        if (count > 1) {
          gatherRows(dyAll, m, n0, count, g, mg, p, block.data(), true);
          dyg = block.data();
        }
        if (wantInput) {
          gemmEx<T>(true, false, kc, ld, mg, wt.as<T>() + g * mg * kc, kc,
                    dyg, ld, col.data(), ld);
          // Each (sample, channel) adds into its own plane of dx.
          int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (taps * p));
          parallelFor(count * cg, grain, [&](int64_t first, int64_t last) {
            for (int64_t u = first; u < last; ++u) {
              int64_t j = u / cg, c = u % cg;
              col2im(col.data() + c * taps * ld + j * p, 1, w,
                     out + ((n0 + j) * channels + g * cg + c) * w.inPlane, ld);
            }
          });
        } else {
          im2colBatch(x.as<T>(), channels, n0, count, g, cg, taps, w,
                      col.data());
          gemmEx<T>(false, true, mg, kc, ld, dyg, ld, col.data(), ld,
                    out + g * mg * kc, kc, /*accumulate=*/n0 > 0);
        }
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
