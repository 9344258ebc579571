//===- OptimizerKernels.cpp - AdamW and SGD updates -----------------------===//
//
// graph.adamw_update and graph.sgd_update, elementwise, so codegen may give
// a result the storage of its operand (the update runs in place). The
// arithmetic follows torch.optim's single-tensor (foreach=False) code in
// PyTorch's order: tensor math in the element type, Python scalars computed
// in double and rounded to the element type where PyTorch rounds them.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/OptimizerPlan.h"

#include <cmath>
#include <cstring>
#include <string>

namespace strata::runtime::cpu {
namespace {

/// Reads the scalars every update takes: lr (f64), step (i64), grad_scale.
Status readScalars(const KernelContext &ctx, std::string_view op, size_t first,
                   double &lr, int64_t &step, double &gradScale) {
  if (Status st = checkUpdateScalars(ctx, op, first); !st)
    return st;
  const TensorView &l = ctx.inputs[first], &s = ctx.inputs[first + 1],
                   &g = ctx.inputs[first + 2];
  lr = l.as<double>()[0];
  step = s.as<int64_t>()[0];
  gradScale = g.as<float>()[0];
  if (step < 1)
    return Status::error(std::string(op) + ": step must start at 1, got " +
                         std::to_string(step));
  return Status::ok();
}

/// A non-finite grad_scale (fp16 overflow) skips the update: every result
/// keeps its operand's value.
bool skipUpdate(KernelContext &ctx, double gradScale) {
  if (std::isfinite(gradScale))
    return false;
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    size_t from = i == 0 ? 0 : i + 1; // param, then the states after grad
    if (ctx.outputs[i].data != ctx.inputs[from].data)
      std::memcpy(ctx.outputs[i].data, ctx.inputs[from].data,
                  ctx.outputs[i].bytes());
  }
  return true;
}

Status adamwKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.adamw_update";
  if (Status s = checkArity(ctx, kOp, 7, 7, 3); !s)
    return s;
  if (Status s = checkUpdateTensors(ctx, kOp, 4); !s)
    return s;
  if (Status s = requireAttributes(ctx, kOp,
                                   {"beta1", "beta2", "eps", "weight_decay"});
      !s)
    return s;
  double lr, gradScale;
  int64_t step;
  if (Status s = readScalars(ctx, kOp, 4, lr, step, gradScale); !s)
    return s;
  if (skipUpdate(ctx, gradScale))
    return Status::ok();
  double beta1 = ctx.attrs.getFloat("beta1"),
         beta2 = ctx.attrs.getFloat("beta2");
  double eps = ctx.attrs.getFloat("eps");
  double weightDecay = ctx.attrs.getFloat("weight_decay");
  double biasCorrection1 = 1 - std::pow(beta1, double(step));
  double biasCorrection2 = 1 - std::pow(beta2, double(step));
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  return dispatchFloat(ctx.inputs[0].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *p = ctx.inputs[0].as<T>(), *g = ctx.inputs[1].as<T>();
    const T *m = ctx.inputs[2].as<T>(), *v = ctx.inputs[3].as<T>();
    T *pOut = ctx.outputs[0].as<T>(), *mOut = ctx.outputs[1].as<T>();
    T *vOut = ctx.outputs[2].as<T>();
    const T decay = static_cast<T>(1 - lr * weightDecay);
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
    const T oneMinusB1 = static_cast<T>(1 - beta1);
    const T oneMinusB2 = static_cast<T>(1 - beta2);
    const T bc2Sqrt = static_cast<T>(biasCorrection2Sqrt);
    const T tEps = static_cast<T>(eps), negStep = static_cast<T>(-stepSize);
    const T scale = static_cast<T>(gradScale);
    for (int64_t i = 0, n = ctx.inputs[0].numel(); i < n; ++i) {
      T grad = scale == T(1) ? g[i] : g[i] * scale;
      T param = p[i] * decay;
      T expAvg = m[i] * b1 + oneMinusB1 * grad;
      T expAvgSq = v[i] * b2 + oneMinusB2 * grad * grad;
      T denom = std::sqrt(expAvgSq) / bc2Sqrt + tEps;
      pOut[i] = param + negStep * expAvg / denom;
      mOut[i] = expAvg;
      vOut[i] = expAvgSq;
    }
    return Status::ok();
  });
}

Status sgdKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.sgd_update";
  if (Status s = checkArity(ctx, kOp, 6, 6, 2); !s)
    return s;
  if (Status s = checkUpdateTensors(ctx, kOp, 3); !s)
    return s;
  if (Status s = requireAttributes(ctx, kOp,
                                   {"momentum", "dampening", "weight_decay"});
      !s)
    return s;
  double lr, gradScale;
  int64_t step;
  if (Status s = readScalars(ctx, kOp, 3, lr, step, gradScale); !s)
    return s;
  if (skipUpdate(ctx, gradScale))
    return Status::ok();
  double momentum = ctx.attrs.getFloat("momentum");
  double dampening = ctx.attrs.getFloat("dampening");
  double weightDecay = ctx.attrs.getFloat("weight_decay");
  bool nesterov = ctx.attrs.getBool("nesterov");
  return dispatchFloat(ctx.inputs[0].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *p = ctx.inputs[0].as<T>(), *g = ctx.inputs[1].as<T>();
    const T *buf = ctx.inputs[2].as<T>();
    T *pOut = ctx.outputs[0].as<T>(), *bufOut = ctx.outputs[1].as<T>();
    const T wd = static_cast<T>(weightDecay), mom = static_cast<T>(momentum);
    const T oneMinusDamp = static_cast<T>(1 - dampening);
    const T negLr = static_cast<T>(-lr), scale = static_cast<T>(gradScale);
    for (int64_t i = 0, n = ctx.inputs[0].numel(); i < n; ++i) {
      T d = scale == T(1) ? g[i] : g[i] * scale;
      if (weightDecay != 0)
        d = d + wd * p[i];
      if (momentum != 0) {
        T b = step == 1 ? d : buf[i] * mom + oneMinusDamp * d;
        bufOut[i] = b;
        d = nesterov ? d + mom * b : b;
      } else {
        bufOut[i] = buf[i];
      }
      pOut[i] = p[i] + negLr * d;
    }
    return Status::ok();
  });
}

} // namespace

void registerOptimizerKernels(KernelRegistry &registry) {
  registry.add("graph.adamw_update", adamwKernel);
  registry.add("graph.sgd_update", sgdKernel);
}

} // namespace strata::runtime::cpu
