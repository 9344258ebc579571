//===- NormalizationKernels.cpp - Normalization and softmax on the CPU ----===//
//
// graph.layer_norm, graph.batch_norm, graph.softmax and graph.log_softmax,
// matching torch.nn.functional's layer_norm, batch_norm, softmax and
// log_softmax. Statistics and sums are accumulated in double (LaneSum's
// fixed order, KernelUtils.h) and every result is rounded once to the
// element type, so a result is within an ulp or two of PyTorch's (which
// accumulates float in float here and there).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/NormPlan.h"
#include "strata/Runtime/ShapePlans.h"

#include <cmath>
#include <initializer_list>
#include <string>

namespace strata::runtime::cpu {
namespace {

using shape::product;

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

} // namespace

// Outside the anonymous namespace, as every dispatched function that sums
// through a LaneSum: clang-19 (the fuzz build) left LaneSum's constructor
// undefined at link time when a target_clones function of internal
// linkage inlined it.

/// One row of layer_norm: its statistics (rowMoments), then each element
/// normalized, scaled, shifted (`b` may be null) and rounded once; built
/// for the CPU at hand (VectorMath.h: the same operations in the same
/// order on every ISA).
template <typename T>
STRATA_VECTOR_BODY void layerNormRowBody(const T *row, const T *g, const T *b,
                                         T *out, int64_t len, double epsilon) {
  double mean, rstd;
  rowMoments(row, len, epsilon, mean, rstd);
  for (int64_t i = 0; i < len; ++i) {
    double v = (row[i] - mean) * rstd * g[i];
    if (b)
      v += b[i];
    out[i] = static_cast<T>(v);
  }
}
STRATA_VECTOR_DISPATCHED void layerNormRow(const float *row, const float *g,
                                           const float *b, float *out,
                                           int64_t len, double epsilon) {
  layerNormRowBody(row, g, b, out, len, epsilon);
}
STRATA_VECTOR_DISPATCHED void layerNormRow(const double *row, const double *g,
                                           const double *b, double *out,
                                           int64_t len, double epsilon) {
  layerNormRowBody(row, g, b, out, len, epsilon);
}

namespace {

Status layerNormKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.layer_norm";
  LayerNormShape plan;
  if (Status s = planLayerNorm(ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &scale = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  TensorView &y = ctx.outputs[0];
  double epsilon = plan.epsilon;

  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *in = x.as<T>(), *g = scale.as<T>();
    const T *b = bias ? bias->as<T>() : nullptr;
    T *out = y.as<T>();
    int64_t rows = plan.rows, len = plan.len;
    parallelFor(rows, rowGrain(len), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r)
        layerNormRow(in + r * len, g, b, out + r * len, len, epsilon);
    });
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// BatchNorm
//===----------------------------------------------------------------------===//

/// out[s] = (in[s] - mean) * rstd * scale + shift, rounded to T, for s < n:
/// one plane of a channel, built for the CPU at hand (VectorMath.h).
template <typename T>
STRATA_VECTOR_BODY void normalizePlaneBody(const T *in, T *out, int64_t n,
                                           double mean, double rstd,
                                           double scale, double shift) {
  for (int64_t s = 0; s < n; ++s)
    out[s] = static_cast<T>((in[s] - mean) * rstd * scale + shift);
}
STRATA_VECTOR_DISPATCHED void normalizePlane(const float *in, float *out,
                                             int64_t n, double mean,
                                             double rstd, double scale,
                                             double shift) {
  normalizePlaneBody(in, out, n, mean, rstd, scale, shift);
}
STRATA_VECTOR_DISPATCHED void normalizePlane(const double *in, double *out,
                                             int64_t n, double mean,
                                             double rstd, double scale,
                                             double shift) {
  normalizePlaneBody(in, out, n, mean, rstd, scale, shift);
}

Status batchNormKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.batch_norm";
  BatchNormShape plan;
  if (Status s = planBatchNorm(ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  auto [batch, channels, spatial, count, epsilon, momentum, training] = plan;

  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *in = x.as<T>();
    const T *g = ctx.inputs[1].as<T>(), *b = ctx.inputs[2].as<T>();
    const T *runMean = ctx.inputs[3].as<T>(), *runVar = ctx.inputs[4].as<T>();
    T *out = y.as<T>();
    T *newMean = ctx.outputs[1].as<T>(), *newVar = ctx.outputs[2].as<T>();
    parallelFor(channels, rowGrain(count), [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        double mean, var;
        if (training) {
          double sq;
          channelMoments(in + c * spatial, batch, channels * spatial, spatial,
                         static_cast<double>(count), mean, sq);
          // Biased variance normalizes; the unbiased one updates the running
          // variance (PyTorch's convention).
          var = sq / static_cast<double>(count);
          double unbiased = sq / static_cast<double>(count - 1);
          newMean[c] = static_cast<T>((1 - momentum) * double(runMean[c]) +
                                      momentum * mean);
          newVar[c] = static_cast<T>((1 - momentum) * double(runVar[c]) +
                                     momentum * unbiased);
        } else {
          mean = runMean[c];
          var = runVar[c];
          newMean[c] = runMean[c];
          newVar[c] = runVar[c];
        }
        double rstd = 1.0 / std::sqrt(var + epsilon);
        for (int64_t n = 0; n < batch; ++n) {
          int64_t at = (n * channels + c) * spatial;
          normalizePlane(in + at, out + at, spatial, mean, rstd, double(g[c]),
                         double(b[c]));
        }
      }
    });
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// Softmax, LogSoftmax
//===----------------------------------------------------------------------===//

/// Softmax or log-softmax of `len` elements `stride` apart: the max is
/// subtracted first, exp and the sum are evaluated in double. A row of all
/// -inf gives NaN (-inf - -inf), as torch.softmax and torch.log_softmax do;
/// so does a row holding +inf.
template <typename T>
void softmaxLine(const T *in, T *out, int64_t len, int64_t stride, bool log,
                 std::vector<T> &scratch) {
  if (len == 0)
    return;
  if (stride == 1) {
    // Contiguous: each exponential once (f32 ones vectorized, expAndSum).
    T max = rowMax(in, len);
    scratch.resize(len);
    double sum = expAndSum(in, max, len, scratch.data());
    if (log) {
      double logSum = std::log(sum);
      for (int64_t i = 0; i < len; ++i)
        out[i] = static_cast<T>(double(in[i]) - double(max) - logSum);
    } else {
      divideRow(scratch.data(), sum, out, len);
    }
    return;
  }
  auto [max, sum] = maxAndExpSum(in, len, stride);
  if (log) {
    double logSum = std::log(sum);
    for (int64_t i = 0; i < len; ++i)
      out[i * stride] =
          static_cast<T>(double(in[i * stride]) - double(max) - logSum);
  } else {
    for (int64_t i = 0; i < len; ++i)
      out[i * stride] =
          static_cast<T>(std::exp(double(in[i * stride]) - double(max)) / sum);
  }
}

void addSoftmax(KernelRegistry &r, std::string op, bool log) {
  r.add(op, [op, log](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
      return s;
    if (Status s = requireAttributes(ctx, op, {"axis"}); !s)
      return s;
    const TensorView &x = ctx.inputs[0];
    TensorView &y = ctx.outputs[0];
    if (y.dtype != x.dtype || y.shape != x.shape)
      return Status::error(op + ": result must be " + x.describe() + ", got " +
                           y.describe());
    int64_t axis = ctx.attrs.getInt("axis");
    if (axis < 0 || axis >= x.rank())
      return Status::error(op + ": axis " + std::to_string(axis) +
                           " must be in [0, " + std::to_string(x.rank()) + ")");
    int64_t outer = product(x.shape, 0, axis);
    int64_t len = x.shape[axis];
    int64_t inner = product(x.shape, axis + 1, x.shape.size());
    return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
      using T = decltype(tag);
      const T *in = x.as<T>();
      T *out = y.as<T>();
      parallelFor(outer * inner, rowGrain(len), [&](int64_t b, int64_t e) {
        std::vector<T> scratch; // one line's exponentials
        for (int64_t line = b; line < e; ++line) {
          int64_t o = line / inner, i = line % inner;
          int64_t base = o * len * inner + i;
          softmaxLine(in + base, out + base, len, inner, log, scratch);
        }
      });
      return Status::ok();
    });
  });
}

} // namespace

/// channelMoments (KernelUtils.h), built for the CPU at hand.
template <typename T>
STRATA_VECTOR_BODY void
channelMomentsBody(const T *in, int64_t batch, int64_t stride, int64_t spatial,
                   double count, double &mean, double &sq) {
  LaneSum sum;
  for (int64_t n = 0; n < batch; ++n) {
    const T *plane = in + n * stride;
    sum.add(spatial, [&](int64_t s) { return double(plane[s]); });
  }
  mean = sum.total() / count;
  LaneSum squares;
  for (int64_t n = 0; n < batch; ++n) {
    const T *plane = in + n * stride;
    squares.add(spatial, [&](int64_t s) {
      double d = plane[s] - mean;
      return d * d;
    });
  }
  sq = squares.total();
}
STRATA_VECTOR_DISPATCHED void channelMoments(const float *in, int64_t batch,
                                             int64_t stride, int64_t spatial,
                                             double count, double &mean,
                                             double &sq) {
  channelMomentsBody(in, batch, stride, spatial, count, mean, sq);
}
STRATA_VECTOR_DISPATCHED void channelMoments(const double *in, int64_t batch,
                                             int64_t stride, int64_t spatial,
                                             double count, double &mean,
                                             double &sq) {
  channelMomentsBody(in, batch, stride, spatial, count, mean, sq);
}

void registerNormalizationKernels(KernelRegistry &registry) {
  registry.add("graph.layer_norm", layerNormKernel);
  registry.add("graph.batch_norm", batchNormKernel);
  addSoftmax(registry, "graph.softmax", false);
  addSoftmax(registry, "graph.log_softmax", true);
}

} // namespace strata::runtime::cpu
