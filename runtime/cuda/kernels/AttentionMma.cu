//===- AttentionMma.cu - bf16 / fp16 attention on tensor cores ------------===//
//
// Launches AttentionMma.cuh's block functions for graph.attention and
// graph.attention_grad when every operand is bf16 (or every one fp16), there
// is no mask and no dropout, and the head dim (D = Dv) is 16, 32, 64 or
// 128.
// NarrowFloatKernels.cu asks here first; the rest widens to f32 and takes
// the tiled f32 kernels. STRATA_CUDA_ATTENTION=widened sends every
// attention there (to compare, or to step around a fault).
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"
#include "AttentionMma.cuh"
#include "CudaKernelUtils.cuh"

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
  extern __shared__ __align__(128) unsigned char shared[];
  attention_mma::forwardBlock<E, D>(p, blockIdx.x, threadIdx.x, shared);
}

template <typename E, int D>
__global__ void __launch_bounds__(kThreads)
    mmaGradQueryKernel(MmaParams<E> p) {
  extern __shared__ __align__(128) unsigned char shared[];
  attention_mma::gradQueryBlock<E, D>(p, blockIdx.x, threadIdx.x, shared);
}

template <typename E, int D>
__global__ void __launch_bounds__(kThreads)
    mmaGradKeyKernel(MmaParams<E> p) {
  extern __shared__ __align__(128) unsigned char shared[];
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
  cudaError_t error = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (error != cudaSuccess)
    return cudaStatus(error, std::string(op) + ": cudaFuncSetAttribute");
  kernel<<<unsigned(blocks), kThreads, bytes, stream.stream>>>(p);
  return launchStatus(op);
}

/// Whether the tensor-core kernels take this attention.
bool takes(const attention::Geometry &g) {
  static const bool widened = [] {
    const char *env = std::getenv("STRATA_CUDA_ATTENTION");
    return env && std::strcmp(env, "widened") == 0;
  }();
  return !widened && (g.dtype == DType::BF16 || g.dtype == DType::F16) &&
         !g.hasMask && g.ratio == 0 && g.d == g.dv &&
         attention_mma::supportedHeadDim(g.d) && g.t > 0;
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

template <typename E>
MmaParams<E> paramsOf(const attention::Geometry &g) {
  MmaParams<E> p;
  p.batches = g.batches;
  p.s = g.s;
  p.t = g.t;
  p.scale = float(g.scale);
  p.causal = g.causal;
  return p;
}

} // namespace

Status runMmaAttention(KernelContext &ctx, bool &handled) {
  constexpr const char *kOp = "graph.attention";
  handled = false;
  attention::Geometry g;
  if (Status s = planAttention(ctx, g); !s || !takes(g))
    return Status::ok(); // the widened path reports the error
  handled = true;
  return dispatchMma(g, [&](auto e, auto dim) -> Status {
    using E = decltype(e);
    constexpr int D = decltype(dim)::value;
    MmaParams<E> p = paramsOf<E>(g);
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
  if (Status s = planAttentionGrad(ctx, g); !s || !takes(g))
    return Status::ok();
  // lse and delta per query row, in the scratch attention_grad's prepare
  // allocated for the f32 kernels' three statistics per row.
  size_t needed = size_t(g.batches * g.s) * 2 * sizeof(float);
  const auto *scratch = static_cast<const attention::GradScratch *>(ctx.prepared);
  if (needed > 0 && (!scratch || scratch->bytes < needed))
    return Status::ok(); // unprepared: the widened path says so
  handled = true;
  return dispatchMma(g, [&](auto e, auto dim) -> Status {
    using E = decltype(e);
    constexpr int D = decltype(dim)::value;
    MmaParams<E> p = paramsOf<E>(g);
    p.dy = static_cast<const E *>(ctx.inputs[0].data);
    p.q = static_cast<const E *>(ctx.inputs[1].data);
    p.k = static_cast<const E *>(ctx.inputs[2].data);
    p.v = static_cast<const E *>(ctx.inputs[3].data);
    p.dq = static_cast<E *>(ctx.outputs[0].data);
    p.dk = static_cast<E *>(ctx.outputs[1].data);
    p.dv = static_cast<E *>(ctx.outputs[2].data);
    p.stats = needed > 0 ? static_cast<float *>(scratch->data) : nullptr;
    const CudaStream &stream = streamOf(ctx);
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
