//===- OffloadActivations.cpp - Saved activations kept on the host --------===//
//
// strata-offload-activations: every forward value that backward reads (a
// "saved activation") of at least `min-bytes` is copied to the host tier
// right after the op that makes it and brought back right before backward
// first reads it, so its device bytes are free in between. strata-schedule
// puts the copies on the d2h / h2d streams and prefetches the reloads;
// strata-plan-memory places the host copies in a host activation arena.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ArenaPlanner.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

#include <functional>

namespace strata {
#define GEN_PASS_DEF_OFFLOADACTIVATIONSPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct OffloadActivationsPass
    : public strata::impl::OffloadActivationsPassBase<OffloadActivationsPass> {
  using OffloadActivationsPassBase::OffloadActivationsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(memory::checkAlignment(module, alignment, getArgument())))
      return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        offloadActivations(func);
  }

  /// Which ops of `func` are backward: in a pipelined stage program those
  /// marked `sched.backward` (strata-autodiff marks them, the stage
  /// programs keep them); in @micro_step those after the loss, as
  /// strata-recompute counts them. Null for a function without backward.
  static std::function<bool(Operation *)> backwardOps(func::FuncOp func) {
    Block &body = func.getBody().front();
    bool marked = llvm::any_of(body, [](Operation &op) {
      return op.hasAttr(sched::SchedDialect::kBackwardAttrName);
    });
    if (marked)
      return [](Operation *op) {
        return op->hasAttr(sched::SchedDialect::kBackwardAttrName);
      };
    if (func.getSymName() != "micro_step")
      return nullptr;
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Operation *loss =
        ret.getNumOperands() ? ret.getOperand(0).getDefiningOp() : nullptr;
    if (!loss)
      return nullptr;
    return [loss](Operation *op) {
      return !op->hasTrait<OpTrait::IsTerminator>() &&
             loss->isBeforeInBlock(op);
    };
  }

  /// Values that are no activation to move: their bytes are a state's, a
  /// constant's, or another move's; or a collective made them (a gathered
  /// parameter is gathered again in backward rather than kept).
  static bool isMovable(Operation *op) {
    return !isa<graph::ConstantOp, sched::ReloadOp, sched::OffloadOp,
                sched::AllGatherOp, sched::ReduceScatterOp,
                sched::AllReduceOp, sched::LocalShardOp>(op);
  }

  void offloadActivations(func::FuncOp func) {
    std::function<bool(Operation *)> isBackward = backwardOps(func);
    if (!isBackward)
      return;
    Block &body = func.getBody().front();
    DenseMap<Operation *, int64_t> position;
    int64_t n = 0;
    for (Operation &op : body)
      position[&op] = n++;
    llvm::DenseMap<Value, StringRef> inState =
        graph::findInPlaceStateUpdates(func);

    struct Saved {
      OpResult value;
      Operation *firstBackward;
    };
    std::vector<Saved> saved;
    for (Operation &op : body) {
      if (isBackward(&op) || !isMovable(&op) ||
          op.hasTrait<OpTrait::IsTerminator>())
        continue;
      for (OpResult result : op.getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type || !type.hasStaticShape() || inState.count(result) ||
            memory::storageBytes(type) < int64_t(minBytes))
          continue;
        int64_t lastForward = position[&op];
        Operation *firstBackward = nullptr;
        bool returned = false;
        for (Operation *user : result.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (!top)
            continue;
          if (top->hasTrait<OpTrait::IsTerminator>())
            returned = true;
          else if (!isBackward(top))
            lastForward = std::max(lastForward, position[top]);
          else if (!firstBackward || top->isBeforeInBlock(firstBackward))
            firstBackward = top;
        }
        // Moving pays only with ops between the forward and backward reads.
        if (returned || !firstBackward ||
            position[firstBackward] <= lastForward + 1)
          continue;
        saved.push_back({result, firstBackward});
      }
    }
    if (saved.empty())
      return;

    memory::ArenaPlan before = memory::planArena(func, int64_t(alignment));
    int64_t bytes = 0, atPeak = 0;
    OpBuilder b(func.getContext());
    auto stageOf = [](Operation *op) {
      return op->getAttr(sched::SchedDialect::kStageAttrName);
    };
    for (auto [value, firstBackward] : saved) {
      Operation *def = value.getOwner();
      Location loc = value.getLoc();
      // Live (its op to its last reader) where the lower bound is reached.
      int64_t last = position[def];
      for (Operation *user : value.getUsers())
        if (Operation *top = body.findAncestorOpInBlock(*user))
          last = std::max(last, position[top]);
      if (position[def] <= before.peakPosition &&
          before.peakPosition <= last)
        atPeak += memory::storageBytes(value.getType());
      b.setInsertionPointAfter(def);
      auto offload = b.create<sched::OffloadOp>(loc, value.getType(),
                                                sched::Tier::Host, value,
                                                /*activation=*/true);
      // The reload runs where backward needs the value: its location (and
      // a stage program's action mark there) is that reader's.
      b.setInsertionPoint(firstBackward);
      auto reload = b.create<sched::ReloadOp>(firstBackward->getLoc(),
                                              value.getType(),
                                              sched::Tier::Host,
                                              offload.getResult(),
                                              /*activation=*/true);
      if (Attribute stage = stageOf(def))
        offload->setAttr(sched::SchedDialect::kStageAttrName, stage);
      if (Attribute stage = stageOf(firstBackward))
        reload->setAttr(sched::SchedDialect::kStageAttrName, stage);
      if (firstBackward->hasAttr(sched::SchedDialect::kBackwardAttrName))
        reload->setAttr(sched::SchedDialect::kBackwardAttrName,
                        b.getUnitAttr());
      value.replaceUsesWithIf(reload.getResult(), [&](OpOperand &use) {
        Operation *top = body.findAncestorOpInBlock(*use.getOwner());
        return top && top != offload && isBackward(top);
      });
      bytes += memory::storageBytes(value.getType());
    }
    func->setAttr(sched::SchedDialect::kOffloadedAttrName,
                  sched::OffloadedAttr::get(
                      func.getContext(), int64_t(saved.size()), bytes,
                      before.arenaBytes, before.liveBytes, atPeak));
    memory::dropMemoryPlan(func);
  }
};

} // namespace
