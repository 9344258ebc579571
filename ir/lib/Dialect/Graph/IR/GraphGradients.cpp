//===- GraphGradients.cpp - The gradient of every graph op ----------------===//
//
// Each differentiable op's GradientOpInterface, one `gradient` overload per
// op. A gradient is a short composition of graph ops where that is exact and
// cheap (add, reshape, softmax), and a dedicated gradient op with its own
// kernel otherwise (layer_norm_grad, attention_grad, conv_grad_*).
//
// Conventions: `dys` has one entry per result (null: no gradient reaches
// it); `dxs` receives one entry per operand (null: none). Every result type
// is stated, so the builders never infer.
//
//===----------------------------------------------------------------------===//

#include "strata/Dialect/Graph/IR/GraphDialect.h"
#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;

namespace strata::graph {
namespace {

/// Builds gradient ops at one location.
class GradBuilder {
public:
  GradBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  template <typename OpT, typename... Args>
  OpT create(Args &&...args) {
    return b.create<OpT>(loc, std::forward<Args>(args)...);
  }

  static RankedTensorType tensorType(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  static RankedTensorType withShape(Value v, ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, tensorType(v).getElementType());
  }

  /// A rank-0 constant of `v`'s element type; binary ops broadcast it.
  Value scalar(Value like, double value) {
    auto type = RankedTensorType::get({}, tensorType(like).getElementType());
    return create<ConstantOp>(DenseElementsAttr::get(
        type, b.getFloatAttr(type.getElementType(), value)));
  }
  Value zerosLike(Type type) {
    auto t = cast<RankedTensorType>(type);
    return create<ConstantOp>(
        DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)));
  }

  /// Elementwise binary op with a broadcast result type.
  template <typename OpT>
  Value binary(Value lhs, Value rhs) {
    auto shape = broadcastShapes(tensorType(lhs).getShape(),
                                 tensorType(rhs).getShape());
    assert(shape && "operands do not broadcast");
    return create<OpT>(withShape(lhs, *shape), lhs, rhs);
  }
  Value add(Value l, Value r) { return binary<AddOp>(l, r); }
  Value sub(Value l, Value r) { return binary<SubOp>(l, r); }
  Value mul(Value l, Value r) { return binary<MulOp>(l, r); }
  Value div(Value l, Value r) { return binary<DivOp>(l, r); }
  Value neg(Value v) { return create<NegOp>(v.getType(), v); }

  template <typename OpT>
  Value compare(Value lhs, Value rhs) {
    auto shape = broadcastShapes(tensorType(lhs).getShape(),
                                 tensorType(rhs).getShape());
    return create<OpT>(RankedTensorType::get(*shape, b.getI1Type()), lhs, rhs);
  }
  Value where(Value cond, Value lhs, Value rhs) {
    auto shape = broadcastShapes(tensorType(lhs).getShape(),
                                 tensorType(rhs).getShape());
    shape = broadcastShapes(*shape, tensorType(cond).getShape());
    return create<WhereOp>(withShape(lhs, *shape), cond, lhs, rhs);
  }

  Value reshape(Value v, ArrayRef<int64_t> shape) {
    if (tensorType(v).getShape() == shape)
      return v;
    return create<ReshapeOp>(withShape(v, shape), v);
  }

  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keepdims) {
    if (axes.empty())
      return v;
    auto shape = tensorType(v).getShape();
    SmallVector<int64_t> result;
    for (int64_t d = 0, e = shape.size(); d < e; ++d) {
      if (!llvm::is_contained(axes, d))
        result.push_back(shape[d]);
      else if (keepdims)
        result.push_back(1);
    }
    return create<ReduceSumOp>(withShape(v, result), v,
                               b.getDenseI64ArrayAttr(axes),
                               b.getBoolAttr(keepdims));
  }

  /// Sums `grad` over the dimensions that broadcasting added to reach it
  /// from `target`'s shape, and reshapes to that shape.
  Value unbroadcast(Value grad, Type target) {
    auto to = cast<RankedTensorType>(target);
    ArrayRef<int64_t> from = tensorType(grad).getShape();
    if (from == to.getShape())
      return grad;
    int64_t lead = from.size() - to.getRank();
    SmallVector<int64_t> axes;
    for (int64_t d = 0, e = from.size(); d < e; ++d)
      if (d < lead || (to.getDimSize(d - lead) == 1 && from[d] != 1))
        axes.push_back(d);
    return reshape(reduceSum(grad, axes, /*keepdims=*/true), to.getShape());
  }

  /// Broadcasts a reduction's gradient back over the reduced axes.
  Value unreduce(Value dy, Type inputType, ArrayRef<int64_t> axes) {
    auto input = cast<RankedTensorType>(inputType);
    SmallVector<int64_t> kept(input.getShape());
    for (int64_t axis : axes)
      kept[axis] = 1;
    Value v = reshape(dy, kept);
    if (tensorType(v).getShape() == input.getShape())
      return v;
    return create<BroadcastToOp>(withShape(v, input.getShape()), v);
  }

  Value transpose(Value v, ArrayRef<int64_t> perm) {
    auto shape = tensorType(v).getShape();
    SmallVector<int64_t> result;
    for (int64_t p : perm)
      result.push_back(shape[p]);
    return create<TransposeOp>(withShape(v, result), v,
                               b.getDenseI64ArrayAttr(perm));
  }
  Value transposeLastTwo(Value v) {
    int64_t rank = tensorType(v).getRank();
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return transpose(v, perm);
  }
  Value matmul(Value lhs, Value rhs) {
    auto l = tensorType(lhs).getShape(), r = tensorType(rhs).getShape();
    auto batch = broadcastShapes(l.drop_back(2), r.drop_back(2));
    SmallVector<int64_t> shape(*batch);
    shape.push_back(l[l.size() - 2]);
    shape.push_back(r.back());
    return create<MatmulOp>(withShape(lhs, shape), lhs, rhs);
  }

  OpBuilder &b;
  Location loc;
};

using Grads = SmallVectorImpl<Value>;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Whether the derivative of `kind` reads the forward's output y rather
/// than its input x (runtime/include/strata/Runtime/UnaryGrad.h: each reads
/// one of them, never both).
bool derivativeReadsOutput(UnaryKind kind) {
  return llvm::is_contained({UnaryKind::Exp, UnaryKind::Sqrt,
                             UnaryKind::Reciprocal, UnaryKind::Tanh,
                             UnaryKind::Relu, UnaryKind::Sigmoid},
                            kind);
}

Value unaryGrad(GradBuilder &g, Operation *op, Value dy, UnaryKind kind) {
  Value x = op->getOperand(0), y = op->getResult(0);
  // The operand the derivative does not read repeats the one it does, so
  // the backward pass keeps one forward tensor alive, not two.
  if (derivativeReadsOutput(kind))
    x = y;
  else
    y = x;
  auto floatAttr = [&](StringRef name) {
    return op->getAttrOfType<FloatAttr>(name);
  };
  return g.create<UnaryGradOp>(
      x.getType(), dy, x, y, UnaryKindAttr::get(op->getContext(), kind),
      op->getAttrOfType<GeluApproximationAttr>("approximate"), floatAttr("alpha"),
      floatAttr("beta"), floatAttr("min"), floatAttr("max"));
}

// Every unary op ElementwiseOps.def differentiates by graph.unary_grad.
#define STRATA_GRADIENT_UnaryGrad(OP, KIND)                                    \
  LogicalResult gradient(OP op, GradBuilder &g, ValueRange dys, Grads &dxs) { \
    dxs[0] = unaryGrad(g, op, dys[0], KIND);                                   \
    return success();                                                          \
  }
#define STRATA_GRADIENT_Own(OP, KIND)
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  STRATA_GRADIENT_##Gradient(OpClass, UnaryKind::Kind)
#include "strata/Runtime/ElementwiseOps.def"
#undef STRATA_GRADIENT_UnaryGrad
#undef STRATA_GRADIENT_Own

LogicalResult gradient(NegOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  dxs[0] = g.neg(dys[0]);
  return success();
}

/// The gradient flowing back through a low-precision region is itself low
/// precision, as under autocast.
LogicalResult gradient(RoundToOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.create<RoundToOp>(dys[0].getType(), op.getDtypeAttr(), dys[0]);
  return success();
}

LogicalResult gradient(CastOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  Type from = GradBuilder::tensorType(op.getInput()).getElementType();
  if (!isa<FloatType>(from))
    return success();
  dxs[0] = g.create<CastOp>(op.getInput().getType(), dys[0]);
  return success();
}

LogicalResult gradient(AddOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  dxs[0] = g.unbroadcast(dys[0], op.getLhs().getType());
  dxs[1] = g.unbroadcast(dys[0], op.getRhs().getType());
  return success();
}

LogicalResult gradient(SubOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  dxs[0] = g.unbroadcast(dys[0], op.getLhs().getType());
  dxs[1] = g.unbroadcast(g.neg(dys[0]), op.getRhs().getType());
  return success();
}

LogicalResult gradient(MulOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  dxs[0] = g.unbroadcast(g.mul(dys[0], op.getRhs()), op.getLhs().getType());
  dxs[1] = g.unbroadcast(g.mul(dys[0], op.getLhs()), op.getRhs().getType());
  return success();
}

LogicalResult gradient(DivOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  // d(l/r)/dl = 1/r; d(l/r)/dr = -(l/r)/r.
  Value scaled = g.div(dys[0], op.getRhs());
  dxs[0] = g.unbroadcast(scaled, op.getLhs().getType());
  dxs[1] = g.unbroadcast(g.neg(g.mul(scaled, op.getResult())),
                         op.getRhs().getType());
  return success();
}

LogicalResult gradient(PowOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  Value x = op.getLhs(), p = op.getRhs(), dy = dys[0];
  // d(x^p)/dx = p * x^(p-1); d(x^p)/dp = x^p * log(x).
  Value xpm1 = g.binary<PowOp>(x, g.sub(p, g.scalar(p, 1.0)));
  dxs[0] = g.unbroadcast(g.mul(dy, g.mul(p, xpm1)), x.getType());
  Value logx = g.create<LogOp>(x.getType(), x);
  dxs[1] = g.unbroadcast(g.mul(dy, g.mul(op.getResult(), logx)), p.getType());
  return success();
}

/// max/min: the gradient goes to the winner, half to each on a tie
/// (PyTorch's maximum/minimum).
template <typename LoserCompare>
void minMaxGradient(Operation *op, GradBuilder &g, Value dy, Grads &dxs) {
  Value l = op->getOperand(0), r = op->getOperand(1);
  Value zero = g.scalar(dy, 0.0);
  Value half = g.mul(dy, g.scalar(dy, 0.5));
  Value tie = g.compare<EqualOp>(l, r);
  Value lLoses = g.compare<LoserCompare>(l, r);
  Value rLoses = g.compare<LoserCompare>(r, l);
  dxs[0] = g.unbroadcast(g.where(tie, half, g.where(lLoses, zero, dy)),
                         l.getType());
  dxs[1] = g.unbroadcast(g.where(tie, half, g.where(rLoses, zero, dy)),
                         r.getType());
}

LogicalResult gradient(MaxOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  if (!isa<FloatType>(GradBuilder::tensorType(op.getLhs()).getElementType()))
    return success();
  minMaxGradient<LessOp>(op, g, dys[0], dxs);
  return success();
}

LogicalResult gradient(MinOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  if (!isa<FloatType>(GradBuilder::tensorType(op.getLhs()).getElementType()))
    return success();
  minMaxGradient<GreaterOp>(op, g, dys[0], dxs);
  return success();
}

LogicalResult gradient(WhereOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  Value dy = dys[0], zero = g.scalar(dys[0], 0.0);
  dxs[1] = g.unbroadcast(g.where(op.getCondition(), dy, zero),
                         op.getLhs().getType());
  dxs[2] = g.unbroadcast(g.where(op.getCondition(), zero, dy),
                         op.getRhs().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult gradient(MatmulOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  Value a = op.getLhs(), b = op.getRhs(), dy = dys[0];
  if (GradBuilder::tensorType(a).getRank() < 2 ||
      GradBuilder::tensorType(b).getRank() < 2)
    return op.emitOpError("gradient of a 1-D matmul operand is not supported");
  dxs[0] = g.unbroadcast(g.matmul(dy, g.transposeLastTwo(b)), a.getType());
  dxs[1] = g.unbroadcast(g.matmul(g.transposeLastTwo(a), dy), b.getType());
  return success();
}

LogicalResult gradient(LinearOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  Value dy = dys[0];
  bool transposed = op.getTransposeWeight();
  // y = x W (or x W^T): dx = dy W^T (or dy W).
  dxs[0] = g.create<LinearOp>(op.getInput().getType(), dy, op.getWeight(),
                              Value(), g.b.getBoolAttr(!transposed));
  dxs[1] = g.create<LinearGradWeightOp>(op.getWeight().getType(), dy,
                                        op.getInput(),
                                        g.b.getBoolAttr(transposed));
  if (op.getBias()) {
    int64_t rank = GradBuilder::tensorType(dy).getRank();
    SmallVector<int64_t> axes(rank - 1);
    std::iota(axes.begin(), axes.end(), 0);
    dxs[2] = g.reduceSum(dy, axes, /*keepdims=*/false);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization, softmax, dropout, attention
//===----------------------------------------------------------------------===//

LogicalResult gradient(LayerNormOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  Type scale = op.getScale().getType();
  auto grads = g.create<LayerNormGradOp>(
      TypeRange{op.getInput().getType(), scale, scale}, dys[0], op.getInput(),
      op.getScale(), op.getAxisAttr(), op.getEpsilonAttr());
  dxs[0] = grads.getInputGrad();
  dxs[1] = grads.getScaleGrad();
  if (op.getBias())
    dxs[2] = grads.getBiasGrad();
  return success();
}

LogicalResult gradient(BatchNormOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  if (!dys[0])
    return success(); // Only the running statistics were used.
  Type scale = op.getScale().getType();
  auto grads = g.create<BatchNormGradOp>(
      TypeRange{op.getInput().getType(), scale, scale}, dys[0], op.getInput(),
      op.getScale(), op.getRunningMean(), op.getRunningVar(),
      op.getEpsilonAttr(), op.getTrainingAttr());
  dxs[0] = grads.getInputGrad();
  dxs[1] = grads.getScaleGrad();
  dxs[2] = grads.getBiasGrad();
  return success();
}

LogicalResult gradient(SoftmaxOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  // dx = y * (dy - sum(dy * y, axis)).
  Value y = op.getOutput(), dy = dys[0];
  int64_t axis = op.getAxis();
  Value dot = g.reduceSum(g.mul(dy, y), {axis}, /*keepdims=*/true);
  dxs[0] = g.mul(y, g.sub(dy, dot));
  return success();
}

LogicalResult gradient(LogSoftmaxOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  // dx = dy - exp(y) * sum(dy, axis).
  Value y = op.getOutput(), dy = dys[0];
  int64_t axis = op.getAxis();
  Value total = g.reduceSum(dy, {axis}, /*keepdims=*/true);
  dxs[0] = g.sub(dy, g.mul(g.create<ExpOp>(y.getType(), y), total));
  return success();
}

LogicalResult gradient(DropoutOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  if (!dys[0])
    return success();
  double ratio = op.getRatio().convertToDouble();
  Value keep = g.create<CastOp>(op.getInput().getType(), op.getMask());
  Value dx = g.mul(dys[0], keep);
  if (ratio > 0.0)
    dx = g.mul(dx, g.scalar(dx, 1.0 / (1.0 - ratio)));
  dxs[0] = dx;
  return success();
}

LogicalResult gradient(AttentionOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  auto grads = g.create<AttentionGradOp>(
      TypeRange{op.getQuery().getType(), op.getKey().getType(),
                op.getValue().getType()},
      dys[0], op.getQuery(), op.getKey(), op.getValue(), op.getMask(),
      op.getProbabilities(), op.getScaleAttr(), op.getCausalAttr(),
      op.getDropoutRatioAttr(),
      op->getAttrOfType<IntegerAttr>("rng_stream"), op.getHeadsInnerAttr(),
      op.getKeepProbabilitiesAttr());
  dxs[0] = grads.getQueryGrad();
  dxs[1] = grads.getKeyGrad();
  dxs[2] = grads.getValueGrad();
  return success();
}

//===----------------------------------------------------------------------===//
// Lookups and losses
//===----------------------------------------------------------------------===//

LogicalResult gradient(EmbeddingOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.create<EmbeddingGradOp>(op.getTable().getType(), dys[0],
                                     op.getIndices());
  return success();
}

LogicalResult gradient(GatherOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  if (!isa<FloatType>(GradBuilder::tensorType(op.getInput()).getElementType()))
    return success();
  dxs[0] = g.create<GatherGradOp>(op.getInput().getType(), dys[0],
                                  op.getIndices(), op.getAxisAttr());
  return success();
}

LogicalResult gradient(CrossEntropyOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.create<CrossEntropyGradOp>(
      op.getLogits().getType(), dys[0], op.getLogits(), op.getLabels(),
      op.getWeight(), op.getReductionAttr(), op.getIgnoreIndexAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult gradient(ReshapeOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.reshape(dys[0], GradBuilder::tensorType(op.getInput()).getShape());
  return success();
}

LogicalResult gradient(BroadcastToOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.unbroadcast(dys[0], op.getInput().getType());
  return success();
}

LogicalResult gradient(TransposeOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  ArrayRef<int64_t> perm = op.getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  dxs[0] = g.transpose(dys[0], inverse);
  return success();
}

LogicalResult gradient(SliceOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.create<SliceGradOp>(op.getInput().getType(), dys[0],
                                 op.getOffsetsAttr(), op.getSizesAttr(),
                                 op.getStridesAttr());
  return success();
}

LogicalResult gradient(ConcatOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  auto split = g.create<SplitOp>(op.getInputs().getTypes(), dys[0],
                                 op.getAxisAttr());
  for (auto [i, result] : llvm::enumerate(split.getOutputs()))
    dxs[i] = result;
  return success();
}

LogicalResult gradient(SplitOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  SmallVector<Value> pieces;
  for (auto [dy, result] : llvm::zip(dys, op.getOutputs()))
    pieces.push_back(dy ? dy : g.zerosLike(result.getType()));
  dxs[0] = g.create<ConcatOp>(op.getInput().getType(), pieces,
                              op.getAxisAttr());
  return success();
}

LogicalResult gradient(PadOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  dxs[0] = g.create<PadGradOp>(op.getInput().getType(), dys[0],
                               op.getPadsAttr(), op.getModeAttr(),
                               op.getValueAttr());
  return success();
}

LogicalResult gradient(TriluOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.create<TriluOp>(dys[0].getType(), dys[0], op.getUpperAttr(),
                             op.getKAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult gradient(ReduceSumOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.unreduce(dys[0], op.getInput().getType(), op.getAxes());
  return success();
}

LogicalResult gradient(ReduceMeanOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  auto shape = GradBuilder::tensorType(op.getInput()).getShape();
  int64_t count = 1;
  for (int64_t axis : op.getAxes())
    count *= shape[axis];
  Value dy = g.mul(dys[0], g.scalar(dys[0], 1.0 / static_cast<double>(count)));
  dxs[0] = g.unreduce(dy, op.getInput().getType(), op.getAxes());
  return success();
}

LogicalResult gradient(ReduceMaxOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  // Shared evenly among the maxima, as PyTorch's amax.
  Value x = op.getInput();
  Type xType = x.getType();
  if (!isa<FloatType>(GradBuilder::tensorType(x).getElementType()))
    return success();
  Value max = g.unreduce(op.getOutput(), xType, op.getAxes());
  Value isMax = g.compare<EqualOp>(x, max);
  Value ones = g.create<CastOp>(xType, isMax);
  Value count = g.reduceSum(ones, op.getAxes(), /*keepdims=*/true);
  Value share = g.div(g.reshape(dys[0], GradBuilder::tensorType(count).getShape()),
                      count);
  dxs[0] = g.mul(ones, share);
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LogicalResult gradient(ConvOp op, GradBuilder &g, ValueRange dys, Grads &dxs) {
  Value dy = dys[0];
  dxs[0] = g.create<ConvGradInputOp>(op.getInput().getType(), dy,
                                     op.getWeight(), op.getStridesAttr(),
                                     op.getPadsAttr(), op.getDilationsAttr(),
                                     op.getGroupsAttr());
  dxs[1] = g.create<ConvGradWeightOp>(op.getWeight().getType(), dy,
                                      op.getInput(), op.getStridesAttr(),
                                      op.getPadsAttr(), op.getDilationsAttr(),
                                      op.getGroupsAttr());
  if (op.getBias()) {
    SmallVector<int64_t> axes{0};
    for (int64_t d = 2, e = GradBuilder::tensorType(dy).getRank(); d < e; ++d)
      axes.push_back(d);
    dxs[2] = g.reduceSum(dy, axes, /*keepdims=*/false);
  }
  return success();
}

LogicalResult gradient(MaxPoolOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.create<MaxPoolGradOp>(
      op.getInput().getType(), dys[0], op.getInput(), op.getKernelShapeAttr(),
      op.getStridesAttr(), op.getPadsAttr(), op.getDilationsAttr(),
      op.getCeilModeAttr());
  return success();
}

LogicalResult gradient(AvgPoolOp op, GradBuilder &g, ValueRange dys,
                       Grads &dxs) {
  dxs[0] = g.create<AvgPoolGradOp>(
      op.getInput().getType(), dys[0], op.getKernelShapeAttr(),
      op.getStridesAttr(), op.getPadsAttr(), op.getCeilModeAttr(),
      op.getCountIncludePadAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

template <typename OpT>
struct GradientModel
    : public GradientOpInterface::ExternalModel<GradientModel<OpT>, OpT> {
  LogicalResult buildGradient(Operation *op, OpBuilder &builder,
                              ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) const {
    operandGrads.assign(op->getNumOperands(), Value());
    if (llvm::all_of(resultGrads, [](Value v) { return !v; }))
      return success();
    GradBuilder g(builder, op->getLoc());
    return gradient(cast<OpT>(op), g, resultGrads, operandGrads);
  }
};

template <typename... OpTs>
void attachGradients(MLIRContext &context) {
  (OpTs::template attachInterface<GradientModel<OpTs>>(context), ...);
}

} // namespace

void registerGradientModels(MLIRContext &context) {
  attachGradients<
  // Every unary op of ElementwiseOps.def.
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient) OpClass,
#include "strata/Runtime/ElementwiseOps.def"
      CastOp, RoundToOp, AddOp, SubOp, MulOp, DivOp, PowOp,
      MaxOp, MinOp, WhereOp, MatmulOp, LinearOp, LayerNormOp, BatchNormOp,
      SoftmaxOp, LogSoftmaxOp, DropoutOp, AttentionOp, EmbeddingOp, GatherOp,
      CrossEntropyOp, ReshapeOp, BroadcastToOp, TransposeOp, SliceOp, ConcatOp,
      SplitOp, PadOp, TriluOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ConvOp,
      MaxPoolOp, AvgPoolOp>(context);
}

} // namespace strata::graph
