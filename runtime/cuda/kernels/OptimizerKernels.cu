//===- OptimizerKernels.cu - AdamW and SGD updates on CUDA ------------------===//
//
// graph.adamw_update and graph.sgd_update, the counterparts of
// runtime/cpu/kernels/OptimizerKernels.cpp: one fused elementwise kernel
// launch per batch of up to kMaxBatchTensors parameters (MultiTensor.cuh;
// strata-group-updates merges the per-parameter updates), in place when
// codegen gives a result its operand's storage. The arithmetic is the CPU's, operation for
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
#include "MultiTensor.cuh"
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

/// The scalars' device pointers (planUpdate checked their types).
ScalarPointers scalarsOf(const KernelContext &ctx, const UpdatePlan &plan) {
  return {ctx.inputs[plan.scalars].as<double>(),
          ctx.inputs[plan.scalars + 1].as<int64_t>(),
          ctx.inputs[plan.scalars + 2].as<float>()};
}

/// Elements a block updates.
constexpr int64_t kChunk = 16 * kBlock;

/// A block's elements: thread threadIdx.x takes begin, begin + kBlock, ...
/// below end, of the batch's tensor `tensor`.
struct ChunkRange {
  int tensor;
  int64_t begin, end;
};

__device__ inline ChunkRange chunkOf(const BatchBlocks &blocks,
                                     const int64_t *n) {
  int t = blocks.tensorOf(blockIdx.x);
  int64_t begin = (int64_t(blockIdx.x) - blocks.first[t]) * kChunk;
  int64_t end = begin + kChunk < n[t] ? begin + kChunk : n[t];
  return {t, begin + threadIdx.x, end};
}

/// The batch [begin, end) of an update's parameters: the blocks each
/// takes, and its element counts into `n`.
BatchBlocks batchBlocks(const KernelContext &ctx, const UpdatePlan &plan,
                        size_t begin, size_t end, int64_t *n) {
  BatchBlocks blocks;
  for (size_t k = begin; k < end; ++k) {
    n[k - begin] = plan.operand(ctx, k, 0).numel();
    blocks.add((n[k - begin] + kChunk - 1) / kChunk);
  }
  return blocks;
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

/// Up to kMaxBatchTensors parameters of one update.
template <typename T> struct AdamWBatch {
  const T *p[kMaxBatchTensors], *g[kMaxBatchTensors], *m[kMaxBatchTensors],
      *v[kMaxBatchTensors];
  T *pOut[kMaxBatchTensors], *mOut[kMaxBatchTensors], *vOut[kMaxBatchTensors];
  int64_t n[kMaxBatchTensors];
  BatchBlocks blocks;
};

template <typename T>
__global__ void __launch_bounds__(kBlock)
    adamwUpdate(AdamWBatch<T> b, ScalarPointers scalars, AdamWAttrs attrs) {
  const double lr = *scalars.lr;
  const int64_t step = *scalars.step;
  const double gradScale = *scalars.gradScale;
  const ChunkRange r = chunkOf(b.blocks, b.n);
  const int t = r.tensor;
  const T *p = b.p[t], *g = b.g[t], *m = b.m[t], *v = b.v[t];
  T *pOut = b.pOut[t], *mOut = b.mOut[t], *vOut = b.vOut[t];
  if (step < 1) {
    for (int64_t i = r.begin; i < r.end; i += kBlock)
      pOut[i] = mOut[i] = vOut[i] = quietNaN<T>();
    return;
  }
  if (!isFinite(gradScale)) { // skip: results keep the operands' values
    for (int64_t i = r.begin; i < r.end; i += kBlock) {
      T pi = p[i], mi = m[i], vi = v[i];
      pOut[i] = pi;
      mOut[i] = mi;
      vOut[i] = vi;
    }
    return;
  }
  const AdamWConstants<T> c = adamwConstants<T>(attrs, lr, step, gradScale);
  for (int64_t i = r.begin; i < r.end; i += kBlock) {
    T pi, mi, vi;
    adamwElement(c, p[i], g[i], m[i], v[i], pi, mi, vi);
    pOut[i] = pi;
    mOut[i] = mi;
    vOut[i] = vi;
  }
}

Status adamwKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.adamw_update";
  UpdatePlan plan;
  if (Status s = planUpdate(ctx, kOp, 4, 3, plan); !s)
    return s;
  if (Status s = requireAttributes(ctx, kOp,
                                   {"beta1", "beta2", "eps", "weight_decay"});
      !s)
    return s;
  ScalarPointers scalars = scalarsOf(ctx, plan);
  AdamWAttrs attrs{ctx.attrs.getFloat("beta1"), ctx.attrs.getFloat("beta2"),
                   ctx.attrs.getFloat("eps"),
                   ctx.attrs.getFloat("weight_decay")};
  return dispatchFloat(plan.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const CudaStream &s = streamOf(ctx);
    return forEachBatch(plan.parameters, [&](size_t begin, size_t end) {
      AdamWBatch<T> b;
      b.blocks = batchBlocks(ctx, plan, begin, end, b.n);
      for (size_t k = begin; k < end; ++k) {
        size_t j = k - begin;
        b.p[j] = plan.operand(ctx, k, 0).as<T>();
        b.g[j] = plan.operand(ctx, k, 1).as<T>();
        b.m[j] = plan.operand(ctx, k, 2).as<T>();
        b.v[j] = plan.operand(ctx, k, 3).as<T>();
        b.pOut[j] = plan.result(ctx, k, 0).as<T>();
        b.mOut[j] = plan.result(ctx, k, 1).as<T>();
        b.vOut[j] = plan.result(ctx, k, 2).as<T>();
      }
      if (b.blocks.total() == 0)
        return Status::ok();
      STRATA_LAUNCH(unsigned(b.blocks.total()), kBlock, 0, s.stream,
                    adamwUpdate<T>)
      (b, scalars, attrs);
      return launchStatus(kOp);
    });
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

template <typename T> struct SgdBatch {
  const T *p[kMaxBatchTensors], *g[kMaxBatchTensors], *buf[kMaxBatchTensors];
  T *pOut[kMaxBatchTensors], *bufOut[kMaxBatchTensors];
  int64_t n[kMaxBatchTensors];
  BatchBlocks blocks;
};

template <typename T>
__global__ void __launch_bounds__(kBlock)
    sgdUpdate(SgdBatch<T> b, ScalarPointers scalars, SgdAttrs attrs) {
  const double lr = *scalars.lr;
  const int64_t step = *scalars.step;
  const double gradScale = *scalars.gradScale;
  const ChunkRange r = chunkOf(b.blocks, b.n);
  const int t = r.tensor;
  const T *p = b.p[t], *g = b.g[t], *buf = b.buf[t];
  T *pOut = b.pOut[t], *bufOut = b.bufOut[t];
  if (step < 1) {
    for (int64_t i = r.begin; i < r.end; i += kBlock)
      pOut[i] = bufOut[i] = quietNaN<T>();
    return;
  }
  if (!isFinite(gradScale)) {
    for (int64_t i = r.begin; i < r.end; i += kBlock) {
      T pi = p[i], bi = buf[i];
      pOut[i] = pi;
      bufOut[i] = bi;
    }
    return;
  }
  const SgdConstants<T> c = sgdConstants<T>(attrs, lr, gradScale);
  for (int64_t i = r.begin; i < r.end; i += kBlock) {
    T pi, bi;
    sgdElement(attrs, c, step, p[i], g[i], buf[i], pi, bi);
    pOut[i] = pi;
    bufOut[i] = bi;
  }
}

Status sgdKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.sgd_update";
  UpdatePlan plan;
  if (Status s = planUpdate(ctx, kOp, 3, 2, plan); !s)
    return s;
  if (Status s = requireAttributes(ctx, kOp,
                                   {"momentum", "dampening", "weight_decay"});
      !s)
    return s;
  ScalarPointers scalars = scalarsOf(ctx, plan);
  SgdAttrs attrs{ctx.attrs.getFloat("momentum"),
                 ctx.attrs.getFloat("dampening"),
                 ctx.attrs.getFloat("weight_decay"),
                 ctx.attrs.getBool("nesterov")};
  return dispatchFloat(plan.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const CudaStream &s = streamOf(ctx);
    return forEachBatch(plan.parameters, [&](size_t begin, size_t end) {
      SgdBatch<T> b;
      b.blocks = batchBlocks(ctx, plan, begin, end, b.n);
      for (size_t k = begin; k < end; ++k) {
        size_t j = k - begin;
        b.p[j] = plan.operand(ctx, k, 0).as<T>();
        b.g[j] = plan.operand(ctx, k, 1).as<T>();
        b.buf[j] = plan.operand(ctx, k, 2).as<T>();
        b.pOut[j] = plan.result(ctx, k, 0).as<T>();
        b.bufOut[j] = plan.result(ctx, k, 1).as<T>();
      }
      if (b.blocks.total() == 0)
        return Status::ok();
      STRATA_LAUNCH(unsigned(b.blocks.total()), kBlock, 0, s.stream,
                    sgdUpdate<T>)
      (b, scalars, attrs);
      return launchStatus(kOp);
    });
  });
}

} // namespace

void registerOptimizerKernels(KernelRegistry &registry) {
  registry.add("graph.adamw_update", adamwKernel);
  registry.add("graph.sgd_update", sgdKernel);
}

} // namespace strata::runtime::cuda
