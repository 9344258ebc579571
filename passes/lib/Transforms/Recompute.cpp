//===- Recompute.cpp - Forward values made again in backward ---------------===//
//
// strata-recompute: instead of keeping a forward value backward reads, make
// it again right before backward first reads it. Two granularities:
//  - one op whose operands are still there in backward (mode=always: every
//    candidate);
//  - one layer, as torch.utils.checkpoint does per block (mode=layers:
//    every layer but the one holding the loss): the layer's inputs are
//    kept and every forward op of it that backward needs is made again, in
//    order, right before the layer's backward first needs one of them.
// mode=auto takes both kinds of option, the fewest FLOPs per byte freed
// first, while the step does not fit a device budget (after
// strata-offload-state has moved what it can).
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ArenaPlanner.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"
#include "strata/Transforms/Layers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <map>

namespace strata {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// The pipeline stage `op` runs on, as strata-stage-programs places it:
/// its `sched.stage`, or (an op strata-partition added) the latest stage
/// of what it reads; -1 for none.
int64_t stageOf(Operation *op, DenseMap<Operation *, int64_t> &memo) {
  if (auto stage =
          op->getAttrOfType<IntegerAttr>(sched::SchedDialect::kStageAttrName))
    return stage.getInt();
  auto it = memo.find(op);
  if (it != memo.end())
    return it->second;
  memo[op] = -1; // a cycle cannot occur in a block; this ends one anyway
  int64_t stage = -1;
  for (Value operand : op->getOperands())
    if (Operation *def = operand.getDefiningOp())
      stage = std::max(stage, stageOf(def, memo));
  return memo[op] = stage;
}

/// Whether `a` and `b` run on the same pipeline stage (an op of no stage,
/// such as a parameter's fetch and its rearrangement, runs where it is
/// read). Before strata-stage-programs a clone runs in its original's
/// stage's backward: one whose reader is on another stage would send a
/// value against the backward's direction.
bool sameStage(Operation *a, Operation *b,
               DenseMap<Operation *, int64_t> &memo) {
  int64_t sa = stageOf(a, memo), sb = stageOf(b, memo);
  return sa == sb || sa < 0 || sb < 0;
}

/// Whether `op` can run again in backward to the same bits: pure, no
/// randomness, not a move or a collective; with one result unless
/// `multipleResults` (a layer's clones replace every result).
bool isRecomputable(Operation *op, bool multipleResults = false) {
  // A fused body is the op's own elementwise arithmetic: pure.
  if (op->getNumResults() == 0 ||
      (op->getNumResults() != 1 && !multipleResults) ||
      (op->getNumRegions() != 0 && !isa<graph::FusedElementwiseOp>(op)) ||
      isa<graph::ConstantOp, graph::DropoutOp>(op) ||
      op->getDialect()->getNamespace() != "graph")
    return false;
  // Attention is not Pure for its dropout: without it, it is.
  if (auto attention = dyn_cast<graph::AttentionOp>(op)) {
    auto ratio = attention->getAttrOfType<FloatAttr>("dropout_ratio");
    return !ratio || ratio.getValueAsDouble() == 0;
  }
  return isMemoryEffectFree(op);
}

/// A fetch: an all-gather or a reload, each result the fetched copy of the
/// operand at its index. A parameter reaches forward through a chain of
/// them (a ZeRO-3 gather; MiCS's inter- then intra-node gathers; a reload
/// from the host tier).
bool isFetch(Operation *op) {
  return isa<sched::AllGatherOp, sched::ReloadOp>(op) &&
         op->getNumOperands() == op->getNumResults();
}

/// The value a hop of a fetch chain reads to make `result`.
Value hopSource(OpResult result) {
  Operation *op = result.getOwner();
  return op->getOperand(isFetch(op) ? result.getResultNumber() : 0);
}

/// The hops that make `value`, a fetch's result, from a function argument,
/// first hop first: fetches, and the one-operand ops that rearrange what
/// they fetch (a narrowing cast of a shard before its gather). Empty when
/// `value` is not made so.
SmallVector<OpResult> fetchChain(Value value) {
  auto top = dyn_cast<OpResult>(value);
  if (!top || !isFetch(top.getOwner()))
    return {};
  SmallVector<OpResult> chain;
  while (auto result = dyn_cast<OpResult>(value)) {
    Operation *op = result.getOwner();
    if (!isFetch(op) && !(op->getNumOperands() == 1 && isRecomputable(op)))
      return {};
    chain.push_back(result);
    value = hopSource(result);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

/// What makes two fetch chains alike: the argument and each hop's op,
/// attributes and element type (`withArgument` false: the hops alone, what one
/// bucket of new fetches shares).
std::string fetchSignature(ArrayRef<OpResult> chain, bool withArgument) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (withArgument)
    os << cast<BlockArgument>(hopSource(chain.front())).getArgNumber();
  for (OpResult hop : chain)
    os << "|" << hop.getOwner()->getName()
       << hop.getOwner()->getAttrDictionary()
       << getElementTypeOrSelf(hop.getType());
  return text;
}

/// @micro_step's forward and backward: the ops up to the loss, and those
/// after it (the return aside).
struct StepParts {
  mutable func::FuncOp step;
  Operation *loss = nullptr;
  func::ReturnOp ret;
  bool isBackward(Operation *op) const {
    return op != ret && loss->isBeforeInBlock(op);
  }
  bool isForward(Operation *op) const {
    return op == loss || op->isBeforeInBlock(loss);
  }
};

std::optional<StepParts> stepParts(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>("micro_step");
  if (!step)
    return std::nullopt;
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  Operation *loss = ret.getNumOperands() ? ret.getOperand(0).getDefiningOp()
                                         : nullptr;
  if (!loss)
    return std::nullopt;
  return StepParts{step, loss, ret};
}

/// Whether `user` is a backward op that reads an activation: a backward
/// fetch reading a forward value (ZeRO-3 gathers the narrowing cast of a
/// shard forward made) reads a parameter's copy, made again with it.
bool isBackwardRead(const StepParts &parts, Operation *user) {
  return parts.isBackward(user) && !isFetch(user);
}

/// One layer's checkpoint, before it is made: the forward ops to make
/// again (in block order), where, and what that costs and frees.
struct LayerCheckpoint {
  std::string name;
  SmallVector<Operation *> ops;
  /// The fetched parameters the clones read: fetched again in backward.
  SmallVector<Value> fetched;
  /// The earliest backward reader of any of `ops`' results.
  Operation *point = nullptr;
  /// Bytes of the values backward reads that it no longer keeps.
  int64_t freedBytes = 0;
  /// Forward FLOPs made again.
  double flops = 0;
};

/// Each layer's checkpoint in @micro_step, the loss's layer (whose
/// backward starts at once) and layers already checkpointed aside.
///
/// Layers are the modules of the parameters' names (layerOf), numbered in
/// order of first use. A value's layer is the latest whose parameter it is
/// made from (-1: none, as a mask); a fetched parameter's is its own, even
/// when the fetch is a bucket of several layers. A layer keeps its inputs
/// (values of other layers), its outputs (what a later layer's forward
/// reads: that layer's inputs), and what cannot run again (dropout,
/// collectives, moves); the values backward reads from its other ops are
/// made again from those, and the parameters they read are fetched again.
SmallVector<LayerCheckpoint> layerCheckpoints(const StepParts &parts) {
  func::FuncOp step = parts.step;
  Block &body = step.getBody().front();
  llvm::StringMap<int64_t> number;
  SmallVector<std::string> names;
  DenseMap<Value, int64_t> layerOfValue;
  for (BlockArgument arg : step.getArguments()) {
    auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  graph::kNameAttrName);
    if (!name || graph::getArgumentRole(step, arg.getArgNumber()) !=
                     graph::Role::Parameter)
      continue;
    (void)number.try_emplace(layerOf(name.getValue()), -1);
  }
  // Numbered in order of first use.
  auto argumentLayer = [&](BlockArgument arg) -> int64_t {
    auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  graph::kNameAttrName);
    if (!name || graph::getArgumentRole(step, arg.getArgNumber()) !=
                     graph::Role::Parameter)
      return -1;
    auto it = number.find(layerOf(name.getValue()));
    if (it == number.end())
      return -1;
    if (it->second < 0) {
      it->second = int64_t(names.size());
      names.push_back(it->first().str());
    }
    return it->second;
  };
  auto layerOfOperand = [&](Value v) -> int64_t {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return argumentLayer(arg);
    auto it = layerOfValue.find(v);
    return it == layerOfValue.end() ? -1 : it->second;
  };
  // The forward ops whose results are in each layer (a fetch's may be in
  // several), in block order.
  std::map<int64_t, SmallVector<Operation *>> opsOfLayer;
  for (Operation &op : body) {
    if (!parts.isForward(&op))
      break;
    if (isFetch(&op)) {
      for (auto [operand, result] : llvm::zip(op.getOperands(), op.getResults()))
        layerOfValue[result] = layerOfOperand(operand);
      continue;
    }
    int64_t layer = -1;
    for (Value operand : op.getOperands())
      layer = std::max(layer, layerOfOperand(operand));
    for (Value result : op.getResults())
      layerOfValue[result] = layer;
    opsOfLayer[layer].push_back(&op);
  }
  int64_t lossLayer = layerOfValue.lookup(parts.loss->getResult(0));
  llvm::DenseSet<StringRef> done;
  if (auto checkpointed = step->getAttrOfType<ArrayAttr>(
          sched::SchedDialect::kCheckpointedAttrName))
    for (auto name : checkpointed.getAsValueRange<StringAttr>())
      done.insert(name);

  SmallVector<LayerCheckpoint> checkpoints;
  for (int64_t layer = 0; layer < lossLayer; ++layer) {
    if (done.contains(names[layer]))
      continue;
    auto inLayer = [&](Value v) {
      auto it = layerOfValue.find(v);
      return it != layerOfValue.end() && it->second == layer;
    };
    // An output: read by a forward op of another layer.
    auto isOutput = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation *user) {
        return parts.isForward(user) &&
               (user->getNumResults() == 0 || !inLayer(user->getResult(0)));
      });
    };
    // Whether the clones make `v` again (else they read it as it is).
    auto remade = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && inLayer(v) && !isOutput(v) && isRecomputable(def, true);
    };
    LayerCheckpoint checkpoint;
    checkpoint.name = names[layer];
    llvm::SetVector<Operation *> ops;
    llvm::SetVector<Value> fetched;
    SmallVector<Operation *> worklist;
    // Fetches are not remade: the layer's other ops are all its values.
    for (Operation *op : opsOfLayer[layer])
      for (Value r : op->getResults())
        if (remade(r) && llvm::any_of(r.getUsers(), [&](Operation *user) {
              return isBackwardRead(parts, user);
            })) {
          checkpoint.freedBytes += memory::storageBytes(r.getType());
          if (ops.insert(op))
            worklist.push_back(op);
        }
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      for (Value operand : op->getOperands()) {
        if (remade(operand)) {
          if (ops.insert(operand.getDefiningOp()))
            worklist.push_back(operand.getDefiningOp());
        } else if (!fetchChain(operand).empty()) {
          fetched.insert(operand);
        }
      }
    }
    if (ops.empty())
      continue;
    checkpoint.ops.assign(ops.begin(), ops.end());
    llvm::sort(checkpoint.ops, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    // In forward's order of fetching: the new buckets list their
    // parameters as forward's do.
    checkpoint.fetched.assign(fetched.begin(), fetched.end());
    llvm::sort(checkpoint.fetched, [](Value a, Value b) {
      Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
      return x == y ? cast<OpResult>(a).getResultNumber() <
                          cast<OpResult>(b).getResultNumber()
                    : x->isBeforeInBlock(y);
    });
    for (Operation *op : checkpoint.ops) {
      checkpoint.flops += forwardFlops(op);
      for (Operation *user : op->getUsers())
        if (isBackwardRead(parts, user) &&
            (!checkpoint.point || user->isBeforeInBlock(checkpoint.point)))
          checkpoint.point = user;
    }
    checkpoints.push_back(std::move(checkpoint));
  }
  return checkpoints;
}

/// Values for the clones to read instead of `fetched` (forward's fetched
/// parameters), placed before `point`: backward's own fetch of the same
/// parameter where it has one (the first after `point`, moved up to it,
/// else the last before it), else new fetches (gathers: one bucket per
/// kind of chain). Forward's fetched copies then die in forward, as
/// without the checkpoint.
IRMapping fetchAgain(const StepParts &parts, ArrayRef<Value> fetched,
                     Operation *point) {
  IRMapping mapping;
  Block &body = parts.step.getBody().front();
  // Backward's fetched values by signature, in block order.
  std::map<std::string, SmallVector<OpResult>> backward;
  for (Operation &op : body)
    if (parts.isBackward(&op) && isFetch(&op))
      for (OpResult r : op.getResults())
        if (SmallVector<OpResult> chain = fetchChain(r); !chain.empty())
          backward[fetchSignature(chain, true)].push_back(r);
  // Whether every hop of `r`'s chain can run before `point`: each reads
  // arguments, values made before it, or the hop before it.
  auto movable = [&](OpResult r) {
    llvm::SmallPtrSet<Operation *, 4> hops;
    for (OpResult hop : fetchChain(r)) {
      for (Value operand : hop.getOwner()->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && !hops.contains(def) && !def->isBeforeInBlock(point))
          return false;
      }
      hops.insert(hop.getOwner());
    }
    return true;
  };
  // Values no backward fetch gives: one per parameter and chain (forward
  // may fetch one twice), by the kind of chain making them.
  llvm::MapVector<std::string, SmallVector<Value>,
                  std::map<std::string, unsigned>>
      alike;
  for (Value v : fetched) {
    SmallVector<OpResult> chain = fetchChain(v);
    auto it = backward.find(fetchSignature(chain, true));
    OpResult chosen;
    if (it != backward.end()) {
      for (OpResult r : it->second)
        if (!r.getOwner()->isBeforeInBlock(point)) {
          chosen = r;
          break;
        }
      if (chosen && !movable(chosen))
        chosen = nullptr;
      if (!chosen)
        for (OpResult r : llvm::reverse(it->second))
          if (r.getOwner()->isBeforeInBlock(point)) {
            chosen = r;
            break;
          }
    }
    if (chosen) {
      for (OpResult hop : fetchChain(chosen))
        if (!hop.getOwner()->isBeforeInBlock(point))
          hop.getOwner()->moveBefore(point);
      mapping.map(v, chosen);
      continue;
    }
    alike[fetchSignature(chain, true)].push_back(v);
  }
  // Gathers share a bucket per kind of chain; a reload moves one tensor.
  llvm::MapVector<std::string, SmallVector<Value>,
                  std::map<std::string, unsigned>>
      buckets;
  for (auto &[signature, values] : alike) {
    SmallVector<OpResult> chain = fetchChain(values.front());
    bool reloads = llvm::any_of(chain, [](OpResult hop) {
      return isa<sched::ReloadOp>(hop.getOwner());
    });
    buckets[reloads ? signature : fetchSignature(chain, false)].push_back(
        values.front());
  }
  OpBuilder b(point);
  for (auto &[kind, values] : buckets) {
    // Hop by hop: one fetch for all of the bucket's values, a
    // rearrangement for each.
    SmallVector<SmallVector<OpResult>> chains;
    SmallVector<Value> current;
    for (Value v : values) {
      chains.push_back(fetchChain(v));
      current.push_back(hopSource(chains.back().front()));
    }
    for (size_t hop = 0; hop < chains.front().size(); ++hop) {
      Operation *like = chains.front()[hop].getOwner();
      if (!isFetch(like)) {
        for (auto [i, chain] : llvm::enumerate(chains)) {
          IRMapping operand;
          operand.map(hopSource(chain[hop]), current[i]);
          current[i] = b.clone(*chain[hop].getOwner(), operand)->getResult(0);
        }
        continue;
      }
      OperationState state(like->getLoc(), like->getName());
      state.addOperands(current);
      for (auto &chain : chains)
        state.addTypes(chain[hop].getType());
      state.addAttributes(like->getAttrs());
      Operation *op = b.create(state);
      current.assign(op->result_begin(), op->result_end());
    }
    for (auto [v, made] : llvm::zip(values, current))
      mapping.map(v, made);
  }
  for (auto &[signature, values] : alike)
    for (Value v : ArrayRef(values).drop_front())
      mapping.map(v, mapping.lookup(values.front()));
  return mapping;
}

/// Makes `checkpoint`'s ops again before its point, in order (a clone
/// reads earlier clones), and points backward's reads at the clones.
void applyCheckpoint(const StepParts &parts, LayerCheckpoint &checkpoint) {
  IRMapping mapping = fetchAgain(parts, checkpoint.fetched, checkpoint.point);
  OpBuilder b(checkpoint.point);
  for (Operation *op : checkpoint.ops) {
    Operation *clone = b.clone(*op, mapping);
    clone->setAttr(sched::SchedDialect::kRecomputedAttrName, b.getUnitAttr());
  }
  // Backward's reads from the point on (the clones and the fetches moved
  // up come before it).
  for (Operation *op : checkpoint.ops)
    for (Value r : op->getResults())
      r.replaceUsesWithIf(mapping.lookup(r), [&](OpOperand &use) {
        return isBackwardRead(parts, use.getOwner()) &&
               !use.getOwner()->isBeforeInBlock(checkpoint.point);
      });
  SmallVector<Attribute> names;
  if (auto done = parts.step->getAttrOfType<ArrayAttr>(
          sched::SchedDialect::kCheckpointedAttrName))
    names.assign(done.begin(), done.end());
  names.push_back(b.getStringAttr(checkpoint.name));
  parts.step->setAttr(sched::SchedDialect::kCheckpointedAttrName,
                      b.getArrayAttr(names));
}

struct RecomputePass : public strata::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == Recompute::None) {
      module.emitError("strata-recompute: mode must be auto, always or "
                       "layers, got none");
      return signalPassFailure();
    }
    if (failed(memory::checkAlignment(module, alignment, getArgument())))
      return signalPassFailure();
    // Before strata-stage-programs, which places an op in a stage's forward
    // or backward by `sched.backward`: what this pass makes runs in
    // backward, and is marked so.
    llvm::DenseSet<Operation *> existing;
    if (markBackward)
      if (auto step = module.lookupSymbol<func::FuncOp>("micro_step"))
        for (Operation &op : step.getBody().front())
          existing.insert(&op);
    auto marked = llvm::make_scope_exit([&] {
      if (!markBackward)
        return;
      if (auto step = module.lookupSymbol<func::FuncOp>("micro_step"))
        for (Operation &op : step.getBody().front())
          if (!existing.contains(&op))
            op.setAttr(sched::SchedDialect::kBackwardAttrName,
                       UnitAttr::get(module.getContext()));
    });
    if (mode == Recompute::Always) {
      if (recomputeActivations(module, INT64_MAX) > 0)
        dropMemoryPlans(module);
      return;
    }
    if (mode == Recompute::Layers) {
      std::optional<StepParts> parts = stepParts(module);
      if (!parts)
        return;
      // Each layer's clones read its own values and kept ones only, so
      // one layer's checkpoint leaves the others' as they were found.
      SmallVector<LayerCheckpoint> checkpoints = layerCheckpoints(*parts);
      // With layers-per-stage K, each stage's first K layers only (in
      // order: under 1F1B a stage's first layer keeps a micro-batch's
      // activations longest).
      DenseMap<Operation *, int64_t> memo;
      std::map<int64_t, int64_t> perStage;
      for (LayerCheckpoint &checkpoint : checkpoints) {
        if (markBackward && !llvm::all_of(checkpoint.ops, [&](Operation *op) {
              return sameStage(op, checkpoint.point, memo);
            }))
          continue;
        if (layersPerStage >= 0 &&
            perStage[stageOf(checkpoint.point, memo)]++ >= layersPerStage)
          continue;
        applyCheckpoint(*parts, checkpoint);
      }
      if (!checkpoints.empty())
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
    // Options one at a time until the bytes they free could cover the
    // excess (they may not all be live at the peak), then the plan again.
    for (int64_t peak = devicePeak(); peak > budget; peak = devicePeak()) {
      int64_t freed = 0;
      while (freed < peak - budget) {
        int64_t bytes = recomputeCheapest(module);
        if (bytes == 0)
          break;
        freed += bytes;
      }
      if (freed == 0)
        break;
      dropMemoryPlans(module);
    }
  }

  static void dropMemoryPlans(ModuleOp module) {
    for (auto func : module.getOps<func::FuncOp>())
      memory::dropMemoryPlan(func);
  }

  /// mode=auto's step: of every single op's recomputation and every
  /// layer's checkpoint, the one that makes the fewest forward FLOPs again
  /// per byte of saved activation it frees (ties: the most bytes, then the
  /// earliest). Returns the bytes it frees (0: there was none).
  int64_t recomputeCheapest(ModuleOp module) {
    std::optional<StepParts> parts = stepParts(module);
    if (!parts)
      return 0;
    SmallVector<LayerCheckpoint> layers = layerCheckpoints(*parts);
    LayerCheckpoint *bestLayer = nullptr;
    double bestPrice = 0;
    int64_t bestBytes = 0;
    auto better = [&](double flops, int64_t bytes) {
      if (bytes <= 0)
        return false;
      double price = flops / double(bytes);
      return !bestBytes || price < bestPrice ||
             (price == bestPrice && bytes > bestBytes);
    };
    for (LayerCheckpoint &layer : layers)
      if (better(layer.flops, layer.freedBytes)) {
        bestLayer = &layer;
        bestPrice = layer.flops / double(layer.freedBytes);
        bestBytes = layer.freedBytes;
      }
    Operation *bestOp = nullptr;
    for (auto [op, bytes] : singleOpCandidates(*parts))
      if (better(forwardFlops(op), bytes)) {
        bestOp = op;
        bestLayer = nullptr;
        bestPrice = forwardFlops(op) / double(bytes);
        bestBytes = bytes;
      }
    if (bestOp)
      return recomputeOp(*parts, bestOp) ? bestBytes : 0;
    if (!bestLayer)
      return 0;
    applyCheckpoint(*parts, *bestLayer);
    return bestBytes;
  }

  /// The earliest backward reader of `op`'s result, when every operand of
  /// `op` is still there at that point (null otherwise).
  static Operation *recomputePoint(const StepParts &parts, Operation *op) {
    Operation *first = nullptr;
    for (Operation *user : op->getResult(0).getUsers())
      if (parts.isBackward(user) && (!first || user->isBeforeInBlock(first)))
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
  }

  /// Forward ops backward could make again on their own (see
  /// recomputePoint), with their result's bytes, in block order.
  std::vector<std::pair<Operation *, int64_t>>
  singleOpCandidates(const StepParts &parts) {
    std::vector<std::pair<Operation *, int64_t>> candidates;
    DenseMap<Operation *, int64_t> memo;
    for (Operation &op : parts.step.getBody().front()) {
      if (!parts.isForward(&op) || &op == parts.loss)
        break;
      Operation *point = nullptr;
      if (isRecomputable(&op) &&
          !op.hasAttr(sched::SchedDialect::kRecomputedAttrName) &&
          (point = recomputePoint(parts, &op)) &&
          (!markBackward || sameStage(&op, point, memo)))
        candidates.push_back(
            {&op, memory::storageBytes(op.getResult(0).getType())});
    }
    return candidates;
  }

  /// Makes `op` again right before backward first reads it. Returns
  /// whether it could (an earlier clone may have moved that read).
  static bool recomputeOp(const StepParts &parts, Operation *op) {
    Operation *point = recomputePoint(parts, op);
    if (!point)
      return false;
    OpBuilder b(point);
    Operation *clone = b.clone(*op);
    clone->setAttr(sched::SchedDialect::kRecomputedAttrName, b.getUnitAttr());
    op->getResult(0).replaceUsesWithIf(
        clone->getResult(0), [&](OpOperand &use) {
          return use.getOwner() != clone && parts.isBackward(use.getOwner());
        });
    return true;
  }

  /// mode=always: every single-op candidate, largest first, until `want`
  /// bytes are saved (INT64_MAX: every one). Returns the bytes saved.
  int64_t recomputeActivations(ModuleOp module, int64_t want) {
    std::optional<StepParts> parts = stepParts(module);
    if (!parts)
      return 0;
    std::vector<std::pair<Operation *, int64_t>> candidates =
        singleOpCandidates(*parts);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const auto &a, const auto &b) {
                       return a.second > b.second;
                     });
    int64_t saved = 0;
    for (auto [op, bytes] : candidates) {
      if (saved >= want)
        break;
      if (recomputeOp(*parts, op))
        saved += bytes;
    }
    return saved;
  }
};

} // namespace
