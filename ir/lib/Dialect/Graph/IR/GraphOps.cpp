//===- GraphOps.cpp - Graph dialect operations ----------------------------===//
//
// Result type inference, verifiers and folders of the graph dialect. Every
// shape is static: an op whose shapes do not fit is rejected here, so the
// passes after the importer never meet an inconsistent graph.
//
//===----------------------------------------------------------------------===//

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "strata/Runtime/ElementwiseFormulas.h"
#include "strata/Runtime/FusedProgram.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace strata::graph;

//===----------------------------------------------------------------------===//
// Shared shape helpers
//===----------------------------------------------------------------------===//

std::optional<SmallVector<int64_t>>
strata::graph::broadcastShapes(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  SmallVector<int64_t> result;
  if (!OpTrait::util::getBroadcastedShape(lhs, rhs, result))
    return std::nullopt;
  return result;
}

int64_t strata::graph::slidingWindowOutputSize(int64_t input, int64_t kernel,
                                               int64_t stride, int64_t padBegin,
                                               int64_t padEnd, int64_t dilation,
                                               bool ceilMode) {
  // PyTorch's pooling_output_shape: floor division of a numerator that
  // ceil mode raises by stride - 1, so a window longer than the padded input
  // still counts when it starts inside it.
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t numerator =
      input + padBegin + padEnd - span + (ceilMode ? stride - 1 : 0);
  if (numerator < 0)
    return 0;
  int64_t out = numerator / stride + 1;
  // PyTorch and ONNX: the last window must start inside the input or the
  // begin padding.
  if (ceilMode && (out - 1) * stride >= input + padBegin)
    --out;
  return out;
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += 'x';
    s += std::to_string(d);
  }
  return s.empty() ? "scalar" : s;
}

static RankedTensorType rankedOrNull(Type type) {
  return dyn_cast<RankedTensorType>(type);
}

LogicalResult strata::graph::inferBroadcastResultType(
    MLIRContext *context, std::optional<Location> location, Type lhs, Type rhs,
    bool isComparison, SmallVectorImpl<Type> &inferred) {
  auto lhsType = rankedOrNull(lhs), rhsType = rankedOrNull(rhs);
  if (!lhsType || !rhsType)
    return emitOptionalError(location, "operands must be ranked tensors");
  auto shape = broadcastShapes(lhsType.getShape(), rhsType.getShape());
  if (!shape)
    return emitOptionalError(location, "shapes ",
                             shapeString(lhsType.getShape()), " and ",
                             shapeString(rhsType.getShape()),
                             " do not broadcast");
  Type element = isComparison ? IntegerType::get(context, 1)
                              : lhsType.getElementType();
  inferred.push_back(RankedTensorType::get(*shape, element));
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location> location,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type)
    return emitOptionalError(location, "value must be a ranked tensor");
  inferred.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor adaptor) { return getValueAttr(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//


LogicalResult WhereOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto cond = cast<RankedTensorType>(adaptor.getCondition().getType());
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(location, "lhs and rhs element types differ");
  auto shape = broadcastShapes(lhs.getShape(), rhs.getShape());
  if (shape)
    shape = broadcastShapes(cond.getShape(), *shape);
  if (!shape)
    return emitOptionalError(location, "condition ",
                             shapeString(cond.getShape()), ", lhs ",
                             shapeString(lhs.getShape()), " and rhs ",
                             shapeString(rhs.getShape()), " do not broadcast");
  inferred.push_back(RankedTensorType::get(*shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(location, "operands must have rank >= 2");
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  if (l.back() != r[r.size() - 2])
    return emitOptionalError(location, "contraction sizes differ: lhs ",
                             shapeString(l), ", rhs ", shapeString(r));
  auto batch = broadcastShapes(l.drop_back(2), r.drop_back(2));
  if (!batch)
    return emitOptionalError(location, "batch dims of ", shapeString(l),
                             " and ", shapeString(r), " do not broadcast");
  batch->push_back(l[l.size() - 2]);
  batch->push_back(r.back());
  inferred.push_back(RankedTensorType::get(*batch, lhs.getElementType()));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOptionalError(location,
                             "input must have rank >= 1 and weight rank 2");
  bool transposed = adaptor.getTransposeWeight();
  int64_t k = weight.getDimSize(transposed ? 1 : 0);
  int64_t n = weight.getDimSize(transposed ? 0 : 1);
  if (input.getShape().back() != k)
    return emitOptionalError(location, "input ",
                             shapeString(input.getShape()),
                             " does not match weight ",
                             shapeString(weight.getShape()),
                             transposed ? " (transposed)" : "");
  if (Value bias = adaptor.getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != n)
      return emitOptionalError(location, "bias must have shape ", n);
  }
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = n;
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization and activations over an axis
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t axis = adaptor.getAxisAttr().getInt();
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(location, "axis ", axis,
                             " must be in [0, rank) for rank ",
                             input.getRank());
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  for (Value v : {adaptor.getScale(), adaptor.getBias()}) {
    if (!v)
      continue;
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getShape() != normalized)
      return emitOptionalError(location, "scale and bias must have shape ",
                               shapeString(normalized), ", got ",
                               shapeString(type.getShape()));
  }
  if (adaptor.getEpsilonAttr().getValueAsDouble() < 0)
    return emitOptionalError(location, "epsilon must be >= 0");
  inferred.push_back(input);
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getRank() < 2)
    return emitOptionalError(location, "input must have rank >= 2");
  int64_t channels = input.getDimSize(1);
  for (Value v : {adaptor.getScale(), adaptor.getBias(),
                  adaptor.getRunningMean(), adaptor.getRunningVar()}) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != channels)
      return emitOptionalError(location, "per-channel operands must have shape ",
                               channels, ", got ",
                               shapeString(type.getShape()));
  }
  double momentum = adaptor.getMomentumAttr().getValueAsDouble();
  if (momentum < 0 || momentum > 1)
    return emitOptionalError(location, "momentum must be in [0, 1]");
  if (adaptor.getEpsilonAttr().getValueAsDouble() < 0)
    return emitOptionalError(location, "epsilon must be >= 0");
  auto stat = RankedTensorType::get({channels}, input.getElementType());
  inferred.append({input, stat, stat});
  return success();
}

template <typename AxisOp>
static LogicalResult verifyAxisOp(AxisOp op) {
  int64_t rank = op.getInput().getType().getRank();
  int64_t axis = op.getAxisAttr().getInt();
  if (axis < 0 || axis >= rank)
    return op.emitOpError("axis ") << axis << " must be in [0, " << rank << ")";
  return success();
}
LogicalResult SoftmaxOp::verify() { return verifyAxisOp(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxisOp(*this); }

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  inferred.push_back(input);
  inferred.push_back(input.clone(IntegerType::get(context, 1)));
  return success();
}

void FusedElementwiseOp::build(OpBuilder &builder, OperationState &state,
                               TypeRange resultTypes, ValueRange inputs) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(
        RankedTensorType::get({}, getElementTypeOrSelf(input.getType())),
        input.getLoc());
}

namespace {

bool isNarrowFloat(Type t) { return t.isBF16() || t.isF16(); }

// graph::UnaryKind (GraphBase.td) numbers the unary ops in
// ElementwiseOps.def's order, so a unary_grad's kind names the runtime's
// Unary of the same number.
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  static_assert(int(UnaryKind::Kind) == int(strata::runtime::Unary::Kind),     \
                "graph::UnaryKind and ElementwiseOps.def disagree on " #Kind);
#include "strata/Runtime/ElementwiseOps.def"

} // namespace

std::optional<FusedCode> strata::graph::fusedCodeOf(Operation *op) {
  using runtime::FusedOpcode;
  using runtime::UnaryGradKind;
  auto code = [](FusedOpcode op, UnaryGradKind kind = UnaryGradKind::Abs) {
    return std::optional<FusedCode>(FusedCode{int(op), int(kind)});
  };
  auto elementOf = [](Value v) { return getElementTypeOrSelf(v.getType()); };
  // The ops ElementwiseOps.def marks fusible run as their own opcode.
#define STRATA_FUSIBLE_BINARY(Kind, Mnemonic, OpClass, Types)                  \
  if (isa<OpClass>(op))                                                        \
    return code(FusedOpcode::Kind);
#define STRATA_FUSIBLE_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)         \
  if (isa<OpClass>(op))                                                        \
    return code(FusedOpcode::Kind);
#include "strata/Runtime/ElementwiseOps.def"
  return llvm::TypeSwitch<Operation *, std::optional<FusedCode>>(op)
      .Case([&](WhereOp) { return code(FusedOpcode::Where); })
      .Case([&](GeluOp g) {
        return code(g.getApproximate() == GeluApproximation::Tanh
                        ? FusedOpcode::GeluTanh
                        : FusedOpcode::Gelu);
      })
      .Case([&](CastOp c) -> std::optional<FusedCode> {
        Type from = elementOf(c.getInput()), to = elementOf(c.getOutput());
        bool fromFloat = from.isF32() || isNarrowFloat(from);
        if (to.isBF16())
          return fromFloat ? code(FusedOpcode::CastBf16) : std::nullopt;
        if (to.isF16())
          return fromFloat ? code(FusedOpcode::CastF16) : std::nullopt;
        // Widening: exact only from a narrow type (f32 -> f64 would mix
        // the wide types).
        return isNarrowFloat(from) ? code(FusedOpcode::CastWide)
                                   : std::nullopt;
      })
      .Case([&](UnaryGradOp g) -> std::optional<FusedCode> {
        if (g.getAlpha() || g.getBeta() || g.getMin() || g.getMax())
          return std::nullopt;
        bool tanh = g.getApproximate() &&
                    *g.getApproximate() == GeluApproximation::Tanh;
        if (tanh && g.getKind() != UnaryKind::Gelu)
          return std::nullopt;
        switch (g.getKind()) {
        case UnaryKind::Gelu:
          return code(FusedOpcode::Grad, tanh ? UnaryGradKind::GeluTanh
                                              : UnaryGradKind::Gelu);
#define STRATA_FUSIBLE_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)         \
  case UnaryKind::Kind:                                                        \
    return code(FusedOpcode::Grad, UnaryGradKind::Kind);
#include "strata/Runtime/ElementwiseOps.def"
        default:
          return std::nullopt;
        }
      })
      .Default([](Operation *) { return std::nullopt; });
}

LogicalResult FusedElementwiseOp::verify() {
  using runtime::kFusedMaxInputs;
  using runtime::kFusedMaxInstructions;
  using runtime::kFusedMaxRank;
  using runtime::kFusedMaxResults;
  if (getInputs().empty() || getInputs().size() > size_t(kFusedMaxInputs))
    return emitOpError("takes 1 to ")
           << kFusedMaxInputs << " inputs, got " << getInputs().size();
  if (getNumResults() == 0 || getNumResults() > unsigned(kFusedMaxResults))
    return emitOpError("returns 1 to ")
           << kFusedMaxResults << " results, got " << getNumResults();
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ")
           << body.getNumArguments() << " arguments for "
           << getInputs().size() << " inputs";
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() !=
        RankedTensorType::get({}, getElementTypeOrSelf(input.getType())))
      return emitOpError("body argument ")
             << arg.getArgNumber() << " must be one element of its input, "
             << RankedTensorType::get({},
                                      getElementTypeOrSelf(input.getType()))
             << ", got " << arg.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in graph.yield");
  if (yield.getValues().size() != getNumResults())
    return emitOpError("body yields ")
           << yield.getValues().size() << " values for " << getNumResults()
           << " results";
  for (auto [value, result] : llvm::zip(yield.getValues(), getResults()))
    if (value.getType() !=
        RankedTensorType::get({}, getElementTypeOrSelf(result.getType())))
      return emitOpError("body yields ")
             << value.getType() << " for result " << result.getType();
  unsigned instructions = 0;
  for (Operation &op : body.without_terminator()) {
    if (!fusedCodeOf(&op))
      return op.emitOpError("cannot run in a graph.fused_elementwise body");
    for (Type t : op.getResultTypes())
      if (cast<RankedTensorType>(t).getRank() != 0)
        return op.emitOpError("in a graph.fused_elementwise body computes "
                              "one element (a rank-0 tensor), not ")
               << t;
    ++instructions;
  }
  if (instructions == 0 || instructions > unsigned(kFusedMaxInstructions))
    return emitOpError("body must hold 1 to ")
           << kFusedMaxInstructions << " ops, got " << instructions;
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(getResult(0).getType()).getShape();
  if (shape.size() > size_t(kFusedMaxRank))
    return emitOpError("results of rank above ") << kFusedMaxRank;
  for (Type t : getResultTypes())
    if (cast<RankedTensorType>(t).getShape() != shape)
      return emitOpError("results must share one shape");
  for (Value input : getInputs()) {
    auto in = cast<RankedTensorType>(input.getType()).getShape();
    auto b = broadcastShapes(in, shape);
    if (!b || ArrayRef<int64_t>(*b) != shape)
      return emitOpError("input ")
             << input.getType() << " does not broadcast to the results";
  }
  return success();
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  if (getNumResults() != getInputs().size())
    return emitOpError("has ")
           << getInputs().size() << " operands but " << getNumResults()
           << " results (one scalar per operand)";
  return success();
}

/// The optimizer updates' shared shape: `perParameter` tensors per
/// parameter, one type each, and `resultsPerParameter` results of that type.
static LogicalResult verifyUpdate(Operation *op, ValueRange tensors,
                                  unsigned perParameter,
                                  unsigned resultsPerParameter) {
  if (tensors.empty() || tensors.size() % perParameter != 0)
    return op->emitOpError("takes ")
           << perParameter << " tensors per parameter, got " << tensors.size();
  size_t parameters = tensors.size() / perParameter;
  if (op->getNumResults() != parameters * resultsPerParameter)
    return op->emitOpError("updates ")
           << parameters << " parameters into " << op->getNumResults()
           << " results (" << resultsPerParameter << " per parameter)";
  for (size_t p = 0; p < parameters; ++p) {
    Type type = tensors[p * perParameter].getType();
    for (unsigned i = 1; i < perParameter; ++i)
      if (tensors[p * perParameter + i].getType() != type)
        return op->emitOpError("parameter ")
               << p << ": operand " << tensors[p * perParameter + i].getType()
               << " does not match the parameter " << type;
    for (unsigned i = 0; i < resultsPerParameter; ++i)
      if (op->getResult(p * resultsPerParameter + i).getType() != type)
        return op->emitOpError("parameter ")
               << p << ": result "
               << op->getResult(p * resultsPerParameter + i).getType()
               << " does not match the parameter " << type;
  }
  return success();
}

LogicalResult AdamWUpdateOp::verify() {
  return verifyUpdate(*this, getTensors(), kTensorsPerParameter,
                      kResultsPerParameter);
}

LogicalResult SGDUpdateOp::verify() {
  return verifyUpdate(*this, getTensors(), kTensorsPerParameter,
                      kResultsPerParameter);
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatioAttr().getValueAsDouble();
  if (ratio < 0 || ratio >= 1)
    return emitOpError("ratio must be in [0, 1), got ") << ratio;
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto q = cast<RankedTensorType>(adaptor.getQuery().getType());
  auto k = cast<RankedTensorType>(adaptor.getKey().getType());
  auto v = cast<RankedTensorType>(adaptor.getValue().getType());
  int64_t rank = q.getRank();
  bool headsInner = adaptor.getHeadsInner();
  if (rank < (headsInner ? 3 : 2) || k.getRank() != rank ||
      v.getRank() != rank)
    return emitOptionalError(location, "query, key and value must have one "
                                       "rank >= ",
                             headsInner ? 3 : 2);
  // heads_inner: the checks below see [..., H, S, D], as without it.
  auto logical = [&](ArrayRef<int64_t> shape) {
    SmallVector<int64_t> out(shape);
    if (headsInner)
      std::swap(out[rank - 3], out[rank - 2]);
    return out;
  };
  SmallVector<int64_t> qLogical = logical(q.getShape()),
                       kLogical = logical(k.getShape()),
                       vLogical = logical(v.getShape());
  ArrayRef<int64_t> qs = qLogical, ks = kLogical, vs = vLogical;
  if (qs.drop_back(2) != ks.drop_back(2) || qs.drop_back(2) != vs.drop_back(2))
    return emitOptionalError(location, "batch dims differ: query ",
                             shapeString(qs), ", key ", shapeString(ks),
                             ", value ", shapeString(vs));
  if (qs.back() != ks.back())
    return emitOptionalError(location, "query and key head sizes differ");
  if (ks[rank - 2] != vs[rank - 2])
    return emitOptionalError(location, "key and value lengths differ");
  SmallVector<int64_t> scores(qs.drop_back());
  scores.push_back(ks[rank - 2]);
  if (Value mask = adaptor.getMask()) {
    auto maskShape = cast<RankedTensorType>(mask.getType()).getShape();
    auto b = broadcastShapes(maskShape, scores);
    if (!b || ArrayRef<int64_t>(*b) != ArrayRef<int64_t>(scores))
      return emitOptionalError(location, "mask ", shapeString(maskShape),
                               " does not broadcast to the scores ",
                               shapeString(scores));
  }
  double dropout = adaptor.getDropoutRatioAttr().getValueAsDouble();
  if (dropout < 0 || dropout >= 1)
    return emitOptionalError(location, "dropout_ratio must be in [0, 1)");
  SmallVector<int64_t> shape(qs.drop_back());
  shape.push_back(vs.back());
  inferred.push_back(RankedTensorType::get(logical(shape), q.getElementType()));
  // The probabilities, in the scores' [..., H, S, T] order either way.
  if (adaptor.getKeepProbabilities())
    inferred.push_back(RankedTensorType::get(scores, q.getElementType()));
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (getKeepProbabilities() != bool(getProbabilities()))
    return emitOpError("takes the forward's probabilities exactly when "
                       "keep_probabilities is set");
  if (!getProbabilities())
    return success();
  // [..., H, S, T]: the query's batch dims and rows, the key's rows.
  auto q = cast<RankedTensorType>(getQuery().getType());
  auto k = cast<RankedTensorType>(getKey().getType());
  int64_t rank = q.getRank();
  if (rank < (getHeadsInner() ? 3 : 2) || k.getRank() != rank)
    return emitOpError("query and key must have one rank >= ")
           << (getHeadsInner() ? 3 : 2);
  SmallVector<int64_t> scores(q.getShape());
  int64_t keys = k.getShape()[getHeadsInner() ? rank - 3 : rank - 2];
  if (getHeadsInner())
    std::swap(scores[rank - 3], scores[rank - 2]);
  scores.back() = keys;
  auto p = cast<RankedTensorType>(getProbabilities().getType());
  if (p.getShape() != ArrayRef<int64_t>(scores) ||
      p.getElementType() != q.getElementType())
    return emitOpError("probabilities must be ")
           << RankedTensorType::get(scores, q.getElementType())
           << " (the scores' shape), got " << p;
  return success();
}

//===----------------------------------------------------------------------===//
// Lookups and losses
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto table = cast<RankedTensorType>(adaptor.getTable().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  if (table.getRank() != 2)
    return emitOptionalError(location, "table must have rank 2");
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  int64_t axis = adaptor.getAxisAttr().getInt();
  if (axis < 0 || axis >= input.getRank())
    return emitOptionalError(location, "axis ", axis, " must be in [0, ",
                             input.getRank(), ")");
  SmallVector<int64_t> shape(input.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, input.getShape().drop_front(axis + 1));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> location,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  auto labels = cast<RankedTensorType>(adaptor.getLabels().getType());
  if (logits.getRank() < 2)
    return emitOptionalError(location, "logits must have rank >= 2 [N, C, ...]");
  SmallVector<int64_t> expected{logits.getDimSize(0)};
  llvm::append_range(expected, logits.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(location, "labels must have shape ",
                             shapeString(expected), ", got ",
                             shapeString(labels.getShape()));
  if (Value weight = adaptor.getWeight()) {
    auto w = cast<RankedTensorType>(weight.getType());
    if (w.getRank() != 1 || w.getDimSize(0) != logits.getDimSize(1))
      return emitOptionalError(location, "weight must have shape ",
                               logits.getDimSize(1));
  }
  if (adaptor.getReduction() == Reduction::None)
    inferred.push_back(labels.clone(logits.getElementType()));
  else
    inferred.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (getInput().getType().getNumElements() != getType().getNumElements())
    return emitOpError("element counts differ: ")
           << shapeString(getInput().getType().getShape()) << " vs "
           << shapeString(getType().getShape());
  return success();
}


namespace {
/// reshape(reshape(x)) -> reshape(x).
struct FoldReshapeChain : public OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto producer = op.getInput().getDefiningOp<ReshapeOp>();
    if (!producer)
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(),
                                           producer.getInput());
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<FoldReshapeChain>(context);
}

LogicalResult BroadcastToOp::verify() {
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getType().getShape();
  auto b = broadcastShapes(in, out);
  if (!b || ArrayRef<int64_t>(*b) != out)
    return emitOpError("cannot broadcast ")
           << shapeString(in) << " to " << shapeString(out);
  return success();
}


LogicalResult TransposeOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return emitOptionalError(location, "perm must have ", input.getRank(),
                             " entries");
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return emitOptionalError(location, "perm is not a permutation");
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}


namespace {
/// transpose(transpose(x, p1), p2) -> transpose(x, p1 o p2).
struct ComposeTransposes : public OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto producer = op.getInput().getDefiningOp<TransposeOp>();
    if (!producer)
      return failure();
    SmallVector<int64_t> perm;
    for (int64_t p : op.getPerm())
      perm.push_back(producer.getPerm()[p]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, producer.getInput(), perm);
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ComposeTransposes>(context);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), sizes = adaptor.getSizes(),
                    strides = adaptor.getStrides();
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(sizes.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return emitOptionalError(location,
                             "offsets, sizes and strides need one entry per dim");
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = input.getDimSize(d);
    if (strides[d] == 0 || sizes[d] < 0)
      return emitOptionalError(location, "dim ", d,
                               ": stride must be non-zero and size >= 0");
    if (sizes[d] == 0)
      continue;
    int64_t last = offsets[d] + (sizes[d] - 1) * strides[d];
    if (offsets[d] < 0 || offsets[d] >= dim || last < 0 || last >= dim)
      return emitOptionalError(location, "dim ", d, ": slice [", offsets[d],
                               " +", sizes[d], " x", strides[d],
                               "] is out of bounds for size ", dim);
  }
  inferred.push_back(RankedTensorType::get(sizes, input.getElementType()));
  return success();
}


LogicalResult ConcatOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(location, "needs at least one input");
  auto first = cast<RankedTensorType>(adaptor.getInputs().front().getType());
  int64_t axis = adaptor.getAxisAttr().getInt();
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(location, "axis ", axis, " must be in [0, ",
                             first.getRank(), ")");
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value input : adaptor.getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getRank() != first.getRank())
      return emitOptionalError(location, "inputs must have one rank");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(location, "inputs differ in dim ", d);
    shape[axis] += type.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::verify() {
  auto input = getInput().getType();
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= input.getRank())
    return emitOpError("axis ") << axis << " is out of range";
  if (getOutputs().empty())
    return emitOpError("needs at least one result");
  int64_t total = 0;
  for (Value result : getOutputs()) {
    auto type = cast<RankedTensorType>(result.getType());
    if (type.getRank() != input.getRank() ||
        type.getElementType() != input.getElementType())
      return emitOpError("results must have the input's rank and element type");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != input.getDimSize(d))
        return emitOpError("result differs from the input in dim ") << d;
    total += type.getDimSize(axis);
  }
  if (total != input.getDimSize(axis))
    return emitOpError("result sizes along the axis sum to ")
           << total << ", expected " << input.getDimSize(axis);
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *context,
                                      std::optional<Location> location,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> pads = adaptor.getPads();
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return emitOptionalError(location, "pads needs two entries per dim");
  PadMode mode = adaptor.getMode();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t begin = pads[d], end = pads[d + rank], dim = input.getDimSize(d);
    if (begin < 0 || end < 0)
      return emitOptionalError(location, "pads must be >= 0");
    if (mode == PadMode::Reflect && (begin >= dim || end >= dim))
      return emitOptionalError(location, "reflect pads must be smaller than "
                                         "the dim");
    shape.push_back(dim + begin + end);
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult TriluOp::verify() {
  if (getInput().getType().getRank() < 2)
    return emitOpError("input must have rank >= 2");
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduceType(std::optional<Location> location,
                                     Type inputType, ArrayRef<int64_t> axes,
                                     bool keepdims,
                                     SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(inputType);
  llvm::SmallSet<int64_t, 8> reduced;
  for (int64_t axis : axes) {
    if (axis < 0 || axis >= input.getRank())
      return emitOptionalError(location, "axis ", axis, " must be in [0, ",
                               input.getRank(), ")");
    if (!reduced.insert(axis).second)
      return emitOptionalError(location, "axis ", axis, " repeats");
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (!reduced.contains(d))
      shape.push_back(input.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

#define STRATA_REDUCE_INFER(OP)                                                \
  LogicalResult OP::inferReturnTypes(MLIRContext *context,                     \
                                     std::optional<Location> location,         \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferReduceType(location, adaptor.getInput().getType(),             \
                           adaptor.getAxes(), adaptor.getKeepdims(), inferred);\
  }
STRATA_REDUCE_INFER(ReduceSumOp)
STRATA_REDUCE_INFER(ReduceMeanOp)
STRATA_REDUCE_INFER(ReduceMaxOp)
#undef STRATA_REDUCE_INFER

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Checks the window attributes of a conv or pool over `spatial` dims and
/// appends the output spatial sizes to `shape`.
static LogicalResult
inferWindowShape(std::optional<Location> location, ArrayRef<int64_t> input,
                 ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                 ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                 bool ceilMode, SmallVectorImpl<int64_t> &shape) {
  size_t spatial = input.size() - 2;
  if (kernel.size() != spatial || strides.size() != spatial ||
      dilations.size() != spatial || pads.size() != 2 * spatial)
    return emitOptionalError(
        location, "window attributes need one entry per spatial dim (",
        spatial, ") and pads two");
  for (size_t i = 0; i < spatial; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 ||
        pads[i + spatial] < 0)
      return emitOptionalError(location,
                               "kernel, strides and dilations must be >= 1 "
                               "and pads >= 0");
    int64_t out = slidingWindowOutputSize(input[i + 2], kernel[i], strides[i],
                                          pads[i], pads[i + spatial],
                                          dilations[i], ceilMode);
    if (out < 1)
      return emitOptionalError(location, "window does not fit spatial dim ",
                               i, " of size ", input[i + 2]);
    shape.push_back(out);
  }
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  int64_t groups = adaptor.getGroupsAttr().getInt();
  if (input.getRank() < 3 || weight.getRank() != input.getRank())
    return emitOptionalError(location,
                             "input [N, C, x...] and weight [M, C/g, k...] "
                             "must have one rank >= 3");
  int64_t m = weight.getDimSize(0);
  if (groups < 1 || m % groups != 0 ||
      weight.getDimSize(1) * groups != input.getDimSize(1))
    return emitOptionalError(location, "channels do not match: input ",
                             shapeString(input.getShape()), ", weight ",
                             shapeString(weight.getShape()), ", groups ",
                             groups);
  if (Value bias = adaptor.getBias()) {
    auto b = cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != m)
      return emitOptionalError(location, "bias must have shape ", m);
  }
  SmallVector<int64_t> shape{input.getDimSize(0), m};
  if (failed(inferWindowShape(location, input.getShape(),
                              weight.getShape().drop_front(2),
                              adaptor.getStrides(), adaptor.getPads(),
                              adaptor.getDilations(), false, shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getRank() < 3)
    return emitOptionalError(location, "input must have rank >= 3");
  SmallVector<int64_t> shape(input.getShape().take_front(2));
  if (failed(inferWindowShape(location, input.getShape(),
                              adaptor.getKernelShape(), adaptor.getStrides(),
                              adaptor.getPads(), adaptor.getDilations(),
                              adaptor.getCeilMode(), shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult AvgPoolOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getRank() < 3)
    return emitOptionalError(location, "input must have rank >= 3");
  SmallVector<int64_t> shape(input.getShape().take_front(2));
  SmallVector<int64_t> ones(input.getRank() - 2, 1);
  if (failed(inferWindowShape(location, input.getShape(),
                              adaptor.getKernelShape(), adaptor.getStrides(),
                              adaptor.getPads(), ones, adaptor.getCeilMode(),
                              shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "strata/Dialect/Graph/IR/GraphOps.cpp.inc"
