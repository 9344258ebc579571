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

#include "ArenaPlanner.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>

namespace strata {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct FunctionPlan {
  int64_t arenaBytes = 0, liveBytes = 0;
};

struct PlanMemoryPass
    : public strata::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  int64_t align(int64_t bytes) const {
    return memory::alignBytes(bytes, int64_t(alignment));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      module.emitError("strata-plan-memory: alignment must be a power of "
                       "two, got ")
          << uint64_t(alignment);
      return signalPassFailure();
    }
    // The state, in first-seen order, and the constants.
    memory::PersistentState persistent =
        memory::collectPersistentState(module, int64_t(alignment));
    std::vector<memory::PersistentTensor> &states = persistent.tensors;
    const llvm::StringMap<size_t> &stateIndex = persistent.index;
    int64_t constants = persistent.constantBytes;

    int64_t arena = 0, live = 0;
    auto planAll = [&] {
      arena = live = 0;
      for (auto func : module.getOps<func::FuncOp>()) {
        if (func.isExternal())
          continue;
        FunctionPlan plan = planFunction(func);
        Builder b(func.getContext());
        func->setAttr(sched::SchedDialect::kArenaAttrName,
                      sched::ArenaAttr::get(b.getContext(), plan.arenaBytes,
                                            plan.liveBytes));
        arena = std::max(arena, plan.arenaBytes);
        live = std::max(live, plan.liveBytes);
      }
    };
    using sched::Tier;
    auto tierBytes = [&](Tier tier) {
      return persistent.tierBytes(tier, int64_t(alignment));
    };
    auto devicePeak = [&] {
      return tierBytes(Tier::Device) + constants + arena;
    };

    if (recompute != "none" && recompute != "auto" && recompute != "always") {
      module.emitError("strata-plan-memory: recompute must be none, auto or "
                       "always, got '")
          << std::string(recompute) << "'";
      return signalPassFailure();
    }
    if (recompute == "always")
      recomputeActivations(module, INT64_MAX);
    planAll();
    int64_t budget = int64_t(gpuMemory);
    if (budget > 0 && devicePeak() > budget) {
      // Move state off the device, largest first, until the plan fits:
      // optimizer states to the host, then to SSD, then parameters to the
      // host. Each round re-plans, as the moves' device copies take arena
      // bytes of their own.
      int64_t host = tierBytes(Tier::Host), ssd = tierBytes(Tier::Ssd);
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
      bool moved = true;
      while (devicePeak() > budget && moved) {
        moved = false;
        int64_t excess = devicePeak() - budget;
        auto place = [&](graph::Role role, Tier tier, int64_t &used,
                         uint64_t limit, bool allowed) {
          if (!allowed)
            return;
          for (size_t i : candidates(role)) {
            if (excess <= 0)
              return;
            int64_t bytes = align(states[i].bytes);
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
            if (!func.isExternal())
              insertMoves(func, states, stateIndex);
          planAll();
        }
        // Last, activations: recompute in backward what forward made.
        if (!moved && recompute == "auto" && devicePeak() > budget &&
            recomputeActivations(module, devicePeak() - budget) > 0) {
          moved = true;
          planAll();
        }
      }
      if (devicePeak() > budget) {
        int64_t persistent = tierBytes(Tier::Device);
        module.emitError("strata-plan-memory: the step needs ")
            << devicePeak() << " bytes of device memory but the budget is "
            << budget << ": " << devicePeak() - budget
            << " bytes do not fit with every optimizer state and parameter "
               "the host"
            << (ssdMemory ? " and SSD tiers" : " tier")
            << " can take moved off the device (left there: state "
            << persistent << " bytes, activations " << arena
            << ", constants " << constants
            << "); raise --gpu-memory, "
            << (recompute == "none" ? "recompute activations (--recompute "
                                      "auto), "
                                    : "")
            << "give the host tier room (--host-memory) or an SSD tier "
               "(--ssd-memory), shard over more ranks (--partition-group), "
               "or use a smaller --batch";
        return signalPassFailure();
      }
    }

    Builder b(module.getContext());
    module->setAttr(sched::SchedDialect::kMemoryPlanAttrName,
                    sched::MemoryPlanAttr::get(
                        b.getContext(), arena, live, int64_t(pageSize),
                        int64_t(alignment), devicePeak(), tierBytes(Tier::Host),
                        tierBytes(Tier::Ssd), std::max<int64_t>(budget, 0)));
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

  /// Gives every argument of a state moved off the device its tier, a
  /// reload before each op that reads it and an offload of the value the
  /// function returns for it (once; later rounds see the attribute).
  void insertMoves(func::FuncOp func,
                   const std::vector<memory::PersistentTensor> &states,
                   const llvm::StringMap<size_t> &stateIndex) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(func.getContext());
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
      func.setArgAttr(arg.getArgNumber(), sched::SchedDialect::kTierAttrName,
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
      for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
        auto resultName =
            func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
        Value value = ret.getOperand(i);
        if (!resultName || resultName != name || value == arg)
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

  FunctionPlan planFunction(func::FuncOp func) {
    memory::ArenaPlan arena = memory::planArena(func, int64_t(alignment));
    FunctionPlan plan{arena.arenaBytes, arena.liveBytes};
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
