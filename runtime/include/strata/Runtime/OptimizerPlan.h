//===- OptimizerPlan.h - The optimizer updates' checks, for every backend -*- C++ -*-===//
//
// graph.adamw_update and graph.sgd_update update one or more parameters
// (strata-group-updates merges them into multi-tensor updates). Their
// operands are, per parameter, the parameter, its gradient and states (one
// shape and type), then the shared scalars lr (f64), step (i64) and
// grad_scale (f32); their results are, per parameter, the parameter and
// states. graph.sum_squares takes one or more tensors and gives one scalar
// each. Both backends' kernels check their operands here, with the same
// messages.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_OPTIMIZERPLAN_H
#define STRATA_RUNTIME_OPTIMIZERPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstddef>
#include <string_view>

namespace strata::runtime {

/// Where an update's tensors are.
struct UpdatePlan {
  size_t parameters = 0;
  /// Operands per parameter (AdamW 4, SGD 3) and results (3, 2).
  size_t perParameter = 0, resultsPerParameter = 0;
  /// Operand `scalars` is lr; step and grad_scale follow.
  size_t scalars = 0;
  DType dtype = DType::F32;

  const TensorView &operand(const KernelContext &ctx, size_t parameter,
                            size_t i) const {
    return ctx.inputs[parameter * perParameter + i];
  }
  TensorView &result(KernelContext &ctx, size_t parameter, size_t i) const {
    return ctx.outputs[parameter * resultsPerParameter + i];
  }
  /// The operand whose value result `i` of a parameter replaces: the
  /// parameter first, then the states after the gradient.
  static size_t updatedOperand(size_t i) { return i == 0 ? 0 : i + 1; }
};

/// Checks the operand and result counts, that each parameter's tensors
/// share its shape and every parameter one float dtype, and the scalars'
/// types (not their values).
Status planUpdate(const KernelContext &ctx, std::string_view op,
                  size_t perParameter, size_t resultsPerParameter,
                  UpdatePlan &plan);

/// graph.sum_squares: as many results as operands, each a float scalar,
/// every operand one float dtype and every result one.
Status checkSumSquares(const KernelContext &ctx);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_OPTIMIZERPLAN_H
