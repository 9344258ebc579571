//===- OptimizerKernels.cu - AdamW and SGD updates on CUDA ------------------===//
//
// graph.adamw_update and graph.sgd_update, the counterparts of
// runtime/cpu/kernels/OptimizerKernels.cpp: one fused elementwise kernel per
// instruction (the ops take one tensor each), in place when codegen gives a
// result its operand's storage. The arithmetic is the CPU's, operation for
// operation: tensor math in the element type with every product and sum
// rounded (no fused multiply-add), the scalars in double and rounded to the
// element type where the CPU rounds them.
//
// lr, step and grad_scale are device tensors, so everything the CPU decides
// from their values is decided on the device, by every thread from the same
// three loads:
//  - a non-finite grad_scale skips the update: every result gets its
//    operand's value (as the CPU's skipUpdate);
//  - step < 1, an error on the CPU, cannot be reported from the device:
//    every result is NaN instead, so the run's loss says so.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"
#include "NormalizationCommon.cuh"

#include "strata/Runtime/OptimizerPlan.h"

#include <cmath>
#include <limits>
#include <string>

namespace strata::runtime::cuda {
namespace {

using namespace norm;

/// The scalars every update reads on the device.
struct ScalarPointers {
  const double *lr;
  const int64_t *step;
  const float *gradScale;
};

/// The CPU's readScalars, less the values: dtypes and sizes.
Status checkScalars(const KernelContext &ctx, std::string_view op, size_t first,
                    ScalarPointers &out) {
  if (Status st = checkUpdateScalars(ctx, op, first); !st)
    return st;
  const TensorView &l = ctx.inputs[first], &s = ctx.inputs[first + 1],
                   &g = ctx.inputs[first + 2];
  out = {l.as<double>(), s.as<int64_t>(), g.as<float>()};
  return Status::ok();
}

__host__ __device__ inline bool isFinite(double x) {
  return x - x == 0.0; // inf - inf and NaN - NaN are NaN
}

template <typename T> __host__ __device__ inline T quietNaN() {
  return std::numeric_limits<T>::quiet_NaN();
}

//===----------------------------------------------------------------------===//
// AdamW
//===----------------------------------------------------------------------===//

struct AdamWAttrs {
  double beta1, beta2, eps, weightDecay;
};

/// The CPU's per-element constants, from the scalars' values.
template <typename T> struct AdamWConstants {
  T decay, b1, b2, oneMinusB1, oneMinusB2, bc2Sqrt, eps, negStep, scale;
};

template <typename T>
__host__ __device__ inline AdamWConstants<T>
adamwConstants(const AdamWAttrs &a, double lr, int64_t step, double gradScale) {
  double biasCorrection1 = 1 - pow(a.beta1, double(step));
  double biasCorrection2 = 1 - pow(a.beta2, double(step));
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = sqrt(biasCorrection2);
  AdamWConstants<T> c;
  c.decay = static_cast<T>(addRn(1.0, -mulRn(lr, a.weightDecay)));
  c.b1 = static_cast<T>(a.beta1);
  c.b2 = static_cast<T>(a.beta2);
  c.oneMinusB1 = static_cast<T>(1 - a.beta1);
  c.oneMinusB2 = static_cast<T>(1 - a.beta2);
  c.bc2Sqrt = static_cast<T>(biasCorrection2Sqrt);
  c.eps = static_cast<T>(a.eps);
  c.negStep = static_cast<T>(-stepSize);
  c.scale = static_cast<T>(gradScale);
  return c;
}

/// One element of the CPU's loop, rounding as it rounds.
template <typename T>
__host__ __device__ inline void adamwElement(const AdamWConstants<T> &c, T p,
                                             T g, T m, T v, T &pOut, T &mOut,
                                             T &vOut) {
  T grad = c.scale == T(1) ? g : mulRn(g, c.scale);
  T param = mulRn(p, c.decay);
  T expAvg = addRn(mulRn(m, c.b1), mulRn(c.oneMinusB1, grad));
  T expAvgSq = addRn(mulRn(v, c.b2), mulRn(mulRn(c.oneMinusB2, grad), grad));
  T denom = addRn(sqrt(expAvgSq) / c.bc2Sqrt, c.eps);
  pOut = addRn(param, mulRn(c.negStep, expAvg) / denom);
  mOut = expAvg;
  vOut = expAvgSq;
}

template <typename T>
__global__ void adamwUpdate(const T *p, const T *g, const T *m, const T *v,
                            T *pOut, T *mOut, T *vOut, int64_t n,
                            ScalarPointers scalars, AdamWAttrs attrs) {
  const double lr = *scalars.lr;
  const int64_t step = *scalars.step;
  const double gradScale = *scalars.gradScale;
  if (step < 1) {
    for (int64_t i = gridStart(); i < n; i += gridStride())
      pOut[i] = mOut[i] = vOut[i] = quietNaN<T>();
    return;
  }
  if (!isFinite(gradScale)) { // skip: results keep the operands' values
    for (int64_t i = gridStart(); i < n; i += gridStride()) {
      T pi = p[i], mi = m[i], vi = v[i];
      pOut[i] = pi;
      mOut[i] = mi;
      vOut[i] = vi;
    }
    return;
  }
  const AdamWConstants<T> c = adamwConstants<T>(attrs, lr, step, gradScale);
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    T pi, mi, vi;
    adamwElement(c, p[i], g[i], m[i], v[i], pi, mi, vi);
    pOut[i] = pi;
    mOut[i] = mi;
    vOut[i] = vi;
  }
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
  ScalarPointers scalars;
  if (Status s = checkScalars(ctx, kOp, 4, scalars); !s)
    return s;
  AdamWAttrs attrs{ctx.attrs.getFloat("beta1"), ctx.attrs.getFloat("beta2"),
                   ctx.attrs.getFloat("eps"),
                   ctx.attrs.getFloat("weight_decay")};
  return dispatchFloat(ctx.inputs[0].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = ctx.inputs[0].numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    adamwUpdate<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(
        ctx.inputs[0].as<T>(), ctx.inputs[1].as<T>(), ctx.inputs[2].as<T>(),
        ctx.inputs[3].as<T>(), ctx.outputs[0].as<T>(), ctx.outputs[1].as<T>(),
        ctx.outputs[2].as<T>(), n, scalars, attrs);
    return launchStatus(kOp);
  });
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

struct SgdAttrs {
  double momentum, dampening, weightDecay;
  bool nesterov;
};

template <typename T> struct SgdConstants {
  T wd, mom, oneMinusDamp, negLr, scale;
};

template <typename T>
__host__ __device__ inline SgdConstants<T>
sgdConstants(const SgdAttrs &a, double lr, double gradScale) {
  SgdConstants<T> c;
  c.wd = static_cast<T>(a.weightDecay);
  c.mom = static_cast<T>(a.momentum);
  c.oneMinusDamp = static_cast<T>(1 - a.dampening);
  c.negLr = static_cast<T>(-lr);
  c.scale = static_cast<T>(gradScale);
  return c;
}

template <typename T>
__host__ __device__ inline void sgdElement(const SgdAttrs &a,
                                           const SgdConstants<T> &c,
                                           int64_t step, T p, T g, T buf,
                                           T &pOut, T &bufOut) {
  T d = c.scale == T(1) ? g : mulRn(g, c.scale);
  if (a.weightDecay != 0)
    d = addRn(d, mulRn(c.wd, p));
  if (a.momentum != 0) {
    T b = step == 1 ? d : addRn(mulRn(buf, c.mom), mulRn(c.oneMinusDamp, d));
    bufOut = b;
    d = a.nesterov ? addRn(d, mulRn(c.mom, b)) : b;
  } else {
    bufOut = buf;
  }
  pOut = addRn(p, mulRn(c.negLr, d));
}

template <typename T>
__global__ void sgdUpdate(const T *p, const T *g, const T *buf, T *pOut,
                          T *bufOut, int64_t n, ScalarPointers scalars,
                          SgdAttrs attrs) {
  const double lr = *scalars.lr;
  const int64_t step = *scalars.step;
  const double gradScale = *scalars.gradScale;
  if (step < 1) {
    for (int64_t i = gridStart(); i < n; i += gridStride())
      pOut[i] = bufOut[i] = quietNaN<T>();
    return;
  }
  if (!isFinite(gradScale)) {
    for (int64_t i = gridStart(); i < n; i += gridStride()) {
      T pi = p[i], bi = buf[i];
      pOut[i] = pi;
      bufOut[i] = bi;
    }
    return;
  }
  const SgdConstants<T> c = sgdConstants<T>(attrs, lr, gradScale);
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    T pi, bi;
    sgdElement(attrs, c, step, p[i], g[i], buf[i], pi, bi);
    pOut[i] = pi;
    bufOut[i] = bi;
  }
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
  ScalarPointers scalars;
  if (Status s = checkScalars(ctx, kOp, 3, scalars); !s)
    return s;
  SgdAttrs attrs{ctx.attrs.getFloat("momentum"),
                 ctx.attrs.getFloat("dampening"),
                 ctx.attrs.getFloat("weight_decay"),
                 ctx.attrs.getBool("nesterov")};
  return dispatchFloat(ctx.inputs[0].dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t n = ctx.inputs[0].numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    sgdUpdate<T><<<gridFor(s, n), kBlock, 0, s.stream>>>(
        ctx.inputs[0].as<T>(), ctx.inputs[1].as<T>(), ctx.inputs[2].as<T>(),
        ctx.outputs[0].as<T>(), ctx.outputs[1].as<T>(), n, scalars, attrs);
    return launchStatus(kOp);
  });
}

} // namespace

void registerOptimizerKernels(KernelRegistry &registry) {
  registry.add("graph.adamw_update", adamwKernel);
  registry.add("graph.sgd_update", sgdKernel);
}

} // namespace strata::runtime::cuda
