//===- LossPlan.h - graph.cross_entropy's checks, for every backend -*- C++ -*-===//
//
// What both backends' cross-entropy kernels (and their gradients) check before touching memory
// (less the labels' values, which only a kernel that runs on the host can
// read), and what they find out: the shape of the problem and its
// attributes.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_LOSSPLAN_H
#define STRATA_RUNTIME_LOSSPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>

namespace strata::runtime {

/// logits [N, C, d...], labels [N, d...] (integers), optional weight [C],
/// loss [] or (reduction "none") [N, d...].
struct CrossEntropyShape {
  int64_t batch = 0, classes = 0, spatial = 0, positions = 0;
  bool none = false, sum = false, hasWeight = false;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
};

Status planCrossEntropy(const KernelContext &ctx, CrossEntropyShape &out);

/// graph.cross_entropy_grad: (dloss, logits, labels [, weight]) -> dlogits,
/// dloss [] or (reduction "none") of the labels' shape.
Status planCrossEntropyGrad(const KernelContext &ctx, CrossEntropyShape &out);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_LOSSPLAN_H
