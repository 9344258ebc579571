//===- ElementwiseGradKernels.cu - Gradients of elementwise ops on CUDA ---===//
//
// The counterparts of the CPU's ElementwiseGradKernels.cpp:
// graph.unary_grad (dx = f'(x) * dy, evaluated in double like the CPU's, with
// PyTorch's backward formulas), graph.sum_squares (sum of squares in double,
// reduced in a fixed order: two passes, over a batch of operands each,
// through a per-instruction buffer of block partials its prepare function
// allocates), graph.round_to and
// runtime.copy (a device-to-device copy on the stream).
//
//===----------------------------------------------------------------------===//

#include "ElementwiseCommon.cuh"
#include "MultiTensor.cuh"

#include "strata/Runtime/NarrowFloat.h"
#include "strata/Runtime/OptimizerPlan.h"
#include "strata/Runtime/UnaryGrad.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

namespace strata::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// unary_grad
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void __launch_bounds__(kBlock)
    unaryGradKernel(const T *g, const T *x, const T *y, T *out, int64_t n,
                    UnaryGradParams p) {
  STRATA_GRID_STRIDE(i, n)
  out[i] = static_cast<T>(unaryDerivative(p, x[i], y[i], g[i]));
}

Status unaryGradKernelFn(KernelContext &ctx) {
  constexpr const char *kOp = "graph.unary_grad";
  UnaryGradParams p;
  if (Status s = planUnaryGrad(ctx, p); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1], &y = ctx.inputs[2];
  TensorView &dx = ctx.outputs[0];
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = dy.numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &cs = streamOf(ctx);
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, unaryGradKernel<T>)
    (dy.as<T>(), x.as<T>(), y.as<T>(), dx.as<T>(), n, p);
    return launchStatus(kOp);
  });
}

//===----------------------------------------------------------------------===//
// sum_squares
//===----------------------------------------------------------------------===//

/// Blocks of the first pass, at most: each leaves one partial sum.
constexpr int kPartials = 1024;

/// Sums `v` over the block's kBlock threads into v of thread 0, in a fixed
/// tree order. `shared` holds kBlock doubles.
__device__ inline double blockSum(double v, double *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  return shared[0];
}

/// Blocks of the first pass for a tensor of n elements: each leaves one
/// partial sum. The count depends on n only, so the order of the sum (and
/// the result) is the same on every run, every GPU, and whichever other
/// tensors share the instruction.
int64_t partialBlocks(int64_t n) {
  return std::min<int64_t>(kPartials, (n + kBlock - 1) / kBlock);
}

/// Up to kMaxBatchTensors operands of one instruction.
template <typename T, typename U> struct SumSquaresBatch {
  const T *in[kMaxBatchTensors];
  U *out[kMaxBatchTensors];
  int64_t n[kMaxBatchTensors];
  BatchBlocks blocks;
  /// The batch's partials start here in the instruction's buffer.
  double *partial;
};

/// Pass 1: block j of tensor t sums the squares of elements j * kBlock +
/// thread, stepping by the tensor's blocks times kBlock, into its partial.
template <typename T, typename U>
__global__ void __launch_bounds__(kBlock)
    sumSquaresPartials(SumSquaresBatch<T, U> b) {
  __shared__ double shared[kBlock];
  const int t = b.blocks.tensorOf(blockIdx.x);
  const int64_t j = int64_t(blockIdx.x) - b.blocks.first[t];
  const int64_t stride = (b.blocks.first[t + 1] - b.blocks.first[t]) * kBlock;
  const T *in = b.in[t];
  double sum = 0;
  for (int64_t i = j * kBlock + threadIdx.x; i < b.n[t]; i += stride) {
    double v = double(in[i]);
    sum += v * v;
  }
  double total = blockSum(sum, shared);
  if (threadIdx.x == 0)
    b.partial[blockIdx.x] = total;
}

/// Pass 2: block t adds tensor t's partials and writes its result.
template <typename T, typename U>
__global__ void __launch_bounds__(kPartials)
    sumSquaresFinish(SumSquaresBatch<T, U> b) {
  __shared__ double shared[kPartials];
  const int t = blockIdx.x;
  const int64_t first = b.blocks.first[t],
                count = b.blocks.first[t + 1] - first;
  shared[threadIdx.x] =
      int(threadIdx.x) < count ? b.partial[first + threadIdx.x] : 0.0;
  __syncthreads();
  for (int s = kPartials / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    b.out[t][0] = static_cast<U>(shared[0]);
}

/// The instruction's partials buffer, allocated once at load: every
/// operand's blocks.
Status sumSquaresPrepare(KernelContext &ctx, std::shared_ptr<void> &prepared) {
  int64_t total = 0;
  for (const TensorView &x : ctx.inputs)
    total += partialBlocks(x.numel());
  void *buffer = nullptr;
  if (Status s = cudaStatus(
          cudaMalloc(&buffer, std::max<int64_t>(total, 1) * sizeof(double)),
          "graph.sum_squares: cudaMalloc");
      !s)
    return s;
  prepared = std::shared_ptr<void>(buffer, [](void *p) { cudaFree(p); });
  return Status::ok();
}

Status sumSquaresKernelFn(KernelContext &ctx) {
  constexpr const char *kOp = "graph.sum_squares";
  if (Status s = checkSumSquares(ctx); !s)
    return s;
  auto *partial = static_cast<double *>(const_cast<void *>(ctx.prepared));
  if (!partial)
    return Status::error(std::string(kOp) +
                         ": no partials buffer (the prepare step did not run)");
  return dispatchFloat(ctx.inputs[0].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    return dispatchFloat(ctx.outputs[0].dtype, kOp, [&](auto outTag) -> Status {
      using U = decltype(outTag);
      const CudaStream &cs = streamOf(ctx);
      double *next = partial;
      return forEachBatch(ctx.inputs.size(), [&](size_t begin, size_t end) {
        SumSquaresBatch<T, U> b;
        for (size_t k = begin; k < end; ++k) {
          b.in[k - begin] = ctx.inputs[k].as<T>();
          b.out[k - begin] = ctx.outputs[k].as<U>();
          b.n[k - begin] = ctx.inputs[k].numel();
          b.blocks.add(partialBlocks(b.n[k - begin]));
        }
        b.partial = next;
        next += b.blocks.total();
        if (b.blocks.total() > 0) {
          STRATA_LAUNCH(unsigned(b.blocks.total()), kBlock, 0, cs.stream,
                        sumSquaresPartials<T, U>)
          (b);
          if (Status s = launchStatus(kOp); !s)
            return s;
        }
        // An empty tensor's sum is 0: its pass-2 block has no partials.
        STRATA_LAUNCH(b.blocks.count, kPartials, 0, cs.stream,
                      sumSquaresFinish<T, U>)
        (b);
        return launchStatus(kOp);
      });
    });
  });
}

//===----------------------------------------------------------------------===//
// round_to
//===----------------------------------------------------------------------===//

__global__ void __launch_bounds__(kBlock)
    roundToKernel(const float *in, float *out, int64_t n, bool bf16) {
  STRATA_GRID_STRIDE(i, n)
  out[i] = bf16 ? roundToBf16(in[i]) : roundToFp16(in[i]);
}

Status roundToKernelFn(KernelContext &ctx) {
  if (Status s = checkArity(ctx, "graph.round_to", 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  std::string dtype = ctx.attrs.getString("dtype");
  if (x.dtype != DType::F32 || y.dtype != DType::F32 || x.shape != y.shape)
    return Status::error("graph.round_to: operand and result must be one f32 "
                         "shape, got " + x.describe());
  if (dtype != "bf16" && dtype != "fp16")
    return Status::error("graph.round_to: dtype must be bf16 or fp16, not '" +
                         dtype + "'");
  int64_t n = x.numel();
  if (n == 0)
    return Status::ok();
  const CudaStream &cs = streamOf(ctx);
  STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, roundToKernel)
  (x.as<float>(), y.as<float>(), n, dtype == "bf16");
  return launchStatus("graph.round_to");
}

//===----------------------------------------------------------------------===//
// copy
//===----------------------------------------------------------------------===//

/// A copy onto itself is nothing to do; partially overlapping buffers (the
/// CPU's memmove would allow them) are not supported by cudaMemcpyAsync, and
/// the executor never hands a kernel such a pair.
Status copyKernelFn(KernelContext &ctx) {
  if (Status s = checkArity(ctx, "runtime.copy", 1, 1, 1); !s)
    return s;
  const TensorView &in = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return Status::error("runtime.copy: " + in.describe() + " does not fit " +
                         out.describe());
  if (in.data == out.data || in.bytes() == 0)
    return Status::ok();
  return cudaStatus(cudaMemcpyAsync(out.data, in.data, in.bytes(),
                                    cudaMemcpyDeviceToDevice,
                                    streamOf(ctx).stream),
                    "runtime.copy: cudaMemcpyAsync");
}

} // namespace

void registerElementwiseGradKernels(KernelRegistry &registry) {
  registry.add("graph.unary_grad", unaryGradKernelFn);
  registry.add("graph.sum_squares", sumSquaresKernelFn, sumSquaresPrepare);
  registry.add("runtime.copy", copyKernelFn);
  registry.add("graph.round_to", roundToKernelFn);
}

} // namespace strata::runtime::cuda
