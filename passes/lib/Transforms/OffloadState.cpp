//===- OffloadState.cpp - Persistent state moved off the device -----------===//
//
// strata-offload-state: over a device budget, moves persistent state to
// slower tiers, largest first, until the step fits or nothing more can
// move: optimizer states to the host, then to SSD, then parameters to the
// host. Each round re-measures the arena, as the moves' device copies take
// bytes of their own.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ArenaPlanner.h"
#include "ArgAttrs.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace strata {
#define GEN_PASS_DEF_OFFLOADSTATEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct OffloadStatePass
    : public strata::impl::OffloadStatePassBase<OffloadStatePass> {
  using OffloadStatePassBase::OffloadStatePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(memory::checkAlignment(module, alignment, getArgument())))
      return signalPassFailure();
    int64_t budget = int64_t(gpuMemory);
    if (budget <= 0)
      return;
    int64_t align = int64_t(alignment);
    memory::PersistentState persistent =
        memory::collectPersistentState(module, align);
    std::vector<memory::PersistentTensor> &states = persistent.tensors;
    using sched::Tier;
    auto devicePeak = [&] {
      return persistent.tierBytes(Tier::Device, align) +
             persistent.constantBytes + memory::largestArena(module, align);
    };
    int64_t host = persistent.tierBytes(Tier::Host, align),
            ssd = persistent.tierBytes(Tier::Ssd, align);
    auto candidates = [&](graph::Role role) {
      std::vector<size_t> c;
      for (size_t i = 0; i < states.size(); ++i)
        if (states[i].role == role && states[i].tier == Tier::Device &&
            !graph::isPipelineScalar(states[i].name))
          c.push_back(i);
      std::stable_sort(c.begin(), c.end(), [&](size_t a, size_t b) {
        return states[a].bytes > states[b].bytes;
      });
      return c;
    };
    int64_t peak = devicePeak();
    bool moved = true;
    while (peak > budget && moved) {
      moved = false;
      int64_t excess = peak - budget;
      auto place = [&](graph::Role role, Tier tier, int64_t &used,
                       uint64_t limit, bool allowed) {
        if (!allowed)
          return;
        for (size_t i : candidates(role)) {
          if (excess <= 0)
            return;
          int64_t bytes = memory::alignBytes(states[i].bytes, align);
          if (limit && used + bytes > int64_t(limit))
            continue;
          states[i].tier = tier;
          used += bytes;
          excess -= bytes;
          moved = true;
        }
      };
      place(graph::Role::OptimizerState, Tier::Host, host, hostMemory, true);
      place(graph::Role::OptimizerState, Tier::Ssd, ssd, ssdMemory,
            ssdMemory > 0);
      place(graph::Role::Parameter, Tier::Host, host, hostMemory, true);
      if (moved) {
        for (auto func : module.getOps<func::FuncOp>())
          if (!func.isExternal()) {
            insertMoves(func, states, persistent.index);
            memory::dropMemoryPlan(func);
          }
        peak = devicePeak();
      }
    }
  }

  /// Gives every argument of a state moved off the device its tier, a
  /// reload before each op that reads it and an offload of the value the
  /// function returns for it (once; later rounds see the attribute).
  void insertMoves(func::FuncOp func,
                   const std::vector<memory::PersistentTensor> &states,
                   const llvm::StringMap<size_t> &stateIndex) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(func.getContext());
    ArgAttrBatch attrs(func);
    // The results by name (looked up per moved argument).
    llvm::StringMap<SmallVector<unsigned, 1>> resultsNamed;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (auto resultName =
              func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName))
        resultsNamed[resultName.getValue()].push_back(i);
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    graph::kNameAttrName);
      if (!name || func.getArgAttr(arg.getArgNumber(),
                                   sched::SchedDialect::kTierAttrName))
        continue;
      auto it = stateIndex.find(name.getValue());
      if (it == stateIndex.end() ||
          states[it->second].tier == sched::Tier::Device)
        continue;
      sched::Tier tier = states[it->second].tier;
      attrs.set(arg.getArgNumber(), sched::SchedDialect::kTierAttrName,
                sched::TierAttr::get(b.getContext(), tier));
      // One reload right before each reader.
      SmallVector<Operation *> readers;
      for (Operation *user : arg.getUsers())
        if (!isa<func::ReturnOp>(user) && !llvm::is_contained(readers, user))
          readers.push_back(user);
      for (Operation *reader : readers) {
        b.setInsertionPoint(reader);
        auto reload = b.create<sched::ReloadOp>(arg.getLoc(), arg.getType(),
                                                tier, arg);
        reader->replaceUsesOfWith(arg, reload.getResult());
      }
      // The new value goes back to its tier as soon as it exists.
      for (unsigned i : resultsNamed.lookup(name.getValue())) {
        Value value = ret.getOperand(i);
        if (value == arg)
          continue;
        if (Operation *producer = value.getDefiningOp())
          b.setInsertionPointAfter(producer);
        else
          b.setInsertionPoint(ret);
        auto offload = b.create<sched::OffloadOp>(value.getLoc(),
                                                  value.getType(), tier, value);
        ret.setOperand(i, offload.getResult());
      }
    }
  }

};

} // namespace
