//===- NarrowOperands.h - Ops that see bf16 / fp16 tensors ------*- C++ -*-===//
//
// strata-mixed-precision's narrow storage gives bf16 / fp16 operands and
// results to its products (linear, matmul, attention, conv), to their
// gradients and to reduce_sum (a bias gradient sums a narrow gradient).
// Where a backend has no narrow kernel for one of them, it runs the f32
// kernel on widened copies and rounds the results once: the numbers of the
// f32 emulation (graph.round_to). This is the list, and the prepare-side
// half of that adapter (the kernel side widens values, which is backend
// work).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_NARROWOPERANDS_H
#define STRATA_RUNTIME_NARROWOPERANDS_H

#include "strata/Runtime/Kernel.h"

#include <algorithm>
#include <span>
#include <vector>

namespace strata::runtime {

inline constexpr const char *kNarrowFloatOps[] = {
    "graph.linear",          "graph.matmul",
    "graph.attention",       "graph.conv",
    "graph.linear_grad_weight", "graph.attention_grad",
    "graph.conv_grad_input", "graph.conv_grad_weight",
    "graph.reduce_sum"};

inline bool hasNarrowFloat(std::span<const TensorView> views) {
  return std::any_of(views.begin(), views.end(), [](const TensorView &v) {
    return isNarrowFloat(v.dtype);
  });
}

inline bool hasNarrowFloat(const KernelContext &ctx) {
  return hasNarrowFloat(ctx.inputs) ||
         hasNarrowFloat(std::span<const TensorView>(ctx.outputs));
}

/// `ctx` with `inputs` and `outputs` in place of its views.
inline KernelContext withViews(const KernelContext &ctx,
                               std::span<const TensorView> inputs,
                               std::span<TensorView> outputs) {
  KernelContext wide{inputs, outputs, ctx.attrs};
  wide.seed = ctx.seed;
  wide.comm = ctx.comm;
  wide.ssdFile = ctx.ssdFile;
  wide.stream = ctx.stream;
  wide.prepared = ctx.prepared;
  wide.description = ctx.description;
  wide.seedSlot = ctx.seedSlot;
  return wide;
}

/// The f32 kernel's prepare function, seeing the narrow views as f32 (a
/// prepare reads shapes and types, never values).
inline PrepareFn prepareWidened(PrepareFn f32Prepare) {
  if (!f32Prepare)
    return nullptr;
  return [f32Prepare](KernelContext &ctx,
                      std::shared_ptr<void> &prepared) -> Status {
    std::vector<TensorView> inputs(ctx.inputs.begin(), ctx.inputs.end());
    std::vector<TensorView> outputs(ctx.outputs.begin(), ctx.outputs.end());
    for (auto *views : {&inputs, &outputs})
      for (TensorView &v : *views)
        if (isNarrowFloat(v.dtype))
          v.dtype = DType::F32;
    KernelContext wide = withViews(ctx, inputs, outputs);
    return f32Prepare(wide, prepared);
  };
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_NARROWOPERANDS_H
