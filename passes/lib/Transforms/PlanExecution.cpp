//===- PlanExecution.cpp - What the runtime would otherwise infer --------===//
//
// strata-plan-execution: marks the instructions --inject-delay may delay,
// gives every random op its RNG stream and seed slot, and marks the
// products TF32 computes exactly. Codegen writes these into the artifact;
// the runtime reads them and matches no op names.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ScheduleAnalysis.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_PLANEXECUTIONPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// Collectives, moves and optimizer updates: what a missing event would
/// race with.
bool isDelayable(Operation *op) {
  return isa<sched::SchedDialect>(op->getDialect()) ||
         isa<graph::AdamWUpdateOp, graph::SGDUpdateOp>(op);
}

/// Dropout, or attention with dropout.
bool drawsRandomNumbers(Operation *op) {
  for (StringRef name : {"ratio", "dropout_ratio"})
    if (auto ratio = op->getAttrOfType<FloatAttr>(name))
      if (ratio.getValueAsDouble() > 0)
        return true;
  return false;
}

/// The narrow type a value holds when graph.round_to made it.
std::optional<graph::NarrowFloat> roundedTo(Value v) {
  if (auto round = v.getDefiningOp<graph::RoundToOp>())
    return round.getDtype();
  return std::nullopt;
}

struct PlanExecutionPass
    : public strata::impl::PlanExecutionPassBase<PlanExecutionPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Builder b(func.getContext());
      int64_t instruction = 0, seedSlot = 0;
      for (Operation &op : func.getBody().front()) {
        if (!schedule::isInstruction(&op))
          continue;
        int64_t index = instruction++;
        if (isDelayable(&op))
          op.setAttr(sched::SchedDialect::kDelayableAttrName, b.getUnitAttr());
        if (drawsRandomNumbers(&op)) {
          // A forward op and its gradient share the stream autodiff gave
          // them (tagged by the top bit, so it never meets an index).
          uint64_t stream = uint64_t(index);
          if (auto shared = op.getAttrOfType<IntegerAttr>("rng_stream"))
            stream = uint64_t(shared.getInt()) | (uint64_t(1) << 63);
          op.setAttr(sched::SchedDialect::kRngStreamAttrName,
                     b.getI64IntegerAttr(int64_t(stream)));
          op.setAttr(sched::SchedDialect::kSeedSlotAttrName,
                     b.getI64IntegerAttr(seedSlot++));
        }
        if (isa<graph::LinearOp, graph::MatmulOp>(op)) {
          std::optional<graph::NarrowFloat> a = roundedTo(op.getOperand(0));
          std::optional<graph::NarrowFloat> c = roundedTo(op.getOperand(1));
          if (a && c) {
            Type type = *a == graph::NarrowFloat::BF16 &&
                                *c == graph::NarrowFloat::BF16
                            ? Type(b.getBF16Type())
                            : Type(b.getF16Type());
            op.setAttr(sched::SchedDialect::kExactTf32AttrName,
                       TypeAttr::get(type));
          }
        }
      }
    }
  }
};

} // namespace
