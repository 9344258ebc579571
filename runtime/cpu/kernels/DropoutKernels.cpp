//===- DropoutKernels.cpp - Training-mode dropout on the CPU --------------===//
//
// graph.dropout: y = x * mask / (1 - ratio) with a Bernoulli(1 - ratio) keep
// mask drawn from a counter-based generator, Philox4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11; the philox4x32_R
// of Random123 with R = 10). The mask bit of element i is a pure function of
// (seed, i): key = (low, high 32 bits of the seed), counter = (low, high 32
// bits of i, 0, 0), u = word 0 of the output / 2^32, keep iff u >= ratio.
// A replay with the same seed draws the same mask, in any order and on any
// number of threads, and graph.attention draws its probability dropout by
// the same rule.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include <array>

namespace strata::runtime::cpu {

/// Random123's philox4x32_R(10, ctr, key): ten rounds, the key bumped by the
/// Weyl constants before every round but the first.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                      std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;
  constexpr uint32_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0],
           static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1],
           static_cast<uint32_t>(p0)};
  }
  return ctr;
}

bool dropoutKeeps(uint64_t seed, uint64_t index, double ratio) {
  std::array<uint32_t, 4> out = philox4x32_10(
      {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0, 0},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  // Exact in double: a multiple of 2^-32 in [0, 1).
  double u = static_cast<double>(out[0]) * 0x1p-32;
  return u >= ratio;
}

namespace {

Status dropoutKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.dropout";
  if (Status s = checkArity(ctx, kOp, 1, 1, 2); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0], &mask = ctx.outputs[1];
  if (!ctx.attrs.has("ratio"))
    return Status::error("graph.dropout: missing attribute 'ratio'");
  double ratio = ctx.attrs.getFloat("ratio");
  if (!(ratio >= 0 && ratio < 1))
    return Status::error("graph.dropout: ratio must be in [0, 1), got " +
                         std::to_string(ratio));
  if (y.dtype != x.dtype || y.shape != x.shape || mask.dtype != DType::I1 ||
      mask.shape != x.shape)
    return Status::error("graph.dropout: results must be " + x.describe() +
                         " and i1 of its shape, got " + y.describe() + " and " +
                         mask.describe());
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *in = x.as<T>();
    T *out = y.as<T>();
    uint8_t *keep = mask.as<uint8_t>();
    // PyTorch scales by the reciprocal in the element type
    // (noise.bernoulli_(1 - p).div_(1 - p), then input * noise).
    const T scale = T(1) / T(1 - ratio);
    for (int64_t i = 0, n = x.numel(); i < n; ++i) {
      bool k = dropoutKeeps(seedOf(ctx), static_cast<uint64_t>(i), ratio);
      keep[i] = k ? 1 : 0;
      // x * 0, not 0: an inf or NaN input gives NaN, as in PyTorch.
      out[i] = in[i] * (k ? scale : T(0));
    }
    return Status::ok();
  });
}

} // namespace

void registerDropoutKernels(KernelRegistry &registry) {
  registry.add("graph.dropout", dropoutKernel);
}

} // namespace strata::runtime::cpu
