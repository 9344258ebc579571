//===- OptimizerPlan.h - The optimizer updates' checks, for every backend -*- C++ -*-===//
//
// graph.adamw_update and graph.sgd_update take the parameter, its gradient
// and states (one shape and type), then the scalars lr (f64), step (i64)
// and grad_scale (f32), and write the parameter and states. Both backends'
// kernels check their operands here, with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_OPTIMIZERPLAN_H
#define STRATA_RUNTIME_OPTIMIZERPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstddef>
#include <string_view>

namespace strata::runtime {

/// Operands [0, tensors) and every result have the parameter's shape and
/// type.
Status checkUpdateTensors(const KernelContext &ctx, std::string_view op,
                          size_t tensors);
/// Operands first, first + 1, first + 2 are the f64 lr, i64 step and f32
/// grad_scale scalars.
Status checkUpdateScalars(const KernelContext &ctx, std::string_view op,
                          size_t first);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_OPTIMIZERPLAN_H
