//===- PlanMemory.cpp - Lifetime-based placement of activations -----------===//
//
// strata-plan-memory: every activation of every program gets a slot in one
// arena, so the runtime allocates the arena once and nothing after.
// Lifetimes are logical step ids (op positions); placement is greedy by
// size with best-fit gaps (the TFLite/IREE "greedy by size" heuristic),
// which lands within a few percent of the lower bound (the most bytes live
// at once) on the models here. Over a device budget it fails, saying how
// many bytes do not fit: strata-offload-state and strata-recompute, before
// it, are what make a step fit.
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
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct FunctionPlan {
  int64_t arenaBytes = 0, liveBytes = 0, hostArenaBytes = 0;
};

struct PlanMemoryPass
    : public strata::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  int64_t align(int64_t bytes) const {
    return memory::alignBytes(bytes, int64_t(alignment));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(memory::checkAlignment(module, alignment, getArgument())))
      return signalPassFailure();
    memory::PersistentState persistent =
        memory::collectPersistentState(module, int64_t(alignment));
    int64_t constants = persistent.constantBytes;
    using sched::Tier;
    auto tierBytes = [&](Tier tier) {
      return persistent.tierBytes(tier, int64_t(alignment));
    };
    int64_t arena = 0, live = 0, hostArena = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FunctionPlan plan = planFunction(func);
      func->setAttr(sched::SchedDialect::kArenaAttrName,
                    sched::ArenaAttr::get(func.getContext(), plan.arenaBytes,
                                          plan.liveBytes, plan.hostArenaBytes));
      arena = std::max(arena, plan.arenaBytes);
      hostArena = std::max(hostArena, plan.hostArenaBytes);
      live = std::max(live, plan.liveBytes);
    }
    int64_t devicePeak = tierBytes(Tier::Device) + constants + arena;
    int64_t budget = int64_t(gpuMemory);
    if (budget > 0 && devicePeak > budget) {
      int64_t state = tierBytes(Tier::Device);
      module.emitError("strata-plan-memory: the step needs ")
          << devicePeak << " bytes of device memory but the budget is "
          << budget << ": " << devicePeak - budget
          << " bytes do not fit with every optimizer state and parameter "
             "the host"
          << (ssdMemory ? " and SSD tiers" : " tier")
          << " can take moved off the device (left there: state " << state
          << " bytes, activations " << arena << ", constants " << constants
          << "); raise --gpu-memory, "
          << (recompute == Recompute::None ? "recompute activations (--recompute "
                                    "auto), "
                                  : "")
          << (offloadActivations ? "" : "offload activations to the host "
                                        "(--offload-activations), ")
          << "give the host tier room (--host-memory) or an SSD tier "
             "(--ssd-memory), shard over more ranks (--partition-group), "
             "or use a smaller --batch";
      return signalPassFailure();
    }
    // Offloaded activations share the host tier with offloaded state.
    int64_t hostBytes = tierBytes(Tier::Host) + hostArena;
    if (hostArena > 0 && hostMemory > 0 && hostBytes > int64_t(hostMemory)) {
      module.emitError("strata-plan-memory: the host tier needs ")
          << hostBytes << " bytes (state " << tierBytes(Tier::Host)
          << ", offloaded activations " << hostArena
          << ") but --host-memory is " << int64_t(hostMemory)
          << "; raise --host-memory or leave out --offload-activations";
      return signalPassFailure();
    }
    Builder b(module.getContext());
    module->setAttr(sched::SchedDialect::kMemoryPlanAttrName,
                    sched::MemoryPlanAttr::get(
                        b.getContext(), arena, live, int64_t(pageSize),
                        int64_t(alignment), devicePeak, hostBytes,
                        tierBytes(Tier::Ssd),
                        std::max<int64_t>(budget, 0), hostArena));
  }

  FunctionPlan planFunction(func::FuncOp func) {
    memory::ArenaPlan arena = memory::planArena(func, int64_t(alignment));
    FunctionPlan plan{arena.arenaBytes, arena.liveBytes, arena.hostArenaBytes};
    Block &body = func.getBody().front();
    // One slot per result (unit: computed into a state's own storage).
    Builder b(func.getContext());
    for (Operation &op : body) {
      if (isa<graph::ConstantOp>(op) || op.hasTrait<OpTrait::IsTerminator>() ||
          op.getNumResults() == 0)
        continue;
      SmallVector<Attribute> slots;
      for (Value result : op.getResults()) {
        auto it = arena.offsets.find(result);
        if (it == arena.offsets.end())
          slots.push_back(b.getUnitAttr());
        else
          slots.push_back(sched::SlotAttr::get(
              b.getContext(), it->second,
              align(memory::storageBytes(result.getType()))));
      }
      op.setAttr(sched::SchedDialect::kSlotsAttrName, b.getArrayAttr(slots));
    }
    return plan;
  }
};

} // namespace
