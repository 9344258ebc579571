//===- NormPlan.h - layer_norm's and batch_norm's checks, for every backend -*- C++ -*-===//
//
// What both backends' normalization kernels check before touching memory,
// with the same messages, and the geometry they find.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_NORMPLAN_H
#define STRATA_RUNTIME_NORMPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>

namespace strata::runtime {

/// graph.layer_norm: x normalized over dims [axis, rank) as `rows` rows of
/// `len`, by scale and optional bias of the normalized dims' shape.
struct LayerNormShape {
  int64_t rows = 0, len = 0;
  double epsilon = 0;
  bool hasBias = false;
};
Status planLayerNorm(const KernelContext &ctx, LayerNormShape &out);

/// graph.batch_norm: x [N, C, ...] with per-channel scale, bias, running
/// mean and variance -> y, new running mean and variance.
struct BatchNormShape {
  int64_t batch = 0, channels = 0, spatial = 0, count = 0;
  double epsilon = 0, momentum = 0;
  bool training = false;
};
Status planBatchNorm(const KernelContext &ctx, BatchNormShape &out);

/// graph.layer_norm_grad (dy, x, scale -> dx, dscale, dbias): x as `rows`
/// rows of `len` (the normalized dims from attribute axis).
struct LayerNormGradPlan {
  int64_t rows = 0, len = 0;
  double epsilon = 0;
};
Status planLayerNormGrad(const KernelContext &ctx, LayerNormGradPlan &out);

/// graph.batch_norm_grad (dy, x, scale, running mean, running var -> dx,
/// dscale, dbias) over x [N, C, ...].
struct BatchNormGradPlan {
  int64_t batch = 0, channels = 0, spatial = 0;
  double epsilon = 0;
  bool training = false;
};
Status planBatchNormGrad(const KernelContext &ctx, BatchNormGradPlan &out);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_NORMPLAN_H
