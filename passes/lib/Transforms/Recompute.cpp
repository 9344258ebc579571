//===- Recompute.cpp - Forward values made again in backward ---------------===//
//
// strata-recompute: instead of keeping a forward value backward reads, make
// it again right before backward first reads it: every candidate
// (mode=always), or largest first while the step does not fit a device
// budget (mode=auto, after strata-offload-state has moved what it can).
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ArenaPlanner.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace strata {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct RecomputePass : public strata::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == Recompute::None) {
      module.emitError("strata-recompute: mode must be auto or always, got "
                       "none");
      return signalPassFailure();
    }
    if (failed(memory::checkAlignment(module, alignment, getArgument())))
      return signalPassFailure();
    if (mode == Recompute::Always) {
      if (recomputeActivations(module, INT64_MAX) > 0)
        dropMemoryPlans(module);
      return;
    }
    int64_t budget = int64_t(gpuMemory);
    if (budget <= 0)
      return;
    int64_t align = int64_t(alignment);
    auto devicePeak = [&] {
      memory::PersistentState persistent =
          memory::collectPersistentState(module, align);
      return persistent.tierBytes(sched::Tier::Device, align) +
             persistent.constantBytes + memory::largestArena(module, align);
    };
    for (int64_t peak = devicePeak(); peak > budget; peak = devicePeak()) {
      if (recomputeActivations(module, peak - budget) == 0)
        break;
      dropMemoryPlans(module);
    }
  }

  static void dropMemoryPlans(ModuleOp module) {
    for (auto func : module.getOps<func::FuncOp>())
      memory::dropMemoryPlan(func);
  }

  /// Whether `op` can run again in backward to the same bits: pure, one
  /// result, no randomness, not a move or a collective.
  static bool isRecomputable(Operation *op) {
    // A fused body is the op's own elementwise arithmetic: pure.
    if (op->getNumResults() != 1 ||
        (op->getNumRegions() != 0 && !isa<graph::FusedElementwiseOp>(op)) ||
        !isMemoryEffectFree(op) || isa<graph::ConstantOp>(op) ||
        op->getDialect()->getNamespace() != "graph")
      return false;
    if (isa<graph::DropoutOp>(op))
      return false;
    if (auto attention = dyn_cast<graph::AttentionOp>(op))
      if (auto ratio = attention->getAttrOfType<FloatAttr>("dropout_ratio");
          ratio && ratio.getValueAsDouble() > 0)
        return false;
    return true;
  }

  /// Activation recomputation in @micro_step: a forward value that backward
  /// reads, made by a recomputable op whose operands are still live when
  /// backward first reads it (a parameter, or a value backward reads
  /// later), is made again right before that read instead of being kept
  /// from forward. Largest first, until `want` bytes are saved (INT64_MAX:
  /// every candidate). Returns the bytes saved.
  int64_t recomputeActivations(ModuleOp module, int64_t want) {
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step)
      return 0;
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Operation *loss = ret.getNumOperands() ? ret.getOperand(0).getDefiningOp()
                                           : nullptr;
    if (!loss)
      return 0;
    auto isBackward = [&](Operation *user) {
      return user != ret && loss->isBeforeInBlock(user);
    };
    // The earliest backward reader of `op`'s result, when every operand of
    // `op` is still there at that point (null otherwise).
    auto recomputePoint = [&](Operation *op) -> Operation * {
      Operation *first = nullptr;
      for (Operation *user : op->getResult(0).getUsers())
        if (isBackward(user) && (!first || user->isBeforeInBlock(first)))
          first = user;
      if (!first)
        return nullptr;
      for (Value operand : op->getOperands()) {
        if (isa<BlockArgument>(operand) ||
            isa_and_nonnull<graph::ConstantOp>(operand.getDefiningOp()))
          continue;
        if (!llvm::any_of(operand.getUsers(), [&](Operation *user) {
              return user == first || first->isBeforeInBlock(user);
            }))
          return nullptr;
      }
      return first;
    };
    std::vector<std::pair<Operation *, int64_t>> candidates;
    for (Operation &op : body) {
      if (&op == loss || loss->isBeforeInBlock(&op))
        break;
      if (isRecomputable(&op) && !op.hasAttr(sched::SchedDialect::kRecomputedAttrName) &&
          recomputePoint(&op))
        candidates.push_back(
            {&op, memory::storageBytes(op.getResult(0).getType())});
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const auto &a, const auto &b) {
                       return a.second > b.second;
                     });
    int64_t saved = 0;
    OpBuilder b(module.getContext());
    for (auto [op, bytes] : candidates) {
      if (saved >= want)
        break;
      // Looked up again: earlier clones may read this value sooner.
      Operation *point = recomputePoint(op);
      if (!point)
        continue;
      b.setInsertionPoint(point);
      Operation *clone = b.clone(*op);
      clone->setAttr(sched::SchedDialect::kRecomputedAttrName, b.getUnitAttr());
      op->getResult(0).replaceUsesWithIf(clone->getResult(0), [&](OpOperand &use) {
        return use.getOwner() != clone && isBackward(use.getOwner());
      });
      saved += bytes;
    }
    return saved;
  }

};

} // namespace
