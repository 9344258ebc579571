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

    // The parameters with a gradient, by name and type.
    MLIRContext *ctx = module.getContext();
    llvm::StringMap<Type> paramTypes;
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto name = step.getArgAttrOfType<StringAttr>(i, graph::kNameAttrName);
      if (name && graph::getArgumentRole(step, i) == graph::Role::Parameter)
        paramTypes[name.getValue()] = step.getArgument(i).getType();
    }
    SmallVector<std::pair<std::string, Type>> params;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto name = step.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      std::optional<StringRef> of =
          name ? graph::stateParameter(graph::StateKind::Gradient,
                                       name.getValue())
               : std::nullopt;
      if (graph::getResultRole(step, i) != graph::Role::Gradient || !of)
        continue;
      std::string param = of->str();
      params.push_back({param, paramTypes.lookup(param)});
    }

    // Arguments: per parameter (value, gradient, states), then lr and step.
    bool adamw = optimizer == Optimizer::AdamW;
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    auto entry = [&](graph::Role role, StringRef name) {
      NamedAttribute attrs[] = {graph::nameEntry(ctx, name),
                                graph::roleEntry(ctx, role)};
      return DictionaryAttr::get(ctx, attrs);
    };
    using graph::StateKind;
    SmallVector<StateKind> stateKinds =
        adamw ? SmallVector<StateKind>{StateKind::AdamWExpAvg,
                                       StateKind::AdamWExpAvgSq}
              : SmallVector<StateKind>{StateKind::SGDMomentum};
    for (auto &[name, type] : params) {
      argTypes.push_back(type);
      argAttrs.push_back(entry(graph::Role::Parameter, name));
      argTypes.push_back(type);
      argAttrs.push_back(entry(graph::Role::Gradient,
                               graph::stateName(StateKind::Gradient, name)));
      for (StateKind state : stateKinds) {
        argTypes.push_back(type);
        argAttrs.push_back(entry(graph::stateRole(state),
                                 graph::stateName(state, name)));
      }
    }
    OpBuilder b(ctx);
    auto f64Scalar = RankedTensorType::get({}, b.getF64Type());
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
    argTypes.push_back(f64Scalar);
    argAttrs.push_back(entry(graph::Role::Input, "strata.lr"));
    argTypes.push_back(i64Scalar);
    argAttrs.push_back(entry(graph::Role::Input, "strata.step"));
    if (lossScale) {
      // Dynamic loss scaling state, kept by strata-run and in checkpoints:
      // the scale, steps since the last overflow, updates applied.
      argTypes.push_back(f32Scalar);
      argAttrs.push_back(entry(graph::Role::OptimizerState, "strata.loss_scale"));
      argTypes.push_back(i64Scalar);
      argAttrs.push_back(entry(graph::Role::OptimizerState, "strata.good_steps"));
      argTypes.push_back(i64Scalar);
      argAttrs.push_back(entry(graph::Role::OptimizerState, "strata.applied_steps"));
    }

    b.setInsertionPointAfter(step);
    Location loc = step.getLoc();
    auto func = b.create<func::FuncOp>(loc, "optimizer_step",
                                       b.getFunctionType(argTypes, {}));
    func.setAllArgAttrs(argAttrs);
    Block *body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
    unsigned perParam = 2 + stateKinds.size();
    Value lr = body->getArgument(params.size() * perParam);
    Value stepIndex = body->getArgument(params.size() * perParam + 1);

    auto constant = [&](double v) -> Value {
      return b.create<graph::ConstantOp>(
          loc, DenseElementsAttr::get(f32Scalar, b.getF32FloatAttr(v)));
    };
    // Global norm of the averaged gradient.
    Value sumSquares;
    for (unsigned p = 0; p < params.size(); ++p) {
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
      Value scale = body->getArgument(params.size() * perParam + 2);
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

    SmallVector<Value> results{norm};
    SmallVector<DictionaryAttr> resultAttrs{entry(graph::Role::Output, "strata.grad_norm")};
    for (auto [p, param] : llvm::enumerate(params)) {
      auto &[name, type] = param;
      Value value = body->getArgument(p * perParam);
      Value grad = body->getArgument(p * perParam + 1);
      if (adamw) {
        auto update = b.create<graph::AdamWUpdateOp>(
            loc, TypeRange{type, type, type},
            ValueRange{value, grad, body->getArgument(p * perParam + 2),
                       body->getArgument(p * perParam + 3)},
            lr, stepIndex, gradScale,
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
            b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay));
        results.append(update->getResults().begin(),
                       update->getResults().end());
      } else {
        auto update = b.create<graph::SGDUpdateOp>(
            loc, TypeRange{type, type},
            ValueRange{value, grad, body->getArgument(p * perParam + 2)}, lr,
            stepIndex, gradScale,
            b.getF64FloatAttr(momentum), b.getF64FloatAttr(dampening),
            b.getF64FloatAttr(weightDecay), b.getBoolAttr(nesterov));
        results.append(update->getResults().begin(),
                       update->getResults().end());
      }
      resultAttrs.push_back(entry(graph::Role::Parameter, name));
      for (StateKind state : stateKinds)
        resultAttrs.push_back(
            entry(graph::stateRole(state), graph::stateName(state, name)));
    }
    b.create<func::ReturnOp>(loc, results);
    func.setFunctionType(
        b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
