//===- ElementwiseGradKernels.cpp - Gradients of elementwise ops ----------===//
//
// graph.unary_grad (dx = f'(x) * dy for the forward op named by `kind`, with
// PyTorch's backward formulas; f32 exact GELU's in float, vectorized, as
// PyTorch's), graph.sum_squares (the gradient norm's
// pieces, one scalar per operand) and runtime.copy (a state update codegen could not do in place).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/NarrowFloat.h"
#include "strata/Runtime/OptimizerPlan.h"
#include "strata/Runtime/UnaryGrad.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>
#include <string>

namespace strata::runtime::cpu {
namespace {

/// unaryDerivativeLoop for one kind known at compile time.
template <UnaryGradKind Kind, typename T>
STRATA_VECTOR_BODY void derivativeBody(UnaryGradParams p, const T *dy,
                                       const T *x, const T *y, T *dx,
                                       int64_t n) {
  p.kind = Kind;
  for (int64_t i = 0; i < n; ++i)
    dx[i] = static_cast<T>(unaryDerivative(p, x[i], y[i], dy[i]));
}

template <typename T>
STRATA_VECTOR_BODY void derivativeByKind(const UnaryGradParams &p,
                                         const T *dy, const T *x, const T *y,
                                         T *dx, int64_t n) {
  switch (p.kind) {
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  case UnaryGradKind::Kind:                                                    \
    return derivativeBody<UnaryGradKind::Kind>(p, dy, x, y, dx, n);
#include "strata/Runtime/ElementwiseOps.def"
  case UnaryGradKind::GeluTanh:
    return derivativeBody<UnaryGradKind::GeluTanh>(p, dy, x, y, dx, n);
  }
}

} // namespace

STRATA_VECTOR_DISPATCHED void unaryDerivativeLoop(const UnaryGradParams &p,
                                                  const float *dy,
                                                  const float *x,
                                                  const float *y, float *dx,
                                                  int64_t n) {
  derivativeByKind(p, dy, x, y, dx, n);
}

STRATA_VECTOR_DISPATCHED void unaryDerivativeLoop(const UnaryGradParams &p,
                                                  const double *dy,
                                                  const double *x,
                                                  const double *y, double *dx,
                                                  int64_t n) {
  derivativeByKind(p, dy, x, y, dx, n);
}

namespace {

Status unaryGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.unary_grad";
  UnaryGradParams p;
  if (Status s = planUnaryGrad(ctx, p); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1], &y = ctx.inputs[2];
  TensorView &dx = ctx.outputs[0];
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *g = dy.as<T>(), *px = x.as<T>(), *py = y.as<T>();
    T *out = dx.as<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (p.kind == UnaryGradKind::Gelu) {
        // In float, vectorized, as PyTorch's gelu_backward (VectorMath.h).
        parallelFor(dy.numel(), kElementwiseGrain / 4,
                    [&](int64_t b, int64_t e) {
                      geluExactGradF32(px + b, g + b, out + b, e - b);
                    });
        return Status::ok();
      }
    }
    parallelFor(dy.numel(), kElementwiseGrain / 4, [&](int64_t b, int64_t e) {
      unaryDerivativeLoop(p, g + b, px + b, py + b, out + b, e - b);
    });
    return Status::ok();
  });
}

Status sumSquaresKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.sum_squares";
  if (Status s = checkSumSquares(ctx); !s)
    return s;
  return dispatchFloat(ctx.inputs[0].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    return dispatchFloat(ctx.outputs[0].dtype, kOp, [&](auto outTag) -> Status {
      using U = decltype(outTag);
      // Each operand in blocks of kBlock elements, each block's squares
      // summed in double by lanes (LaneSum), the blocks' sums added in
      // order: the order depends on the length alone, never on the thread
      // count, and no sum waits on one running total.
      constexpr int64_t kBlock = int64_t(1) << 16;
      std::vector<double> partial;
      for (size_t k = 0; k < ctx.inputs.size(); ++k) {
        const T *in = ctx.inputs[k].as<T>();
        int64_t n = ctx.inputs[k].numel();
        int64_t blocks = std::max<int64_t>(1, (n + kBlock - 1) / kBlock);
        partial.assign(size_t(blocks), 0.0);
        parallelFor(blocks, 1, [&](int64_t first, int64_t last) {
          for (int64_t b = first; b < last; ++b) {
            const T *x = in + b * kBlock;
            partial[size_t(b)] =
                laneSum(std::min(kBlock, n - b * kBlock), [&](int64_t i) {
                  return double(x[i]) * double(x[i]);
                });
          }
        });
        double sum = 0;
        for (double block : partial)
          sum += block;
        ctx.outputs[k].as<U>()[0] = static_cast<U>(sum);
      }
      return Status::ok();
    });
  });
}

Status roundToKernel(KernelContext &ctx) {
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
  const float *in = x.as<float>();
  float *out = y.as<float>();
  bool bf16 = dtype == "bf16";
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    out[i] = bf16 ? roundToBf16(in[i]) : roundToFp16(in[i]);
  return Status::ok();
}

Status copyKernel(KernelContext &ctx) {
  if (Status s = checkArity(ctx, "runtime.copy", 1, 1, 1); !s)
    return s;
  const TensorView &in = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return Status::error("runtime.copy: " + in.describe() + " does not fit " +
                         out.describe());
  if (in.data != out.data && in.bytes() > 0)
    std::memmove(out.data, in.data, in.bytes());
  return Status::ok();
}

} // namespace

void registerElementwiseGradKernels(KernelRegistry &registry) {
  registry.add("graph.unary_grad", unaryGradKernel);
  registry.add("graph.sum_squares", sumSquaresKernel);
  registry.add("runtime.copy", copyKernel);
  registry.add("graph.round_to", roundToKernel);
}

} // namespace strata::runtime::cpu
