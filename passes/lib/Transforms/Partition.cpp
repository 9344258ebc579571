//===- Partition.cpp - ZeRO-3 / MiCS sharding of the training step --------===//
//
// strata-partition: parameters, gradients and optimizer states become flat
// shards over the partition group; all-gathers before use (forward, and
// again in backward), reduce-scatters of the gradients every micro-step, an
// all-reduce over the replication group at the accumulation boundary.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_PARTITIONPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

StringRef argRole(func::FuncOp func, unsigned i) {
  auto role = func.getArgAttrOfType<StringAttr>(i, graph::kRoleAttrName);
  return role ? role.getValue() : StringRef();
}

StringRef resultRole(func::FuncOp func, unsigned i) {
  auto role = func.getResultAttrOfType<StringAttr>(i, graph::kRoleAttrName);
  return role ? role.getValue() : StringRef();
}

/// The shard type of a parameter-shaped type over `parts` ranks.
RankedTensorType shardType(Type type, int64_t parts) {
  auto t = cast<RankedTensorType>(type);
  int64_t n = t.getNumElements();
  return RankedTensorType::get({(n + parts - 1) / parts}, t.getElementType());
}

struct PartitionPass : public strata::impl::PartitionPassBase<PartitionPass> {
  using PartitionPassBase::PartitionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (world < 1 || partition < 1 || world % partition != 0 ||
        ranksPerNode < 1 || world % ranksPerNode != 0) {
      module.emitError("strata-partition: need P | N and K | N, got N = ")
          << world << ", K = " << ranksPerNode << ", P = " << partition;
      return signalPassFailure();
    }
    if (hierarchical &&
        (partition <= ranksPerNode || partition % ranksPerNode != 0)) {
      module.emitError("strata-partition: a hierarchical all-gather needs "
                       "P > K and K | P, got K = ")
          << ranksPerNode << ", P = " << partition;
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    auto update = module.lookupSymbol<func::FuncOp>("optimizer_step");
    if (!step || !update) {
      module.emitError("strata-partition: run strata-autodiff and "
                       "strata-optimizer first");
      return signalPassFailure();
    }
    if (partition > 1) {
      // @main (the forward program) shares the parameter shards.
      if (auto main = module.lookupSymbol<func::FuncOp>("main"))
        partitionMicroStep(main);
      partitionMicroStep(step);
    }
    partitionOptimizerStep(update);
  }

  /// A gather of `shard` back to `type`, before `before`.
  Value gather(OpBuilder &b, Location loc, Value shard, Type type) {
    auto full = cast<RankedTensorType>(type);
    auto shardT = cast<RankedTensorType>(shard.getType());
    int64_t padded = shardT.getNumElements() * partition;
    int64_t n = full.getNumElements();
    Type element = full.getElementType();
    Value v;
    if (!hierarchical) {
      v = b.create<sched::AllGatherOp>(
          loc, RankedTensorType::get({padded}, element), shard,
          b.getStringAttr("partition"));
    } else {
      // MiCS: (1) inter-node all-gather among the ranks with this local
      // rank: shards of partition ranks l, l+K, ... (one per node); (2)
      // rearranged into those P/K shards; (3) one intra-node all-gather per
      // shard, giving [C(iK), ..., C(iK+K-1)] for node i: concatenated in
      // order, [C0, ..., C(P-1)].
      int64_t size = shardT.getNumElements();
      int64_t nodes = partition / ranksPerNode;
      Value inter = b.create<sched::AllGatherOp>(
          loc, RankedTensorType::get({nodes * size}, element), shard,
          b.getStringAttr("inter"));
      SmallVector<Type> pieces(nodes, shardT);
      auto split = b.create<graph::SplitOp>(loc, pieces, inter,
                                            b.getI64IntegerAttr(0));
      SmallVector<Value> gathered;
      for (Value piece : split.getOutputs())
        gathered.push_back(b.create<sched::AllGatherOp>(
            loc, RankedTensorType::get({ranksPerNode * size}, element), piece,
            b.getStringAttr("intra")));
      v = nodes == 1 ? gathered.front()
                     : b.create<graph::ConcatOp>(
                           loc, RankedTensorType::get({padded}, element),
                           gathered, b.getI64IntegerAttr(0));
    }
    if (padded != n)
      v = b.create<graph::SliceOp>(
          loc, RankedTensorType::get({n}, full.getElementType()), v,
          b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({n}),
          b.getDenseI64ArrayAttr({1}));
    if (full.getRank() != 1)
      v = b.create<graph::ReshapeOp>(loc, full, v);
    return v;
  }

  /// The flattened, padded value of `grad` reduce-scattered to its shard.
  Value scatter(OpBuilder &b, Location loc, Value grad) {
    auto full = cast<RankedTensorType>(grad.getType());
    auto shardT = shardType(full, partition);
    int64_t n = full.getNumElements();
    int64_t padded = shardT.getNumElements() * partition;
    Value v = grad;
    if (full.getRank() != 1)
      v = b.create<graph::ReshapeOp>(
          loc, RankedTensorType::get({n}, full.getElementType()), v);
    if (padded != n)
      v = b.create<graph::PadOp>(
          loc, RankedTensorType::get({padded}, full.getElementType()), v,
          b.getDenseI64ArrayAttr({0, padded - n}), b.getStringAttr("constant"),
          b.getF64FloatAttr(0.0));
    return b.create<sched::ReduceScatterOp>(loc, shardT, v,
                                            b.getStringAttr("partition"));
  }

  void partitionMicroStep(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(func.getContext());
    // Ops after the loss's producer are the backward pass (@main has none).
    Operation *lossOp = func.getSymName() == "main"
                            ? nullptr
                            : ret.getOperand(0).getDefiningOp();
    auto isBackward = [&](Operation *op) {
      return lossOp && lossOp->isBeforeInBlock(op);
    };

    for (BlockArgument arg : func.getArguments()) {
      StringRef role = argRole(func, arg.getArgNumber());
      if (role != "parameter" && role != "gradient")
        continue;
      Type full = arg.getType();
      arg.setType(shardType(full, partition));
      func.setArgAttr(arg.getArgNumber(), "graph.shards",
                      b.getI64IntegerAttr(partition));
      if (role != "parameter")
        continue;
      SmallVector<OpOperand *> forwardUses, backwardUses;
      for (OpOperand &use : arg.getUses())
        (isBackward(use.getOwner()) ? backwardUses : forwardUses)
            .push_back(&use);
      auto firstUser = [&](ArrayRef<OpOperand *> uses) {
        Operation *first = uses.front()->getOwner();
        for (OpOperand *u : uses)
          if (u->getOwner()->isBeforeInBlock(first))
            first = u->getOwner();
        return first;
      };
      for (ArrayRef<OpOperand *> uses : {ArrayRef(forwardUses),
                                         ArrayRef(backwardUses)}) {
        if (uses.empty())
          continue;
        b.setInsertionPoint(firstUser(uses));
        Value value = gather(b, arg.getLoc(), arg, full);
        for (OpOperand *u : uses)
          u->set(value);
      }
    }

    // Gradients: reduce-scatter into the shard (accumulator).
    b.setInsertionPoint(ret);
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (resultRole(func, i) != "gradient")
        continue;
      Value result = ret.getOperand(i);
      auto add = result.getDefiningOp<graph::AddOp>();
      auto acc = add ? dyn_cast<BlockArgument>(add.getLhs()) : BlockArgument();
      if (acc && argRole(func, acc.getArgNumber()) == "gradient") {
        Value shard = scatter(b, add.getLoc(), add.getRhs());
        Value sum = b.create<graph::AddOp>(add.getLoc(), acc.getType(), acc,
                                           shard);
        ret.setOperand(i, sum);
        if (add->use_empty())
          add->erase();
      } else {
        ret.setOperand(i, scatter(b, func.getLoc(), result));
      }
    }
    func.setFunctionType(FunctionType::get(func.getContext(),
                                           body.getArgumentTypes(),
                                           ret.getOperandTypes()));
  }

  void partitionOptimizerStep(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(func.getContext());
    int64_t replicas = world / partition;
    for (BlockArgument arg : func.getArguments()) {
      StringRef role = argRole(func, arg.getArgNumber());
      if (role != "parameter" && role != "gradient" &&
          role != "optimizer_state")
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        graph::kNameAttrName);
          name && name.getValue().starts_with("strata."))
        continue; // loss-scaling counters are scalars, not shards
      if (partition > 1) {
        arg.setType(shardType(type, partition));
        func.setArgAttr(arg.getArgNumber(), "graph.shards",
                        b.getI64IntegerAttr(partition));
      }
      // 2-hop: the gradient shards of the replicas are summed once per
      // optimizer step.
      if (role == "gradient" && replicas > 1) {
        b.setInsertionPointToStart(&body);
        auto reduced = b.create<sched::AllReduceOp>(
            arg.getLoc(), arg.getType(), arg, b.getStringAttr("replication"));
        arg.replaceAllUsesExcept(reduced, reduced);
      }
    }
    // Updates and the global norm over the partition group's shards.
    func.walk([&](Operation *op) {
      if (isa<graph::AdamWUpdateOp, graph::SGDUpdateOp>(op))
        for (Value result : op->getResults())
          result.setType(op->getOperand(0).getType());
      if (auto sqrt = dyn_cast<graph::SqrtOp>(op); sqrt && partition > 1) {
        b.setInsertionPoint(sqrt);
        Value total = b.create<sched::AllReduceOp>(
            sqrt.getLoc(), sqrt.getInput().getType(), sqrt.getInput(),
            b.getStringAttr("partition"));
        sqrt->setOperand(0, total);
      }
    });
    func.setFunctionType(FunctionType::get(func.getContext(),
                                           body.getArgumentTypes(),
                                           ret.getOperandTypes()));
  }
};

} // namespace
