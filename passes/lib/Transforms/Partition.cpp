//===- Partition.cpp - ZeRO-3 / MiCS sharding of the training step --------===//
//
// strata-partition: parameters, gradients and optimizer states become flat
// shards over the partition group. Parameters are bucketed (per layer, up to
// a size); each bucket is all-gathered by one coalesced collective before its
// first use in forward and again before its first use in backward
// (hierarchically when the group spans nodes), its gradients are
// reduce-scattered by one collective as soon as the last of them is computed,
// and at the accumulation boundary the gradient shards are all-reduced over
// the replication group (2-hop). `grad-sync=global` instead all-reduces the
// full gradients over every rank each micro-step and keeps the local shard.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Transforms/Layers.h"

#include "ArgAttrs.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

namespace strata {
#define GEN_PASS_DEF_PARTITIONPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

std::optional<graph::Role> argRole(func::FuncOp func, unsigned i) {
  return graph::getArgumentRole(func, i);
}

StringRef argName(func::FuncOp func, unsigned i) {
  auto name = func.getArgAttrOfType<StringAttr>(i, graph::kNameAttrName);
  return name ? name.getValue() : StringRef();
}

std::optional<graph::Role> resultRole(func::FuncOp func, unsigned i) {
  return graph::getResultRole(func, i);
}

StringRef resultName(func::FuncOp func, unsigned i) {
  auto name = func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
  return name ? name.getValue() : StringRef();
}

/// The shard type of a parameter-shaped type over `parts` ranks.
RankedTensorType shardType(Type type, int64_t parts) {
  auto t = cast<RankedTensorType>(type);
  int64_t n = t.getNumElements();
  return RankedTensorType::get({(n + parts - 1) / parts}, t.getElementType());
}

int64_t byteWidth(Type element) {
  return std::max<int64_t>(element.getIntOrFloatBitWidth() / 8, 1);
}

/// Gives argument `arg` its shard type over `parts` ranks, marked (when
/// `attrs` is applied) with `graph.shards` and the value's
/// `graph.full_shape`.
void shardArgument(BlockArgument arg, int64_t parts, ArgAttrBatch &attrs) {
  auto full = cast<RankedTensorType>(arg.getType());
  Builder b(arg.getContext());
  arg.setType(shardType(full, parts));
  attrs.set(arg.getArgNumber(), "graph.shards", b.getI64IntegerAttr(parts));
  attrs.set(arg.getArgNumber(), "graph.full_shape",
            b.getDenseI64ArrayAttr(full.getShape()));
}

/// The position of `op` in its block, for ordering uses.
using Positions = DenseMap<Operation *, unsigned>;

Positions numberOps(Block &block) {
  Positions positions;
  unsigned i = 0;
  for (Operation &op : block)
    positions[&op] = i++;
  return positions;
}

struct PartitionPass : public strata::impl::PartitionPassBase<PartitionPass> {
  using PartitionPassBase::PartitionPassBase;

  /// Parameter names, bucket by bucket, in the order of first use in
  /// @micro_step.
  std::vector<SmallVector<std::string>> buckets;
  bool global = false;

  /// The narrow type gradients are summed in (reduce-type), or null: f32.
  Type reduceElementType() {
    MLIRContext *context = &getContext();
    if (reduceType == "bf16")
      return BFloat16Type::get(context);
    if (reduceType == "f16")
      return Float16Type::get(context);
    return Type();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (world < 1 || partition < 1 || world % partition != 0 ||
        ranksPerNode < 1 || world % ranksPerNode != 0) {
      module.emitError("strata-partition: need P | N and K | N, got N = ")
          << unsigned(world) << ", K = " << unsigned(ranksPerNode)
          << ", P = " << unsigned(partition);
      return signalPassFailure();
    }
    if (hierarchical &&
        (partition <= ranksPerNode || partition % ranksPerNode != 0)) {
      module.emitError("strata-partition: a hierarchical all-gather needs "
                       "P > K and K | P, got K = ")
          << unsigned(ranksPerNode) << ", P = " << unsigned(partition);
      return signalPassFailure();
    }
    global = gradSync == GradSync::Global;
    if (reduceType != "f32" && reduceType != "bf16" && reduceType != "f16") {
      module.emitError("strata-partition: reduce-type is f32, bf16 or f16, "
                       "got '")
          << reduceType << "'";
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    auto update = module.lookupSymbol<func::FuncOp>("optimizer_step");
    if (!step || !update) {
      module.emitError("strata-partition: run strata-autodiff and "
                       "strata-optimizer first");
      return signalPassFailure();
    }
    formBuckets(step);
    if (partition > 1)
      // @main (the forward program) shares the parameter shards.
      if (auto main = module.lookupSymbol<func::FuncOp>("main"))
        gatherParameters(main, /*lossOp=*/nullptr);
    partitionMicroStep(step);
    partitionOptimizerStep(update);
  }

  //===--------------------------------------------------------------------===//
  // Buckets
  //===--------------------------------------------------------------------===//

  /// Parameters in order of first use, cut into runs of one layer of at
  /// most `bucketBytes` (padded, gathered size; 0: one parameter a bucket).
  void formBuckets(func::FuncOp step) {
    Block &body = step.getBody().front();
    Positions positions = numberOps(body);
    struct Entry {
      unsigned first;
      std::string name;
      int64_t bytes;
    };
    std::vector<Entry> entries;
    for (BlockArgument arg : step.getArguments()) {
      if (argRole(step, arg.getArgNumber()) != graph::Role::Parameter)
        continue;
      unsigned first = ~0u;
      for (Operation *user : arg.getUsers())
        first = std::min(first, positions.lookup(user));
      auto shard = shardType(arg.getType(), partition);
      entries.push_back({first, argName(step, arg.getArgNumber()).str(),
                         shard.getNumElements() * int64_t(partition) *
                             byteWidth(shard.getElementType())});
    }
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry &a, const Entry &b) {
                       return a.first < b.first;
                     });
    buckets.clear();
    std::string layer;
    int64_t bytes = 0;
    for (const Entry &e : entries) {
      std::string l = layerOf(e.name);
      if (buckets.empty() || bucketBytes == 0 || l != layer ||
          bytes + e.bytes > int64_t(bucketBytes)) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(e.name);
      layer = l;
      bytes += e.bytes;
    }
  }

  //===--------------------------------------------------------------------===//
  // All-gathers
  //===--------------------------------------------------------------------===//

  /// The full values of `shards` (one coalesced gather; with `hierarchical`
  /// MiCS's three stages), flattened and padded: each P times its shard.
  SmallVector<Value> gatherPadded(OpBuilder &b, Location loc,
                                  ArrayRef<Value> shards) {
    SmallVector<Type> padded;
    for (Value s : shards) {
      auto t = cast<RankedTensorType>(s.getType());
      padded.push_back(RankedTensorType::get(
          {t.getNumElements() * int64_t(partition)}, t.getElementType()));
    }
    if (!hierarchical)
      return b.create<sched::AllGatherOp>(loc, padded,
                                          sched::Group::Partition, shards)
          .getResults();
    // (1) An inter-node all-gather among the ranks with this local rank
    // (one per node): the shards of partition ranks l, l+K, ..., that is
    // P/K blocks [C(l), C(K+l), ...]; (2) one intra-node all-gather of
    // those P/K blocks (`blocks`), block i giving [C(iK), ..., C(iK+K-1)]:
    // in order, [C0, ..., C(P-1)]. The IR holds two ops whatever P/K.
    int64_t nodes = partition / ranksPerNode;
    SmallVector<Type> interTypes;
    for (Value s : shards) {
      auto t = cast<RankedTensorType>(s.getType());
      interTypes.push_back(RankedTensorType::get(
          {t.getNumElements() * nodes}, t.getElementType()));
    }
    auto inter = b.create<sched::AllGatherOp>(loc, interTypes,
                                              sched::Group::Inter, shards);
    auto intra = b.create<sched::AllGatherOp>(
        loc, padded, sched::Group::Intra, inter.getResults());
    if (nodes > 1)
      intra->setAttr("blocks", b.getI64IntegerAttr(nodes));
    return SmallVector<Value>(intra.getResults());
  }

  /// Drops the padding and restores the shape.
  Value unflatten(OpBuilder &b, Location loc, Value padded, Type type) {
    auto full = cast<RankedTensorType>(type);
    int64_t n = full.getNumElements();
    Value v = padded;
    if (cast<RankedTensorType>(padded.getType()).getNumElements() != n)
      v = b.create<graph::SliceOp>(
          loc, RankedTensorType::get({n}, full.getElementType()), v,
          b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({n}),
          b.getDenseI64ArrayAttr({1}));
    if (full.getRank() != 1)
      v = b.create<graph::ReshapeOp>(loc, full, v);
    return v;
  }

  /// The bf16 / fp16 type every use in `uses` casts the parameter to, or
  /// null when some use reads it otherwise.
  static Type narrowReadType(ArrayRef<OpOperand *> uses) {
    Type narrow;
    for (OpOperand *use : uses) {
      auto castOp = dyn_cast<graph::CastOp>(use->getOwner());
      if (!castOp)
        return Type();
      Type to = cast<RankedTensorType>(castOp.getType()).getElementType();
      if (!(to.isBF16() || to.isF16()) || (narrow && narrow != to))
        return Type();
      narrow = to;
    }
    return narrow;
  }

  /// Mixed precision rounds a parameter (graph.cast to bf16 / fp16, or
  /// graph.round_to) before its products, and the backward products read
  /// that rounded copy too. Kept alive from the forward to the backward
  /// pass, it would hold the whole parameter on every rank and defeat the
  /// sharding; so the backward uses get their own rounding, of the
  /// parameter gathered again for the backward pass (what DeepSpeed and
  /// FSDP do: gather and cast again). Same values.
  void recastForBackward(func::FuncOp func, Operation *lossOp) {
    Positions positions = numberOps(func.getBody().front());
    unsigned lossAt = positions.lookup(lossOp);
    for (BlockArgument arg : func.getArguments()) {
      if (argRole(func, arg.getArgNumber()) != graph::Role::Parameter)
        continue;
      for (Operation *rounding : llvm::to_vector(arg.getUsers())) {
        if (!isa<graph::CastOp, graph::RoundToOp>(rounding) ||
            positions.lookup(rounding) > lossAt)
          continue;
        SmallVector<OpOperand *> late;
        Operation *first = nullptr;
        for (OpOperand &use : rounding->getResult(0).getUses()) {
          unsigned at = positions.lookup(use.getOwner());
          if (at <= lossAt)
            continue;
          late.push_back(&use);
          if (!first || at < positions.lookup(first))
            first = use.getOwner();
        }
        if (late.empty())
          continue;
        OpBuilder b(first);
        Operation *again = b.clone(*rounding);
        for (OpOperand *use : late)
          use->set(again->getResult(0));
      }
    }
  }

  /// Shards every parameter argument of `func` and gathers each bucket
  /// before its first use; in @micro_step (`lossOp` set) once for the
  /// forward uses and once more for the backward uses (after `lossOp`).
  void gatherParameters(func::FuncOp func, Operation *lossOp) {
    Block &body = func.getBody().front();
    if (lossOp)
      recastForBackward(func, lossOp);
    Positions positions = numberOps(body);
    unsigned lossAt = lossOp ? positions.lookup(lossOp) : ~0u;
    llvm::StringMap<BlockArgument> byName;
    DenseMap<BlockArgument, Type> fullTypes;
    ArgAttrBatch attrs(func);
    for (BlockArgument arg : func.getArguments()) {
      if (argRole(func, arg.getArgNumber()) != graph::Role::Parameter)
        continue;
      byName[argName(func, arg.getArgNumber())] = arg;
      fullTypes[arg] = arg.getType();
      shardArgument(arg, partition, attrs);
    }
    attrs.apply();
    // Every use, taken before any is rewritten.
    DenseMap<BlockArgument, SmallVector<OpOperand *>> allUses;
    for (auto &[arg, type] : fullTypes)
      for (OpOperand &use : arg.getUses())
        allUses[arg].push_back(&use);
    OpBuilder b(func.getContext());
    for (const auto &bucket : buckets) {
      for (bool backward : {false, true}) {
        if (backward && !lossOp)
          continue;
        // The members used in this phase, and their uses there.
        SmallVector<BlockArgument> members;
        SmallVector<SmallVector<OpOperand *>> uses;
        Operation *first = nullptr;
        for (const std::string &name : bucket) {
          BlockArgument arg = byName.lookup(name);
          if (!arg)
            continue;
          SmallVector<OpOperand *> phase;
          for (OpOperand *use : allUses.lookup(arg)) {
            unsigned at = positions.lookup(use->getOwner());
            if ((at > lossAt) != backward)
              continue;
            phase.push_back(use);
            if (!first || at < positions.lookup(first))
              first = use->getOwner();
          }
          if (phase.empty())
            continue;
          members.push_back(arg);
          uses.push_back(std::move(phase));
        }
        if (members.empty())
          continue;
        b.setInsertionPoint(first);
        Location loc = members.front().getLoc();
        // A member this phase reads only through casts to one bf16 / fp16
        // type (mixed precision's narrow storage) is cast on its shard and
        // gathered narrow: half the bytes, the same values (a cast commutes
        // with the gather), as DeepSpeed gathers bf16 parameters.
        SmallVector<Type> narrow(members.size());
        SmallVector<Value> shards;
        for (unsigned i = 0; i < members.size(); ++i) {
          narrow[i] = narrowReadType(uses[i]);
          Value shard = members[i];
          if (narrow[i])
            shard = b.create<graph::CastOp>(
                loc, cast<RankedTensorType>(shard.getType()).clone(narrow[i]),
                shard);
          shards.push_back(shard);
        }
        SmallVector<Value> padded = gatherPadded(b, loc, shards);
        // The casts the narrow gathers replace; erased last (the builder
        // inserts before the first of them).
        SmallVector<Operation *> replaced;
        for (unsigned i = 0; i < members.size(); ++i) {
          auto fullType = cast<RankedTensorType>(fullTypes[members[i]]);
          if (narrow[i])
            fullType = fullType.clone(narrow[i]);
          Value full = unflatten(b, loc, padded[i], fullType);
          for (OpOperand *use : uses[i]) {
            if (!narrow[i]) {
              use->set(full);
              continue;
            }
            Operation *castOp = use->getOwner();
            castOp->getResult(0).replaceAllUsesWith(full);
            replaced.push_back(castOp);
          }
        }
        for (Operation *castOp : replaced)
          castOp->erase();
      }
    }
    func.setFunctionType(FunctionType::get(
        func.getContext(), body.getArgumentTypes(),
        func.getFunctionType().getResults()));
  }

  //===--------------------------------------------------------------------===//
  // @micro_step
  //===--------------------------------------------------------------------===//

  /// `grad` flattened and zero-padded to `parts` equal slices.
  Value flattenPadded(OpBuilder &b, Location loc, Value grad, int64_t parts) {
    auto full = cast<RankedTensorType>(grad.getType());
    auto shardT = shardType(full, parts);
    int64_t n = full.getNumElements();
    int64_t padded = shardT.getNumElements() * parts;
    Value v = grad;
    if (full.getRank() != 1)
      v = b.create<graph::ReshapeOp>(
          loc, RankedTensorType::get({n}, full.getElementType()), v);
    if (padded != n)
      v = b.create<graph::PadOp>(
          loc, RankedTensorType::get({padded}, full.getElementType()), v,
          b.getDenseI64ArrayAttr({0, padded - n}),
          graph::PadModeAttr::get(b.getContext(), graph::PadMode::Constant),
          b.getF64FloatAttr(0.0));
    return v;
  }

  void partitionMicroStep(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // Ops after the loss's producer are the backward pass.
    Operation *lossOp = ret.getOperand(0).getDefiningOp();
    if (partition > 1) {
      gatherParameters(func, lossOp);
      ArgAttrBatch attrs(func);
      for (BlockArgument arg : func.getArguments())
        if (argRole(func, arg.getArgNumber()) == graph::Role::Gradient)
          shardArgument(arg, partition, attrs);
      attrs.apply();
    }
    // Without sharding and with 2-hop sync, gradients stay local until the
    // accumulation boundary (one all-reduce in @optimizer_step).
    bool syncHere = partition > 1 || global;
    if (!syncHere)
      return;

    // Each gradient result: the micro-step's own gradient and, with
    // accumulation, the accumulator it is added to.
    struct Result {
      unsigned index;
      Value grad;
      BlockArgument acc;
      Operation *add;
    };
    llvm::StringMap<Result> results;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (resultRole(func, i) != graph::Role::Gradient)
        continue;
      Value value = ret.getOperand(i);
      Result r{i, value, BlockArgument(), nullptr};
      if (auto add = value.getDefiningOp<graph::AddOp>())
        if (auto acc = dyn_cast<BlockArgument>(add.getLhs());
            acc && argRole(func, acc.getArgNumber()) == graph::Role::Gradient) {
          r = {i, add.getRhs(), acc, add};
        }
      if (std::optional<StringRef> param = graph::stateParameter(
              graph::StateKind::Gradient, resultName(func, i)))
        results[*param] = r;
    }

    OpBuilder b(func.getContext());
    SmallVector<Operation *> replaced;
    for (const auto &bucket : buckets) {
      SmallVector<Result> members;
      for (const std::string &name : bucket)
        if (auto it = results.find(name); it != results.end())
          members.push_back(it->second);
      if (members.empty())
        continue;
      // Right after the last of the bucket's gradients is computed.
      Operation *last = nullptr;
      for (const Result &r : members) {
        Operation *def = r.grad.getDefiningOp();
        if (def && (!last || last->isBeforeInBlock(def)))
          last = def;
      }
      if (last)
        b.setInsertionPointAfter(last);
      else
        b.setInsertionPointToStart(&body);
      Location loc = last ? last->getLoc() : func.getLoc();
      // Sharded: flattened and padded; unsharded (P = 1, global sync): as
      // they are.
      SmallVector<Value> flat;
      SmallVector<Type> shardTypes;
      for (const Result &r : members) {
        flat.push_back(partition == 1
                           ? r.grad
                           : flattenPadded(b, loc, r.grad, partition));
        shardTypes.push_back(partition == 1
                                 ? r.grad.getType()
                                 : shardType(r.grad.getType(), partition));
      }
      // --reduce-dtype narrow: the sums travel (and are rounded) narrow.
      SmallVector<Type> wideShardTypes = shardTypes;
      if (Type narrow = reduceElementType()) {
        for (Value &v : flat)
          v = b.create<graph::CastOp>(
              loc, cast<RankedTensorType>(v.getType()).clone(narrow), v);
        for (Type &t : shardTypes)
          t = cast<RankedTensorType>(t).clone(narrow);
      }
      SmallVector<Value> shards;
      if (!global) {
        shards = b.create<sched::ReduceScatterOp>(
                      loc, shardTypes, sched::Group::Partition, flat)
                     .getResults();
      } else {
        // DeepSpeed's default, kept for ablation: the full gradient summed
        // over every rank, then this rank's shard of it.
        SmallVector<Type> types;
        for (Value v : flat)
          types.push_back(v.getType());
        auto sum = b.create<sched::AllReduceOp>(loc, types,
                                                sched::Group::World, flat);
        for (auto [value, type] : llvm::zip(sum.getResults(), shardTypes))
          shards.push_back(partition == 1
                               ? Value(value)
                               : b.create<sched::LocalShardOp>(
                                     loc, type, sched::Group::Partition,
                                     value)
                                     .getResult());
      }
      // Late accumulation: what reads the reduced shards (the widening
      // casts, the adds into the accumulators) runs at the end of the
      // micro-step, after the last backward op, so the compute stream
      // never waits for a bucket's reduction while there is backward work
      // left; the buckets keep their order there, and every sum its
      // operands.
      OpBuilder tail(ret);
      if (reduceElementType())
        for (auto [shard, wide] : llvm::zip(shards, wideShardTypes))
          shard = tail.create<graph::CastOp>(loc, wide, shard);
      for (auto [r, shard] : llvm::zip(members, shards)) {
        Value out = shard;
        if (r.acc) {
          out = tail.create<graph::AddOp>(loc, r.acc.getType(), r.acc, out);
          replaced.push_back(r.add);
        }
        ret.setOperand(r.index, out);
      }
    }
    // The old accumulations, once nothing inserts next to them.
    for (Operation *add : replaced)
      if (add->use_empty())
        add->erase();
    func.setFunctionType(FunctionType::get(func.getContext(),
                                           body.getArgumentTypes(),
                                           ret.getOperandTypes()));
  }

  //===--------------------------------------------------------------------===//
  // @optimizer_step
  //===--------------------------------------------------------------------===//

  /// Whether `v` is a sum of graph.sum_squares results (the global norm).
  static bool isSumOfSquares(Value v) {
    Operation *def = v.getDefiningOp();
    if (isa_and_nonnull<graph::SumSquaresOp>(def))
      return true;
    if (auto add = dyn_cast_or_null<graph::AddOp>(def))
      return isSumOfSquares(add.getLhs()) && isSumOfSquares(add.getRhs());
    return false;
  }

  void partitionOptimizerStep(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(func.getContext());
    int64_t replicas = world / partition;
    llvm::StringMap<BlockArgument> gradients;
    ArgAttrBatch attrs(func);
    for (BlockArgument arg : func.getArguments()) {
      std::optional<graph::Role> role = argRole(func, arg.getArgNumber());
      if (role != graph::Role::Parameter && role != graph::Role::Gradient &&
          role != graph::Role::OptimizerState)
        continue;
      StringRef name = argName(func, arg.getArgNumber());
      if (graph::isPipelineScalar(name))
        continue; // loss-scaling counters are scalars, not shards
      if (partition > 1)
        shardArgument(arg, partition, attrs);
      if (std::optional<StringRef> param =
              graph::stateParameter(graph::StateKind::Gradient, name);
          param && role == graph::Role::Gradient)
        gradients[*param] = arg;
    }
    attrs.apply();
    // 2-hop: the gradient shards of the replicas are summed once per
    // optimizer step, one coalesced all-reduce per bucket.
    if (!global && replicas > 1) {
      b.setInsertionPointToStart(&body);
      for (const auto &bucket : buckets) {
        SmallVector<Value> members;
        SmallVector<Type> types;
        for (const std::string &name : bucket)
          if (BlockArgument arg = gradients.lookup(name)) {
            members.push_back(arg);
            types.push_back(arg.getType());
          }
        if (members.empty())
          continue;
        Location loc = members.front().getLoc();
        SmallVector<Value> operands(members.begin(), members.end());
        SmallVector<Type> sent = types;
        // What reads the accumulated shards before the sum: the all-reduce,
        // or the casts that narrow them for it.
        SmallPtrSet<Operation *, 8> readers;
        if (Type narrow = reduceElementType())
          for (auto [v, t] : llvm::zip(operands, sent)) {
            t = cast<RankedTensorType>(t).clone(narrow);
            v = b.create<graph::CastOp>(loc, t, v);
            readers.insert(v.getDefiningOp());
          }
        auto reduced = b.create<sched::AllReduceOp>(
            loc, sent, sched::Group::Replication, operands);
        readers.insert(reduced);
        for (auto [arg, sum, type] :
             llvm::zip(members, reduced.getResults(), types)) {
          Value wide = sum;
          if (wide.getType() != type)
            wide = b.create<graph::CastOp>(loc, type, sum);
          arg.replaceAllUsesExcept(wide, readers);
        }
      }
    }
    // Updates on shards; the squared norm summed over the partition group.
    func.walk([&](Operation *op) {
      if (isa<graph::AdamWUpdateOp, graph::SGDUpdateOp>(op))
        for (OpResult result : op->getResults())
          result.setType(
              op->getOperand(*graph::inPlaceOperand(op, result.getResultNumber()))
                  .getType());
      if (auto sqrt = dyn_cast<graph::SqrtOp>(op);
          sqrt && partition > 1 && isSumOfSquares(sqrt.getInput())) {
        b.setInsertionPoint(sqrt);
        Value total = b.create<sched::AllReduceOp>(
                           sqrt.getLoc(), sqrt.getInput().getType(),
                           sched::Group::Partition, sqrt.getInput())
                          .getResult(0);
        sqrt->setOperand(0, total);
      }
    });
    func.setFunctionType(FunctionType::get(func.getContext(),
                                           body.getArgumentTypes(),
                                           ret.getOperandTypes()));
  }
};

} // namespace
