//===- AttentionMma.cu - bf16 / fp16 attention on tensor cores ------------===//
//
// Launches AttentionMma.cuh's block functions for graph.attention and
// graph.attention_grad when query, key and value (and the gradient) are
// bf16 (or all fp16), a mask if any is f32 (mixed precision keeps it so:
// -inf must survive), and the head dim (D = Dv) is 16, 32, 64 or 128.
// Dropout is applied as the CPU applies it; heads_inner operands
// ([..., S, H, D]) are read and written where they lie. keep_probabilities:
// the forward is left to the widened f32 kernels (which write the second
// result); the gradient takes its probabilities operand (last, after the
// mask if any) and ignores it, making them again as without.
// NarrowFloatKernels.cu asks here first; the rest widens to f32 and takes
// the tiled f32 kernels. STRATA_CUDA_ATTENTION=widened sends every
// attention there (to compare, or to step around a fault).
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"
#include "AttentionMma.cuh"
#include "CudaKernelUtils.cuh"

#include "strata/Runtime/NarrowOperands.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

namespace strata::runtime::cuda {
namespace {

using attention_mma::kThreads;
using attention_mma::MmaParams;

template <typename E, int D>
__global__ void __launch_bounds__(kThreads)
    mmaForwardKernel(MmaParams<E> p) {
  STRATA_DYNAMIC_SHARED(128, shared);
  attention_mma::forwardBlock<E, D>(p, blockIdx.x, threadIdx.x, shared);
}

template <typename E, int D>
__global__ void __launch_bounds__(kThreads)
    mmaGradQueryKernel(MmaParams<E> p) {
  STRATA_DYNAMIC_SHARED(128, shared);
  attention_mma::gradQueryBlock<E, D>(p, blockIdx.x, threadIdx.x, shared);
}

template <typename E, int D>
__global__ void __launch_bounds__(kThreads)
    mmaGradKeyKernel(MmaParams<E> p) {
  STRATA_DYNAMIC_SHARED(128, shared);
  attention_mma::gradKeyBlock<E, D>(p, blockIdx.x, threadIdx.x, shared);
}

/// Launches `kernel` on `blocks` blocks with `bytes` of shared memory.
template <typename E>
Status launchMma(const CudaStream &stream, void (*kernel)(MmaParams<E>),
                 const MmaParams<E> &p, int64_t blocks, size_t bytes,
                 const char *op) {
  if (blocks == 0)
    return Status::ok();
  if (blocks > INT32_MAX)
    return Status::error(std::string(op) + ": " + std::to_string(blocks) +
                         " tiles exceed a grid");
  // The same value on every launch (the layouts are fixed per kernel): a
  // captured graph's nodes all agree with the function's attribute.
  cudaError_t error = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (error != cudaSuccess)
    return cudaStatus(error, std::string(op) + ": cudaFuncSetAttribute");
  STRATA_LAUNCH(unsigned(blocks), kThreads, bytes, stream.stream, kernel)(p);
  return launchStatus(op);
}

static_assert(attention_mma::kMaskDims == attention::kMaxMaskDims);

/// Whether a block of `bytes` of shared memory fits the stream's GPU (an
/// A100 has less than the 187 KB the head dim 128 gradient takes).
bool fitsSharedMemory(const CudaStream &stream, size_t bytes) {
  return bytes <= stream.sharedPerBlockOptin;
}

/// The shared checks on `ctx` with an f32 mask (operand `maskAt`) read as
/// the other operands' narrow type: the tensor-core kernels read it as f32.
/// The gradient's probabilities (keep_probabilities: its last operand,
/// after the mask if any) are not read. False (and `g` unset) where they
/// cannot take the instruction.
bool planNarrow(const KernelContext &ctx, size_t maskAt, bool grad,
                attention::Geometry &g) {
  static const bool widened = [] {
    const char *env = std::getenv("STRATA_CUDA_ATTENTION");
    return env && std::strcmp(env, "widened") == 0;
  }();
  // The operands after the mask: the gradient's probabilities.
  const size_t after =
      grad && ctx.attrs.getBool("keep_probabilities", false) ? 1 : 0;
  if (widened || ctx.inputs.size() < maskAt + after)
    return false;
  DType t = ctx.inputs[grad ? 1 : 0].dtype;
  if (t != DType::BF16 && t != DType::F16)
    return false;
  std::vector<TensorView> inputs(ctx.inputs.begin(), ctx.inputs.end());
  if (inputs.size() > maskAt + after) {
    if (inputs[maskAt].dtype != DType::F32)
      return false;
    inputs[maskAt].dtype = t;
  }
  // The kernels move rows 16 bytes at a time.
  for (size_t i = 0; i < ctx.inputs.size() && i < maskAt; ++i)
    if (reinterpret_cast<uintptr_t>(ctx.inputs[i].data) % 16 != 0)
      return false;
  KernelContext checked = withViews(ctx, inputs, ctx.outputs);
  Status s = grad ? planAttentionGrad(checked, g) : planAttention(checked, g);
  return s && g.d == g.dv && attention_mma::supportedHeadDim(g.d) && g.t > 0;
}

/// Calls fn(E{}, std::integral_constant<int, D>{}) for g's element type
/// and head dim.
template <typename Fn> Status dispatchMma(const attention::Geometry &g, Fn &&fn) {
  auto byDim = [&](auto e) -> Status {
    switch (g.d) {
    case 16:
      return fn(e, std::integral_constant<int, 16>{});
    case 32:
      return fn(e, std::integral_constant<int, 32>{});
    case 64:
      return fn(e, std::integral_constant<int, 64>{});
    default:
      return fn(e, std::integral_constant<int, 128>{});
    }
  };
  if (g.dtype == DType::BF16)
    return byDim(mma::Bf16{});
  return byDim(mma::Fp16{});
}

/// Everything of the parameters but the tensors; false when the mask's
/// batch dims do not merge into kMaskDims.
template <typename E>
bool paramsOf(const attention::Geometry &g, const KernelContext &ctx,
              size_t maskAt, MmaParams<E> &p) {
  p.batches = g.batches;
  p.s = g.s;
  p.t = g.t;
  p.scale = float(g.scale);
  p.causal = g.causal;
  p.headsInner = g.headsInner;
  p.heads = g.heads;
  p.ratio = g.ratio;
  p.dropScale = 1.0f / float(1.0 - g.ratio); // the CPU's T(1) / T(1 - ratio)
  p.seed = ctx.seed;
  p.seedSlot = ctx.seedSlot;
  if (!g.hasMask)
    return true;
  p.mask = ctx.inputs[maskAt].as<float>();
  return attention::mergeMaskDims(g, p.maskDims, p.maskSize, p.maskStride,
                                  p.maskRow, p.maskCol);
}

} // namespace

Status runMmaAttention(KernelContext &ctx, bool &handled) {
  constexpr const char *kOp = "graph.attention";
  handled = false;
  attention::Geometry g;
  if (!planNarrow(ctx, 3, false, g))
    return Status::ok(); // the widened path takes it, or reports the error
  // keep_probabilities: the widened kernels write the probabilities (a
  // second sweep over the keys that these kernels do not have).
  if (g.keepProbabilities)
    return Status::ok();
  return dispatchMma(g, [&](auto e, auto dim) -> Status {
    using E = decltype(e);
    constexpr int D = decltype(dim)::value;
    MmaParams<E> p;
    if (!paramsOf<E>(g, ctx, 3, p) ||
        !fitsSharedMemory(streamOf(ctx), attention_mma::ForwardLayout<D>::bytes))
      return Status::ok(); // a mask of many batch dims, a small GPU: widened
    handled = true;
    p.q = static_cast<const E *>(ctx.inputs[0].data);
    p.k = static_cast<const E *>(ctx.inputs[1].data);
    p.v = static_cast<const E *>(ctx.inputs[2].data);
    p.out = static_cast<E *>(ctx.outputs[0].data);
    return launchMma<E>(streamOf(ctx), mmaForwardKernel<E, D>, p,
                        attention_mma::forwardBlocks(p),
                        attention_mma::ForwardLayout<D>::bytes, kOp);
  });
}

Status runMmaAttentionGrad(KernelContext &ctx, bool &handled) {
  constexpr const char *kOp = "graph.attention_grad";
  handled = false;
  attention::Geometry g;
  if (!planNarrow(ctx, 4, true, g))
    return Status::ok();
  // lse and delta per query row, in the scratch attention_grad's prepare
  // allocated for the f32 kernels' three statistics per row.
  size_t needed = size_t(g.batches * g.s) * 2 * sizeof(float);
  const auto *scratch = static_cast<const attention::GradScratch *>(ctx.prepared);
  if (needed > 0 && (!scratch || scratch->bytes < needed ||
                     scratch->device != streamOf(ctx).ordinal))
    return Status::ok(); // unprepared, or for another GPU: the widened path
                         // says so
  return dispatchMma(g, [&](auto e, auto dim) -> Status {
    using E = decltype(e);
    constexpr int D = decltype(dim)::value;
    MmaParams<E> p;
    const CudaStream &stream = streamOf(ctx);
    if (!paramsOf<E>(g, ctx, 4, p) ||
        !fitsSharedMemory(stream, attention_mma::GradQueryLayout<D>::bytes) ||
        !fitsSharedMemory(stream, attention_mma::GradKeyLayout<D>::bytes))
      return Status::ok();
    handled = true;
    p.dy = static_cast<const E *>(ctx.inputs[0].data);
    p.q = static_cast<const E *>(ctx.inputs[1].data);
    p.k = static_cast<const E *>(ctx.inputs[2].data);
    p.v = static_cast<const E *>(ctx.inputs[3].data);
    p.dq = static_cast<E *>(ctx.outputs[0].data);
    p.dk = static_cast<E *>(ctx.outputs[1].data);
    p.dv = static_cast<E *>(ctx.outputs[2].data);
    p.stats = needed > 0 ? static_cast<float *>(scratch->data) : nullptr;
    // Every query row's statistics and dQ, then dK and dV from them (in
    // stream order).
    if (Status s = launchMma<E>(stream, mmaGradQueryKernel<E, D>, p,
                                attention_mma::forwardBlocks(p),
                                attention_mma::GradQueryLayout<D>::bytes, kOp);
        !s)
      return s;
    return launchMma<E>(stream, mmaGradKeyKernel<E, D>, p,
                        attention_mma::gradKeyBlocks(p),
                        attention_mma::GradKeyLayout<D>::bytes, kOp);
  });
}

} // namespace strata::runtime::cuda
