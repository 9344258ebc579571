//===- ElementwiseOps.cpp - Handlers for elementwise ONNX ops -------------===//

#include "../NodeImporter.h"

using namespace mlir;
using namespace strata;
using namespace strata::frontend;
namespace g = strata::graph;

namespace {

template <typename OpTy>
LogicalResult importBinary(NodeImporter &n) {
  return n.setResult(n.create<OpTy>({n.getInput(0), n.getInput(1)}));
}

/// Max, Min, Sum: variadic, folded pairwise left to right.
template <typename OpTy>
LogicalResult importVariadic(NodeImporter &n) {
  Value acc = n.getInput(0);
  for (unsigned i = 1; i < n.getNumInputs(); ++i) {
    FailureOr<Value> next = n.create<OpTy>({acc, n.getInput(i)});
    if (failed(next))
      return failure();
    acc = *next;
  }
  n.setOutput(0, acc);
  return success();
}

template <typename OpTy>
LogicalResult importUnary(NodeImporter &n) {
  Value x = n.getInput(0);
  return n.setResult(n.createTyped<OpTy>(x.getType(), x));
}

/// Gelu (opset 20): exact, or with the tanh approximation.
LogicalResult importGelu(NodeImporter &n) {
  std::string approximate = n.getAttrString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return n.fail("approximate must be 'none' or 'tanh', not '" + approximate +
                  "'");
  Value x = n.getInput(0);
  if (!isa<FloatType>(getElementTypeOrSelf(x.getType())))
    return n.fail("the input must be a float tensor");
  auto kind = approximate == "tanh" ? g::GeluApproximation::Tanh
                                    : g::GeluApproximation::None;
  return n.setResult(n.createTyped<g::GeluOp>(
      x.getType(), x,
      {n.attr("approximate",
              g::GeluApproximationAttr::get(n.getContext(), kind))}));
}

/// LessOrEqual / GreaterOrEqual as the negation of the strict opposite.
template <typename StrictOpposite>
LogicalResult importNegatedCompare(NodeImporter &n) {
  FailureOr<Value> strict =
      n.create<StrictOpposite>({n.getInput(0), n.getInput(1)});
  if (failed(strict))
    return failure();
  return n.setResult(n.createTyped<g::NotOp>(strict->getType(), *strict));
}

LogicalResult importPow(NodeImporter &n) {
  Value base = n.getInput(0), exponent = n.getInput(1);
  Type element = getElementTypeOrSelf(base.getType());
  if (getElementTypeOrSelf(exponent.getType()) != element) {
    auto type = cast<RankedTensorType>(exponent.getType()).clone(element);
    FailureOr<Value> cast = n.createTyped<g::CastOp>(type, exponent);
    if (failed(cast))
      return failure();
    exponent = *cast;
  }
  return n.setResult(n.create<g::PowOp>({base, exponent}));
}

LogicalResult importCast(NodeImporter &n) {
  Value x = n.getInput(0);
  Type element = getElementType(n.getContext(), n.getAttrInt("to", 0));
  if (!element)
    return n.fail("unsupported target type " +
                  std::to_string(n.getAttrInt("to", 0)));
  return n.setResult(n.createTyped<g::CastOp>( cast<RankedTensorType>(x.getType()).clone(element), x));
}

LogicalResult importCastLike(NodeImporter &n) {
  Value x = n.getInput(0);
  Type element = getElementTypeOrSelf(n.getInput(1).getType());
  return n.setResult(n.createTyped<g::CastOp>( cast<RankedTensorType>(x.getType()).clone(element), x));
}

LogicalResult importIdentity(NodeImporter &n) {
  n.setOutput(0, n.getInput(0));
  return success();
}

LogicalResult importWhere(NodeImporter &n) {
  return n.setResult(n.create<g::WhereOp>({n.getInput(0), n.getInput(1), n.getInput(2)}));
}

/// A unary op carrying float attributes read from the node.
template <typename OpTy>
LogicalResult importUnaryWithAttrs(
    NodeImporter &n, ArrayRef<std::pair<StringRef, double>> attrsAndDefaults) {
  SmallVector<NamedAttribute> attrs;
  for (auto [name, defaultValue] : attrsAndDefaults)
    attrs.push_back(n.f64Attr(name, n.getAttrFloat(name, defaultValue)));
  Value x = n.getInput(0);
  return n.setResult(n.createTyped<OpTy>(x.getType(), x, attrs));
}

LogicalResult importClip(NodeImporter &n) {
  Value x = n.getInput(0);
  SmallVector<NamedAttribute> attrs;
  Value result = x;
  for (auto [index, name] : {std::pair<unsigned, StringRef>{1, "min"},
                             std::pair<unsigned, StringRef>{2, "max"}}) {
    if (!n.hasInput(index))
      continue;
    if (n.getConstantInput(index)) {
      FailureOr<double> bound = n.getConstantScalar(index, name);
      if (failed(bound))
        return failure();
      attrs.push_back(n.f64Attr(name, *bound));
      continue;
    }
    // A bound computed at run time: max/min ops.
    FailureOr<Value> bounded =
        index == 1 ? n.create<g::MaxOp>({result, n.getInput(index)})
                   : n.create<g::MinOp>({result, n.getInput(index)});
    if (failed(bounded))
      return failure();
    result = *bounded;
  }
  if (!attrs.empty()) {
    FailureOr<Value> clipped =
        n.createTyped<g::ClipOp>(result.getType(), result, attrs);
    if (failed(clipped))
      return failure();
    result = *clipped;
  }
  n.setOutput(0, result);
  return success();
}

/// PRelu(x, slope) = x < 0 ? slope * x : x.
LogicalResult importPRelu(NodeImporter &n) {
  Value x = n.getInput(0), slope = n.getInput(1);
  FailureOr<Value> zero = n.scalarLike(x, 0.0);
  if (failed(zero))
    return failure();
  FailureOr<Value> negative = n.create<g::LessOp>({x, *zero});
  FailureOr<Value> scaled = n.create<g::MulOp>({x, slope});
  if (failed(negative) || failed(scaled))
    return failure();
  FailureOr<Value> result = n.create<g::WhereOp>({*negative, *scaled, x});
  if (failed(result))
    return failure();
  if (result->getType() != x.getType())
    return n.fail("slope does not broadcast to the input");
  n.setOutput(0, *result);
  return success();
}

/// Selu(x) = gamma * elu(x, alpha).
LogicalResult importSelu(NodeImporter &n) {
  Value x = n.getInput(0);
  FailureOr<Value> elu = n.createTyped<g::EluOp>(
      x.getType(), x,
      {n.f64Attr("alpha", n.getAttrFloat("alpha", 1.67326319217681884765625))});
  FailureOr<Value> gamma =
      n.scalarLike(x, n.getAttrFloat("gamma", 1.05070102214813232421875));
  if (failed(elu) || failed(gamma))
    return failure();
  return n.setResult(n.create<g::MulOp>({*elu, *gamma}));
}

} // namespace

void strata::frontend::registerElementwiseHandlers(OpHandlerTable &table) {
  table["Add"] = importBinary<g::AddOp>;
  table["Sub"] = importBinary<g::SubOp>;
  table["Mul"] = importBinary<g::MulOp>;
  table["Div"] = importBinary<g::DivOp>;
  table["Pow"] = importPow;
  table["Equal"] = importBinary<g::EqualOp>;
  table["Less"] = importBinary<g::LessOp>;
  table["Greater"] = importBinary<g::GreaterOp>;
  table["LessOrEqual"] = importNegatedCompare<g::GreaterOp>;
  table["GreaterOrEqual"] = importNegatedCompare<g::LessOp>;
  table["And"] = importBinary<g::AndOp>;
  table["Or"] = importBinary<g::OrOp>;
  table["Max"] = importVariadic<g::MaxOp>;
  table["Min"] = importVariadic<g::MinOp>;
  table["Sum"] = importVariadic<g::AddOp>;
  table["Neg"] = importUnary<g::NegOp>;
  table["Abs"] = importUnary<g::AbsOp>;
  table["Exp"] = importUnary<g::ExpOp>;
  table["Log"] = importUnary<g::LogOp>;
  table["Sqrt"] = importUnary<g::SqrtOp>;
  table["Reciprocal"] = importUnary<g::ReciprocalOp>;
  table["Tanh"] = importUnary<g::TanhOp>;
  table["Erf"] = importUnary<g::ErfOp>;
  table["Gelu"] = importGelu;
  table["Relu"] = importUnary<g::ReluOp>;
  table["Sigmoid"] = importUnary<g::SigmoidOp>;
  table["Softplus"] = importUnary<g::SoftplusOp>;
  table["HardSwish"] = importUnary<g::HardSwishOp>;
  table["Softsign"] = importUnary<g::SoftsignOp>;
  table["Not"] = importUnary<g::NotOp>;
  table["Sin"] = importUnary<g::SinOp>;
  table["Cos"] = importUnary<g::CosOp>;
  table["PRelu"] = importPRelu;
  table["Selu"] = importSelu;
  table["LeakyRelu"] = [](NodeImporter &n) {
    return importUnaryWithAttrs<g::LeakyReluOp>(n, {{"alpha", 0.01}});
  };
  table["Elu"] = [](NodeImporter &n) {
    return importUnaryWithAttrs<g::EluOp>(n, {{"alpha", 1.0}});
  };
  table["HardSigmoid"] = [](NodeImporter &n) {
    return importUnaryWithAttrs<g::HardSigmoidOp>(n,
                                                  {{"alpha", 0.2}, {"beta", 0.5}});
  };
  table["Clip"] = importClip;
  table["Cast"] = importCast;
  table["CastLike"] = importCastLike;
  table["Identity"] = importIdentity;
  table["Where"] = importWhere;
}
