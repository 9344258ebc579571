//===- PlanMemory.cpp - Lifetime-based placement of activations -----------===//
//
// strata-plan-memory: every activation of every program gets an offset in
// one arena, so the runtime allocates the arena once and nothing after.
// Lifetimes are logical step ids (op positions); placement is greedy by
// size with best-fit gaps (the TFLite/IREE "greedy by size" heuristic),
// which lands within a few percent of the lower bound (the most bytes live
// at once) on the models here.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace strata {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// Bytes of a tensor as the runtime stores it (i1 as one byte).
int64_t storageBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  Type element = t.getElementType();
  int64_t width =
      element.isInteger(1) ? 1 : (element.getIntOrFloatBitWidth() + 7) / 8;
  return t.getNumElements() * width;
}

struct Interval {
  Value value;
  int64_t first, last; // op positions, inclusive
  int64_t bytes;       // rounded up to the alignment
  int64_t rawBytes;
  int64_t offset = -1;
};

struct FunctionPlan {
  int64_t arenaBytes = 0, liveBytes = 0;
};

struct PlanMemoryPass
    : public strata::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      module.emitError("strata-plan-memory: alignment must be a power of "
                       "two, got ")
          << uint64_t(alignment);
      return signalPassFailure();
    }
    Builder b(module.getContext());
    int64_t arena = 0, live = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FunctionPlan plan = planFunction(func);
      func->setAttr("memory.arena_bytes", b.getI64IntegerAttr(plan.arenaBytes));
      func->setAttr("memory.live_bytes", b.getI64IntegerAttr(plan.liveBytes));
      arena = std::max(arena, plan.arenaBytes);
      live = std::max(live, plan.liveBytes);
    }
    module->setAttr("memory.arena_bytes", b.getI64IntegerAttr(arena));
    module->setAttr("memory.live_bytes", b.getI64IntegerAttr(live));
    module->setAttr("memory.page_size",
                    b.getI64IntegerAttr(int64_t(pageSize)));
    module->setAttr("memory.alignment",
                    b.getI64IntegerAttr(int64_t(alignment)));
  }

  FunctionPlan planFunction(func::FuncOp func) {
    Block &body = func.getBody().front();
    llvm::DenseMap<Value, llvm::StringRef> inState =
        graph::findInPlaceStateUpdates(func);
    DenseMap<Operation *, int64_t> position;
    int64_t n = 0;
    for (Operation &op : body)
      position[&op] = n++;

    std::vector<Interval> intervals;
    DenseMap<Value, size_t> index;
    for (Operation &op : body) {
      if (isa<graph::ConstantOp>(op) || op.hasTrait<OpTrait::IsTerminator>())
        continue;
      for (Value result : op.getResults()) {
        if (inState.count(result))
          continue;
        int64_t first = position[&op], last = first;
        for (Operation *user : result.getUsers())
          last = std::max(last, position.lookup(user));
        int64_t raw = storageBytes(result.getType());
        int64_t bytes = (std::max<int64_t>(raw, 1) + int64_t(alignment) - 1) /
                        int64_t(alignment) * int64_t(alignment);
        index[result] = intervals.size();
        intervals.push_back({result, first, last, bytes, raw});
      }
    }

    FunctionPlan plan;
    // The lower bound: the most raw bytes live at one position.
    std::vector<int64_t> delta(n + 1, 0);
    for (const Interval &iv : intervals) {
      delta[iv.first] += iv.rawBytes;
      delta[iv.last + 1] -= iv.rawBytes;
    }
    int64_t running = 0;
    for (int64_t d : delta)
      plan.liveBytes = std::max(plan.liveBytes, running += d);

    // Greedy by size, best fit among the gaps left by overlapping tensors.
    std::vector<size_t> order(intervals.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) {
      if (intervals[a].bytes != intervals[c].bytes)
        return intervals[a].bytes > intervals[c].bytes;
      return intervals[a].first < intervals[c].first;
    });
    std::vector<size_t> placed;
    std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end)
    for (size_t i : order) {
      Interval &iv = intervals[i];
      busy.clear();
      for (size_t j : placed) {
        const Interval &other = intervals[j];
        if (other.first <= iv.last && iv.first <= other.last)
          busy.push_back({other.offset, other.offset + other.bytes});
      }
      std::sort(busy.begin(), busy.end());
      int64_t best = -1, bestGap = INT64_MAX, start = 0;
      for (auto [offset, end] : busy) {
        int64_t gap = offset - start;
        if (gap >= iv.bytes && gap < bestGap) {
          best = start;
          bestGap = gap;
        }
        start = std::max(start, end);
      }
      iv.offset = best >= 0 ? best : start;
      plan.arenaBytes = std::max(plan.arenaBytes, iv.offset + iv.bytes);
      placed.push_back(i);
    }

    // One attribute per op: its results' offsets (-1: in state storage).
    Builder b(func.getContext());
    for (Operation &op : body) {
      if (isa<graph::ConstantOp>(op) || op.hasTrait<OpTrait::IsTerminator>() ||
          op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value result : op.getResults()) {
        auto it = index.find(result);
        offsets.push_back(it == index.end() ? -1
                                            : intervals[it->second].offset);
      }
      op.setAttr("memory.offsets", b.getDenseI64ArrayAttr(offsets));
    }
    return plan;
  }
};

} // namespace
