//===- AttentionKernels.cu - Fused scaled-dot-product attention on CUDA ---===//
//
// graph.attention and its gradient graph.attention_grad (the latter is
// registered by the CPU's NeuralNetGradKernels.cpp; it lives here with the
// forward it recomputes). The kernels are tiled, flash-attention style
// (AttentionCommon.cuh): the S x T scores never exist in memory, the
// forward makes one pass over the keys with an online softmax, the backward
// recomputes the probabilities and sums dK, dV per key tile in a fixed
// order (deterministic, no atomics).
//
// The forward saves no statistics, so the backward's first kernel
// recomputes each query row's softmax statistics and hands them to the
// second through a scratch buffer of 3 values per query row, allocated by
// attention_grad's prepare function (the one allocation; it lives as long
// as the instruction). With keep_probabilities the forward also writes the
// probabilities into its second result (a second sweep over the keys per
// query tile); the gradient takes them as its last operand and ignores
// them, making them again as without (AttentionPlan's `hasMask` says
// whether operand 4 is a mask).
//
// Tiles are 32 x 32 when shared memory allows, smaller for wide heads (each
// kernel takes the largest of 32, 16, ..., 1 that fits the GPU's opt-in
// shared memory per block); head dims too wide for a 1 x 1 tile are refused.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"
#include "CudaKernelUtils.cuh"

#include <cstdint>
#include <memory>
#include <string>

namespace strata::runtime::cuda {
namespace {

using attention::Geometry;
using attention::GradScratch;
using attention::Kernel;
using attention::kThreads;
using attention::Params;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attentionForwardKernel(Params<T> p) {
  STRATA_DYNAMIC_SHARED(16, shared);
  attention::forwardBlocks(p, reinterpret_cast<T *>(shared));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attentionGradQueryKernel(Params<T> p) {
  STRATA_DYNAMIC_SHARED(16, shared);
  attention::gradQueryBlocks(p, reinterpret_cast<T *>(shared));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attentionGradKeyKernel(Params<T> p) {
  STRATA_DYNAMIC_SHARED(16, shared);
  attention::gradKeyBlocks(p, reinterpret_cast<T *>(shared));
}

/// Picks `p`'s tiles for `kind` and launches `kernel` over every (batch
/// matrix, tile of `tiled` rows).
template <typename T>
Status launchTiles(const CudaStream &stream, void (*kernel)(Params<T>),
                   Kernel kind, Params<T> &p, int64_t tiled,
                   const std::string &op) {
  int limit = int(stream.sharedPerBlockOptin);
  p.layout = attention::chooseLayout(kind, p.d, p.dvDim, sizeof(T),
                                     size_t(limit));
  if (p.layout.tile == 0)
    return Status::error(op + ": head dims " + std::to_string(p.d) + " and " +
                         std::to_string(p.dvDim) +
                         " need more shared memory than a block has (" +
                         std::to_string(limit) + " bytes)");
  size_t bytes = size_t(p.layout.total) * sizeof(T);
  // The GPU's limit, not `bytes`: the layout depends on the head dims, and
  // a captured graph's launches of one kernel with different sizes must
  // all stay within the function's attribute.
  cudaError_t error = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit);
  if (error != cudaSuccess)
    return cudaStatus(error, op + ": cudaFuncSetAttribute");
  int64_t tile = p.layout.tile;
  int64_t work = p.batches * ((tiled + tile - 1) / tile);
  int64_t grid = std::min<int64_t>(work, int64_t(stream.multiProcessors) * 16);
  STRATA_LAUNCH(unsigned(std::max<int64_t>(grid, 1)), kThreads, bytes,
                stream.stream, kernel)
  (p);
  return launchStatus(op);
}

Status tooManyMaskDims(const std::string &op) {
  return Status::error(op + ": the mask's batch dims do not merge into " +
                       std::to_string(attention::kMaxMaskDims));
}

Status attentionKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.attention";
  Geometry g;
  if (Status s = planAttention(ctx, g); !s)
    return s;
  return dispatchFloat(g.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    TensorView &out = ctx.outputs[0];
    // keep_probabilities: [..., S, T], which Dv = 0 does not empty.
    T *probs = g.keepProbabilities ? ctx.outputs[1].as<T>() : nullptr;
    if (out.numel() == 0 && (!probs || ctx.outputs[1].numel() == 0))
      return Status::ok();
    const CudaStream &stream = streamOf(ctx);
    if (g.t == 0) // no keys: the product with no terms is zero (and there
                  // are no probabilities)
      return cudaStatus(
          cudaMemsetAsync(out.data, 0, out.bytes(), stream.stream),
          std::string(kOp) + ": cudaMemsetAsync");
    Params<T> p;
    if (!attention::fillParams(g, ctx.seed, p))
      return tooManyMaskDims(kOp);
    p.seedSlot = ctx.seedSlot;
    p.q = ctx.inputs[0].as<T>();
    p.k = ctx.inputs[1].as<T>();
    p.v = ctx.inputs[2].as<T>();
    p.mask = g.hasMask ? ctx.inputs[3].as<T>() : nullptr;
    p.out = out.as<T>();
    p.probs = probs;
    return launchTiles<T>(stream, attentionForwardKernel<T>, Kernel::Forward,
                          p, g.s, kOp);
  });
}

/// Bytes of the statistics (m, l, D per query row), 0 when none are needed.
size_t statsBytes(const Geometry &g) {
  if (g.t == 0 || (g.dtype != DType::F32 && g.dtype != DType::F64))
    return 0;
  return size_t(g.batches * g.s * 3) * byteWidth(g.dtype);
}

Status attentionGradPrepare(KernelContext &ctx,
                            std::shared_ptr<void> &prepared) {
  constexpr const char *kOp = "graph.attention_grad";
  Geometry g;
  if (Status s = planAttentionGrad(ctx, g); !s)
    return s;
  size_t bytes = statsBytes(g);
  if (bytes == 0)
    return Status::ok();
  auto scratch = std::make_shared<GradScratch>();
  if (Status s = cudaStatus(cudaGetDevice(&scratch->device),
                            std::string(kOp) + ": cudaGetDevice");
      !s)
    return s;
  if (Status s = cudaStatus(cudaMalloc(&scratch->data, bytes),
                            std::string(kOp) +
                                ": cannot allocate the softmax statistics");
      !s)
    return s;
  scratch->bytes = bytes;
  prepared = std::move(scratch);
  return Status::ok();
}

Status attentionGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.attention_grad";
  Geometry g;
  if (Status s = planAttentionGrad(ctx, g); !s)
    return s;
  const CudaStream &stream = streamOf(ctx);
  if (g.t == 0) { // no keys: every gradient is zero (the CPU's memsets)
    for (TensorView &out : ctx.outputs)
      if (out.bytes() != 0)
        if (Status s = cudaStatus(
                cudaMemsetAsync(out.data, 0, out.bytes(), stream.stream),
                std::string(kOp) + ": cudaMemsetAsync");
            !s)
          return s;
    return Status::ok();
  }
  // The CPU reads the mask as the query's type whatever its own (its checks
  // pass a non-float mask); here that would read past the mask's memory.
  if (g.hasMask && ctx.inputs[4].dtype != ctx.inputs[1].dtype)
    return Status::error(std::string(kOp) + ": operand " +
                         ctx.inputs[4].describe() +
                         " does not have the gradient's element type");
  return dispatchFloat(ctx.inputs[1].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    if (ctx.outputs[0].numel() == 0 && ctx.outputs[1].numel() == 0 &&
        ctx.outputs[2].numel() == 0)
      return Status::ok();
    size_t bytes = statsBytes(g);
    const auto *scratch = static_cast<const GradScratch *>(ctx.prepared);
    if (bytes != 0 && (!scratch || scratch->bytes < bytes))
      return Status::error(std::string(kOp) +
                           ": the instruction was not prepared (its softmax "
                           "statistics have no scratch memory)");
    if (bytes != 0 && scratch->device != stream.ordinal)
      return Status::error(std::string(kOp) + ": prepared on GPU " +
                           std::to_string(scratch->device) +
                           ", launched on GPU " +
                           std::to_string(stream.ordinal));
    Params<T> p;
    if (!attention::fillParams(g, ctx.seed, p))
      return tooManyMaskDims(kOp);
    p.seedSlot = ctx.seedSlot;
    p.dy = ctx.inputs[0].as<T>();
    p.q = ctx.inputs[1].as<T>();
    p.k = ctx.inputs[2].as<T>();
    p.v = ctx.inputs[3].as<T>();
    p.mask = g.hasMask ? ctx.inputs[4].as<T>() : nullptr;
    p.dq = ctx.outputs[0].as<T>();
    p.dk = ctx.outputs[1].as<T>();
    p.dv = ctx.outputs[2].as<T>();
    p.stats = bytes != 0 ? static_cast<T *>(scratch->data) : nullptr;
    // Every query row's statistics and dQ, then dK and dV from them (in
    // stream order).
    if (g.batches * g.s > 0)
      if (Status s = launchTiles<T>(stream, attentionGradQueryKernel<T>,
                                    Kernel::GradQuery, p, g.s, kOp);
          !s)
        return s;
    if (g.batches * g.t > 0 && (g.d > 0 || g.dv > 0))
      if (Status s = launchTiles<T>(stream, attentionGradKeyKernel<T>,
                                    Kernel::GradKey, p, g.t, kOp);
          !s)
        return s;
    return Status::ok();
  });
}

} // namespace

void registerAttentionKernels(KernelRegistry &registry) {
  registry.add("graph.attention", attentionKernel);
  registry.add("graph.attention_grad", attentionGradKernel,
               attentionGradPrepare);
}

} // namespace strata::runtime::cuda
