//===- NeuralNetGradKernels.cpp - Gradients of layers and losses ----------===//
//
// The gradient ops of linear, layer_norm, batch_norm, attention, embedding,
// gather and cross_entropy. Statistics are recomputed from the forward's
// inputs exactly as the forward kernels compute them; reductions accumulate
// in double, products go through BLAS in the element type.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/AttentionPlan.h"
#include "strata/Runtime/GemmPlan.h"
#include "strata/Runtime/LossPlan.h"
#include "strata/Runtime/NormPlan.h"
#include "strata/Runtime/ShapePlans.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <string>

namespace strata::runtime::cpu {
namespace {


//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

Status linearGradWeightKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.linear_grad_weight";
  LinearGradWeightPlan plan;
  if (Status s = planLinearGradWeight(ctx, plan); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  TensorView &dw = ctx.outputs[0];
  const bool transposed = plan.transposed;
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    if (transposed) // dW[N, K] = dy^T x
      gemmEx<T>(true, false, n, k, m, dy.as<T>(), n, x.as<T>(), k, dw.as<T>(),
                k);
    else // dW[K, N] = x^T dy
      gemmEx<T>(true, false, k, n, m, x.as<T>(), k, dy.as<T>(), n, dw.as<T>(),
                n);
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// layer_norm, batch_norm
//===----------------------------------------------------------------------===//

} // namespace

// Outside the anonymous namespace, as every dispatched function that sums
// through a LaneSum: clang-19 (the fuzz build) left LaneSum's constructor
// undefined at link time when a target_clones function of internal
// linkage inlined it.

/// One row of layer_norm's gradient: the row's statistics recomputed as
/// the forward computes them (rowMoments, into `mean`, `rstd`), the two
/// means of the scaled gradient, then dx; all in double (LaneSum) and
/// rounded once. Built for the CPU at hand (VectorMath.h).
template <typename T>
STRATA_VECTOR_BODY void
layerNormGradRowBody(const T *row, const T *grow, const T *w, T *dx,
                     int64_t len, double epsilon, double &mean, double &rstd) {
  rowMoments(row, len, epsilon, mean, rstd);
  const double mu = mean, rs = rstd;
  double meanDxhat =
      laneSum(len, [&](int64_t i) { return double(grow[i]) * double(w[i]); });
  double meanDxhatXhat = laneSum(len, [&](int64_t i) {
    double xhat = (row[i] - mu) * rs;
    return double(grow[i]) * double(w[i]) * xhat;
  });
  meanDxhat /= double(len);
  meanDxhatXhat /= double(len);
  for (int64_t i = 0; i < len; ++i) {
    double xhat = (row[i] - mu) * rs;
    double dxhat = double(grow[i]) * double(w[i]);
    dx[i] = static_cast<T>(rs * (dxhat - meanDxhat - xhat * meanDxhatXhat));
  }
}
STRATA_VECTOR_DISPATCHED void layerNormGradRow(const float *row,
                                               const float *grow,
                                               const float *w, float *dx,
                                               int64_t len, double epsilon,
                                               double &mean, double &rstd) {
  layerNormGradRowBody(row, grow, w, dx, len, epsilon, mean, rstd);
}
STRATA_VECTOR_DISPATCHED void layerNormGradRow(const double *row,
                                               const double *grow,
                                               const double *w, double *dx,
                                               int64_t len, double epsilon,
                                               double &mean, double &rstd) {
  layerNormGradRowBody(row, grow, w, dx, len, epsilon, mean, rstd);
}

/// Columns [first, last) of layer_norm's scale and bias gradients, summed
/// over the rows in order into dScale and dBias (double, zeroed by the
/// caller). Built for the CPU at hand (VectorMath.h).
template <typename T>
STRATA_VECTOR_BODY void
layerNormGradColumnsBody(const T *in, const T *g, const double *mean,
                         const double *rstd, int64_t rows, int64_t len,
                         int64_t first, int64_t last, double *dScale,
                         double *dBias) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = in + r * len, *grow = g + r * len;
    for (int64_t i = first; i < last; ++i) {
      double xhat = (row[i] - mean[r]) * rstd[r];
      dScale[i - first] += double(grow[i]) * xhat;
      dBias[i - first] += grow[i];
    }
  }
}
STRATA_VECTOR_DISPATCHED void
layerNormGradColumns(const float *in, const float *g, const double *mean,
                     const double *rstd, int64_t rows, int64_t len,
                     int64_t first, int64_t last, double *dScale,
                     double *dBias) {
  layerNormGradColumnsBody(in, g, mean, rstd, rows, len, first, last, dScale,
                           dBias);
}
STRATA_VECTOR_DISPATCHED void
layerNormGradColumns(const double *in, const double *g, const double *mean,
                     const double *rstd, int64_t rows, int64_t len,
                     int64_t first, int64_t last, double *dScale,
                     double *dBias) {
  layerNormGradColumnsBody(in, g, mean, rstd, rows, len, first, last, dScale,
                           dBias);
}

/// One channel's sums for batch_norm's gradient, over `batch` planes of
/// `spatial` elements `stride` apart (x from `in`, dy from `g`): dBias =
/// sum dy and dScale = sum dy * (x - mean) * rstd, in double through a
/// LaneSum over the planes in order. Built for the CPU at hand.
template <typename T>
STRATA_VECTOR_BODY void
channelGradSumsBody(const T *in, const T *g, int64_t batch, int64_t stride,
                    int64_t spatial, double mean, double rstd, double &dBias,
                    double &dScale) {
  LaneSum bias, scale;
  for (int64_t n = 0; n < batch; ++n) {
    const T *gs = g + n * stride;
    bias.add(spatial, [&](int64_t s) { return double(gs[s]); });
  }
  for (int64_t n = 0; n < batch; ++n) {
    const T *xs = in + n * stride, *gs = g + n * stride;
    scale.add(spatial, [&](int64_t s) {
      return double(gs[s]) * (xs[s] - mean) * rstd;
    });
  }
  dBias = bias.total();
  dScale = scale.total();
}
STRATA_VECTOR_DISPATCHED void
channelGradSums(const float *in, const float *g, int64_t batch,
                int64_t stride, int64_t spatial, double mean, double rstd,
                double &dBias, double &dScale) {
  channelGradSumsBody(in, g, batch, stride, spatial, mean, rstd, dBias,
                      dScale);
}
STRATA_VECTOR_DISPATCHED void
channelGradSums(const double *in, const double *g, int64_t batch,
                int64_t stride, int64_t spatial, double mean, double rstd,
                double &dBias, double &dScale) {
  channelGradSumsBody(in, g, batch, stride, spatial, mean, rstd, dBias,
                      dScale);
}

namespace {

Status layerNormGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.layer_norm_grad";
  LayerNormGradPlan plan;
  if (Status s = planLayerNormGrad(ctx, plan); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1],
                   &scale = ctx.inputs[2];
  const int64_t rows = plan.rows, len = plan.len;
  const double epsilon = plan.epsilon;
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *g = dy.as<T>(), *in = x.as<T>(), *w = scale.as<T>();
    T *dx = ctx.outputs[0].as<T>();
    // Rows in parallel: each row's statistics and dx. Then the scale and
    // bias gradients in parallel over columns, each summing its rows in
    // order, as one thread would.
    // scratch: each row's mean and 1 / std.
    std::vector<double> mean(rows), rstd(rows);
    parallelFor(rows, rowGrain(len), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r)
        layerNormGradRow(in + r * len, g + r * len, w, dx + r * len, len,
                         epsilon, mean[r], rstd[r]);
    });
    T *dScaleOut = ctx.outputs[1].as<T>(), *dBiasOut = ctx.outputs[2].as<T>();
    int64_t columnGrain = std::max<int64_t>(16, len / 2 / kernelThreads());
    parallelFor(len, columnGrain, [&](int64_t first, int64_t last) {
      // scratch: this block's column sums.
      std::vector<double> dScale(last - first, 0.0), dBias(last - first, 0.0);
      layerNormGradColumns(in, g, mean.data(), rstd.data(), rows, len, first,
                           last, dScale.data(), dBias.data());
      for (int64_t i = first; i < last; ++i) {
        dScaleOut[i] = static_cast<T>(dScale[i - first]);
        dBiasOut[i] = static_cast<T>(dBias[i - first]);
      }
    });
    return Status::ok();
  });
}

/// dx over one plane of a channel: dy, less (in training) its share of
/// the batch's mean and of the normalized input's direction, times
/// scale * rstd; built for the CPU at hand (VectorMath.h).
template <typename T>
STRATA_VECTOR_BODY void
batchNormGradPlaneBody(const T *g, const T *in, T *dx, int64_t n,
                       bool training, double mean, double rstd, double dBias,
                       double dScale, double count, double scale) {
  for (int64_t s = 0; s < n; ++s) {
    double v = double(g[s]);
    if (training)
      v -= (dBias + (in[s] - mean) * rstd * dScale) / count;
    dx[s] = static_cast<T>(v * scale * rstd);
  }
}
STRATA_VECTOR_DISPATCHED void
batchNormGradPlane(const float *g, const float *in, float *dx, int64_t n,
                   bool training, double mean, double rstd, double dBias,
                   double dScale, double count, double scale) {
  batchNormGradPlaneBody(g, in, dx, n, training, mean, rstd, dBias, dScale,
                         count, scale);
}
STRATA_VECTOR_DISPATCHED void
batchNormGradPlane(const double *g, const double *in, double *dx, int64_t n,
                   bool training, double mean, double rstd, double dBias,
                   double dScale, double count, double scale) {
  batchNormGradPlaneBody(g, in, dx, n, training, mean, rstd, dBias, dScale,
                         count, scale);
}

Status batchNormGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.batch_norm_grad";
  BatchNormGradPlan plan;
  if (Status s = planBatchNormGrad(ctx, plan); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  const int64_t batch = plan.batch, channels = plan.channels,
                spatial = plan.spatial;
  const bool training = plan.training;
  const double epsilon = plan.epsilon;
  const double count = double(batch * spatial);
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *g = dy.as<T>(), *in = x.as<T>(), *w = ctx.inputs[2].as<T>();
    const T *runMean = ctx.inputs[3].as<T>(), *runVar = ctx.inputs[4].as<T>();
    T *dx = ctx.outputs[0].as<T>();
    auto at = [&](int64_t n, int64_t c, int64_t s) {
      return (n * channels + c) * spatial + s;
    };
    // Channels in parallel, each summed in LaneSum's fixed order.
    parallelFor(channels, rowGrain(batch * spatial), [&](int64_t first,
                                                         int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      double mean = runMean[c], var = runVar[c];
      if (training) {
        double sq;
        channelMoments(in + at(0, c, 0), batch, channels * spatial, spatial,
                       count, mean, sq);
        var = sq / count;
      }
      double rstd = 1.0 / std::sqrt(var + epsilon);
      double dBias, dScale;
      channelGradSums(in + at(0, c, 0), g + at(0, c, 0), batch,
                      channels * spatial, spatial, mean, rstd, dBias, dScale);
      for (int64_t n = 0; n < batch; ++n) {
        int64_t i = at(n, c, 0);
        batchNormGradPlane(g + i, in + i, dx + i, spatial, training, mean,
                           rstd, dBias, dScale, count, double(w[c]));
      }
      ctx.outputs[1].as<T>()[c] = static_cast<T>(dScale);
      ctx.outputs[2].as<T>()[c] = static_cast<T>(dBias);
    }
    });
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

Status attentionGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.attention_grad";
  AttentionPlan plan;
  if (Status st = planAttentionGrad(ctx, plan); !st)
    return st;
  const TensorView &dy = ctx.inputs[0], &q = ctx.inputs[1], &k = ctx.inputs[2],
                   &v = ctx.inputs[3];
  const TensorView *mask = plan.hasMask ? &ctx.inputs[4] : nullptr;
  const int64_t rank = q.rank(), s = plan.s, t = plan.t, d = plan.d,
                dv = plan.dv, batches = plan.batches;
  const std::vector<int64_t> &batchShape = plan.batchShape;
  const std::vector<int64_t> &maskStrides = plan.maskStrides;
  const double ratio = plan.ratio, scale = plan.scale;
  const bool causal = plan.causal;
  // Batch matrix b's rows are ldD and ldV apart (heads_inner: the heads'
  // rows interleave); its scratch rows are t apart.
  const int64_t ldD = plan.ld(d), ldV = plan.ld(dv);
  const int64_t blockRows = attentionRows(causal);
  if (t == 0) { // no keys: the forward's output is empty of terms
    for (TensorView &out : ctx.outputs)
      std::memset(out.data, 0, out.bytes());
    return Status::ok();
  }
  return dispatchFloat(q.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *pq = q.as<T>(), *pk = k.as<T>(), *pv = v.as<T>(),
            *pdy = dy.as<T>();
    const T *pm = mask ? mask->as<T>() : nullptr;
    T *dq = ctx.outputs[0].as<T>(), *dk = ctx.outputs[1].as<T>(),
      *dvOut = ctx.outputs[2].as<T>();
    // keep_probabilities: the forward's probabilities, read, not made.
    const T *kept = plan.probabilities >= 0
                        ? ctx.inputs[plan.probabilities].as<T>()
                        : nullptr;
    const T tScale = static_cast<T>(scale);
    const T dropScale = T(1) / T(1 - ratio);
    // Batch matrices are independent: blocks of them run on the pool, each
    // with its own scratch (probabilities, dropped probabilities, their
    // gradients and one row's exponentials).
    parallelFor(batches, 1, [&](int64_t first, int64_t last) {
      // scratch: probabilities, dropped probabilities (the probabilities
      // themselves without dropout: x * 1 is x, bit for bit), dS, the
      // dropout mask (when there is one) and one row's exponentials.
      std::vector<T> p(kept ? 0 : s * t), pd(ratio > 0 ? s * t : 0),
          ds(s * t), e(kept ? 0 : t);
      std::vector<T> keepMask(ratio > 0 ? s * t : 0);
      for (int64_t b = first; b < last; ++b) {
        // The probabilities' rows (t apart): kept, or made here.
        const T *probs = kept ? kept + b * s * t : p.data();
        const T *pdData = ratio > 0 ? pd.data() : probs;
        int64_t maskBase = mask ? maskOffset(batchShape, maskStrides, b) : 0;
        const T *qb = pq + plan.offset(b, s, d), *kb = pk + plan.offset(b, t, d),
                *vb = pv + plan.offset(b, t, dv);
        const T *dyb = pdy + plan.offset(b, s, dv);
        T *dqb = dq + plan.offset(b, s, d), *dkb = dk + plan.offset(b, t, d),
          *dvb = dvOut + plan.offset(b, t, dv);
        // Blocks of query rows, as the forward: under a causal mask rows
        // [i0, i1) see keys [0, i1). P, Pd and dS past them are never
        // read: dQ takes the block's keys, and the key blocks of dV and dK
        // below start at a multiple of blockRows no later than the
        // row's own block, so end at or before its keys.
        for (int64_t i0 = 0; i0 < s; i0 += blockRows) {
          int64_t i1 = std::min(s, i0 + blockRows), rows = i1 - i0;
          int64_t keys = causal ? std::min(t, i1) : t;
          if (!kept)
            gemmEx<T>(false, true, rows, keys, d, qb + i0 * ldD, ldD, kb,
                      ldD, p.data() + i0 * t, t);
          for (int64_t i = i0; i < i1; ++i) {
            const T *row = probs + i * t;
            if (!kept)
              attentionRowProbabilities(
                  p.data() + i * t, i, keys, tScale, pm,
                  pm ? maskBase + i * maskStrides[rank - 2] : 0,
                  pm ? maskStrides[rank - 1] : 0, causal, e.data());
            if (ratio > 0)
              for (int64_t j = 0; j < keys; ++j) {
                uint64_t index = static_cast<uint64_t>((b * s + i) * t + j);
                T keep =
                    dropoutKeeps(seedOf(ctx), index, ratio) ? dropScale : T(0);
                keepMask[i * t + j] = keep;
                pd[i * t + j] = row[j] * keep;
              }
          }
          // dPd = dY V^T, then through dropout and softmax into dS.
          gemmEx<T>(false, true, rows, keys, dv, dyb + i0 * ldV, ldV, vb, ldV,
                    ds.data() + i0 * t, t);
          for (int64_t i = i0; i < i1; ++i) {
            T *dsRow = ds.data() + i * t;
            attentionGradRow(dsRow, probs + i * t,
                             ratio > 0 ? keepMask.data() + i * t : nullptr,
                             keys, scale);
          }
          // dQ = dS K, over the keys the block sees.
          gemmEx<T>(false, false, rows, d, keys, ds.data() + i0 * t, t, kb,
                    ldD, dqb + i0 * ldD, ldD);
        }
        // dV = Pd^T dY, dK = dS^T Q, by blocks of keys. Under a causal
        // mask key j takes terms from query rows i >= j only (Pd and dS
        // are 0 above the diagonal), so key block [j0, j1) multiplies rows
        // [j0, s): half the products. Without one, one block of every key
        // and every row.
        const int64_t keyBlock = causal ? blockRows : t;
        for (int64_t j0 = 0; j0 < t; j0 += keyBlock) {
          int64_t cols = std::min(t, j0 + keyBlock) - j0;
          int64_t from = causal ? std::min(j0, s) : 0, inner = s - from;
          gemmEx<T>(true, false, cols, dv, inner, pdData + from * t + j0, t,
                    dyb + from * ldV, ldV, dvb + j0 * ldV, ldV);
          gemmEx<T>(true, false, cols, d, inner, ds.data() + from * t + j0, t,
                    qb + from * ldD, ldD, dkb + j0 * ldD, ldD);
        }
      }
    });
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// embedding, gather
//===----------------------------------------------------------------------===//

/// Scatter-adds rows of `dy` [outer, count, inner] into `out` [outer, rows,
/// inner] at the indices, in index order (deterministic); negative indices
/// count from the end, anything outside [-rows, rows) is an error reported
/// before anything is written.
Status scatterAdd(std::string_view op, const TensorView &dy,
                  const TensorView &indices, TensorView &out, int64_t outer,
                  int64_t rows, int64_t inner) {
  int64_t count = indices.numel();
  return dispatchIndex(indices.dtype, op, [&](auto indexTag) -> Status {
    using I = decltype(indexTag);
    const I *idx = indices.as<I>();
    for (int64_t j = 0; j < count; ++j) {
      int64_t row = static_cast<int64_t>(idx[j]);
      if (row < -rows || row >= rows)
        return Status::error(std::string(op) + ": index " +
                             std::to_string(row) + " at " + std::to_string(j) +
                             " is out of range for " + std::to_string(rows) +
                             " rows");
    }
    return dispatchFloat(dy.dtype, op, [&](auto tag) -> Status {
      using T = decltype(tag);
      const T *g = dy.as<T>();
      T *o = out.as<T>();
      std::fill(o, o + out.numel(), T(0));
      for (int64_t a = 0; a < outer; ++a)
        for (int64_t j = 0; j < count; ++j) {
          int64_t row = static_cast<int64_t>(idx[j]);
          row += row < 0 ? rows : 0;
          T *dst = o + (a * rows + row) * inner;
          const T *src = g + (a * count + j) * inner;
          for (int64_t i = 0; i < inner; ++i)
            dst[i] += src[i];
        }
      return Status::ok();
    });
  });
}

Status embeddingGradKernel(KernelContext &ctx) {
  shape::ScatterGeometry g;
  if (Status s = shape::planEmbeddingGrad(ctx, g); !s)
    return s;
  return scatterAdd("graph.embedding_grad", ctx.inputs[0], ctx.inputs[1],
                    ctx.outputs[0], g.outer, g.rows, g.inner);
}

Status gatherGradKernel(KernelContext &ctx) {
  shape::ScatterGeometry g;
  if (Status s = shape::planGatherGrad(ctx, g); !s)
    return s;
  return scatterAdd("graph.gather_grad", ctx.inputs[0], ctx.inputs[1],
                    ctx.outputs[0], g.outer, g.rows, g.inner);
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

Status crossEntropyGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.cross_entropy_grad";
  CrossEntropyShape plan;
  if (Status s = planCrossEntropyGrad(ctx, plan); !s)
    return s;
  const TensorView &dloss = ctx.inputs[0], &logits = ctx.inputs[1],
                   &labels = ctx.inputs[2];
  const TensorView *weight = ctx.inputs.size() > 3 ? &ctx.inputs[3] : nullptr;
  TensorView &dx = ctx.outputs[0];
  int64_t batch = plan.batch, classes = plan.classes, spatial = plan.spatial;
  bool none = plan.none, summed = plan.sum, hasIgnore = plan.hasIgnore;
  int64_t ignoreIndex = plan.ignoreIndex;
  return dispatchAll(labels.dtype, kOp, [&](auto labelTag) -> Status {
    using L = decltype(labelTag);
    const L *y = labels.as<L>();
    return dispatchFloat(logits.dtype, kOp, [&](auto tag) -> Status {
      using T = decltype(tag);
      const T *x = logits.as<T>(), *g = dloss.as<T>();
      const T *w = weight ? weight->as<T>() : nullptr;
      T *out = dx.as<T>();
      double totalWeight = 0;
      for (int64_t i = 0; i < batch * spatial; ++i) {
        int64_t label = static_cast<int64_t>(y[i]);
        if (hasIgnore && label == ignoreIndex)
          continue;
        if (label < 0 || label >= classes)
          return Status::error("graph.cross_entropy_grad: label " +
                               std::to_string(label) + " is out of range");
        totalWeight += w ? double(w[label]) : 1.0;
      }
      // Positions in parallel, each exponential computed once (the max
      // first, the sum in double; rows of contiguous classes by
      // crossEntropyGradRow, built for the CPU at hand).
      parallelFor(batch * spatial, rowGrain(classes), [&](int64_t b, int64_t e) {
        // scratch: one position's exponentials.
        std::vector<T> ex(classes);
        for (int64_t i = b; i < e; ++i) {
          int64_t n = i / spatial, s = i % spatial;
          const T *col = x + n * classes * spatial + s;
          T *dcol = out + n * classes * spatial + s;
          int64_t label = static_cast<int64_t>(y[i]);
          if (hasIgnore && label == ignoreIndex) {
            for (int64_t c = 0; c < classes; ++c)
              dcol[c * spatial] = T(0);
            continue;
          }
          double scale = none     ? double(g[i])
                         : summed ? double(g[0])
                                  : double(g[0]) / totalWeight;
          scale *= w ? double(w[label]) : 1.0;
          if (spatial == 1) {
            crossEntropyGradRow(col, classes, label, scale, ex.data(), dcol);
            continue;
          }
          // Classes spatial apart: serial max and sum.
          T max = col[0];
          for (int64_t c = 1; c < classes; ++c) {
            T v = col[c * spatial];
            if (v > max || v != v)
              max = v;
          }
          double sum = 0;
          for (int64_t c = 0; c < classes; ++c) {
            ex[c] = static_cast<T>(
                std::exp(double(col[c * spatial]) - double(max)));
            sum += ex[c];
          }
          for (int64_t c = 0; c < classes; ++c) {
            double p = double(ex[c]) / sum;
            dcol[c * spatial] =
                static_cast<T>(scale * (p - (c == label ? 1.0 : 0.0)));
          }
        }
      });
      return Status::ok();
    });
  });
}

} // namespace

STRATA_VECTOR_DISPATCHED void attentionGradRowF32(float *ds, const float *p,
                                                 const float *keep,
                                                 int64_t keys, double scale) {
  attentionGradRowBody(ds, p, keep, keys, scale);
}

void registerNeuralNetGradKernels(KernelRegistry &registry) {
  registry.add("graph.linear_grad_weight", linearGradWeightKernel);
  registry.add("graph.layer_norm_grad", layerNormGradKernel);
  registry.add("graph.batch_norm_grad", batchNormGradKernel);
  registry.add("graph.attention_grad", attentionGradKernel);
  registry.add("graph.embedding_grad", embeddingGradKernel);
  registry.add("graph.gather_grad", gatherGradKernel);
  registry.add("graph.cross_entropy_grad", crossEntropyGradKernel);
}

} // namespace strata::runtime::cpu
