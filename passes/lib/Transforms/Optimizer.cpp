//===- Optimizer.cpp - The optimizer step ---------------------------------===//
//
// strata-optimizer: builds @optimizer_step from the gradients @micro_step
// returns: the global gradient norm, the clipping factor, and one update op
// per parameter (graph.adamw_update or graph.sgd_update), each of which the
// runtime runs in place on the parameter and its states.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace strata {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

using graph::StateKind;

/// A parameter that @micro_step returns a gradient for.
struct TrainedParameter {
  std::string name;
  Type type;
};

/// The parameters with a gradient, in the order of their gradients.
SmallVector<TrainedParameter> collectTrainedParameters(func::FuncOp step) {
  llvm::StringMap<Type> paramTypes;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(i, graph::kNameAttrName);
    if (name && graph::getArgumentRole(step, i) == graph::Role::Parameter)
      paramTypes[name.getValue()] = step.getArgument(i).getType();
  }
  SmallVector<TrainedParameter> params;
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    auto name = step.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
    std::optional<StringRef> of =
        name ? graph::stateParameter(StateKind::Gradient, name.getValue())
             : std::nullopt;
    if (graph::getResultRole(step, i) != graph::Role::Gradient || !of)
      continue;
    std::string param = of->str();
    params.push_back({param, paramTypes.lookup(param)});
  }
  return params;
}

struct OptimizerPass : public strata::impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step) {
      module.emitError("strata-optimizer: run strata-autodiff first (no "
                       "@micro_step)");
      return signalPassFailure();
    }
    if (accum < 1) {
      module.emitError("strata-optimizer: accum must be at least 1");
      return signalPassFailure();
    }
    buildOptimizerStep(step, collectTrainedParameters(step));
  }

private:
  /// The optimizer states of each parameter, in argument order.
  SmallVector<StateKind> stateKinds() const {
    if (optimizer == Optimizer::AdamW)
      return {StateKind::AdamWExpAvg, StateKind::AdamWExpAvgSq};
    return {StateKind::SGDMomentum};
  }

  /// Arguments: per parameter (value, gradient, states), then lr and step,
  /// then the loss-scaling state.
  void buildArguments(MLIRContext *ctx, ArrayRef<TrainedParameter> params,
                      SmallVectorImpl<Type> &argTypes,
                      SmallVectorImpl<DictionaryAttr> &argAttrs) const {
    for (const TrainedParameter &param : params) {
      argTypes.push_back(param.type);
      argAttrs.push_back(
          graph::roleAndName(ctx, graph::Role::Parameter, param.name));
      argTypes.push_back(param.type);
      argAttrs.push_back(graph::roleAndName(
          ctx, graph::Role::Gradient,
          graph::stateName(StateKind::Gradient, param.name)));
      for (StateKind state : stateKinds()) {
        argTypes.push_back(param.type);
        argAttrs.push_back(graph::roleAndName(
            ctx, graph::stateRole(state), graph::stateName(state, param.name)));
      }
    }
    Builder b(ctx);
    auto f64Scalar = RankedTensorType::get({}, b.getF64Type());
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
    argTypes.push_back(f64Scalar);
    argAttrs.push_back(
        graph::roleAndName(ctx, graph::Role::Input, "strata.lr"));
    argTypes.push_back(i64Scalar);
    argAttrs.push_back(
        graph::roleAndName(ctx, graph::Role::Input, "strata.step"));
    if (lossScale) {
      // Dynamic loss scaling state, kept by strata-run and in checkpoints:
      // the scale, steps since the last overflow, updates applied.
      argTypes.push_back(f32Scalar);
      argAttrs.push_back(graph::roleAndName(ctx, graph::Role::OptimizerState,
                                            "strata.loss_scale"));
      argTypes.push_back(i64Scalar);
      argAttrs.push_back(graph::roleAndName(ctx, graph::Role::OptimizerState,
                                            "strata.good_steps"));
      argTypes.push_back(i64Scalar);
      argAttrs.push_back(graph::roleAndName(ctx, graph::Role::OptimizerState,
                                            "strata.applied_steps"));
    }
  }

  /// Builds @optimizer_step after `step`.
  void buildOptimizerStep(func::FuncOp step,
                          ArrayRef<TrainedParameter> params) {
    MLIRContext *ctx = step.getContext();
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    buildArguments(ctx, params, argTypes, argAttrs);

    OpBuilder b(ctx);
    b.setInsertionPointAfter(step);
    Location loc = step.getLoc();
    auto func = b.create<func::FuncOp>(loc, "optimizer_step",
                                       b.getFunctionType(argTypes, {}));
    func.setAllArgAttrs(argAttrs);
    Block *body = func.addEntryBlock();
    b.setInsertionPointToStart(body);

    auto [norm, gradScale] = buildNormAndGradScale(b, loc, body, params.size());
    SmallVector<Value> results{norm};
    SmallVector<DictionaryAttr> resultAttrs{
        graph::roleAndName(ctx, graph::Role::Output, "strata.grad_norm")};
    unsigned perParam = 2 + stateKinds().size();
    Value lr = body->getArgument(params.size() * perParam);
    Value stepIndex = body->getArgument(params.size() * perParam + 1);
    for (auto [p, param] : llvm::enumerate(params)) {
      ValueRange state = body->getArguments().slice(p * perParam, perParam);
      buildUpdate(b, loc, param.type, state, lr, stepIndex, gradScale, results);
      resultAttrs.push_back(
          graph::roleAndName(ctx, graph::Role::Parameter, param.name));
      for (StateKind kind : stateKinds())
        resultAttrs.push_back(graph::roleAndName(
            ctx, graph::stateRole(kind), graph::stateName(kind, param.name)));
    }
    b.create<func::ReturnOp>(loc, results);
    func.setFunctionType(
        b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }

  /// The global norm of the averaged (and unscaled) gradient, and the factor
  /// every update multiplies its gradient by: 1/accum, unscaling, clipping,
  /// and with loss scaling NaN on overflow.
  std::pair<Value, Value> buildNormAndGradScale(OpBuilder &b, Location loc,
                                                Block *body,
                                                unsigned numParams) const {
    auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
    auto constant = [&](double v) -> Value {
      return b.create<graph::ConstantOp>(
          loc, DenseElementsAttr::get(f32Scalar, b.getF32FloatAttr(v)));
    };
    unsigned perParam = 2 + stateKinds().size();
    Value sumSquares;
    for (unsigned p = 0; p < numParams; ++p) {
      Value g = body->getArgument(p * perParam + 1);
      Value s = b.create<graph::SumSquaresOp>(loc, TypeRange{f32Scalar},
                                              ValueRange{g})
                    .getResult(0);
      sumSquares = sumSquares
                       ? b.create<graph::AddOp>(loc, f32Scalar, sumSquares, s)
                       : s;
    }
    if (!sumSquares)
      sumSquares = constant(0.0);
    Value rawNorm = b.create<graph::SqrtOp>(loc, f32Scalar, sumSquares);
    Value norm = rawNorm;
    Value gradScale = constant(1.0 / accum);
    if (lossScale) {
      // Unscale: the gradients hold scale * the true gradient.
      Value scale = body->getArgument(numParams * perParam + 2);
      gradScale = b.create<graph::DivOp>(loc, f32Scalar, gradScale, scale);
      norm = b.create<graph::MulOp>(loc, f32Scalar, norm, gradScale);
    } else if (accum > 1) {
      norm = b.create<graph::MulOp>(loc, f32Scalar, norm, gradScale);
    }
    if (clipNorm > 0.0) {
      // torch.nn.utils.clip_grad_norm_: min(1, max_norm / (norm + 1e-6)).
      Value denom = b.create<graph::AddOp>(loc, f32Scalar, norm, constant(1e-6));
      Value coef = b.create<graph::DivOp>(loc, f32Scalar, constant(clipNorm),
                                          denom);
      coef = b.create<graph::MinOp>(loc, f32Scalar, coef, constant(1.0));
      gradScale = b.create<graph::MulOp>(loc, f32Scalar, coef, gradScale);
    }
    if (lossScale) {
      // An overflowed gradient (inf or NaN norm) makes grad_scale NaN
      // (inf * 0), and the updates skip the step.
      Value zero = b.create<graph::MulOp>(loc, f32Scalar, rawNorm, constant(0.0));
      gradScale = b.create<graph::AddOp>(loc, f32Scalar, gradScale, zero);
    }
    return {norm, gradScale};
  }

  /// One parameter's update; `state` is its (value, gradient, optimizer
  /// states) arguments. Appends the new value and states to `results`.
  void buildUpdate(OpBuilder &b, Location loc, Type type, ValueRange state,
                   Value lr, Value stepIndex, Value gradScale,
                   SmallVectorImpl<Value> &results) const {
    Operation *update;
    if (optimizer == Optimizer::AdamW) {
      update = b.create<graph::AdamWUpdateOp>(
          loc, TypeRange{type, type, type},
          ValueRange{state[0], state[1], state[2], state[3]}, lr, stepIndex,
          gradScale, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
          b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay));
    } else {
      update = b.create<graph::SGDUpdateOp>(
          loc, TypeRange{type, type}, ValueRange{state[0], state[1], state[2]},
          lr, stepIndex, gradScale, b.getF64FloatAttr(momentum),
          b.getF64FloatAttr(dampening), b.getF64FloatAttr(weightDecay),
          b.getBoolAttr(nesterov));
    }
    results.append(update->getResults().begin(), update->getResults().end());
  }
};

} // namespace
