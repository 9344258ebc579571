//===- KernelChecks.h - Checks every backend's kernels make -----*- C++ -*-===//
//
// The operand-count, attribute and gradient dtype checks a kernel makes
// before it touches memory, shared by the CPU and CUDA backends so both reject a malformed
// instruction with the same one-line message.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_KERNELCHECKS_H
#define STRATA_RUNTIME_KERNELCHECKS_H

#include "strata/Runtime/Kernel.h"

#include <initializer_list>
#include <string>
#include <string_view>

namespace strata::runtime {

/// Checks the number of inputs (within [minIn, maxIn]) and outputs.
inline Status checkArity(const KernelContext &ctx, std::string_view op,
                         size_t minIn, size_t maxIn, size_t outs) {
  if (ctx.inputs.size() < minIn || ctx.inputs.size() > maxIn ||
      ctx.outputs.size() != outs)
    return Status::error(std::string(op) + ": expected " +
                         std::to_string(minIn) +
                         (minIn == maxIn ? "" : ".." + std::to_string(maxIn)) +
                         " inputs and " + std::to_string(outs) +
                         " outputs, got " + std::to_string(ctx.inputs.size()) +
                         " and " + std::to_string(ctx.outputs.size()));
  return Status::ok();
}

/// Checks that every attribute in `names` is set (those without an ODS
/// default, which codegen always writes).
inline Status requireAttributes(const KernelContext &ctx, std::string_view op,
                                std::initializer_list<const char *> names) {
  for (const char *name : names)
    if (!ctx.attrs.has(name))
      return Status::error(std::string(op) + ": missing attribute '" + name +
                           "'");
  return Status::ok();
}

/// The gradient kernels' rule: every float operand and every result has the
/// element type of operand 0 (the gradient).
inline Status checkGradDTypes(std::string_view op, const KernelContext &ctx) {
  DType t = ctx.inputs[0].dtype;
  for (const TensorView &v : ctx.inputs)
    if (isFloat(v.dtype) && v.dtype != t)
      return Status::error(std::string(op) + ": operand " + v.describe() +
                           " does not have the gradient's element type");
  for (const TensorView &v : ctx.outputs)
    if (v.dtype != t)
      return Status::error(std::string(op) + ": result " + v.describe() +
                           " does not have the gradient's element type");
  return Status::ok();
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_KERNELCHECKS_H
