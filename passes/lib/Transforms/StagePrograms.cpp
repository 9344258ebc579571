//===- StagePrograms.cpp - One step program per pipeline stage ------------===//
//
// strata-stage-programs: @micro_step, its ops placed on stages, becomes one
// @pipeline_step_<s> per stage, unrolled over the step's micro-batches in
// the order the schedule gives each stage, with sched.send / sched.recv
// where a value crosses a cut.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"
#include "strata/Transforms/Layers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace strata {
#define GEN_PASS_DEF_STAGEPROGRAMSPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using pipeline::Phase;

namespace {

/// Where each op of @micro_step runs and what crosses the cuts.
struct StepAnalysis {
  int64_t stages = 1;
  DenseMap<Operation *, int64_t> stage;
  DenseMap<Operation *, Phase> phase;
  /// Ops that read no state: any stage computes them where it needs them.
  llvm::DenseSet<Operation *> replicable;
  /// Values read on another stage than their own, in op order; the index
  /// is the value's tag.
  SmallVector<Value> crossing;
  DenseMap<Value, int64_t> tag;
  /// For each crossing value, the stages that receive it (every stage
  /// between its own and the farthest reader).
  DenseMap<Value, SmallVector<int64_t>> path;
};

struct StageProgramsPass
    : public strata::impl::StageProgramsPassBase<StageProgramsPass> {
  using StageProgramsPassBase::StageProgramsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pipelineAttr = module->getAttrOfType<sched::PipelineAttr>(
        sched::SchedDialect::kPipelineAttrName);
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!pipelineAttr || !step) {
      module.emitError("strata-stage-programs: needs a module cut into "
                       "stages (strata-pipeline) with @micro_step "
                       "(strata-autodiff)");
      return signalPassFailure();
    }
    if (microBatches < 1) {
      module.emitError("strata-stage-programs: micro-batches must be >= 1");
      return signalPassFailure();
    }
    StepAnalysis a;
    a.stages = pipelineAttr.getStages();
    if (failed(analyze(step, a)))
      return signalPassFailure();

    pipeline::StageOrders orders =
        pipeline::buildSchedule(schedule, microBatches, stageCosts(step, a));
    std::string problem =
        pipeline::verifySchedule(schedule, orders, microBatches);
    if (!problem.empty()) {
      module.emitError("strata-stage-programs: internal error: ") << problem;
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(step);
    for (int64_t s = a.stages - 1; s >= 0; --s)
      if (failed(buildStage(step, a, s, orders[s], b)))
        return signalPassFailure();
    step.erase();
  }

  /// Stages and phases of every op, the replicable ops, the crossing values.
  LogicalResult analyze(func::FuncOp step, StepAnalysis &a) {
    Block &body = step.getBody().front();
    // Values that depend on state (anything but inputs and constants).
    llvm::DenseSet<Value> stateful;
    for (BlockArgument arg : step.getArguments())
      if (graph::getArgumentRole(step, arg.getArgNumber()) !=
          graph::Role::Input)
        stateful.insert(arg);
    for (Operation &op : body.without_terminator()) {
      auto stage =
          op.getAttrOfType<IntegerAttr>(sched::SchedDialect::kStageAttrName);
      if (!stage)
        return op.emitError("strata-stage-programs: op has no stage");
      a.stage[&op] = stage.getInt();
      bool reads = llvm::any_of(op.getOperands(), [&](Value v) {
        return stateful.contains(v);
      });
      if (reads || !isMemoryEffectFree(&op) || op.getNumRegions() > 0) {
        for (Value r : op.getResults())
          stateful.insert(r);
      } else {
        a.replicable.insert(&op);
      }
      a.phase[&op] = op.hasAttr(sched::SchedDialect::kBackwardAttrName)
                         ? Phase::Backward
                         : Phase::Forward;
    }
    // Crossing values and their paths.
    for (Operation &op : body.without_terminator()) {
      if (a.replicable.contains(&op))
        continue;
      int64_t own = a.stage[&op];
      for (Value r : op.getResults()) {
        int64_t lo = own, hi = own;
        for (Operation *user : r.getUsers()) {
          if (isa<func::ReturnOp>(user))
            continue;
          lo = std::min(lo, a.stage[user]);
          hi = std::max(hi, a.stage[user]);
        }
        if (lo == own && hi == own)
          continue;
        if (lo < own && hi > own)
          return op.emitError("strata-stage-programs: a value is read on "
                              "stages both before and after its own");
        a.tag[r] = int64_t(a.crossing.size());
        a.crossing.push_back(r);
        SmallVector<int64_t> &path = a.path[r];
        if (hi > own)
          for (int64_t s = own + 1; s <= hi; ++s)
            path.push_back(s);
        else
          for (int64_t s = own - 1; s >= lo; --s)
            path.push_back(s);
      }
    }
    if (schedule == pipeline::ScheduleKind::ZeroBubble)
      splitWeightGradients(step, a);
    return success();
  }

  /// Zero bubble: a stage's backward ops that no value sent to another
  /// stage needs are its weight-gradient phase (W).
  void splitWeightGradients(func::FuncOp step, StepAnalysis &a) {
    llvm::DenseSet<Operation *> needed;
    SmallVector<Operation *> work;
    for (Value v : a.crossing) {
      Operation *def = v.getDefiningOp();
      if (a.phase[def] == Phase::Backward)
        work.push_back(def);
    }
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!needed.insert(op).second)
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (a.phase.lookup(def) == Phase::Backward &&
              !a.replicable.contains(def) && a.stage[def] == a.stage[op])
            work.push_back(def);
    }
    for (Operation &op : step.getBody().front().without_terminator())
      if (a.phase[&op] == Phase::Backward && !needed.contains(&op))
        a.phase[&op] = Phase::Weight;
  }

  /// Each stage's F, B and W work in forward FLOPs.
  static std::vector<pipeline::StageCost> stageCosts(func::FuncOp step,
                                                     const StepAnalysis &a) {
    std::vector<pipeline::StageCost> costs(a.stages, {0, 0, 0});
    for (Operation &op : step.getBody().front().without_terminator()) {
      if (a.replicable.contains(&op))
        continue;
      pipeline::StageCost &c = costs[a.stage.lookup(&op)];
      double flops = forwardFlops(&op);
      switch (a.phase.lookup(&op)) {
      case Phase::Forward: c.forward += flops; break;
      case Phase::Backward: c.backward += flops; break;
      case Phase::Weight: c.weight += flops; break;
      }
    }
    return costs;
  }

  /// @pipeline_step_<s>: the stage's actions in `order`.
  LogicalResult buildStage(func::FuncOp step, const StepAnalysis &a,
                           int64_t s, ArrayRef<pipeline::Action> order,
                           OpBuilder &moduleBuilder) {
    MLIRContext *ctx = step.getContext();
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto stageAttr = IntegerAttr::get(IntegerType::get(ctx, 64), s);
    int64_t m = microBatches;

    // The state a micro-batch hands to the next: gradient accumulators and
    // buffers, by name, to the return operand that holds their new value.
    llvm::StringMap<Value> chained;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      std::optional<graph::Role> role = graph::getResultRole(step, i);
      auto name = step.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      if (name && role &&
          (*role == graph::Role::Gradient || *role == graph::Role::Buffer))
        chained[name.getValue()] = ret.getOperand(i);
    }

    Block *block = new Block();
    SmallVector<DictionaryAttr> argAttrs;
    DenseMap<Value, Value> shared;
    std::vector<IRMapping> maps(m);
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(block);
    Location loc = step.getLoc();

    auto addArg = [&](BlockArgument arg, std::optional<int64_t> k) {
      Value v = block->addArgument(arg.getType(), arg.getLoc());
      NamedAttrList attrs(step.getArgAttrDict(arg.getArgNumber()));
      if (k)
        attrs.set(sched::SchedDialect::kMicroBatchAttrName,
                  b.getI64IntegerAttr(*k));
      argAttrs.push_back(attrs.getDictionary(ctx));
      return v;
    };
    // The value of `v` in micro-batch `k` on this stage.
    std::function<FailureOr<Value>(Value, int64_t)> lookup =
        [&](Value v, int64_t k) -> FailureOr<Value> {
      if (Value mapped = maps[k].lookupOrNull(v))
        return mapped;
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        std::optional<graph::Role> role =
            graph::getArgumentRole(step, arg.getArgNumber());
        if (role == graph::Role::Input) {
          Value x = addArg(arg, k);
          maps[k].map(v, x);
          return x;
        }
        auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      graph::kNameAttrName);
        if (k > 0 && name && chained.count(name.getValue())) {
          // The previous micro-batch's new value.
          Value previous = maps[k - 1].lookupOrNull(chained[name.getValue()]);
          if (!previous)
            return emitError(loc, "strata-stage-programs: stage ")
                   << s << " reads '" << name.getValue()
                   << "' before the previous micro-batch updated it";
          maps[k].map(v, previous);
          return previous;
        }
        Value &x = shared[v];
        if (!x)
          x = addArg(arg, std::nullopt);
        maps[k].map(v, x);
        return x;
      }
      Operation *def = v.getDefiningOp();
      if (!a.replicable.contains(def))
        return emitError(def->getLoc(), "strata-stage-programs: stage ")
               << s << " reads a value of stage " << a.stage.lookup(def)
               << " it never receives";
      // Computed again here, with its own operands.
      for (Value operand : def->getOperands())
        if (failed(lookup(operand, k)))
          return failure();
      Operation *copy = b.clone(*def, maps[k]);
      copy->setAttr(sched::SchedDialect::kStageAttrName, stageAttr);
      return maps[k].lookup(v);
    };

    for (const pipeline::Action &action : order) {
      int64_t k = action.microBatch;
      auto tagAttr = [&](Value v) { return b.getI64IntegerAttr(a.tag.lookup(v)); };
      // Receive what this action's phase brings to this stage.
      for (Value v : a.crossing) {
        Operation *def = v.getDefiningOp();
        if (a.phase.lookup(def) != action.phase)
          continue;
        const SmallVector<int64_t> &path = a.path.lookup(v);
        auto at = llvm::find(path, s);
        if (at == path.end())
          continue;
        int64_t from = at == path.begin() ? a.stage.lookup(def) : *(at - 1);
        auto recv = b.create<sched::RecvOp>(
            loc, v.getType(), b.getI64IntegerAttr(from),
            b.getI64IntegerAttr(k), tagAttr(v));
        recv->setAttr(sched::SchedDialect::kStageAttrName, stageAttr);
        maps[k].map(v, recv.getResult());
      }
      // The stage's own ops of this phase.
      for (Operation &op : body.without_terminator()) {
        if (a.replicable.contains(&op) || a.stage.lookup(&op) != s ||
            a.phase.lookup(&op) != action.phase)
          continue;
        for (Value operand : op.getOperands())
          if (failed(lookup(operand, k)))
            return failure();
        b.clone(op, maps[k]);
      }
      // Send on what the next stages of each path need.
      for (Value v : a.crossing) {
        Operation *def = v.getDefiningOp();
        if (a.phase.lookup(def) != action.phase)
          continue;
        const SmallVector<int64_t> &path = a.path.lookup(v);
        bool own = a.stage.lookup(def) == s;
        auto at = llvm::find(path, s);
        if (!own && (at == path.end() || at + 1 == path.end()))
          continue;
        int64_t to = own ? path.front() : *(at + 1);
        auto send = b.create<sched::SendOp>(loc, maps[k].lookup(v),
                                            b.getI64IntegerAttr(to),
                                            b.getI64IntegerAttr(k),
                                            tagAttr(v));
        send->setAttr(sched::SchedDialect::kStageAttrName, stageAttr);
      }
    }

    // Results: the losses of every micro-batch, the last values of the
    // gradients and buffers this stage computes.
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value v = ret.getOperand(i);
      Operation *def = v.getDefiningOp();
      if (!def || a.replicable.contains(def) || a.stage.lookup(def) != s)
        continue;
      std::optional<graph::Role> role = graph::getResultRole(step, i);
      bool perMicroBatch = role == graph::Role::Output;
      for (int64_t k = perMicroBatch ? 0 : m - 1; k < m; ++k) {
        results.push_back(maps[k].lookup(v));
        NamedAttrList attrs(step.getResultAttrDict(i));
        resultAttrs.push_back(attrs.getDictionary(ctx));
      }
    }
    b.create<func::ReturnOp>(loc, results);

    auto func = moduleBuilder.create<func::FuncOp>(
        loc, ("pipeline_step_" + std::to_string(s)),
        FunctionType::get(ctx, block->getArgumentTypes(),
                          ValueRange(results).getTypes()));
    func.getBody().push_back(block);
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(resultAttrs);
    func->setAttr(sched::SchedDialect::kStageAttrName, stageAttr);
    return success();
  }
};

} // namespace
