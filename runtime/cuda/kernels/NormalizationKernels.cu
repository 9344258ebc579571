//===- NormalizationKernels.cu - Normalization and softmax on CUDA ---------===//
//
// graph.layer_norm, graph.batch_norm, graph.softmax and graph.log_softmax,
// the counterparts of runtime/cpu/kernels/NormalizationKernels.cpp: the
// same checks and messages, statistics and sums accumulated in double and
// every result rounded once to the element type. One block per row (layer
// norm, softmax line) or per channel (batch norm); the block's threads
// stride over the row and reduce with NormalizationCommon.cuh's fixed tree,
// so a run is reproducible bit for bit (the CPU sums sequentially: the
// double sums differ from its in the last bits only).
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"
#include "NormalizationCommon.cuh"

#include "strata/Runtime/NormPlan.h"

#include <initializer_list>
#include <string>

namespace strata::runtime::cuda {
namespace {

using namespace norm;

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void layerNormRows(const T *in, const T *g, const T *b, T *out,
                              int64_t rows, int64_t len, double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = in + r * len;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
      sum += double(row[i]);
    double mean = blockSum(sum) / double(len);
    // Two passes: the variance of centred values cannot go negative.
    double sq = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      double d = double(row[i]) - mean;
      sq += d * d;
    }
    double rstd = 1.0 / sqrt(blockSum(sq) / double(len) + epsilon);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      double v = (double(row[i]) - mean) * rstd * double(g[i]);
      if (b)
        v += double(b[i]);
      out[r * len + i] = static_cast<T>(v);
    }
  }
}

Status layerNormKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.layer_norm";
  LayerNormShape plan;
  if (Status s = planLayerNorm(ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &scale = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  TensorView &y = ctx.outputs[0];
  double epsilon = plan.epsilon;
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    int64_t rows = plan.rows, len = plan.len;
    if (rows == 0 || len == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    STRATA_LAUNCH(rowGrid(rows), kBlock, 0, s.stream, layerNormRows<T>)
    (x.as<T>(), scale.as<T>(), bias ? bias->as<T>() : nullptr, y.as<T>(), rows,
     len, epsilon);
    return launchStatus(kOp);
  });
}

//===----------------------------------------------------------------------===//
// BatchNorm
//===----------------------------------------------------------------------===//

/// One block per channel c of x [batch, channels, spatial].
template <typename T>
__global__ void batchNormChannels(const T *in, const T *g, const T *b,
                                  const T *runMean, const T *runVar, T *out,
                                  T *newMean, T *newVar, int64_t batch,
                                  int64_t channels, int64_t spatial,
                                  double epsilon, double momentum,
                                  bool training) {
  const int64_t count = batch * spatial;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    auto at = [&](int64_t k) {
      return (k / spatial * channels + c) * spatial + k % spatial;
    };
    double mean, var;
    if (training) {
      double sum = 0;
      for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
        sum += double(in[at(k)]);
      mean = blockSum(sum) / double(count);
      double sq = 0;
      for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
        double d = double(in[at(k)]) - mean;
        sq += d * d;
      }
      sq = blockSum(sq);
      // Biased variance normalizes; the unbiased one updates the running
      // variance (PyTorch's convention).
      var = sq / double(count);
      double unbiased = sq / double(count - 1);
      if (threadIdx.x == 0) {
        newMean[c] = static_cast<T>((1 - momentum) * double(runMean[c]) +
                                    momentum * mean);
        newVar[c] = static_cast<T>((1 - momentum) * double(runVar[c]) +
                                   momentum * unbiased);
      }
    } else {
      mean = double(runMean[c]);
      var = double(runVar[c]);
      if (threadIdx.x == 0) {
        newMean[c] = runMean[c];
        newVar[c] = runVar[c];
      }
    }
    double rstd = 1.0 / sqrt(var + epsilon);
    double gc = double(g[c]), bc = double(b[c]);
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t i = at(k);
      out[i] = static_cast<T>((double(in[i]) - mean) * rstd * gc + bc);
    }
  }
}

Status batchNormKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.batch_norm";
  BatchNormShape plan;
  if (Status s = planBatchNorm(ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  int64_t batch = plan.batch, channels = plan.channels, spatial = plan.spatial;
  double epsilon = plan.epsilon, momentum = plan.momentum;
  bool training = plan.training;
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    if (channels == 0)
      return Status::ok();
    const CudaStream &s = streamOf(ctx);
    // An empty batch still copies (eval) the running statistics; spatial
    // is >= 1 in the kernel's divisions whenever count > 0.
    STRATA_LAUNCH(rowGrid(channels), kBlock, 0, s.stream, batchNormChannels<T>)
    (x.as<T>(), ctx.inputs[1].as<T>(), ctx.inputs[2].as<T>(),
     ctx.inputs[3].as<T>(), ctx.inputs[4].as<T>(), y.as<T>(),
     ctx.outputs[1].as<T>(), ctx.outputs[2].as<T>(), batch, channels, spatial,
     epsilon, momentum, training);
    return launchStatus(kOp);
  });
}

//===----------------------------------------------------------------------===//
// Softmax, LogSoftmax
//===----------------------------------------------------------------------===//

/// One block per line of `len` elements `inner` apart (outer * inner
/// lines): the max (NaN wins) first, exp and the sum in double. A row of
/// all -inf gives NaN, as on the CPU.
template <typename T>
__global__ void softmaxLines(const T *in, T *out, int64_t lines, int64_t len,
                             int64_t inner, bool log) {
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    int64_t base = line / inner * len * inner + line % inner;
    const T *x = in + base;
    T *y = out + base;
    T max = x[0];
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
      max = NanMaxOp()(max, x[i * inner]);
    max = blockReduce(max, NanMaxOp());
    double sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
      sum += exp(double(x[i * inner]) - double(max));
    sum = blockSum(sum);
    if (log) {
      double logSum = ::log(sum);
      for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
        y[i * inner] =
            static_cast<T>(double(x[i * inner]) - double(max) - logSum);
    } else {
      for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
        y[i * inner] =
            static_cast<T>(exp(double(x[i * inner]) - double(max)) / sum);
    }
  }
}

void addSoftmax(KernelRegistry &r, std::string op, bool log) {
  r.add(op, [op, log](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
      return s;
    if (Status s = requireAttributes(ctx, op, {"axis"}); !s)
      return s;
    const TensorView &x = ctx.inputs[0];
    TensorView &y = ctx.outputs[0];
    if (y.dtype != x.dtype || y.shape != x.shape)
      return Status::error(op + ": result must be " + x.describe() + ", got " +
                           y.describe());
    int64_t axis = ctx.attrs.getInt("axis");
    if (axis < 0 || axis >= x.rank())
      return Status::error(op + ": axis " + std::to_string(axis) +
                           " must be in [0, " + std::to_string(x.rank()) + ")");
    int64_t outer = product(x.shape, 0, axis);
    int64_t len = x.shape[axis];
    int64_t inner = product(x.shape, axis + 1, x.shape.size());
    return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
      using T = decltype(tag);
      int64_t lines = outer * inner;
      if (lines == 0 || len == 0)
        return Status::ok();
      const CudaStream &s = streamOf(ctx);
      STRATA_LAUNCH(rowGrid(lines), kBlock, 0, s.stream, softmaxLines<T>)
      (x.as<T>(), y.as<T>(), lines, len, inner, log);
      return launchStatus(op);
    });
  });
}

} // namespace

void registerNormalizationKernels(KernelRegistry &registry) {
  registry.add("graph.layer_norm", layerNormKernel);
  registry.add("graph.batch_norm", batchNormKernel);
  addSoftmax(registry, "graph.softmax", false);
  addSoftmax(registry, "graph.log_softmax", true);
}

} // namespace strata::runtime::cuda
