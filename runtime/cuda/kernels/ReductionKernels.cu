//===- ReductionKernels.cu - Sum, mean and max over axes on CUDA ----------===//
//
// graph.reduce_sum, graph.reduce_mean, graph.reduce_max, the counterparts of
// the CPU's ReductionKernels.cpp, with its plan (kept and reduced runs of
// dims), its checks and messages, and its accumulators: float sums and
// means in double, rounded once to the element type; integer sums wrapping
// in 64 bits, then narrowed; max propagating NaN like torch.amax.
//
// bf16 / fp16 sums read the narrow elements directly (runNarrowReduceSum,
// which the narrow adapter calls first): the adapter's numbers, without
// its f32 copies.
//
// Deterministic, no atomics: every result element is folded by a fixed set
// of threads in a fixed order that depends on the shapes only, so a run
// repeats bit for bit (and matches the CPU's correctly rounded float sums up
// to the last bit of a double).
//
// - The innermost dim reduced (rows: softmax-like sums, full reductions),
//   or fewer than 64 results: a group of G threads (a power of two up to a
//   warp covering the row, or a whole block for fewer than 1024 rows longer
//   than 1024) per result element strides the group's elements, then a
//   shared-memory tree folds the G partials.
// - The innermost dim kept (column sums: bias gradients) and at least 64
//   results: a block of 512 threads takes 32 (or, below 4096 results, 8)
//   neighbouring result elements, so a warp reads neighbouring inputs; the
//   16 (or 64) rows of threads split the reduced elements and their
//   partials fold in order.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseCommon.cuh"

#include "strata/Runtime/NarrowFloat.h"
#include "strata/Runtime/ReducePlan.h"

#include <limits>
#include <type_traits>
#include <vector>

namespace strata::runtime::cuda {
namespace {

using reduce::kMaxRuns;
using reduce::planReduce;
using reduce::ReducePlan;
using reduce::Runs;

/// The input offset of coordinate `flat` (row-major) of `runs`.
__device__ inline int64_t offsetOf(const Runs &runs, int64_t flat) {
  int64_t offset = 0;
  for (int i = runs.count - 1; i > 0; --i) {
    offset += (flat % runs.sizes[i]) * runs.strides[i];
    flat /= runs.sizes[i];
  }
  if (runs.count > 0)
    offset += flat * runs.strides[0];
  return offset;
}

//===----------------------------------------------------------------------===//
// The folds: an accumulator starts at init(), takes elements through
// step(), partial accumulators merge through combine() (lower index on the
// left), and finish() makes the result.
//===----------------------------------------------------------------------===//

template <typename T> struct SumOp {
  /// Floats sum in double; integers in 64 bits, wrapping (no UB).
  using Acc =
      std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
  __device__ Acc init() const { return Acc(0); }
  __device__ Acc step(Acc a, T v) const {
    if constexpr (std::is_floating_point_v<T>)
      return a + v;
    else
      return a + static_cast<uint64_t>(static_cast<int64_t>(v));
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ T finish(Acc a) const {
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(a);
    else // modular narrowing
      return static_cast<T>(static_cast<int64_t>(a));
  }
};

/// bf16 / fp16 sums, the narrow adapter's numbers (NarrowFloatKernels.cu:
/// widen to f32, the f32 sum in double, rounded to f32, then to the narrow
/// type) without its f32 copies: each element widens as it is read.
template <bool Bf16> struct NarrowSumOp {
  using Acc = double;
  __device__ Acc init() const { return 0.0; }
  __device__ Acc step(Acc a, uint16_t v) const {
    return a + (Bf16 ? fromBf16Bits(v) : fromFp16Bits(v));
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ uint16_t finish(Acc a) const {
    float f = static_cast<float>(a);
    return Bf16 ? bf16Bits(f) : fp16Bits(f);
  }
};

template <typename T> struct MeanOp {
  using Acc = double;
  /// torch.mean: sum / count (0 / 0 = NaN for an empty group), the quotient
  /// in double, rounded once.
  double count = 1;
  __device__ Acc init() const { return 0.0; }
  __device__ Acc step(Acc a, T v) const { return a + v; }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ T finish(Acc a) const { return static_cast<T>(a / count); }
};

template <typename T> struct MaxOp {
  using Acc = T;
  /// -inf for floats, the lowest value for integers.
  T lowest = T(0);
  __device__ Acc init() const { return lowest; }
  __device__ Acc step(Acc a, T v) const {
    // A NaN operand wins and, once taken, stays (NaN > v is false).
    if constexpr (std::is_floating_point_v<T>)
      return v > a || v != v ? v : a;
    else
      return v > a ? v : a;
  }
  __device__ Acc combine(Acc a, Acc b) const { return step(a, b); }
  __device__ T finish(Acc a) const { return a; }
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Groups of `group` threads (a power of two dividing kBlock), one per result
/// element: lane l folds reduced elements l, l + group, ...; a shared-memory
/// tree then folds the group's partials.
template <typename T, typename Op>
__global__ void __launch_bounds__(kBlock)
    groupReduceKernel(const T *in, T *out, int64_t outputs, int64_t count,
                      Runs kept, Runs reduced, int group, Op op) {
  using Acc = typename Op::Acc;
  __shared__ Acc partial[kBlock];
  int lane = int(threadIdx.x) % group;
  int groups = kBlock / group;
  int64_t first = int64_t(blockIdx.x) * groups;
  // The loop bound is the same for every thread of the block, so every
  // thread reaches every __syncthreads.
  for (; first < outputs; first += int64_t(gridDim.x) * groups) {
    int64_t o = first + int(threadIdx.x) / group;
    Acc acc = op.init();
    if (o < outputs) {
      int64_t base = offsetOf(kept, o);
      for (int64_t r = lane; r < count; r += group)
        acc = op.step(acc, in[base + offsetOf(reduced, r)]);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = group / 2; s > 0; s >>= 1) {
      if (lane < s)
        partial[threadIdx.x] =
            op.combine(partial[threadIdx.x], partial[threadIdx.x + s]);
      __syncthreads();
    }
    if (lane == 0 && o < outputs)
      out[o] = op.finish(partial[threadIdx.x]);
    __syncthreads();
  }
}

/// Threads per block of the column kernel.
constexpr int kColumnThreads = 512;

/// Blocks of X x (kColumnThreads / X) threads, X neighbouring result
/// elements each: thread (x, y) folds reduced elements y, y + Y, ... of
/// result element x of the block's tile; thread (x, 0) then folds the Y
/// partials in order. A warp reads X neighbouring inputs per row (X = 32: a
/// 128-byte line; X = 8: a 32-byte sector, with 64 rows of threads for
/// fewer, longer columns).
template <typename T, typename Op, int X>
__global__ void __launch_bounds__(kColumnThreads)
    columnReduceKernel(const T *in, T *out, int64_t outputs, int64_t count,
                       Runs kept, Runs reduced, Op op) {
  constexpr int Y = kColumnThreads / X;
  using Acc = typename Op::Acc;
  __shared__ Acc partial[Y][X];
  int tx = int(threadIdx.x), ty = int(threadIdx.y);
  for (int64_t first = int64_t(blockIdx.x) * X; first < outputs;
       first += int64_t(gridDim.x) * X) {
    int64_t o = first + tx;
    Acc acc = op.init();
    if (o < outputs) {
      int64_t base = offsetOf(kept, o);
      for (int64_t r = ty; r < count; r += Y)
        acc = op.step(acc, in[base + offsetOf(reduced, r)]);
    }
    partial[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && o < outputs) {
      Acc total = partial[0][tx];
      for (int j = 1; j < Y; ++j)
        total = op.combine(total, partial[j][tx]);
      out[o] = op.finish(total);
    }
    __syncthreads();
  }
}

template <typename T, typename Op, int X>
Status launchColumns(std::string_view op, const CudaStream &cs, const T *in,
                     T *out, int64_t outputs, const ReducePlan &plan,
                     Op fold) {
  int64_t tiles = (outputs + X - 1) / X;
  int64_t cap = int64_t(cs.multiProcessors) * (2048 / kColumnThreads);
  unsigned grid = unsigned(std::max<int64_t>(1, std::min(tiles, cap)));
  STRATA_LAUNCH(grid, dim3(X, kColumnThreads / X), 0, cs.stream,
                columnReduceKernel<T, Op, X>)
  (in, out, outputs, plan.reduceCount, plan.kept, plan.reduced, fold);
  return launchStatus(std::string(op));
}

/// Enqueues the fold of every reduced group of `x` into `y`.
template <typename T, typename Op>
Status launchReduce(std::string_view op, KernelContext &ctx,
                    const ReducePlan &plan, Op fold) {
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  int64_t outputs = y.numel();
  if (outputs == 0)
    return Status::ok();
  const CudaStream &cs = streamOf(ctx);
  int64_t count = plan.reduceCount;
  // The innermost dim kept: columns, unless there are too few of them to
  // fill the GPU (then a group per column, below, reading across rows).
  if (plan.innerKept && outputs >= 64)
    return outputs >= 4096
               ? launchColumns<T, Op, 32>(op, cs, x.as<T>(), y.as<T>(),
                                          outputs, plan, fold)
               : launchColumns<T, Op, 8>(op, cs, x.as<T>(), y.as<T>(),
                                         outputs, plan, fold);
  // Threads per result element, from the shapes only (so the order, and
  // the rounding, is the same on every GPU): a whole block for a few long
  // rows, else the smallest power of two up to a warp covering the row.
  int group = 1;
  if (count > 1024 && outputs < 1024)
    group = kBlock;
  else
    while (group < 32 && group < count)
      group *= 2;
  int64_t groups = kBlock / group;
  int64_t blocks = (outputs + groups - 1) / groups;
  unsigned grid = unsigned(std::max<int64_t>(
      1, std::min<int64_t>(blocks, int64_t(cs.multiProcessors) * 8)));
  STRATA_LAUNCH(grid, kBlock, 0, cs.stream, groupReduceKernel<T, Op>)
  (x.as<T>(), y.as<T>(), outputs, count, plan.kept, plan.reduced, group, fold);
  return launchStatus(std::string(op));
}

Status reduceSumKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.reduce_sum";
  ReducePlan plan;
  if (Status s = planReduce(op, ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  if (x.dtype == DType::I1)
    return Status::error(std::string(op) +
                         ": element type i1 is not supported");
  return dispatchAll(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    return launchReduce<T>(op, ctx, plan, SumOp<T>());
  });
}

} // namespace

Status runNarrowReduceSum(KernelContext &ctx, bool &handled) {
  constexpr std::string_view op = "graph.reduce_sum";
  handled = false;
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return Status::ok();
  DType t = ctx.inputs[0].dtype;
  if (!isNarrowFloat(t) || ctx.outputs[0].dtype != t)
    return Status::ok();
  handled = true;
  ReducePlan plan;
  if (Status s = planReduce(op, ctx, plan); !s)
    return s;
  if (t == DType::BF16)
    return launchReduce<uint16_t>(op, ctx, plan, NarrowSumOp<true>());
  return launchReduce<uint16_t>(op, ctx, plan, NarrowSumOp<false>());
}

namespace {

Status reduceMeanKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.reduce_mean";
  ReducePlan plan;
  if (Status s = planReduce(op, ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    MeanOp<T> fold;
    fold.count = static_cast<double>(plan.reduceCount);
    return launchReduce<T>(op, ctx, plan, fold);
  });
}

Status reduceMaxKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.reduce_max";
  ReducePlan plan;
  if (Status s = planReduce(op, ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  // torch.amax refuses to reduce an empty dim: there is no identity.
  if (plan.reduceCount == 0 && ctx.outputs[0].numel() > 0)
    return Status::error(std::string(op) + ": cannot reduce an empty dim of " +
                         x.describe());
  return dispatchAll(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    MaxOp<T> fold;
    fold.lowest = std::numeric_limits<T>::has_infinity
                      ? -std::numeric_limits<T>::infinity()
                      : std::numeric_limits<T>::lowest();
    return launchReduce<T>(op, ctx, plan, fold);
  });
}

} // namespace

void registerReductionKernels(KernelRegistry &registry) {
  registry.add("graph.reduce_sum", reduceSumKernel);
  registry.add("graph.reduce_mean", reduceMeanKernel);
  registry.add("graph.reduce_max", reduceMaxKernel);
}

} // namespace strata::runtime::cuda
