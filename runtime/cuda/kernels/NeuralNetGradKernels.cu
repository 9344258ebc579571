//===- NeuralNetGradKernels.cu - Gradients of layers and losses on CUDA ----===//
//
// The counterparts of runtime/cpu/kernels/NeuralNetGradKernels.cpp: the
// gradient ops of layer_norm, batch_norm, embedding, gather and
// cross_entropy, with the CPU's checks and messages (linear_grad_weight is
// in LinearAlgebraKernels.cu with the other cuBLASLt products,
// attention_grad in AttentionKernels.cu beside its fused forward). Statistics
// are recomputed from the forward's inputs as the forward kernels compute
// them; reductions accumulate in double in a fixed order (no atomics on
// floats: a run is reproducible bit for bit).
//
//  - layer_norm_grad: a block per row writes dx and the row's (mean, rstd)
//    to scratch; the column sums of dscale and dbias run over fixed chunks
//    of rows (each sequential in row order, as the CPU's), then the chunks
//    are added in order.
//  - batch_norm_grad: a block per channel.
//  - embedding_grad, gather_grad (scatter-add): deterministic without
//    atomics. The indices are sorted by row with a stable radix sort (CUB),
//    each row's run located by binary search, and one thread per element of
//    the result adds its row's gradient rows in index order, starting from
//    zero: the CPU's additions in the CPU's order, so the result is
//    bit-identical.
//  - cross_entropy_grad: one block sums the label weights ("mean"), then a
//    block per position writes its column of the gradient.
//
// What the CPU decides from operand values it reads on the host is decided
// here on the device. The CPU rejects an index or label out of range before
// writing anything; a kernel cannot report that from the device, so here an
// out-of-range index makes the whole table gradient NaN, and an
// out-of-range label makes its column of the logits' gradient NaN (every
// column under "mean", through the total weight).
//
//===----------------------------------------------------------------------===//

#define CCCL_DISABLE_NVTX

#include "CudaKernelUtils.cuh"
#include "NormalizationCommon.cuh"

#include "strata/Runtime/LossPlan.h"
#include "strata/Runtime/NormPlan.h"
#include "strata/Runtime/ShapePlans.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <limits>
#include <string>

namespace strata::runtime::cuda {
namespace {

using namespace norm;


template <typename T> __host__ __device__ inline T quietNaN() {
  return std::numeric_limits<T>::quiet_NaN();
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

struct LayerNormGradShape {
  int64_t rows = 0, len = 0;
  double epsilon = 0;
  /// Rows per chunk of the column sums, and chunks.
  int64_t chunkRows = 1, chunks = 0;
};

Status checkLayerNormGrad(const KernelContext &ctx, LayerNormGradShape &out) {
  LayerNormGradPlan plan;
  if (Status s = planLayerNormGrad(ctx, plan); !s)
    return s;
  out.rows = plan.rows;
  out.len = plan.len;
  out.epsilon = plan.epsilon;
  // At most 128 chunks of at least 32 rows: a function of the shape only,
  // so the sums' order (and bits) never change.
  out.chunkRows = std::max<int64_t>(32, (out.rows + 127) / 128);
  out.chunks = (out.rows + out.chunkRows - 1) / out.chunkRows;
  return Status::ok();
}

/// Scratch: (mean, rstd) per row, then the chunks' partial dscale and dbias.
size_t layerNormGradStatsBytes(const LayerNormGradShape &c) {
  return alignScratch(size_t(c.rows) * 2 * sizeof(double));
}
size_t layerNormGradScratchBytes(const LayerNormGradShape &c) {
  return layerNormGradStatsBytes(c) +
         size_t(c.chunks) * size_t(c.len) * 2 * sizeof(double);
}

/// One block per row: dx, and the row's mean and rstd into `stats`.
template <typename T>
__global__ void layerNormGradRows(const T *g, const T *in, const T *w, T *dx,
                                  double *stats, int64_t rows, int64_t len,
                                  double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = in + r * len, *grow = g + r * len;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
      sum += double(row[i]);
    double mean = blockSum(sum) / double(len), sq = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
      sq += (double(row[i]) - mean) * (double(row[i]) - mean);
    double rstd = 1.0 / sqrt(blockSum(sq) / double(len) + epsilon);
    double meanDxhat = 0, meanDxhatXhat = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      double xhat = (double(row[i]) - mean) * rstd;
      double dxhat = double(grow[i]) * double(w[i]);
      meanDxhat += dxhat;
      meanDxhatXhat += dxhat * xhat;
    }
    meanDxhat = blockSum(meanDxhat) / double(len);
    meanDxhatXhat = blockSum(meanDxhatXhat) / double(len);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      double xhat = (double(row[i]) - mean) * rstd;
      double dxhat = double(grow[i]) * double(w[i]);
      dx[r * len + i] =
          static_cast<T>(rstd * (dxhat - meanDxhat - xhat * meanDxhatXhat));
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// Grid (column tiles, chunks): a thread sums its column over its chunk's
/// rows, in row order.
template <typename T>
__global__ void layerNormGradColumns(const T *g, const T *in,
                                     const double *stats, double *partScale,
                                     double *partBias, int64_t rows,
                                     int64_t len, int64_t chunkRows) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= len)
    return;
  int64_t chunk = blockIdx.y;
  int64_t r0 = chunk * chunkRows, r1 = std::min(rows, r0 + chunkRows);
  double dScale = 0, dBias = 0;
  for (int64_t r = r0; r < r1; ++r) {
    double xhat = (double(in[r * len + i]) - stats[2 * r]) * stats[2 * r + 1];
    dScale += double(g[r * len + i]) * xhat;
    dBias += double(g[r * len + i]);
  }
  partScale[chunk * len + i] = dScale;
  partBias[chunk * len + i] = dBias;
}

/// The chunks' partial sums, added in chunk order.
template <typename T>
__global__ void layerNormGradFinish(const double *partScale,
                                    const double *partBias, int64_t chunks,
                                    int64_t len, T *dScale, T *dBias) {
  for (int64_t i = gridStart(); i < len; i += gridStride()) {
    double s = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partScale[c * len + i];
      b += partBias[c * len + i];
    }
    dScale[i] = static_cast<T>(s);
    dBias[i] = static_cast<T>(b);
  }
}

Status layerNormGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.layer_norm_grad";
  LayerNormGradShape c;
  if (Status s = checkLayerNormGrad(ctx, c); !s)
    return s;
  return dispatchFloat(ctx.inputs[1].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    if (c.len == 0)
      return Status::ok();
    const DeviceScratch *scratch;
    if (Status s = scratchOf(ctx, kOp, layerNormGradScratchBytes(c), scratch);
        !s)
      return s;
    double *stats = scratch->at<double>(0);
    double *partScale = scratch->at<double>(layerNormGradStatsBytes(c));
    double *partBias = partScale + c.chunks * c.len;
    const CudaStream &s = streamOf(ctx);
    const T *g = ctx.inputs[0].as<T>(), *in = ctx.inputs[1].as<T>();
    if (c.rows > 0) {
      STRATA_LAUNCH(rowGrid(c.rows), kBlock, 0, s.stream, layerNormGradRows<T>)
      (g, in, ctx.inputs[2].as<T>(), ctx.outputs[0].as<T>(), stats, c.rows,
       c.len, c.epsilon);
      if (Status st = launchStatus(kOp); !st)
        return st;
      dim3 grid(unsigned((c.len + kBlock - 1) / kBlock), unsigned(c.chunks));
      STRATA_LAUNCH(grid, kBlock, 0, s.stream, layerNormGradColumns<T>)
      (g, in, stats, partScale, partBias, c.rows, c.len, c.chunkRows);
      if (Status st = launchStatus(kOp); !st)
        return st;
    }
    STRATA_LAUNCH(gridFor(s, c.len), kBlock, 0, s.stream,
                  layerNormGradFinish<T>)
    (partScale, partBias, c.chunks, c.len, ctx.outputs[1].as<T>(),
     ctx.outputs[2].as<T>());
    return launchStatus(kOp);
  });
}

Status prepareLayerNormGrad(KernelContext &ctx,
                            std::shared_ptr<void> &prepared) {
  LayerNormGradShape c;
  if (!checkLayerNormGrad(ctx, c) || c.len == 0)
    return Status::ok(); // the run reports it, or has nothing to do
  return makeScratch("graph.layer_norm_grad", layerNormGradScratchBytes(c),
                     prepared);
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

/// One block per channel c of x [batch, channels, spatial].
template <typename T>
__global__ void batchNormGradChannels(const T *g, const T *in, const T *w,
                                      const T *runMean, const T *runVar, T *dx,
                                      T *dScaleOut, T *dBiasOut, int64_t batch,
                                      int64_t channels, int64_t spatial,
                                      double epsilon, bool training) {
  const int64_t count = batch * spatial;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    auto at = [&](int64_t k) {
      return (k / spatial * channels + c) * spatial + k % spatial;
    };
    double mean = double(runMean[c]), var = double(runVar[c]);
    if (training) {
      double sum = 0, sq = 0;
      for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
        sum += double(in[at(k)]);
      mean = blockSum(sum) / double(count);
      for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
        double d = double(in[at(k)]) - mean;
        sq += d * d;
      }
      var = blockSum(sq) / double(count);
    }
    double rstd = 1.0 / sqrt(var + epsilon);
    double dBias = 0, dScale = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t i = at(k);
      dBias += double(g[i]);
      dScale += double(g[i]) * (double(in[i]) - mean) * rstd;
    }
    dBias = blockSum(dBias);
    dScale = blockSum(dScale);
    double wc = double(w[c]);
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t i = at(k);
      double v = double(g[i]);
      if (training)
        v -= (dBias + (double(in[i]) - mean) * rstd * dScale) / double(count);
      dx[i] = static_cast<T>(v * wc * rstd);
    }
    if (threadIdx.x == 0) {
      dScaleOut[c] = static_cast<T>(dScale);
      dBiasOut[c] = static_cast<T>(dBias);
    }
  }
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
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    if (channels == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    STRATA_LAUNCH(rowGrid(channels), kBlock, 0, s.stream,
                  batchNormGradChannels<T>)
    (dy.as<T>(), x.as<T>(), ctx.inputs[2].as<T>(), ctx.inputs[3].as<T>(),
     ctx.inputs[4].as<T>(), ctx.outputs[0].as<T>(), ctx.outputs[1].as<T>(),
     ctx.outputs[2].as<T>(), batch, channels, spatial, epsilon, training);
    return launchStatus(kOp);
  });
}

//===----------------------------------------------------------------------===//
// embedding, gather
//===----------------------------------------------------------------------===//

/// Scatter-add of dy [outer, count, inner] into out [outer, rows, inner].
/// The shared plan's geometry (ShapePlans.h) and the sort's scratch.
struct ScatterShape : shape::ScatterGeometry {
  int endBit = 1;
  size_t sortBytes = 0;
  /// Offsets of the scratch's parts.
  size_t keysIn = 0, keysOut = 0, valsIn = 0, valsOut = 0, starts = 0,
         flag = 0, temp = 0, total = 0;
};

/// Sizes the scratch of a scatter (cub's temporary storage included).
Status planScatter(const std::string &op, ScatterShape &c) {
  if (c.count > INT_MAX || c.rows >= INT_MAX)
    return Status::error(op + ": more than 2^31 - 2 indices or rows are not "
                              "supported on CUDA");
  c.endBit = 1;
  while (c.endBit < 32 && (uint64_t(c.rows) >> c.endBit) != 0)
    ++c.endBit;
  c.sortBytes = 0;
  if (c.count > 0)
    if (Status s = cudaStatus(
            cub::DeviceRadixSort::SortPairs(
                nullptr, c.sortBytes, static_cast<const uint32_t *>(nullptr),
                static_cast<uint32_t *>(nullptr),
                static_cast<const int32_t *>(nullptr),
                static_cast<int32_t *>(nullptr), int(c.count), 0, c.endBit),
            op + ": sizing the index sort");
        !s)
      return s;
  size_t n = size_t(c.count);
  size_t at = 0;
  c.keysIn = at;
  at += alignScratch(n * sizeof(uint32_t));
  c.keysOut = at;
  at += alignScratch(n * sizeof(uint32_t));
  c.valsIn = at;
  at += alignScratch(n * sizeof(int32_t));
  c.valsOut = at;
  at += alignScratch(n * sizeof(int32_t));
  c.starts = at;
  at += alignScratch(size_t(c.rows + 1) * sizeof(int32_t));
  c.flag = at;
  at += alignScratch(sizeof(int));
  c.temp = at;
  at += alignScratch(c.sortBytes);
  c.total = at;
  return Status::ok();
}

/// Keys (the row, `rows` for an index out of range, which also raises
/// `flag`) and values (the position) of the sort.
template <typename I>
__global__ void scatterKeys(const I *idx, int64_t count, int64_t rows,
                            uint32_t *keys, int32_t *vals, int *flag) {
  for (int64_t j = gridStart(); j < count; j += gridStride()) {
    int64_t row = static_cast<int64_t>(idx[j]);
    uint32_t key;
    if (row < -rows || row >= rows) {
      *flag = 1;
      key = uint32_t(rows);
    } else {
      key = uint32_t(row < 0 ? row + rows : row);
    }
    keys[j] = key;
    vals[j] = int32_t(j);
  }
}

/// starts[r] = the first sorted position with key >= r, r in [0, rows].
__global__ void scatterStarts(const uint32_t *keys, int64_t count,
                              int64_t rows, int32_t *starts) {
  for (int64_t r = gridStart(); r <= rows; r += gridStride()) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (int64_t(keys[mid]) < r)
        lo = mid + 1;
      else
        hi = mid;
    }
    starts[r] = int32_t(lo);
  }
}

/// One thread per element (a, r, c) of the result: the rows of dy whose
/// index is r, in index order (the sort is stable), added from zero.
template <typename T>
__global__ void scatterSum(const T *dy, const int32_t *order,
                           const int32_t *starts, const int *flag, T *out,
                           int64_t outer, int64_t rows, int64_t inner,
                           int64_t count) {
  const bool bad = *flag != 0;
  const int64_t n = outer * rows * inner;
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    if (bad) {
      out[e] = quietNaN<T>();
      continue;
    }
    int64_t c = e % inner, r = e / inner % rows, a = e / (inner * rows);
    T acc = T(0);
    for (int32_t q = starts[r], end = starts[r + 1]; q < end; ++q)
      acc += dy[(a * count + order[q]) * inner + c];
    out[e] = acc;
  }
}

Status scatterAdd(KernelContext &ctx, const std::string &op,
                  const TensorView &dy, const TensorView &indices,
                  TensorView &out, ScatterShape c) {
  return dispatchIndex(indices.dtype, op, [&](auto indexTag) -> Status {
    using I = decltype(indexTag);
    return dispatchFloat(dy.dtype, op, [&](auto tag) -> Status {
      using T = decltype(tag);
      if (Status s = planScatter(op, c); !s)
        return s;
      const CudaStream &s = streamOf(ctx);
      if (out.numel() == 0)
        return Status::ok();
      if (c.count == 0)
        return cudaStatus(cudaMemsetAsync(out.data, 0, out.bytes(), s.stream),
                          op + ": cudaMemsetAsync");
      const DeviceScratch *scratch;
      if (Status st = scratchOf(ctx, op, c.total, scratch); !st)
        return st;
      auto *keysIn = scratch->at<uint32_t>(c.keysIn);
      auto *keysOut = scratch->at<uint32_t>(c.keysOut);
      auto *valsIn = scratch->at<int32_t>(c.valsIn);
      auto *valsOut = scratch->at<int32_t>(c.valsOut);
      auto *starts = scratch->at<int32_t>(c.starts);
      auto *flag = scratch->at<int>(c.flag);
      if (Status st = cudaStatus(cudaMemsetAsync(flag, 0, sizeof(int), s.stream),
                                 op + ": cudaMemsetAsync");
          !st)
        return st;
      STRATA_LAUNCH(gridFor(s, c.count), kBlock, 0, s.stream, scatterKeys<I>)
      (indices.as<I>(), c.count, c.rows, keysIn, valsIn, flag);
      if (Status st = launchStatus(op); !st)
        return st;
      size_t sortBytes = c.sortBytes;
      if (Status st = cudaStatus(
              cub::DeviceRadixSort::SortPairs(
                  scratch->at<void>(c.temp), sortBytes,
                  static_cast<const uint32_t *>(keysIn), keysOut,
                  static_cast<const int32_t *>(valsIn), valsOut, int(c.count),
                  0, c.endBit, s.stream),
              op + ": sorting the indices");
          !st)
        return st;
      STRATA_LAUNCH(gridFor(s, c.rows + 1), kBlock, 0, s.stream, scatterStarts)
      (keysOut, c.count, c.rows, starts);
      if (Status st = launchStatus(op); !st)
        return st;
      STRATA_LAUNCH(gridFor(s, out.numel()), kBlock, 0, s.stream, scatterSum<T>)
      (dy.as<T>(), valsOut, starts, flag, out.as<T>(), c.outer, c.rows, c.inner,
       c.count);
      return launchStatus(op);
    });
  });
}

Status checkEmbeddingGrad(const KernelContext &ctx, ScatterShape &c) {
  return shape::planEmbeddingGrad(ctx, c);
}

Status checkGatherGrad(const KernelContext &ctx, ScatterShape &c) {
  return shape::planGatherGrad(ctx, c);
}

template <Status (*Check)(const KernelContext &, ScatterShape &)>
Status scatterKernel(KernelContext &ctx, const char *op) {
  ScatterShape c;
  if (Status s = Check(ctx, c); !s)
    return s;
  return scatterAdd(ctx, op, ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], c);
}

template <Status (*Check)(const KernelContext &, ScatterShape &)>
Status prepareScatter(KernelContext &ctx, std::shared_ptr<void> &prepared,
                      const char *op) {
  ScatterShape c;
  if (!Check(ctx, c) || c.count == 0 || ctx.outputs[0].numel() == 0 ||
      !planScatter(op, c))
    return Status::ok(); // the run reports it, or has no use for scratch
  return makeScratch(op, c.total, prepared);
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

/// The checks both backends make (LossPlan.h).
using CrossEntropyGradShape = CrossEntropyShape;

Status checkCrossEntropyGrad(const KernelContext &ctx,
                             CrossEntropyGradShape &out) {
  return planCrossEntropyGrad(ctx, out);
}

/// One block: the total weight of the labels not ignored (NaN with one out
/// of range), for "mean".
template <typename T, typename L>
__global__ void crossEntropyTotalWeight(const L *y, const T *w,
                                        CrossEntropyGradShape c,
                                        double *total) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < c.positions; i += blockDim.x) {
    int64_t label = static_cast<int64_t>(y[i]);
    if (c.hasIgnore && label == c.ignoreIndex)
      continue;
    if (label < 0 || label >= c.classes)
      sum += quietNaN<double>();
    else
      sum += w ? double(w[label]) : 1.0;
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    *total = sum;
}

/// One block per position: its column of the gradient.
template <typename T, typename L>
__global__ void crossEntropyGradPositions(const T *x, const T *g, const L *y,
                                          const T *w, T *out,
                                          const double *totalWeight,
                                          CrossEntropyGradShape c) {
  for (int64_t i = blockIdx.x; i < c.positions; i += gridDim.x) {
    int64_t n = i / c.spatial, s = i % c.spatial;
    const T *col = x + n * c.classes * c.spatial + s;
    T *dcol = out + n * c.classes * c.spatial + s;
    int64_t label = static_cast<int64_t>(y[i]);
    if (c.hasIgnore && label == c.ignoreIndex) {
      for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x)
        dcol[k * c.spatial] = T(0);
      continue;
    }
    if (label < 0 || label >= c.classes) { // the CPU's error
      for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x)
        dcol[k * c.spatial] = quietNaN<T>();
      continue;
    }
    double scale = c.none  ? double(g[i])
                   : c.sum ? double(g[0])
                           : double(g[0]) / *totalWeight;
    scale *= w ? double(w[label]) : 1.0;
    T max = col[0];
    for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x)
      max = NanMaxOp()(max, col[k * c.spatial]);
    max = blockReduce(max, NanMaxOp());
    double sum = 0;
    for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x)
      sum += exp(double(col[k * c.spatial]) - double(max));
    sum = blockSum(sum);
    for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x) {
      double p = exp(double(col[k * c.spatial]) - double(max)) / sum;
      dcol[k * c.spatial] =
          static_cast<T>(scale * (p - (k == label ? 1.0 : 0.0)));
    }
  }
}

Status crossEntropyGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.cross_entropy_grad";
  CrossEntropyGradShape c;
  if (Status s = checkCrossEntropyGrad(ctx, c); !s)
    return s;
  const TensorView &dloss = ctx.inputs[0], &logits = ctx.inputs[1],
                   &labels = ctx.inputs[2];
  const TensorView *weight = ctx.inputs.size() > 3 ? &ctx.inputs[3] : nullptr;
  return dispatchAll(labels.dtype, kOp, [&](auto labelTag) -> Status {
    using L = decltype(labelTag);
    return dispatchFloat(logits.dtype, kOp, [&](auto tag) -> Status {
      using T = decltype(tag);
      if (c.positions == 0 || c.classes == 0)
        return Status::ok();
      const DeviceScratch *scratch;
      if (Status st = scratchOf(ctx, kOp, sizeof(double), scratch); !st)
        return st;
      double *totalWeight = scratch->at<double>(0);
      const CudaStream &s = streamOf(ctx);
      const T *w = weight ? weight->as<T>() : nullptr;
      if (!c.none && !c.sum) {
        STRATA_LAUNCH(1, kBlock, 0, s.stream, crossEntropyTotalWeight<T, L>)
        (labels.as<L>(), w, c, totalWeight);
        if (Status st = launchStatus(kOp); !st)
          return st;
      }
      int threads = c.classes >= 128 ? kBlock : 32;
      STRATA_LAUNCH(rowGrid(c.positions), threads, 0, s.stream,
                    crossEntropyGradPositions<T, L>)
      (logits.as<T>(), dloss.as<T>(), labels.as<L>(), w, ctx.outputs[0].as<T>(),
       totalWeight, c);
      return launchStatus(kOp);
    });
  });
}

Status prepareCrossEntropyGrad(KernelContext &ctx,
                               std::shared_ptr<void> &prepared) {
  CrossEntropyGradShape c;
  if (!checkCrossEntropyGrad(ctx, c) || c.positions == 0 || c.classes == 0)
    return Status::ok();
  return makeScratch("graph.cross_entropy_grad", sizeof(double), prepared);
}

} // namespace

void registerNeuralNetGradKernels(KernelRegistry &registry) {
  registry.add("graph.layer_norm_grad", layerNormGradKernel,
               prepareLayerNormGrad);
  registry.add("graph.batch_norm_grad", batchNormGradKernel);
  registry.add(
      "graph.embedding_grad",
      [](KernelContext &ctx) {
        return scatterKernel<checkEmbeddingGrad>(ctx, "graph.embedding_grad");
      },
      [](KernelContext &ctx, std::shared_ptr<void> &prepared) {
        return prepareScatter<checkEmbeddingGrad>(ctx, prepared,
                                                  "graph.embedding_grad");
      });
  registry.add(
      "graph.gather_grad",
      [](KernelContext &ctx) {
        return scatterKernel<checkGatherGrad>(ctx, "graph.gather_grad");
      },
      [](KernelContext &ctx, std::shared_ptr<void> &prepared) {
        return prepareScatter<checkGatherGrad>(ctx, prepared,
                                               "graph.gather_grad");
      });
  registry.add("graph.cross_entropy_grad", crossEntropyGradKernel,
               prepareCrossEntropyGrad);
}

} // namespace strata::runtime::cuda
