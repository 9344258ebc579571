//===- LossKernels.cpp - Losses on the CPU --------------------------------===//
//
// graph.cross_entropy, matching torch.nn.functional.cross_entropy (that is,
// nll_loss of log_softmax over dim 1): logits [N, C, d...], integer labels
// [N, d...], optional per-class weight [C]. The log-sum-exp and every sum
// are evaluated in double and rounded once. Conventions:
//  - "mean" is PyTorch's weighted mean sum(w[y] * nll) / sum(w[y]) over the
//    labels that are not ignored; all ignored gives 0 / 0 = NaN, as PyTorch.
//  - ignore_index is optional here (PyTorch defaults it to -100): absent, no
//    label is ignored. Ignored positions give 0 under "none".
//  - A label outside [0, C) that is not ignored is an error (PyTorch raises
//    "Target ... is out of bounds").
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/LossPlan.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

namespace strata::runtime::cpu {
namespace {

Status crossEntropyKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.cross_entropy";
  CrossEntropyShape plan;
  if (Status s = planCrossEntropy(ctx, plan); !s)
    return s;
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1];
  const TensorView *weight = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  TensorView &loss = ctx.outputs[0];
  int64_t classes = plan.classes, batch = plan.batch, spatial = plan.spatial;
  bool none = plan.none, hasIgnore = plan.hasIgnore;
  int64_t ignoreIndex = plan.ignoreIndex;
  std::string reduction = ctx.attrs.getString("reduction", "mean");

  return dispatchAll(labels.dtype, kOp, [&](auto labelTag) -> Status {
    using L = decltype(labelTag);
    const L *y = labels.as<L>();
    // Check every label first so a bad one leaves the result untouched.
    for (int64_t i = 0, n = labels.numel(); i < n; ++i) {
      int64_t label = static_cast<int64_t>(y[i]);
      if ((!hasIgnore || label != ignoreIndex) &&
          (label < 0 || label >= classes))
        return Status::error("graph.cross_entropy: label " +
                             std::to_string(label) + " at " +
                             std::to_string(i) + " is out of [0, " +
                             std::to_string(classes) + ")");
    }
    return dispatchFloat(logits.dtype, kOp, [&](auto tag) -> Status {
      using T = decltype(tag);
      const T *x = logits.as<T>();
      const T *w = weight ? weight->as<T>() : nullptr;
      T *out = loss.as<T>();
      // Each position's loss in parallel (with -1 for an ignored one), then
      // the total in order, as one thread would.
      // scratch: the positions' weighted losses and weights.
      std::vector<double> nlls(batch * spatial), weights(batch * spatial);
      parallelFor(batch * spatial, rowGrain(classes), [&](int64_t b, int64_t e) {
        // scratch: one position's exponentials.
        std::vector<T> ex(spatial == 1 ? classes : 0);
        for (int64_t i = b; i < e; ++i) {
          int64_t n = i / spatial, s = i % spatial;
          int64_t label = static_cast<int64_t>(y[i]);
          if (hasIgnore && label == ignoreIndex) {
            weights[i] = -1;
            if (none)
              out[i] = T(0);
            continue;
          }
          // Class c of position (n, s) is at (n * C + c) * S + s.
          const T *col = x + n * classes * spatial + s;
          T max;
          double sum;
          if (spatial == 1) {
            max = rowMaxExpSum(col, classes, ex.data(), sum);
          } else {
            std::tie(max, sum) = maxAndExpSum(col, classes, spatial);
          }
          // -log_softmax(x)[label]
          double nll =
              double(max) + std::log(sum) - double(col[label * spatial]);
          double wy = w ? double(w[label]) : 1.0;
          if (none)
            out[i] = static_cast<T>(wy * nll);
          nlls[i] = wy * nll;
          weights[i] = wy;
        }
      });
      double total = 0, totalWeight = 0;
      for (int64_t i = 0; i < batch * spatial; ++i) {
        if (hasIgnore && static_cast<int64_t>(y[i]) == ignoreIndex)
          continue;
        total += nlls[i];
        totalWeight += weights[i];
      }
      if (reduction == "sum")
        out[0] = static_cast<T>(total);
      else if (reduction == "mean")
        out[0] = static_cast<T>(total / totalWeight);
      return Status::ok();
    });
  });
}

} // namespace

STRATA_VECTOR_DISPATCHED float rowMaxExpSumF32(const float *row, int64_t n,
                                               float *e, double &sum) {
  return rowMaxExpSumBody(row, n, e, sum);
}

STRATA_VECTOR_DISPATCHED void crossEntropyGradRowF32(const float *row,
                                                     int64_t classes,
                                                     int64_t label,
                                                     double scale, float *e,
                                                     float *dx) {
  crossEntropyGradRowBody(row, classes, label, scale, e, dx);
}

void registerLossKernels(KernelRegistry &registry) {
  registry.add("graph.cross_entropy", crossEntropyKernel);
}

} // namespace strata::runtime::cpu
