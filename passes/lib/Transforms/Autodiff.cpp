//===- Autodiff.cpp - The loss and the backward graph ---------------------===//
//
// strata-autodiff: clones @main into @micro_step, appends the loss and the
// gradient of every trainable parameter. Reverse-mode, one pass over the
// forward ops in reverse order; each op builds its own gradient through
// GradientOpInterface (ir/lib/Dialect/Graph/IR/GraphGradients.cpp).
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/GlobPattern.h"

namespace strata {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

StringRef argName(func::FuncOp func, unsigned i) {
  auto name = func.getArgAttrOfType<StringAttr>(i, graph::kNameAttrName);
  return name ? name.getValue() : StringRef();
}

/// Appends an argument with a role and a name.
BlockArgument addArgument(func::FuncOp func, Type type, graph::Role role,
                          StringRef name) {
  unsigned index = func.getNumArguments();
  (void)func.insertArgument(index, type,
                            graph::roleAndName(func.getContext(), role, name),
                            func.getLoc());
  return func.getArgument(index);
}

/// With pipeline stages: puts the ops after `after` and before `before`
/// that have no stage yet on `stage` (nothing when `stage` is null), and
/// marks them `sched.backward` when they are gradient ops.
void stampStage(Block &body, Operation *after, Operation *before,
                Attribute stage, bool backward) {
  if (!stage)
    return;
  Operation *op = after ? after->getNextNode() : &body.front();
  for (; op && op != before; op = op->getNextNode()) {
    if (op->hasAttr(sched::SchedDialect::kStageAttrName))
      continue;
    op->setAttr(sched::SchedDialect::kStageAttrName, stage);
    if (backward)
      op->setAttr(sched::SchedDialect::kBackwardAttrName,
                  UnitAttr::get(op->getContext()));
  }
}

/// The last stage of a pipelined module (where the loss is), else null.
Attribute lastStage(func::FuncOp func) {
  auto module = func->getParentOfType<ModuleOp>();
  auto pipeline = module ? module->getAttrOfType<sched::PipelineAttr>(
                               sched::SchedDialect::kPipelineAttrName)
                         : sched::PipelineAttr();
  if (!pipeline)
    return {};
  return IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                          pipeline.getStages() - 1);
}

struct AutodiffPass : public strata::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("strata-autodiff: the module has no @main");
      return signalPassFailure();
    }
    if (module.lookupSymbol("micro_step")) {
      module.emitError("strata-autodiff: @micro_step exists already");
      return signalPassFailure();
    }
    SmallVector<llvm::GlobPattern> frozen;
    for (const std::string &glob : freeze) {
      auto pattern = llvm::GlobPattern::create(glob);
      if (!pattern) {
        module.emitError("strata-autodiff: bad --freeze pattern '")
            << glob << "': " << llvm::toString(pattern.takeError());
        return signalPassFailure();
      }
      frozen.push_back(std::move(*pattern));
    }

    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(main);
    auto step = cast<func::FuncOp>(builder.clone(*main));
    step.setSymName("micro_step");
    step->removeAttr(graph::kOutputNamesAttrName);
    if (failed(buildMicroStep(step, frozen)))
      return signalPassFailure();
  }

  /// Returns the loss value, adding `labels` and the cross-entropy if the
  /// model has no scalar loss output of its own.
  FailureOr<Value> buildLoss(func::FuncOp func, func::ReturnOp ret,
                             OpBuilder &b) {
    SmallVector<unsigned> outputs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (graph::getResultRole(func, i) == graph::Role::Output)
        outputs.push_back(i);
    }
    for (unsigned i : outputs) {
      auto type = cast<RankedTensorType>(ret.getOperand(i).getType());
      if (type.getRank() == 0 && isa<FloatType>(type.getElementType()) &&
          logits.empty())
        return ret.getOperand(i);
    }
    if (outputs.empty())
      return func.emitError("strata-autodiff: the model has no outputs");
    Value logitsValue = ret.getOperand(outputs.front());
    if (!logits.empty()) {
      logitsValue = nullptr;
      for (unsigned i : outputs) {
        auto name = func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
        if (name && name.getValue() == logits)
          logitsValue = ret.getOperand(i);
      }
      if (!logitsValue)
        return func.emitError("strata-autodiff: --logits names '")
               << logits << "', which is not an output of the model";
    }
    auto type = cast<RankedTensorType>(logitsValue.getType());
    if (type.getRank() < 2 || !isa<FloatType>(type.getElementType()))
      return func.emitError("strata-autodiff: the loss needs float logits of "
                            "rank 2 or more (classes last), but the output is ")
             << type;
    ArrayRef<int64_t> shape = type.getShape();
    int64_t classes = shape.back();
    int64_t rows = type.getNumElements() / classes;
    SmallVector<int64_t> labelShape(shape.drop_back());
    BlockArgument labels =
        addArgument(func, RankedTensorType::get(labelShape, b.getI64Type()),
                    graph::Role::Input, "labels");
    func.setArgAttr(labels.getArgNumber(), "graph.int_high",
                    b.getI64IntegerAttr(classes));

    Location loc = func.getLoc();
    Value flatLogits = logitsValue, flatLabels = labels;
    if (type.getRank() > 2) {
      flatLogits = b.create<graph::ReshapeOp>(
          loc, RankedTensorType::get({rows, classes}, type.getElementType()),
          logitsValue);
      flatLabels = b.create<graph::ReshapeOp>(
          loc, RankedTensorType::get({rows}, b.getI64Type()), labels);
    }
    return b
        .create<graph::CrossEntropyOp>(
            loc, RankedTensorType::get({}, type.getElementType()), flatLogits,
            flatLabels, Value(),
            graph::ReductionAttr::get(b.getContext(), graph::Reduction::Mean),
            b.getI64IntegerAttr(ignoreIndex))
        .getResult();
  }

  /// Turns `func`, a clone of @main, into @micro_step: the loss, the
  /// backward sweep, and the loss and gradients as results.
  LogicalResult buildMicroStep(func::FuncOp func,
                               ArrayRef<llvm::GlobPattern> frozen) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    Operation *lastForward = ret->getPrevNode();
    FailureOr<Value> loss = buildLoss(func, ret, b);
    if (failed(loss))
      return failure();

    // Trainable parameters, and every value that depends on one.
    llvm::DenseSet<Value> needsGrad;
    SmallVector<BlockArgument> params =
        collectTrainableParameters(func, frozen, needsGrad);
    SmallVector<Operation *> forward = markDependentValues(body, b, needsGrad);
    if (!needsGrad.contains(*loss))
      return func.emitError("strata-autodiff: the loss does not depend on any "
                            "trainable parameter");

    // Reverse sweep; gradient ops go before the return, in creation order.
    llvm::DenseMap<Value, Value> grads;
    grads[*loss] = seedLossGradient(func, *loss, b);
    // The loss and its seed run on the last stage.
    stampStage(body, lastForward, ret, lastStage(func), /*backward=*/false);
    if (failed(backpropagate(forward, needsGrad, ret, b, grads)))
      return failure();

    returnGradients(func, ret, *loss, params, grads, b);
    eraseDeadOps(body);
    return success();
  }

  /// The parameters not matched by a --freeze pattern, which are also the
  /// first values in `needsGrad`.
  static SmallVector<BlockArgument>
  collectTrainableParameters(func::FuncOp func,
                             ArrayRef<llvm::GlobPattern> frozen,
                             llvm::DenseSet<Value> &needsGrad) {
    SmallVector<BlockArgument> params;
    for (BlockArgument arg : func.getArguments()) {
      if (graph::getArgumentRole(func, arg.getArgNumber()) !=
          graph::Role::Parameter)
        continue;
      StringRef name = argName(func, arg.getArgNumber());
      if (llvm::any_of(frozen, [&](const llvm::GlobPattern &p) {
            return p.match(name);
          }))
        continue;
      params.push_back(arg);
      needsGrad.insert(arg);
    }
    return params;
  }

  /// Adds to `needsGrad` every float result that depends differentiably on
  /// a value in it, numbers the random ops' streams, and returns the forward
  /// ops in order.
  static SmallVector<Operation *>
  markDependentValues(Block &body, OpBuilder &b,
                      llvm::DenseSet<Value> &needsGrad) {
    SmallVector<Operation *> forward;
    int64_t rngStream = 0;
    for (Operation &op : body.without_terminator()) {
      forward.push_back(&op);
      // A random op and its gradient draw the same numbers.
      if (auto attention = dyn_cast<graph::AttentionOp>(op))
        if (attention.getDropoutRatio().convertToDouble() > 0.0)
          op.setAttr("rng_stream", b.getI64IntegerAttr(++rngStream));
      auto iface = dyn_cast<graph::GradientOpInterface>(op);
      bool depends = false;
      for (OpOperand &operand : op.getOpOperands())
        if (needsGrad.contains(operand.get()) &&
            (!iface || iface.isDifferentiableOperand(operand.getOperandNumber())))
          depends = true;
      if (!depends)
        continue;
      for (Value result : op.getResults())
        if (isa<FloatType>(getElementTypeOrSelf(result.getType())))
          needsGrad.insert(result);
    }
    return forward;
  }

  /// The gradient of the loss with respect to itself: the loss weight, times
  /// the loss scale with loss scaling.
  Value seedLossGradient(func::FuncOp func, Value loss, OpBuilder &b) {
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (!lossScale)
      return b.create<graph::ConstantOp>(
          func.getLoc(),
          DenseElementsAttr::get(
              lossType, b.getFloatAttr(lossType.getElementType(),
                                       double(lossWeight))));
    // fp16: d(loss * scale) / d(loss) = scale.
    // Persistent: strata-run adjusts it, checkpoints keep it.
    Value scale = addArgument(func, lossType, graph::Role::OptimizerState,
                              "strata.loss_scale");
    if (lossWeight != 1.0)
      scale = b.create<graph::MulOp>(
          func.getLoc(), lossType, scale,
          b.create<graph::ConstantOp>(
              func.getLoc(),
              DenseElementsAttr::get(
                  lossType, b.getFloatAttr(lossType.getElementType(),
                                           double(lossWeight)))));
    return scale;
  }

  /// The reverse sweep over `forward`: each op that has a result gradient
  /// and an operand that needs one builds its operand gradients before
  /// `ret`; gradients reaching one value are summed.
  static LogicalResult backpropagate(ArrayRef<Operation *> forward,
                                     const llvm::DenseSet<Value> &needsGrad,
                                     func::ReturnOp ret, OpBuilder &b,
                                     llvm::DenseMap<Value, Value> &grads) {
    for (Operation *op : llvm::reverse(forward)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value result : op->getResults()) {
        Value g = grads.lookup(result);
        resultGrads.push_back(g);
        any |= static_cast<bool>(g);
      }
      if (!any)
        continue;
      bool wanted = llvm::any_of(op->getOperands(), [&](Value v) {
        return needsGrad.contains(v);
      });
      if (!wanted)
        continue;
      auto iface = dyn_cast<graph::GradientOpInterface>(op);
      if (!iface)
        return op->emitError("strata-autodiff: no gradient for '")
               << op->getName() << "'";
      SmallVector<Value> operandGrads;
      b.setInsertionPoint(ret);
      Operation *mark = ret->getPrevNode();
      if (failed(iface.buildGradient(b, resultGrads, operandGrads)))
        return failure();
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!g || !needsGrad.contains(operand))
          continue;
        if (g.getType() != operand.getType())
          return op->emitError("strata-autodiff: the gradient of '")
                 << op->getName() << "' has type " << g.getType()
                 << ", its operand " << operand.getType();
        Value &slot = grads[operand];
        slot = slot ? b.create<graph::AddOp>(op->getLoc(), g.getType(), slot, g)
                          .getResult()
                    : g;
      }
      // A gradient op (and a sum of gradients reaching this op's operands)
      // runs on the stage of the op it differentiates.
      stampStage(*ret->getBlock(), mark, ret,
                 op->getAttr(sched::SchedDialect::kStageAttrName),
                 /*backward=*/true);
    }
    return success();
  }

  /// Replaces `ret` by a return of the loss, a gradient per parameter (added
  /// to a running sum with `accumulate`) and the buffer updates.
  void returnGradients(func::FuncOp func, func::ReturnOp ret, Value loss,
                       ArrayRef<BlockArgument> params,
                       const llvm::DenseMap<Value, Value> &grads,
                       OpBuilder &b) {
    MLIRContext *ctx = func.getContext();
    SmallVector<Value> results{loss};
    SmallVector<std::pair<graph::Role, StringRef>> resultInfo{
        {graph::Role::Output, "strata.loss"}};
    // resultInfo points into gradNames: reserved, so it never reallocates.
    std::vector<std::string> gradNames;
    gradNames.reserve(params.size());
    // As PyTorch: a parameter the loss does not reach gets no update.
    SmallVector<BlockArgument> trained;
    for (BlockArgument param : params)
      if (grads.lookup(param)) {
        trained.push_back(param);
        gradNames.push_back(graph::stateName(
            graph::StateKind::Gradient, argName(func, param.getArgNumber())));
      }
    // The running sums, appended in one call (one insertArgument per
    // parameter rebuilt the list of argument attributes each time, and
    // the context kept every list: quadratic in the parameters).
    unsigned firstSum = func.getNumArguments();
    if (accumulate) {
      SmallVector<unsigned> at(trained.size(), firstSum);
      SmallVector<Type> types;
      SmallVector<DictionaryAttr> attrs;
      for (auto [param, name] : llvm::zip(trained, gradNames)) {
        types.push_back(grads.lookup(param).getType());
        attrs.push_back(graph::roleAndName(ctx, graph::Role::Gradient, name));
      }
      SmallVector<Location> locs(trained.size(), func.getLoc());
      (void)func.insertArguments(at, types, attrs, locs);
    }
    b.setInsertionPoint(ret);
    for (auto [i, param] : llvm::enumerate(trained)) {
      Value g = grads.lookup(param);
      if (accumulate) {
        BlockArgument sum = func.getArgument(firstSum + i);
        Operation *mark = ret->getPrevNode();
        Operation *def = g.getDefiningOp();
        g = b.create<graph::AddOp>(func.getLoc(), g.getType(), sum, g);
        stampStage(*ret->getBlock(), mark, ret,
                   def ? def->getAttr(sched::SchedDialect::kStageAttrName)
                       : Attribute(),
                   /*backward=*/true);
      }
      results.push_back(g);
      resultInfo.push_back({graph::Role::Gradient, gradNames[i]});
    }
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      if (graph::getResultRole(func, i) == graph::Role::Buffer) {
        results.push_back(ret.getOperand(i));
        resultInfo.push_back({graph::Role::Buffer, name.getValue()});
      }
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    func.setFunctionType(FunctionType::get(
        ctx, func.getArgumentTypes(), ValueRange(results).getTypes()));
    SmallVector<DictionaryAttr> resultAttrs;
    for (auto &[role, name] : resultInfo)
      resultAttrs.push_back(graph::roleAndName(ctx, role, name));
    func.setAllResultAttrs(resultAttrs);
  }

  /// Removes side-effect-free ops whose results nobody reads (the model
  /// outputs the loss does not need, unused operand gradients).
  static void eraseDeadOps(Block &body) {
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (op->use_empty() && isMemoryEffectFree(op))
        op->erase();
  }
};

} // namespace
