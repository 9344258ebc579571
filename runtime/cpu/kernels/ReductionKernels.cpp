//===- ReductionKernels.cpp - Sum, mean and max over axes on the CPU ------===//
//
// graph.reduce_sum, graph.reduce_mean, graph.reduce_max. Float sums and means
// accumulate in double and round once to the element type, so the result is
// the correctly rounded sum whatever order PyTorch's vectorized reduction
// takes; integer sums wrap in 64 bits, then narrow to the element type.
// reduce_max propagates NaN like torch.amax.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/ReducePlan.h"

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>
#include <vector>

namespace strata::runtime::cpu {
namespace {

using reduce::kMaxRuns;
using reduce::planReduce;
using reduce::ReducePlan;
using reduce::Runs;

/// Calls fn(offset) for every coordinate of `runs` in row-major order, with
/// offset = sum c[i] * strides[i]; once (offset 0) if there are no runs.
template <typename Fn> void forEachOffset(const Runs &runs, Fn &&fn) {
  for (int i = 0; i < runs.count; ++i)
    if (runs.sizes[i] == 0)
      return;
  if (runs.count == 0) {
    fn(int64_t(0));
    return;
  }
  std::array<int64_t, kMaxRuns> coord{};
  int64_t inner = runs.sizes[runs.count - 1];
  int64_t step = runs.strides[runs.count - 1];
  int64_t offset = 0;
  while (true) {
    for (int64_t j = 0; j < inner; ++j)
      fn(offset + j * step);
    int64_t d = static_cast<int64_t>(runs.count) - 2;
    for (; d >= 0; --d) {
      offset += runs.strides[d];
      if (++coord[d] < runs.sizes[d])
        break;
      offset -= runs.strides[d] * runs.sizes[d];
      coord[d] = 0;
    }
    if (d < 0)
      return;
  }
}

/// acc[j] += src[j] for j < n: a row of floats into double sums, built for
/// the CPU at hand (VectorMath.h; the baseline ISA added two doubles a
/// vector).
STRATA_VECTOR_DISPATCHED void addRowToDoubles(double *acc, const float *src,
                                              int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    acc[j] = acc[j] + src[j];
}

/// Folds every reduced group of `in` into one output element: an Acc starts
/// at `init`, takes the group's elements in row-major order through `step`
/// and becomes the result through `finish`. Both loop orders visit a group's
/// elements in the same order, so they give identical results. `addRow`,
/// where given, is `step` over a whole row of accumulators.
template <typename T, typename Acc, typename Step, typename Finish>
void reduce(const ReducePlan &plan, const T *in, T *out, Acc init, Step step,
            Finish finish,
            void (*addRow)(Acc *, const T *, int64_t) = nullptr) {
  if (!plan.innerKept) {
    forEachOffset(plan.kept, [&](int64_t base) {
      Acc acc = init;
      forEachOffset(plan.reduced,
                    [&](int64_t off) { acc = step(acc, in[base + off]); });
      *out++ = finish(acc);
    });
    return;
  }
  // The innermost kept run is contiguous: stream whole rows of it (bias
  // gradients reduce the leading dims of [N, D]).
  Runs outer = plan.kept;
  int64_t row = outer.sizes[--outer.count];
  std::vector<Acc> acc(row); // scratch: one accumulator per row element
  forEachOffset(outer, [&](int64_t base) {
    std::fill(acc.begin(), acc.end(), init);
    forEachOffset(plan.reduced, [&](int64_t off) {
      const T *src = in + base + off;
      if (addRow) {
        addRow(acc.data(), src, row);
        return;
      }
      for (int64_t j = 0; j < row; ++j)
        acc[j] = step(acc[j], src[j]);
    });
    for (int64_t j = 0; j < row; ++j)
      *out++ = finish(acc[j]);
  });
}

/// Floats sum in double; integers in 64 bits, wrapping (no UB).
template <typename T>
using SumAcc =
    std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

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
    using Acc = SumAcc<T>;
    void (*addRow)(Acc *, const T *, int64_t) = nullptr;
    if constexpr (std::is_same_v<T, float>)
      addRow = addRowToDoubles;
    reduce<T>(
        plan, x.as<T>(), ctx.outputs[0].as<T>(), Acc(0),
        [](Acc a, T v) {
          if constexpr (std::is_floating_point_v<T>)
            return a + v;
          else
            return a + static_cast<uint64_t>(static_cast<int64_t>(v));
        },
        [](Acc a) {
          if constexpr (std::is_floating_point_v<T>)
            return static_cast<T>(a);
          else // modular narrowing, well defined since C++20
            return static_cast<T>(static_cast<int64_t>(a));
        },
        addRow);
    return Status::ok();
  });
}

Status reduceMeanKernel(KernelContext &ctx) {
  constexpr std::string_view op = "graph.reduce_mean";
  ReducePlan plan;
  if (Status s = planReduce(op, ctx, plan); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  // torch.mean: sum / count, so an empty group gives 0 / 0 = NaN. The
  // quotient is taken in double and rounded once.
  double count = static_cast<double>(plan.reduceCount);
  return dispatchFloat(x.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    reduce<T>(
        plan, x.as<T>(), ctx.outputs[0].as<T>(), 0.0,
        [](double a, T v) { return a + v; },
        [count](double a) { return static_cast<T>(a / count); });
    return Status::ok();
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
    T init = std::numeric_limits<T>::has_infinity
                 ? -std::numeric_limits<T>::infinity()
                 : std::numeric_limits<T>::lowest();
    reduce<T>(
        plan, x.as<T>(), ctx.outputs[0].as<T>(), init,
        [](T a, T v) {
          // A NaN operand wins and, once taken, stays (NaN > v is false).
          if constexpr (std::is_floating_point_v<T>)
            return v > a || v != v ? v : a;
          else
            return v > a ? v : a;
        },
        [](T a) { return a; });
    return Status::ok();
  });
}

} // namespace

void registerReductionKernels(KernelRegistry &registry) {
  registry.add("graph.reduce_sum", reduceSumKernel);
  registry.add("graph.reduce_mean", reduceMeanKernel);
  registry.add("graph.reduce_max", reduceMaxKernel);
}

} // namespace strata::runtime::cpu
