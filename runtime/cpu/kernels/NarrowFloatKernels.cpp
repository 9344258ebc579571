//===- NarrowFloatKernels.cpp - bf16 / fp16 operands of the CPU kernels ---===//
//
// Mixed precision stores the operands and results of linear, matmul,
// attention and conv (and of their gradients) in bf16 or fp16. The CPU
// computes those ops in f32 on the widened values (exact: f32 holds every
// bf16 and fp16 value) and rounds each result once, as it is stored: the
// same numbers as the f32-storage emulation with graph.round_to on every
// operand and result.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include "strata/Runtime/NarrowFloat.h"
#include "strata/Runtime/NarrowOperands.h"

#include <vector>

namespace strata::runtime::cpu {
namespace {

void widen(const TensorView &from, float *to) {
  const auto *in = from.as<uint16_t>();
  bool bf16 = from.dtype == DType::BF16;
  for (int64_t i = 0, n = from.numel(); i < n; ++i)
    to[i] = bf16 ? fromBf16Bits(in[i]) : fromFp16Bits(in[i]);
}

void narrow(const float *from, const TensorView &to) {
  auto *out = to.as<uint16_t>();
  bool bf16 = to.dtype == DType::BF16;
  for (int64_t i = 0, n = to.numel(); i < n; ++i)
    out[i] = bf16 ? bf16Bits(from[i]) : fp16Bits(from[i]);
}

/// An f32 stand-in for each narrow view (its widened values: a kernel may
/// accumulate into its output); other views pass through.
std::vector<TensorView> widenViews(std::span<const TensorView> views,
                                   std::vector<std::vector<float>> &storage) {
  std::vector<TensorView> wide(views.begin(), views.end());
  for (TensorView &v : wide) {
    if (!isNarrowFloat(v.dtype) || !v.data)
      continue;
    std::vector<float> &buffer = storage.emplace_back(v.numel());
    widen(v, buffer.data());
    v.data = buffer.data();
    v.dtype = DType::F32;
  }
  return wide;
}

KernelFn widenNarrowFloats(KernelFn f32Kernel) {
  return [f32Kernel](KernelContext &ctx) -> Status {
    if (!hasNarrowFloat(ctx))
      return f32Kernel(ctx);
    std::vector<std::vector<float>> storage;
    std::vector<TensorView> inputs = widenViews(ctx.inputs, storage);
    std::vector<TensorView> outputs = widenViews(ctx.outputs, storage);
    KernelContext wide = withViews(ctx, inputs, outputs);
    if (Status s = f32Kernel(wide); !s)
      return s;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (isNarrowFloat(ctx.outputs[i].dtype) && ctx.outputs[i].data)
        narrow(outputs[i].as<float>(), ctx.outputs[i]);
    return Status::ok();
  };
}

} // namespace

void registerNarrowFloatOperands(KernelRegistry &registry) {
  for (const char *op : kNarrowFloatOps) {
    const KernelFn *run = registry.lookup(op);
    if (!run)
      continue;
    const PrepareFn *prepare = registry.lookupPrepare(op);
    registry.add(op, widenNarrowFloats(*run),
                 prepareWidened(prepare ? *prepare : PrepareFn()));
  }
}

} // namespace strata::runtime::cpu
