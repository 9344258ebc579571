//===- LossKernels.cu - Losses on CUDA ---------------------------------------===//
//
// graph.cross_entropy, the counterpart of runtime/cpu/kernels/LossKernels.cpp
// (nll_loss of log_softmax over dim 1; logits [N, C, d...], integer labels
// [N, d...], optional weight [C]; reductions "mean", "sum", "none"; optional
// ignore_index). The log-sum-exp and the sums are evaluated in double and
// rounded once.
//
// One block per position (n, d...) computes its log-sum-exp over the
// classes with a fixed-tree reduction. Under "none" it writes its loss;
// under "mean" and "sum" it writes w[y] * nll and w[y] to the instruction's
// scratch (two doubles per position, made by the prepare), and one block
// then sums them in a fixed order: no atomics, the same bits every run.
//
// The CPU rejects a label outside [0, C) that is not ignored before it
// writes anything; a kernel cannot read labels on the host, so here such a
// label gives NaN: its loss under "none", the whole loss under "mean" and
// "sum".
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"
#include "NormalizationCommon.cuh"

#include "strata/Runtime/LossPlan.h"

#include <limits>
#include <string>

namespace strata::runtime::cuda {
namespace {

using namespace norm;

constexpr const char *kOp = "graph.cross_entropy";

/// The checks both backends make (LossPlan.h).
Status checkCrossEntropy(const KernelContext &ctx, CrossEntropyShape &out) {
  return planCrossEntropy(ctx, out);
}

/// Scratch of "mean" and "sum": (w[y] * nll, w[y]) per position.
size_t scratchBytes(const CrossEntropyShape &c) {
  return c.none ? 0 : size_t(c.positions) * 2 * sizeof(double);
}

/// One block per position i = n * spatial + s; class c of it is at
/// (n * C + c) * S + s. Under "none" writes out[i]; else parts[2i],
/// parts[2i + 1] = w[y] * nll, w[y] (0, 0 when ignored).
template <typename T, typename L>
__global__ void crossEntropyPositions(const T *x, const L *y, const T *w,
                                      T *out, double *parts,
                                      CrossEntropyShape c) {
  for (int64_t i = blockIdx.x; i < c.positions; i += gridDim.x) {
    int64_t label = static_cast<int64_t>(y[i]);
    bool ignored = c.hasIgnore && label == c.ignoreIndex;
    bool invalid = !ignored && (label < 0 || label >= c.classes);
    if (ignored || invalid) { // uniform over the block: no reduction
      if (threadIdx.x == 0) {
        double nan = std::numeric_limits<double>::quiet_NaN();
        if (c.none)
          out[i] = static_cast<T>(invalid ? nan : 0.0);
        else {
          parts[2 * i] = invalid ? nan : 0.0;
          parts[2 * i + 1] = invalid ? nan : 0.0;
        }
      }
      continue;
    }
    int64_t n = i / c.spatial, s = i % c.spatial;
    const T *col = x + n * c.classes * c.spatial + s;
    T max = col[0];
    for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x)
      max = NanMaxOp()(max, col[k * c.spatial]);
    max = blockReduce(max, NanMaxOp());
    double sum = 0;
    for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x)
      sum += exp(double(col[k * c.spatial]) - double(max));
    sum = blockSum(sum);
    if (threadIdx.x == 0) {
      // -log_softmax(x)[label]
      double nll = double(max) + log(sum) - double(col[label * c.spatial]);
      double wy = w ? double(w[label]) : 1.0;
      if (c.none)
        out[i] = static_cast<T>(wy * nll);
      else {
        parts[2 * i] = wy * nll;
        parts[2 * i + 1] = wy;
      }
    }
  }
}

/// One block: the loss of "sum" (total) or "mean" (total / total weight).
template <typename T>
__global__ void crossEntropyReduce(const double *parts, int64_t positions,
                                   bool sum, T *out) {
  double total = 0, totalWeight = 0;
  for (int64_t i = threadIdx.x; i < positions; i += blockDim.x) {
    total += parts[2 * i];
    totalWeight += parts[2 * i + 1];
  }
  total = blockSum(total);
  totalWeight = blockSum(totalWeight);
  if (threadIdx.x == 0)
    out[0] = static_cast<T>(sum ? total : total / totalWeight);
}

/// Few classes: a warp per position; many: a block.
int positionBlock(int64_t classes) { return classes >= 128 ? kBlock : 32; }

Status crossEntropyKernel(KernelContext &ctx) {
  CrossEntropyShape c;
  if (Status s = checkCrossEntropy(ctx, c); !s)
    return s;
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1];
  const TensorView *weight = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  TensorView &loss = ctx.outputs[0];
  return dispatchAll(labels.dtype, kOp, [&](auto labelTag) -> Status {
    using L = decltype(labelTag);
    return dispatchFloat(logits.dtype, kOp, [&](auto tag) -> Status {
      using T = decltype(tag);
      const CudaStream &s = streamOf(ctx);
      double *parts = nullptr;
      if (!c.none) {
        const DeviceScratch *scratch;
        if (Status st = scratchOf(ctx, kOp, scratchBytes(c), scratch); !st)
          return st;
        parts = scratch->at<double>(0);
      }
      if (c.positions > 0) {
        STRATA_LAUNCH(rowGrid(c.positions), positionBlock(c.classes), 0,
                      s.stream, crossEntropyPositions<T, L>)
        (logits.as<T>(), labels.as<L>(), weight ? weight->as<T>() : nullptr,
         loss.as<T>(), parts, c);
        if (Status st = launchStatus(kOp); !st)
          return st;
      }
      if (!c.none) {
        // No positions: 0 under "sum", 0 / 0 = NaN under "mean" (the CPU's).
        STRATA_LAUNCH(1, kBlock, 0, s.stream, crossEntropyReduce<T>)
        (parts, c.positions, c.sum, loss.as<T>());
        return launchStatus(kOp);
      }
      return Status::ok();
    });
  });
}

Status prepareCrossEntropy(KernelContext &ctx, std::shared_ptr<void> &prepared) {
  CrossEntropyShape c;
  // A malformed instruction is reported by the run, with the CPU's message.
  if (!checkCrossEntropy(ctx, c) || c.none)
    return Status::ok();
  return makeScratch(kOp, scratchBytes(c), prepared);
}

} // namespace

void registerLossKernels(KernelRegistry &registry) {
  registry.add("graph.cross_entropy", crossEntropyKernel, prepareCrossEntropy);
}

} // namespace strata::runtime::cuda
