//===- NarrowFloatKernels.cu - bf16 / fp16 operands without a narrow kernel ===//
//
// Mixed precision's narrow storage (strata-mixed-precision) gives bf16 /
// fp16 operands and results to the ops of kNarrowFloatOps. The products
// (linear, matmul, linear_grad_weight) run narrow on cuBLASLt; the others
// (attention and its gradient, conv and its gradients, reduce_sum) have f32
// kernels only, so this adapter widens each narrow operand into a
// stream-ordered f32 buffer (cudaMallocAsync: captured into a CUDA graph as
// an allocation node), runs the f32 kernel, rounds each narrow result once
// and frees the buffers in stream order: the CPU's numbers (its adapter
// does the same on the host). The buffers are outside the memory plan.
// Attention with a head dim of 16, 32, 64 or 128 runs narrow on tensor
// cores instead (AttentionMma.cu); reduce_sum and conv read the narrow
// elements themselves (runNarrowReduceSum, runNarrowConv...).
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"

#include "strata/Runtime/NarrowFloat.h"
#include "strata/Runtime/NarrowOperands.h"

#include <vector>

namespace strata::runtime::cuda {
namespace {

__global__ void __launch_bounds__(kBlock)
    widenKernel(const uint16_t *in, float *out, int64_t n, bool bf16) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    out[i] = bf16 ? fromBf16Bits(in[i]) : fromFp16Bits(in[i]);
}

__global__ void __launch_bounds__(kBlock)
    narrowKernel(const float *in, uint16_t *out, int64_t n, bool bf16) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    out[i] = bf16 ? bf16Bits(in[i]) : fp16Bits(in[i]);
}

/// An f32 stand-in (a stream-ordered buffer of `buffers`) for each narrow
/// view, holding its widened values (a kernel may accumulate into its
/// output); other views pass through.
Status widen(StreamBuffers &buffers, const CudaStream &cs,
             const std::string &op, std::span<const TensorView> views,
             std::vector<TensorView> &wide) {
  wide.assign(views.begin(), views.end());
  for (TensorView &v : wide) {
    if (!isNarrowFloat(v.dtype) || !v.data)
      continue;
    int64_t n = v.numel();
    void *buffer = nullptr;
    if (Status s = buffers.allocate(size_t(n) * 4,
                                    op + ": an f32 copy of " + v.describe(),
                                    buffer);
        !s)
      return s;
    if (n > 0)
      STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, buffers.stream(), widenKernel)
      (v.as<uint16_t>(), static_cast<float *>(buffer), n,
       v.dtype == DType::BF16);
    if (Status s = launchStatus(op); !s)
      return s;
    v.data = buffer;
    v.dtype = DType::F32;
  }
  return Status::ok();
}

KernelFn widenNarrowFloats(std::string op, KernelFn f32Kernel) {
  return [op, f32Kernel](KernelContext &ctx) -> Status {
    if (!hasNarrowFloat(ctx))
      return f32Kernel(ctx);
    const CudaStream &cs = streamOf(ctx);
    StreamBuffers buffers(cs.stream);
    std::vector<TensorView> inputs, outputs;
    if (Status s = widen(buffers, cs, op, ctx.inputs, inputs); !s)
      return s;
    if (Status s = widen(buffers, cs, op, ctx.outputs, outputs); !s)
      return s;
    KernelContext wide = withViews(ctx, inputs, outputs);
    if (Status s = f32Kernel(wide); !s)
      return s;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const TensorView &out = ctx.outputs[i];
      int64_t n = out.numel();
      if (!isNarrowFloat(out.dtype) || !out.data || n == 0)
        continue;
      STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, narrowKernel)
      (outputs[i].as<float>(), out.as<uint16_t>(), n, out.dtype == DType::BF16);
      if (Status s = launchStatus(op); !s)
        return s;
    }
    return Status::ok();
  };
}

} // namespace

void registerNarrowFloatOperands(KernelRegistry &registry) {
  for (const char *op : kNarrowFloatOps) {
    // The products have narrow kernels of their own (cuBLASLt).
    std::string_view name = op;
    if (name == "graph.linear" || name == "graph.matmul" ||
        name == "graph.linear_grad_weight")
      continue;
    const KernelFn *run = registry.lookup(op);
    if (!run)
      continue;
    const PrepareFn *prepare = registry.lookupPrepare(op);
    KernelFn widened = widenNarrowFloats(op, *run);
    // Attention runs bf16 / fp16 on tensor cores where AttentionMma.cu
    // can, reduce_sum and conv read narrow elements; the rest widens.
    Status (*native)(KernelContext &, bool &) =
        name == "graph.attention"        ? runMmaAttention
        : name == "graph.attention_grad" ? runMmaAttentionGrad
        : name == "graph.reduce_sum"     ? runNarrowReduceSum
        : name == "graph.conv"           ? runNarrowConv
        : name == "graph.conv_grad_input"  ? runNarrowConvGradInput
        : name == "graph.conv_grad_weight" ? runNarrowConvGradWeight
                                           : nullptr;
    if (native)
      widened = [native, widened](KernelContext &ctx) -> Status {
        bool handled = false;
        Status s = native(ctx, handled);
        return handled ? s : widened(ctx);
      };
    registry.add(op, std::move(widened),
                 prepareWidened(prepare ? *prepare : PrepareFn()));
  }
}

} // namespace strata::runtime::cuda
