//===- DropoutKernels.cu - Training-mode dropout on CUDA -------------------===//
//
// graph.dropout, the counterpart of runtime/cpu/kernels/DropoutKernels.cpp:
// y = x * (keep ? 1 / (1 - ratio) : 0) with the keep bit of element i drawn
// by Philox4x32-10 from (seed, i) exactly as the CPU draws it
// (DropoutPhilox.cuh), so the masks are bit-identical and y is too (one
// rounded multiply in the element type). One thread per element.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"
#include "DropoutPhilox.cuh"
#include "NormalizationCommon.cuh"

#include <string>

namespace strata::runtime::cuda {
namespace {

using namespace norm;
using namespace philox;

template <typename T>
__global__ void dropoutElements(const T *in, T *out, uint8_t *keep, int64_t n,
                                uint64_t seed, const uint64_t *seedSlot,
                                double ratio, T scale) {
  // The slot, where the executor gives one, holds this run's seed (a
  // replayed CUDA graph reads it afresh).
  if (seedSlot)
    seed = *seedSlot;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    bool k = dropoutKeeps(seed, static_cast<uint64_t>(i), ratio);
    keep[i] = k ? 1 : 0;
    // x * 0, not 0: an inf or NaN input gives NaN, as on the CPU.
    out[i] = mulRn(in[i], k ? scale : T(0));
  }
}

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
    int64_t n = x.numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    // The CPU's scale: the reciprocal in the element type.
    const T scale = T(1) / T(1 - ratio);
    STRATA_LAUNCH(gridFor(s, n), kBlock, 0, s.stream, dropoutElements<T>)
    (x.as<T>(), y.as<T>(), mask.as<uint8_t>(), n, ctx.seed, ctx.seedSlot, ratio,
     scale);
    return launchStatus(kOp);
  });
}

} // namespace

void registerDropoutKernels(KernelRegistry &registry) {
  registry.add("graph.dropout", dropoutKernel);
}

} // namespace strata::runtime::cuda
