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
#include "llvm/ADT/StringSet.h"

#include <map>

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

  /// A parameter read on several stages (a tied weight): each stage sums
  /// its own contributions to the gradient over the micro-batches, and the
  /// stages add their sums once per step in the optimizer programs.
  struct Shared {
    std::string gradName;
    /// The accumulator argument (null without accumulation).
    Value accumulator;
    /// The contributions of each holding stage, in the order autodiff
    /// summed them.
    std::map<int64_t, SmallVector<Value>> contributions;
    /// Under partitioning inside the stages: the ops that flatten and pad
    /// the whole gradient (strata-partition) and the reduce-scatter over
    /// the stage group that took it apart from its bucket's. Each holding
    /// stage reduce-scatters its own sum once per step (then adds the
    /// accumulator, a shard); the optimizer programs exchange the shards.
    SmallVector<Operation *> flatten;
    sched::ReduceScatterOp scatter;
  };
  SmallVector<Shared> shared;
  /// The parameters each stage's step program reads.
  SmallVector<llvm::StringSet<>> reads;
  /// The adds autodiff built to sum a shared parameter's contributions and
  /// to accumulate them: replaced by each stage's own sums.
  llvm::DenseSet<Operation *> dropped;
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
    a.reads.resize(a.stages);
    if (failed(analyze(step, a)))
      return signalPassFailure();

    std::vector<pipeline::StageCost> costs = stageCosts(step, a);
    // The costs with the weight gradients apart, whichever the schedule:
    // what the artifact records (the trace and strata-inspect predict both
    // schedules from them).
    std::vector<pipeline::StageCost> splitCosts = costs;
    if (schedule != pipeline::ScheduleKind::ZeroBubble) {
      DenseMap<Operation *, Phase> phases = a.phase;
      splitWeightGradients(step, a);
      splitCosts = stageCosts(step, a);
      a.phase = std::move(phases);
    }
    pipeline::StageOrders orders =
        pipeline::buildSchedule(schedule, microBatches, costs);
    std::string problem =
        pipeline::verifySchedule(schedule, orders, microBatches);
    if (!problem.empty()) {
      module.emitError("strata-stage-programs: internal error: ") << problem;
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(step);
    SmallVector<llvm::StringSet<>> held(a.stages);
    for (int64_t s = 0; s < a.stages; ++s) {
      FailureOr<func::FuncOp> program =
          buildStage(step, a, s, orders[s], b);
      if (failed(program))
        return signalPassFailure();
      b.setInsertionPointAfter(*program);
      // The layers strata-recompute checkpointed in @micro_step (its
      // clones are in the stages' backward) that this stage holds: the
      // layers of the parameters it reads. strata-inspect reports them.
      if (auto layers = step->getAttrOfType<ArrayAttr>(
              sched::SchedDialect::kCheckpointedAttrName)) {
        llvm::StringSet<> own;
        for (unsigned i = 0; i < program->getNumArguments(); ++i)
          if (graph::getArgumentRole(*program, i) == graph::Role::Parameter)
            if (auto name = program->getArgAttrOfType<StringAttr>(
                    i, graph::kNameAttrName))
              own.insert(layerOf(name.getValue()));
        SmallVector<Attribute> kept;
        for (Attribute layer : layers)
          if (own.contains(cast<StringAttr>(layer).getValue()))
            kept.push_back(layer);
        if (!kept.empty())
          (*program)->setAttr(sched::SchedDialect::kCheckpointedAttrName,
                              b.getArrayAttr(kept));
      }
      // What the trace and strata-inspect show of the schedule.
      (*program)->setAttr(sched::SchedDialect::kScheduleAttrName,
                          b.getStringAttr(schedule ==
                                                  pipeline::ScheduleKind::ZeroBubble
                                              ? "zb"
                                              : "1f1b"));
      const pipeline::StageCost &c = splitCosts[s];
      (*program)->setAttr(sched::SchedDialect::kStageCostAttrName,
                          b.getDenseF64ArrayAttr(
                              {c.forward, c.backward, c.weight}));
      held[s] = heldParameters(*program);
      for (unsigned i = 0; i < program->getNumArguments(); ++i)
        if (graph::getArgumentRole(*program, i) == graph::Role::Parameter)
          if (auto name = program->getArgAttrOfType<StringAttr>(
                  i, graph::kNameAttrName))
            a.reads[s].insert(name.getValue());
    }
    if (auto update = module.lookupSymbol<func::FuncOp>("optimizer_step")) {
      b.setInsertionPointAfter(update);
      for (int64_t s = 0; s < a.stages; ++s) {
        FailureOr<func::FuncOp> program = buildOptimizer(update, a, held, s, b);
        if (failed(program))
          return signalPassFailure();
        b.setInsertionPointAfter(*program);
      }
      update.erase();
    }
    step.erase();
  }

  /// The parameters whose gradients a stage program returns.
  static llvm::StringSet<> heldParameters(func::FuncOp program) {
    llvm::StringSet<> names;
    for (unsigned i = 0; i < program.getNumResults(); ++i) {
      auto name =
          program.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      if (graph::getResultRole(program, i) != graph::Role::Gradient || !name)
        continue;
      if (std::optional<StringRef> param = graph::stateParameter(
              graph::StateKind::Gradient, name.getValue()))
        names.insert(*param);
    }
    return names;
  }

  /// @optimizer_step_<s>: the updates of the parameters stage `s` holds. A
  /// shared parameter's gradient is first summed over its stages (each sends
  /// its sum to the others, each adds them in stage order, so every copy
  /// gets the same bits); the squared gradient norm is summed up the chain
  /// of stages and the total sent back down, each parameter counted on the
  /// first stage that holds it.
  FailureOr<func::FuncOp> buildOptimizer(func::FuncOp update,
                                         const StepAnalysis &a,
                                         ArrayRef<llvm::StringSet<>> held,
                                         int64_t s, OpBuilder &moduleBuilder) {
    MLIRContext *ctx = update.getContext();
    Location loc = update.getLoc();
    Block &body = update.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto stageAttr = IntegerAttr::get(IntegerType::get(ctx, 64), s);
    int64_t p = a.stages;
    int64_t nextTag = int64_t(a.crossing.size());

    auto argName = [&](Value v) -> StringRef {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg)
        return {};
      auto name = update.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      graph::kNameAttrName);
      return name ? name.getValue() : StringRef();
    };
    // The parameter a value is, or is the gradient of (through the
    // replication all-reduce of 2-hop sync: result i is operand i's sum).
    std::function<std::optional<std::string>(Value)> parameterOfValue =
        [&](Value v) -> std::optional<std::string> {
      if (auto reduce = v.getDefiningOp<sched::AllReduceOp>())
        return parameterOfValue(
            reduce->getOperand(cast<OpResult>(v).getResultNumber()));
      StringRef name = argName(v);
      if (name.empty())
        return std::nullopt;
      if (auto param = graph::stateParameter(graph::StateKind::Gradient, name))
        return param->str();
      auto arg = cast<BlockArgument>(v);
      if (graph::getArgumentRole(update, arg.getArgNumber()) ==
          graph::Role::Parameter)
        return name.str();
      return std::nullopt;
    };
    // The parameter an op updates or whose gradient it reads.
    auto parameterOf = [&](Operation *op) -> std::optional<std::string> {
      for (Value operand : op->getOperands())
        if (std::optional<std::string> param = parameterOfValue(operand))
          return param;
      return std::nullopt;
    };
    auto firstHolder = [&](StringRef param) {
      for (int64_t t = 0; t < p; ++t)
        if (held[t].contains(param))
          return t;
      return int64_t(-1);
    };

    // The norm: sum_squares ops, the adds over them, the sqrt.
    llvm::DenseSet<Operation *> norm;
    graph::SqrtOp root;
    for (Operation &op : body.without_terminator())
      if (isa<graph::SumSquaresOp>(op))
        norm.insert(&op);
    // With a partition group the shards' squares are all-reduced over it
    // before the square root (strata-partition).
    sched::AllReduceOp normReduce;
    for (Operation &op : body.without_terminator()) {
      if (!isa<graph::AddOp, graph::SqrtOp, sched::AllReduceOp>(op))
        continue;
      bool over = llvm::all_of(op.getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && norm.contains(def);
      });
      if (!over)
        continue;
      norm.insert(&op);
      if (auto sqrt = dyn_cast<graph::SqrtOp>(op))
        root = sqrt;
      if (auto reduce = dyn_cast<sched::AllReduceOp>(op))
        normReduce = reduce;
    }

    Block *block = new Block();
    SmallVector<DictionaryAttr> argAttrs;
    IRMapping map;
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(block);
    auto stamp = [&](Operation *op) {
      op->setAttr(sched::SchedDialect::kStageAttrName, stageAttr);
      return op;
    };
    std::function<FailureOr<Value>(Value)> lookup =
        [&](Value v) -> FailureOr<Value> {
      if (Value mapped = map.lookupOrNull(v))
        return mapped;
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        Value x = block->addArgument(arg.getType(), arg.getLoc());
        argAttrs.push_back(update.getArgAttrDict(arg.getArgNumber()));
        map.map(v, x);
        return x;
      }
      Operation *def = v.getDefiningOp();
      if (norm.contains(def) && def != root.getOperation())
        return emitError(def->getLoc(), "strata-stage-programs: a use of a "
                                        "partial gradient norm");
      for (Value operand : def->getOperands())
        if (failed(lookup(operand)))
          return failure();
      stamp(b.clone(*def, map));
      return map.lookup(v);
    };

    // Shared gradients: send this stage's sum to the other holders, then
    // add every holder's in stage order.
    for (const StepAnalysis::Shared &sh : a.shared) {
      int64_t tag = nextTag++;
      std::optional<StringRef> param =
          graph::stateParameter(graph::StateKind::Gradient, sh.gradName);
      if (!param || !held[s].contains(*param))
        continue;
      Value grad;
      for (BlockArgument arg : update.getArguments())
        if (argName(arg) == sh.gradName)
          grad = arg;
      if (!grad)
        continue;
      FailureOr<Value> mine = lookup(grad);
      if (failed(mine))
        return failure();
      SmallVector<int64_t> holders;
      for (int64_t t = 0; t < p; ++t)
        if (held[t].contains(*param))
          holders.push_back(t);
      for (int64_t t : holders)
        if (t != s)
          stamp(b.create<sched::SendOp>(loc, *mine, b.getI64IntegerAttr(t),
                                        b.getI64IntegerAttr(0),
                                        b.getI64IntegerAttr(tag)));
      Value total;
      for (int64_t t : holders) {
        Value part = *mine;
        if (t != s)
          part = stamp(b.create<sched::RecvOp>(loc, grad.getType(),
                                               b.getI64IntegerAttr(t),
                                               b.getI64IntegerAttr(0),
                                               b.getI64IntegerAttr(tag)))
                     ->getResult(0);
        total = total ? stamp(b.create<graph::AddOp>(loc, grad.getType(),
                                                     total, part))
                            ->getResult(0)
                      : part;
      }
      map.map(grad, total);
    }

    // The norm over the stages.
    if (root) {
      int64_t up = nextTag++, down = nextTag++;
      auto scalar = cast<RankedTensorType>(root.getOperand().getType());
      Value local;
      for (Operation &op : body.without_terminator()) {
        auto squares = dyn_cast<graph::SumSquaresOp>(op);
        if (!squares)
          continue;
        std::optional<std::string> param = parameterOf(&op);
        if (!param || firstHolder(*param) != s)
          continue;
        FailureOr<Value> grad = lookup(squares->getOperand(0));
        if (failed(grad))
          return failure();
        map.map(squares->getOperand(0), *grad);
        Value sq = stamp(b.clone(op, map))->getResult(0);
        local = local ? stamp(b.create<graph::AddOp>(loc, scalar, local, sq))
                            ->getResult(0)
                      : sq;
      }
      if (!local)
        local = stamp(b.create<graph::ConstantOp>(
                          loc, DenseElementsAttr::get(
                                   scalar, b.getFloatAttr(
                                               scalar.getElementType(), 0.0))))
                    ->getResult(0);
      if (normReduce) {
        IRMapping over;
        over.map(normReduce->getOperand(0), local);
        local = stamp(b.clone(*normReduce, over))->getResult(0);
      }
      auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
      if (s > 0) {
        Value below = stamp(b.create<sched::RecvOp>(loc, scalar, i64(s - 1),
                                                    i64(0), i64(up)))
                          ->getResult(0);
        local = stamp(b.create<graph::AddOp>(loc, scalar, below, local))
                    ->getResult(0);
      }
      if (s + 1 < p)
        stamp(b.create<sched::SendOp>(loc, local, i64(s + 1), i64(0), i64(up)));
      Value total = local;
      if (s + 1 < p)
        total = stamp(b.create<sched::RecvOp>(loc, scalar, i64(s + 1), i64(0),
                                              i64(down)))
                    ->getResult(0);
      if (s > 0)
        stamp(b.create<sched::SendOp>(loc, total, i64(s - 1), i64(0), i64(down)));
      map.map(root.getResult(),
              stamp(b.create<graph::SqrtOp>(loc, scalar, total))->getResult(0));
    }

    // The updates of this stage's parameters and whatever they read.
    for (Operation &op : body.without_terminator()) {
      if (norm.contains(&op) || op.getNumResults() == 0)
        continue;
      // Already cloned for the norm (2-hop sync's replication all-reduce
      // of the gradients): cloning it again would all-reduce them twice.
      if (llvm::all_of(op.getResults(),
                       [&](Value r) { return map.contains(r); }))
        continue;
      std::optional<std::string> param = parameterOf(&op);
      if (!param || !held[s].contains(*param))
        continue;
      for (Value operand : op.getOperands())
        if (failed(lookup(operand)))
          return failure();
      stamp(b.clone(op, map));
    }
    // A parameter a stage reads but whose gradient another stage holds (a
    // shared gradient findSharedParameters could not regroup by stage, so
    // that it was summed on one stage): the holder sends the updated value
    // to every such reader, which takes it as its own new value.
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto name = update.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      if (graph::getResultRole(update, i) != graph::Role::Parameter || !name)
        continue;
      int64_t tag = nextTag++;
      int64_t holder = firstHolder(name.getValue());
      if (holder < 0)
        continue;
      SmallVector<int64_t> readers;
      for (int64_t t = 0; t < p; ++t)
        if (!held[t].contains(name.getValue()) &&
            a.reads[t].contains(name.getValue()))
          readers.push_back(t);
      if (s == holder) {
        FailureOr<Value> updated = lookup(ret.getOperand(i));
        if (failed(updated))
          return failure();
        for (int64_t t : readers)
          stamp(b.create<sched::SendOp>(loc, *updated, b.getI64IntegerAttr(t),
                                        b.getI64IntegerAttr(0),
                                        b.getI64IntegerAttr(tag)));
      } else if (llvm::is_contained(readers, s)) {
        Value copy = stamp(b.create<sched::RecvOp>(
                               loc, ret.getOperand(i).getType(),
                               b.getI64IntegerAttr(holder),
                               b.getI64IntegerAttr(0),
                               b.getI64IntegerAttr(tag)))
                         ->getResult(0);
        results.push_back(copy);
        resultAttrs.push_back(update.getResultAttrDict(i));
      }
    }
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value v = ret.getOperand(i);
      Operation *def = v.getDefiningOp();
      bool mine = def && map.contains(v);
      if (!mine && def && !norm.contains(def)) {
        std::optional<std::string> param = parameterOf(def);
        mine = !param; // a global result (the clipped norm): every stage
      }
      if (!mine)
        continue;
      FailureOr<Value> value = lookup(v);
      if (failed(value))
        return failure();
      results.push_back(*value);
      resultAttrs.push_back(update.getResultAttrDict(i));
    }
    b.create<func::ReturnOp>(loc, results);
    return makeStageFunction(moduleBuilder, loc,
                             "optimizer_step_" + std::to_string(s), block,
                             results, argAttrs, resultAttrs, stageAttr);
  }

  /// The function `name` of stage `stageAttr` around `block`, which ends in
  /// a return of `results`.
  static func::FuncOp makeStageFunction(OpBuilder &moduleBuilder, Location loc,
                                        const std::string &name, Block *block,
                                        ArrayRef<Value> results,
                                        ArrayRef<DictionaryAttr> argAttrs,
                                        ArrayRef<DictionaryAttr> resultAttrs,
                                        IntegerAttr stageAttr) {
    auto func = moduleBuilder.create<func::FuncOp>(
        loc, name,
        FunctionType::get(loc.getContext(), block->getArgumentTypes(),
                          ValueRange(results).getTypes()));
    func.getBody().push_back(block);
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(resultAttrs);
    func->setAttr(sched::SchedDialect::kStageAttrName, stageAttr);
    return func;
  }

  /// Stages and phases of every op, the replicable ops, the crossing values.
  LogicalResult analyze(func::FuncOp step, StepAnalysis &a) {
    Block &body = step.getBody().front();
    // Values that depend on state other than the parameters (anything but
    // inputs, constants and parameters).
    llvm::DenseSet<Value> stateful, parameters;
    for (BlockArgument arg : step.getArguments()) {
      std::optional<graph::Role> role =
          graph::getArgumentRole(step, arg.getArgNumber());
      if (role == graph::Role::Parameter)
        parameters.insert(arg);
      else if (role != graph::Role::Input)
        stateful.insert(arg);
    }
    for (Operation &op : body.without_terminator()) {
      bool reads = llvm::any_of(op.getOperands(), [&](Value v) {
        return stateful.contains(v);
      });
      bool readsParameter = llvm::any_of(op.getOperands(), [&](Value v) {
        return parameters.contains(v);
      });
      // A pure op of inputs and constants, or the gather of a parameter's
      // shards (strata-partition) and what reshapes it: any stage computes
      // it again where it needs it (a gathered weight is not sent between
      // stages: each stage gathers over its own stage group).
      bool parameterOnly = llvm::all_of(op.getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return parameters.contains(v) || (def && a.replicable.contains(def));
      });
      bool gather = readsParameter && parameterOnly &&
                    (isa<sched::AllGatherOp>(op) || isMemoryEffectFree(&op));
      if (!reads && op.getNumRegions() == 0 &&
          ((isMemoryEffectFree(&op) && !readsParameter) || gather)) {
        a.replicable.insert(&op);
        for (Value r : op.getResults())
          if (gather)
            parameters.insert(r);
        continue;
      }
      for (Value r : op.getResults())
        stateful.insert(r);
    }
    // Stages and phases: strata-pipeline and autodiff placed every op they
    // made; an op strata-partition added (a reduce-scatter, a shard's
    // accumulation) takes the stage and phase of what it reads.
    for (Operation &op : body.without_terminator()) {
      if (a.replicable.contains(&op))
        continue;
      auto stage =
          op.getAttrOfType<IntegerAttr>(sched::SchedDialect::kStageAttrName);
      Phase phase = op.hasAttr(sched::SchedDialect::kBackwardAttrName)
                        ? Phase::Backward
                        : Phase::Forward;
      if (!stage) {
        int64_t from = -1;
        for (Value operand : op.getOperands())
          if (Operation *def = operand.getDefiningOp())
            if (a.stage.count(def)) {
              from = std::max(from, a.stage[def]);
              phase = std::max(phase, a.phase[def]);
            }
        if (from < 0)
          return op.emitError("strata-stage-programs: op has no stage and "
                              "reads nothing that has one");
        a.stage[&op] = from;
      } else {
        a.stage[&op] = stage.getInt();
      }
      a.phase[&op] = phase;
    }
    findSharedParameters(step, a);
    // Crossing values and their paths.
    for (Operation &op : body.without_terminator()) {
      if (a.replicable.contains(&op) || a.dropped.contains(&op))
        continue;
      int64_t own = a.stage[&op];
      for (Value r : op.getResults()) {
        int64_t lo = own, hi = own;
        for (Operation *user : r.getUsers()) {
          if (isa<func::ReturnOp>(user) || a.dropped.contains(user))
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

  /// The gradients whose contributions come from several stages: autodiff
  /// summed them in a chain add(add(c0, c1), c2) (then added the sum to the
  /// accumulator); each contribution is a leaf of that chain.
  void findSharedParameters(func::FuncOp step, StepAnalysis &a) {
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (graph::getResultRole(step, i) != graph::Role::Gradient)
        continue;
      auto name = step.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      Value total = ret.getOperand(i);
      SmallVector<Operation *> chain;
      Value accumulator;
      if (auto add = total.getDefiningOp<graph::AddOp>()) {
        auto arg = dyn_cast<BlockArgument>(add.getLhs());
        if (arg && graph::getArgumentRole(step, arg.getArgNumber()) ==
                       graph::Role::Gradient) {
          accumulator = arg;
          chain.push_back(add);
          total = add.getRhs();
        }
      }
      // Under partitioning: reduce_scatter(pad(reshape(chain)))[j].
      sched::ReduceScatterOp scatter =
          total.getDefiningOp<sched::ReduceScatterOp>();
      SmallVector<Operation *> flatten;
      unsigned scatterIndex = 0;
      if (scatter) {
        scatterIndex = cast<OpResult>(total).getResultNumber();
        total = scatter->getOperand(scatterIndex);
        while (isa_and_nonnull<graph::ReshapeOp, graph::PadOp>(
                   total.getDefiningOp()) &&
               total.hasOneUse()) {
          flatten.push_back(total.getDefiningOp());
          total = flatten.back()->getOperand(0);
        }
        std::reverse(flatten.begin(), flatten.end());
      }
      SmallVector<Value> leaves;
      Value v = total;
      while (auto add = v.getDefiningOp<graph::AddOp>()) {
        if (!add->hasOneUse() && v != total)
          break;
        chain.push_back(add);
        leaves.push_back(add.getRhs());
        v = add.getLhs();
      }
      leaves.push_back(v);
      std::reverse(leaves.begin(), leaves.end());
      StepAnalysis::Shared shared;
      bool regroupable = true;
      // Under partitioning, a contribution mixed precision widens on the
      // stage that adds it is its producer's: the cast moves there, so the
      // narrow value is not sent every micro-batch.
      SmallVector<std::pair<Operation *, int64_t>> moved;
      for (Value leaf : leaves) {
        Operation *def = leaf.getDefiningOp();
        regroupable &= def && !a.replicable.contains(def);
        if (!regroupable)
          break;
        int64_t stage = a.stage[def];
        Operation *from = isa<graph::CastOp>(def)
                              ? def->getOperand(0).getDefiningOp()
                              : nullptr;
        if (scatter && from && def->hasOneUse() &&
            !a.replicable.contains(from) && a.stage[from] != stage) {
          stage = a.stage[from];
          moved.push_back({def, stage});
        }
        shared.contributions[stage].push_back(leaf);
      }
      if (!regroupable || shared.contributions.size() < 2)
        continue;
      for (auto [cast, stage] : moved) {
        a.stage[cast] = stage;
        cast->setAttr(sched::SchedDialect::kStageAttrName,
                      IntegerAttr::get(IntegerType::get(cast->getContext(), 64),
                                       stage));
      }
      shared.gradName = name ? name.getValue().str() : std::string();
      shared.accumulator = accumulator;
      if (scatter) {
        shared.flatten = flatten;
        shared.scatter = takeOutOfBucket(scatter, scatterIndex, a);
        a.dropped.insert(shared.scatter);
        for (Operation *op : flatten)
          a.dropped.insert(op);
      }
      a.shared.push_back(std::move(shared));
      for (Operation *op : chain)
        a.dropped.insert(op);
    }
  }

  /// Replaces `scatter`, the reduce-scatter of a bucket, by one of its
  /// operand `index` alone (returned) and one of the other operands; both
  /// keep its stage and phase.
  static sched::ReduceScatterOp
  takeOutOfBucket(sched::ReduceScatterOp scatter, unsigned index,
                  StepAnalysis &a) {
    OpBuilder b(scatter);
    Location loc = scatter.getLoc();
    auto alone = b.create<sched::ReduceScatterOp>(
        loc, TypeRange{scatter->getResult(index).getType()},
        scatter.getGroupAttr(), ValueRange{scatter->getOperand(index)});
    scatter->getResult(index).replaceAllUsesWith(alone->getResult(0));
    a.stage[alone] = a.stage.lookup(scatter);
    a.phase[alone] = a.phase.lookup(scatter);
    if (scatter->getNumOperands() > 1) {
      SmallVector<Value> operands;
      SmallVector<Type> types;
      SmallVector<Value> results;
      for (unsigned i = 0; i < scatter->getNumOperands(); ++i) {
        if (i == index)
          continue;
        operands.push_back(scatter->getOperand(i));
        types.push_back(scatter->getResult(i).getType());
        results.push_back(scatter->getResult(i));
      }
      auto rest = b.create<sched::ReduceScatterOp>(
          loc, types, scatter.getGroupAttr(), operands);
      for (auto [from, to] : llvm::zip(results, rest.getResults()))
        from.replaceAllUsesWith(to);
      a.stage[rest] = a.stage.lookup(scatter);
      a.phase[rest] = a.phase.lookup(scatter);
    }
    a.stage.erase(scatter);
    a.phase.erase(scatter);
    scatter.erase();
    return alone;
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
  FailureOr<func::FuncOp> buildStage(func::FuncOp step, const StepAnalysis &a,
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
    SmallVector<Value> sharedSums(a.shared.size());
    SmallVector<int64_t> sharedCounts(a.shared.size(), 0);
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
      Operation *before = block->empty() ? nullptr : &block->back();
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
        if (a.replicable.contains(&op) || a.dropped.contains(&op) ||
            a.stage.lookup(&op) != s || a.phase.lookup(&op) != action.phase)
          continue;
        for (Value operand : op.getOperands())
          if (failed(lookup(operand, k)))
            return failure();
        b.clone(op, maps[k]);
      }
      // This stage's sum of its contributions to a shared parameter's
      // gradient, once the last of them in this micro-batch is computed.
      for (size_t i = 0; i < a.shared.size(); ++i) {
        const StepAnalysis::Shared &sh = a.shared[i];
        auto it = sh.contributions.find(s);
        if (it == sh.contributions.end())
          continue;
        Phase last = Phase::Forward;
        for (Value c : it->second)
          last = std::max(last, a.phase.lookup(c.getDefiningOp()));
        if (last != action.phase)
          continue;
        Value sum;
        for (Value c : it->second) {
          Value mine = maps[k].lookup(c);
          sum = sum ? b.create<graph::AddOp>(loc, sum.getType(), sum, mine)
                          .getResult()
                    : mine;
        }
        Value &acc = sharedSums[i];
        if (!acc && sh.accumulator && !sh.scatter) {
          FailureOr<Value> start = lookup(sh.accumulator, 0);
          if (failed(start))
            return failure();
          acc = *start;
        }
        acc = acc ? b.create<graph::AddOp>(loc, acc.getType(), acc, sum)
                        .getResult()
                  : sum;
        // Partitioned: the whole sum of the step, reduce-scattered over the
        // stage group once, after the last micro-batch's contributions.
        if (sh.scatter && ++sharedCounts[i] == m) {
          IRMapping flat;
          flat.map(sh.flatten.empty() ? sh.scatter->getOperand(0)
                                      : sh.flatten.front()->getOperand(0),
                   acc);
          for (Operation *op : sh.flatten)
            b.clone(*op, flat);
          acc = b.clone(*sh.scatter, flat)->getResult(0);
          if (sh.accumulator) {
            FailureOr<Value> start = lookup(sh.accumulator, 0);
            if (failed(start))
              return failure();
            acc = b.create<graph::AddOp>(loc, acc.getType(), *start, acc)
                      .getResult();
          }
        }
        for (Operation *op = acc.getDefiningOp(); op && op->getBlock() == block;
             op = op->getPrevNode()) {
          if (op->hasAttr(sched::SchedDialect::kStageAttrName))
            break;
          op->setAttr(sched::SchedDialect::kStageAttrName, stageAttr);
          op->setAttr(sched::SchedDialect::kBackwardAttrName, b.getUnitAttr());
        }
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
      // Every op this action added carries it in its location.
      sched::Action mark{action.phase == Phase::Forward    ? 'F'
                         : action.phase == Phase::Backward ? 'B'
                                                           : 'W',
                         k};
      for (Operation *op = before ? before->getNextNode()
                                  : (block->empty() ? nullptr : &block->front());
           op; op = op->getNextNode())
        op->setLoc(sched::withAction(op->getLoc(), mark));
    }

    // Results: the losses of every micro-batch, the last values of the
    // gradients and buffers this stage computes.
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value v = ret.getOperand(i);
      auto name = step.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      auto shared = llvm::find_if(a.shared, [&](const StepAnalysis::Shared &sh) {
        return name && sh.gradName == name.getValue();
      });
      if (shared != a.shared.end()) {
        if (Value sum = sharedSums[shared - a.shared.begin()]) {
          results.push_back(sum);
          resultAttrs.push_back(step.getResultAttrDict(i));
        }
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (!def || a.replicable.contains(def) || a.stage.lookup(def) != s)
        continue;
      std::optional<graph::Role> role = graph::getResultRole(step, i);
      bool perMicroBatch = role == graph::Role::Output;
      for (int64_t k = perMicroBatch ? 0 : m - 1; k < m; ++k) {
        results.push_back(maps[k].lookup(v));
        NamedAttrList attrs(step.getResultAttrDict(i));
        // One output a micro-batch: "strata.loss#3".
        if (perMicroBatch && name)
          attrs.set(graph::kNameAttrName,
                    b.getStringAttr(name.getValue() + "#" + std::to_string(k)));
        resultAttrs.push_back(attrs.getDictionary(ctx));
      }
    }
    b.create<func::ReturnOp>(loc, results);
    return makeStageFunction(moduleBuilder, loc,
                             "pipeline_step_" + std::to_string(s), block,
                             results, argAttrs, resultAttrs, stageAttr);
  }
};

} // namespace
