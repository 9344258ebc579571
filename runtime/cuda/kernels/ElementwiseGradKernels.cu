//===- ElementwiseGradKernels.cu - Gradients of elementwise ops on CUDA ---===//
//
// The counterparts of the CPU's ElementwiseGradKernels.cpp:
// graph.unary_grad (dx = f'(x) * dy, evaluated in double like the CPU's, with
// PyTorch's backward formulas), graph.sum_squares (sum of squares in double,
// reduced in a fixed order: two passes through a per-instruction buffer of
// block partials its prepare function allocates), graph.round_to and
// runtime.copy (a device-to-device copy on the stream).
//
//===----------------------------------------------------------------------===//

#include "ElementwiseCommon.cuh"

#include "strata/Runtime/NarrowFloat.h"
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
    unaryGradKernel<T><<<gridFor(cs, n), kBlock, 0, cs.stream>>>(
        dy.as<T>(), x.as<T>(), y.as<T>(), dx.as<T>(), n, p);
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

/// Pass 1: block b sums the squares of elements b * kBlock + t, stepping
/// by the grid, into partial[b]. The grid depends on n only, so the order
/// (and the result) is the same on every run and every GPU.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    sumSquaresPartials(const T *in, int64_t n, double *partial) {
  __shared__ double shared[kBlock];
  double sum = 0;
  STRATA_GRID_STRIDE(i, n) {
    double v = double(in[i]);
    sum += v * v;
  }
  double total = blockSum(sum, shared);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = total;
}

/// Pass 2: one block adds the `count` partials and writes the result.
template <typename U>
__global__ void __launch_bounds__(kPartials)
    sumSquaresFinish(const double *partial, int count, U *out) {
  __shared__ double shared[kPartials];
  shared[threadIdx.x] = int(threadIdx.x) < count ? partial[threadIdx.x] : 0.0;
  __syncthreads();
  for (int s = kPartials / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[0] = static_cast<U>(shared[0]);
}

/// The instruction's partials buffer, allocated once at load.
Status sumSquaresPrepare(KernelContext &, std::shared_ptr<void> &prepared) {
  void *buffer = nullptr;
  if (Status s = cudaStatus(cudaMalloc(&buffer, kPartials * sizeof(double)),
                            "graph.sum_squares: cudaMalloc");
      !s)
    return s;
  prepared = std::shared_ptr<void>(buffer, [](void *p) { cudaFree(p); });
  return Status::ok();
}

Status sumSquaresKernelFn(KernelContext &ctx) {
  constexpr const char *kOp = "graph.sum_squares";
  if (Status s = checkArity(ctx, kOp, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  if (out.numel() != 1 || !isFloat(out.dtype))
    return Status::error("graph.sum_squares: the result must be a float "
                         "scalar, got " + out.describe());
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    return dispatchFloat(out.dtype, kOp, [&](auto outTag) -> Status {
      using U = decltype(outTag);
      auto *partial = static_cast<double *>(const_cast<void *>(ctx.prepared));
      if (!partial)
        return Status::error(std::string(kOp) +
                             ": no partials buffer (the prepare step did not run)");
      int64_t n = x.numel();
      int blocks = int(std::min<int64_t>(kPartials, (n + kBlock - 1) / kBlock));
      const CudaStream &cs = streamOf(ctx);
      if (blocks > 0) {
        sumSquaresPartials<T><<<blocks, kBlock, 0, cs.stream>>>(x.as<T>(), n,
                                                                partial);
        if (Status s = launchStatus(kOp); !s)
          return s;
      }
      // An empty tensor's sum is 0: pass 2 runs with no partials.
      sumSquaresFinish<U><<<1, kPartials, 0, cs.stream>>>(partial, blocks,
                                                          out.as<U>());
      return launchStatus(kOp);
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
  roundToKernel<<<gridFor(cs, n), kBlock, 0, cs.stream>>>(
      x.as<float>(), y.as<float>(), n, dtype == "bf16");
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
