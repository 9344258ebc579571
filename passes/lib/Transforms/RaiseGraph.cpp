//===- RaiseGraph.cpp - Recognise composite patterns as single ops --------===//
//
// The exporter decomposes nn.Linear, nn.GELU and attention into chains of
// primitive ops. The passes after import (autodiff, partition, schedule) and
// the kernels want them whole, so this pass rebuilds them. Every rewrite is
// exact: a chain that only resembles a pattern is left alone.
//
//===----------------------------------------------------------------------===//

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>

namespace strata {
#define GEN_PASS_DEF_RAISEGRAPHPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

/// The value of a splat float or integer constant.
std::optional<double> getSplatValue(Value value) {
  DenseElementsAttr attr;
  if (!value || !matchPattern(value, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  if (auto floats = dyn_cast<DenseFPElementsAttr>(attr))
    return floats.getSplatValue<APFloat>().convertToDouble();
  if (auto ints = dyn_cast<DenseIntElementsAttr>(attr))
    return static_cast<double>(ints.getSplatValue<APInt>().getSExtValue());
  return std::nullopt;
}

/// True if `value` is a splat constant within float32 rounding of `expected`.
bool isSplatNear(Value value, double expected) {
  std::optional<double> v = getSplatValue(value);
  return v && std::abs(*v - expected) <= 1e-6 * std::max(1.0, std::abs(expected));
}

/// The single user of `value` if it is an op of type OpTy.
template <typename OpTy>
OpTy getSingleUser(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return dyn_cast<OpTy>(*value.getUsers().begin());
}

/// The operand of binary `op` other than `value`.
Value otherOperand(Operation *op, Value value) {
  return op->getOperand(0) == value ? op->getOperand(1) : op->getOperand(0);
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

/// matmul(x, W) with rank-2 W -> linear(x, W); a transpose of W becomes
/// `transpose_weight`.
struct MatmulToLinear : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto weightType = cast<RankedTensorType>(op.getRhs().getType());
    if (weightType.getRank() != 2)
      return failure();
    Value weight = op.getRhs();
    bool transposed = false;
    if (auto transpose = weight.getDefiningOp<TransposeOp>()) {
      weight = transpose.getInput();
      transposed = true;
    }
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), op.getLhs(), weight,
                                          /*bias=*/Value(), transposed);
    return success();
  }
};

/// add(linear(x, W), b) with rank-1 b of the output width -> linear(x, W, b).
struct FoldBiasIntoLinear : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      auto linear = op->getOperand(i).getDefiningOp<LinearOp>();
      Value bias = op->getOperand(1 - i);
      if (!linear || linear.getBias() || !linear->hasOneUse() ||
          linear.getType() != op.getType())
        continue;
      auto biasType = cast<RankedTensorType>(bias.getType());
      if (biasType.getRank() != 1 ||
          biasType.getDimSize(0) != op.getType().getShape().back())
        continue;
      rewriter.replaceOpWithNewOp<LinearOp>(
          op, op.getType(), linear.getInput(), linear.getWeight(), bias,
          linear.getTransposeWeight());
      return success();
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// GELU
//===----------------------------------------------------------------------===//

/// Given `inner` = 1 + f(x), finds the op computing 0.5 * x * inner in any
/// association and returns it.
Operation *findHalfXTimes(Value inner, Value x) {
  auto first = getSingleUser<MulOp>(inner);
  if (!first)
    return nullptr;
  Value other = otherOperand(first, inner);
  // (0.5 * x) * inner
  if (auto halfX = other.getDefiningOp<MulOp>()) {
    Value rest = otherOperand(halfX, x);
    if ((halfX.getLhs() == x || halfX.getRhs() == x) && isSplatNear(rest, 0.5))
      return first;
  }
  auto second = getSingleUser<MulOp>(first.getResult());
  if (!second)
    return nullptr;
  Value last = otherOperand(second, first.getResult());
  if ((other == x && isSplatNear(last, 0.5)) ||
      (isSplatNear(other, 0.5) && last == x))
    return second;
  return nullptr;
}

/// Returns `x` when `value` is x / sqrt(2) or x * (1 / sqrt(2)).
Value matchDivBySqrt2(Value value) {
  if (auto div = value.getDefiningOp<DivOp>())
    if (isSplatNear(div.getRhs(), M_SQRT2))
      return div.getLhs();
  if (auto mul = value.getDefiningOp<MulOp>())
    for (int i = 0; i < 2; ++i)
      if (isSplatNear(mul->getOperand(1 - i), M_SQRT1_2))
        return mul->getOperand(i);
  return nullptr;
}

/// Returns the operand `v` of `1 + v` (either order), else null.
Value matchOnePlus(AddOp add, Value v) {
  Value other = otherOperand(add, v);
  return isSplatNear(other, 1.0) ? v : Value();
}

/// 0.5 * x * (1 + erf(x / sqrt(2))) -> gelu(x).
struct ErfToGelu : public OpRewritePattern<ErfOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ErfOp erf,
                                PatternRewriter &rewriter) const override {
    Value x = matchDivBySqrt2(erf.getInput());
    auto add = getSingleUser<AddOp>(erf.getResult());
    if (!x || !add || !matchOnePlus(add, erf.getResult()))
      return failure();
    Operation *root = findHalfXTimes(add.getResult(), x);
    if (!root || root->getResult(0).getType() != x.getType())
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(root, x, GeluApproximation::None);
    return success();
  }
};

/// True if `value` is x^3: pow(x, 3), x * (x * x) or (x * x) * x.
bool isCubeOf(Value value, Value x) {
  if (auto pow = value.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isSplatNear(pow.getRhs(), 3.0);
  auto mul = value.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  auto isSquare = [&](Value v) {
    auto sq = v.getDefiningOp<MulOp>();
    return sq && sq.getLhs() == x && sq.getRhs() == x;
  };
  return (mul.getLhs() == x && isSquare(mul.getRhs())) ||
         (mul.getRhs() == x && isSquare(mul.getLhs()));
}

/// Returns x when `value` is x + 0.044715 * x^3.
Value matchCubicTerm(Value value) {
  auto add = value.getDefiningOp<AddOp>();
  if (!add)
    return nullptr;
  for (int i = 0; i < 2; ++i) {
    Value x = add->getOperand(i);
    auto mul = add->getOperand(1 - i).getDefiningOp<MulOp>();
    if (!mul)
      continue;
    for (int j = 0; j < 2; ++j)
      if (isCubeOf(mul->getOperand(j), x) &&
          isSplatNear(mul->getOperand(1 - j), 0.044715))
        return x;
  }
  return nullptr;
}

/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) -> gelu(x, tanh).
struct TanhToGelu : public OpRewritePattern<TanhOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TanhOp tanh,
                                PatternRewriter &rewriter) const override {
    auto scaled = tanh.getInput().getDefiningOp<MulOp>();
    if (!scaled)
      return failure();
    const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
    Value x;
    for (int i = 0; i < 2 && !x; ++i)
      if (isSplatNear(scaled->getOperand(1 - i), kSqrt2OverPi))
        x = matchCubicTerm(scaled->getOperand(i));
    auto add = getSingleUser<AddOp>(tanh.getResult());
    if (!x || !add || !matchOnePlus(add, tanh.getResult()))
      return failure();
    Operation *root = findHalfXTimes(add.getResult(), x);
    if (!root || root->getResult(0).getType() != x.getType())
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(root, x, GeluApproximation::Tanh);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

/// True if `axes` are the trailing dims [rank - k, rank).
bool areTrailingAxes(ArrayRef<int64_t> axes, int64_t rank) {
  if (axes.empty())
    return false;
  for (auto [i, axis] : llvm::enumerate(axes))
    if (axis != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i))
      return false;
  return true;
}

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* scale] [+ bias] over
/// trailing axes -> layer_norm(x, scale, bias). Also with the reciprocal
/// square root multiplied in. A missing scale becomes a constant of ones.
struct DecomposedLayerNorm : public OpRewritePattern<SqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SqrtOp sqrt,
                                PatternRewriter &rewriter) const override {
    auto shifted = sqrt.getInput().getDefiningOp<AddOp>();
    if (!shifted)
      return failure();
    Value var;
    std::optional<double> eps;
    for (int i = 0; i < 2 && !eps; ++i)
      if ((eps = getSplatValue(shifted->getOperand(1 - i))))
        var = shifted->getOperand(i);
    auto varMean = var ? var.getDefiningOp<ReduceMeanOp>() : nullptr;
    if (!eps || *eps < 0 || !varMean || !varMean.getKeepdims())
      return failure();
    Value squared = varMean.getInput();
    Value centered;
    if (auto mul = squared.getDefiningOp<MulOp>()) {
      if (mul.getLhs() == mul.getRhs())
        centered = mul.getLhs();
    } else if (auto pow = squared.getDefiningOp<PowOp>()) {
      if (isSplatNear(pow.getRhs(), 2.0))
        centered = pow.getLhs();
    }
    auto sub = centered ? centered.getDefiningOp<SubOp>() : nullptr;
    auto mean = sub ? sub.getRhs().getDefiningOp<ReduceMeanOp>() : nullptr;
    if (!mean || mean.getInput() != sub.getLhs() || !mean.getKeepdims() ||
        mean.getAxes() != varMean.getAxes())
      return failure();
    Value x = sub.getLhs();
    auto xType = cast<RankedTensorType>(x.getType());
    if (centered.getType() != xType ||
        !areTrailingAxes(mean.getAxes(), xType.getRank()))
      return failure();

    // centered / sqrt, or centered * reciprocal(sqrt).
    Operation *normalized = nullptr;
    for (Operation *user : sqrt->getUsers()) {
      if (auto div = dyn_cast<DivOp>(user);
          div && div.getLhs() == centered && div.getRhs() == sqrt.getResult())
        normalized = div;
      // reciprocal(sqrt) or 1 / sqrt, multiplied in.
      Value inverse;
      if (auto rec = dyn_cast<ReciprocalOp>(user))
        inverse = rec.getResult();
      if (auto div = dyn_cast<DivOp>(user);
          div && div.getRhs() == sqrt.getResult() &&
          isSplatNear(div.getLhs(), 1.0))
        inverse = div.getResult();
      if (inverse)
        for (Operation *inverseUser : inverse.getUsers())
          if (auto mul = dyn_cast<MulOp>(inverseUser);
              mul && otherOperand(mul, inverse) == centered)
            normalized = mul;
    }
    if (!normalized || normalized->getResult(0).getType() != xType)
      return failure();

    int64_t axis = mean.getAxes().front();
    ArrayRef<int64_t> paramShape = xType.getShape().drop_front(axis);
    auto isParamShaped = [&](Value v) {
      return cast<RankedTensorType>(v.getType()).getShape() == paramShape;
    };
    Operation *root = normalized;
    Value scale, bias;
    if (auto mul = getSingleUser<MulOp>(root->getResult(0))) {
      Value other = otherOperand(mul, root->getResult(0));
      if (isParamShaped(other) && mul.getType() == xType) {
        scale = other;
        root = mul;
      }
    }
    if (auto add = getSingleUser<AddOp>(root->getResult(0))) {
      Value other = otherOperand(add, root->getResult(0));
      if (isParamShaped(other) && add.getType() == xType) {
        bias = other;
        root = add;
      }
    }
    Location loc = root->getLoc();
    if (!scale) {
      auto type = RankedTensorType::get(paramShape, xType.getElementType());
      scale = rewriter.create<ConstantOp>(
          loc, DenseElementsAttr::get(
                   type, rewriter.getFloatAttr(xType.getElementType(), 1.0)));
    }
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        root, xType, x, scale, bias, rewriter.getI64IntegerAttr(axis),
        rewriter.getF64FloatAttr(*eps));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// What a constant mask of the scores means.
enum class MaskKind { NotConstant, Causal, Other };

/// Classifies a constant "masked" predicate of `shape` that broadcasts to the
/// scores `scores` = [..., S, T]: `isMasked` tells, for a flat index, whether
/// that score is hidden. Causal needs the mask to span [S, T] itself.
MaskKind classifyMask(ArrayRef<int64_t> shape, ArrayRef<int64_t> scores,
                      llvm::function_ref<bool(int64_t)> isMasked) {
  if (shape.size() < 2 || scores.size() < 2 ||
      shape.take_back(2) != scores.take_back(2))
    return MaskKind::Other;
  int64_t s = shape[shape.size() - 2], t = shape.back();
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t j = flat % t, i = (flat / t) % s;
    if (isMasked(flat) != (j > i))
      return MaskKind::Other;
  }
  return MaskKind::Causal;
}

/// Fills of masked_fill / where at or below this act as -inf (see above).
constexpr double kMaskFillThreshold = -1e9;

/// True if every row (last dim) of a mask over [..., S, T] keeps a score.
bool everyRowKeepsOne(ArrayRef<int64_t> shape,
                      llvm::function_ref<bool(int64_t)> isMasked) {
  if (shape.empty())
    return !isMasked(0);
  int64_t t = shape.back(), total = 1;
  for (int64_t d : shape)
    total *= d;
  for (int64_t row = 0; row < total / std::max<int64_t>(t, 1); ++row) {
    bool kept = false;
    for (int64_t j = 0; j < t && !kept; ++j)
      kept = !isMasked(row * t + j);
    if (!kept)
      return false;
  }
  return true;
}

/// The forward half of an attention after its softmax: [dropout], then
/// probs @ v.
struct AttentionOutput {
  /// Null without dropout.
  DropoutOp dropout;
  double dropoutRatio = 0.0;
  MatmulOp output;
  Value v;
};

std::optional<AttentionOutput> matchAttentionOutput(SoftmaxOp softmax) {
  AttentionOutput match;
  Value probs = softmax.getResult();
  match.dropout = getSingleUser<DropoutOp>(probs);
  if (match.dropout) {
    if (!match.dropout.getMask().use_empty())
      return std::nullopt;
    match.dropoutRatio = match.dropout.getRatioAttr().getValueAsDouble();
    probs = match.dropout.getOutput();
  }
  match.output = getSingleUser<MatmulOp>(probs);
  if (!match.output || match.output.getLhs() != probs)
    return std::nullopt;
  match.v = match.output.getRhs();
  return match;
}

/// The mask between the scaled q @ k^T and the softmax, as attention takes
/// it: causal, an additive mask value, or an additive mask to materialize.
struct AttentionMask {
  /// The scores before the mask.
  Value scores;
  /// An additive mask the IR already computes.
  Value mask;
  /// A constant additive mask to materialize on success.
  DenseElementsAttr additiveMask;
  bool causal = false;
};

/// What a constant condition means as a mask of scores of a type, computed
/// once per (condition, polarity, fill, scores type): every layer of a
/// model shares one causal mask, and reading a 2048 x 2048 mask element by
/// element for each of 96 layers was half of a GPT-3-sized compile.
struct WhereMaskMeaning {
  bool usable = false; // a finite fill needs every row to keep a score
  bool causal = false;
  DenseElementsAttr additiveMask;
};
/// (condition, polarity + 2 x finite fill, scores type)
using WhereMaskKey = std::tuple<const void *, unsigned, Type>;
using WhereMaskCache = llvm::DenseMap<WhereMaskKey, WhereMaskMeaning>;

/// masked_fill(cond, -inf) or where(keep, scores, -inf), with a constant
/// condition.
LogicalResult matchWhereMask(WhereOp where, RankedTensorType scoresType,
                             AttentionMask &match, WhereMaskCache &cache) {
  DenseElementsAttr cond;
  if (!matchPattern(where.getCondition(), m_Constant(&cond)))
    return failure();
  bool maskWhereTrue;
  Value kept;
  // -inf, or a fill so negative (torch.finfo(dtype).min, -1e9) that its
  // exponent underflows to exactly 0 next to any kept score; the latter
  // only while every row keeps a score (checked below).
  bool finiteFill = false;
  auto isMaskFill = [&](Value v) {
    std::optional<double> c = getSplatValue(v);
    if (!c || *c > kMaskFillThreshold)
      return false;
    finiteFill = !std::isinf(*c);
    return true;
  };
  if (isMaskFill(where.getLhs())) {
    maskWhereTrue = true;
    kept = where.getRhs();
  } else if (isMaskFill(where.getRhs())) {
    maskWhereTrue = false;
    kept = where.getLhs();
  } else {
    return failure();
  }
  if (kept.getType() != match.scores.getType())
    return failure();
  WhereMaskKey key{cond.getAsOpaquePointer(),
                   unsigned(maskWhereTrue) + 2 * unsigned(finiteFill),
                   scoresType};
  auto [it, inserted] = cache.try_emplace(key);
  WhereMaskMeaning &meaning = it->second;
  if (inserted) {
    SmallVector<bool> values(cond.getValues<bool>());
    auto condShape = cond.getType().getShape();
    auto masked = [&](int64_t flat) {
      return values[cond.isSplat() ? 0 : flat] == maskWhereTrue;
    };
    meaning.usable = !finiteFill || everyRowKeepsOne(condShape, masked);
    if (meaning.usable &&
        classifyMask(condShape, scoresType.getShape(), masked) ==
            MaskKind::Causal) {
      meaning.causal = true;
    } else if (meaning.usable) {
      // An additive 0 / -inf mask of the condition's shape.
      auto elementType = cast<FloatType>(scoresType.getElementType());
      APFloat negInf =
          APFloat::getInf(elementType.getFloatSemantics(), true);
      APFloat zero = APFloat::getZero(elementType.getFloatSemantics());
      SmallVector<APFloat> additive;
      int64_t total = cond.getType().getNumElements();
      for (int64_t flat = 0; flat < total; ++flat)
        additive.push_back(masked(flat) ? negInf : zero);
      meaning.additiveMask = DenseElementsAttr::get(
          RankedTensorType::get(condShape, elementType), additive);
    }
  }
  if (!meaning.usable)
    return failure();
  match.causal = meaning.causal;
  match.additiveMask = meaning.additiveMask;
  match.scores = kept;
  return success();
}

/// scores + additive mask: the mask is the operand that does not lead back
/// to the q @ k^T product. A constant 0 / -inf mask that is causal becomes
/// `causal`.
LogicalResult matchAddedMask(AddOp add, RankedTensorType scoresType,
                             AttentionMask &match) {
  for (int i = 0; i < 2 && !match.mask; ++i) {
    Value candidate = add->getOperand(i);
    if (candidate.getType() != match.scores.getType())
      continue;
    Operation *def = candidate.getDefiningOp();
    if (def && isa<MatmulOp, MulOp, DivOp>(def)) {
      match.mask = add->getOperand(1 - i);
      match.scores = candidate;
    }
  }
  if (!match.mask)
    return failure();
  DenseElementsAttr constMask;
  if (matchPattern(match.mask, m_Constant(&constMask)) &&
      isa<FloatType>(constMask.getElementType())) {
    SmallVector<APFloat> values(constMask.getValues<APFloat>());
    auto masked = [&](int64_t flat) {
      const APFloat &v = values[constMask.isSplat() ? 0 : flat];
      return v.isInfinity() && v.isNegative();
    };
    bool zeroElsewhere = llvm::all_of(values, [](const APFloat &v) {
      return v.isZero() || (v.isInfinity() && v.isNegative());
    });
    if (zeroElsewhere &&
        classifyMask(constMask.getType().getShape(), scoresType.getShape(),
                     masked) == MaskKind::Causal) {
      match.causal = true;
      match.mask = nullptr;
    }
  }
  return success();
}

/// The mask, if any, in front of the softmax's input `scores`.
FailureOr<AttentionMask> matchAttentionMask(Value scores,
                                            RankedTensorType scoresType,
                                            WhereMaskCache &cache) {
  AttentionMask match;
  match.scores = scores;
  if (auto where = scores.getDefiningOp<WhereOp>()) {
    if (failed(matchWhereMask(where, scoresType, match, cache)))
      return failure();
  } else if (auto add = scores.getDefiningOp<AddOp>()) {
    if (failed(matchAddedMask(add, scoresType, match)))
      return failure();
  }
  return match;
}

/// Strips a multiplication or division by a splat constant off `value`,
/// folding it into `scale`.
void stripConstantScale(Value &value, double &scale) {
  if (auto mul = value.getDefiningOp<MulOp>()) {
    for (int i = 0; i < 2; ++i)
      if (std::optional<double> c = getSplatValue(mul->getOperand(1 - i));
          c && mul->getOperand(i).getType() == value.getType()) {
        scale *= *c;
        value = mul->getOperand(i);
        return;
      }
  }
  if (auto div = value.getDefiningOp<DivOp>())
    if (std::optional<double> c = getSplatValue(div.getRhs());
        c && *c != 0 && div.getLhs().getType() == value.getType()) {
      scale /= *c;
      value = div.getLhs();
    }
}

/// True if q [..., S, D], k^T [..., D, T] and v [..., T, E] have rank
/// `rank` and the same batch dims (attention takes them unbroadcast), and
/// `output` is [..., S, E].
bool haveAttentionShapes(Value q, Value keyT, Value v, MatmulOp output,
                         int64_t rank) {
  auto qType = cast<RankedTensorType>(q.getType());
  auto kTType = cast<RankedTensorType>(keyT.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  if (qType.getRank() != rank || kTType.getRank() != rank ||
      vType.getRank() != rank)
    return false;
  ArrayRef<int64_t> qs = qType.getShape(), kts = kTType.getShape(),
                    vs = vType.getShape();
  if (kts.drop_back(2) != qs.drop_back(2) ||
      vs.drop_back(2) != qs.drop_back(2) || kts[rank - 2] != qs.back() ||
      kts.back() != vs[rank - 2])
    return false;
  SmallVector<int64_t> outShape(qs.drop_back());
  outShape.push_back(vs.back());
  return output.getType().getShape() == ArrayRef<int64_t>(outShape);
}

/// True if the mask, when there is one, broadcasts to exactly the scores'
/// shape.
bool maskFitsScores(const AttentionMask &match, RankedTensorType scoresType) {
  if (!match.mask && !match.additiveMask)
    return true;
  ArrayRef<int64_t> maskShape =
      match.mask ? cast<RankedTensorType>(match.mask.getType()).getShape()
                 : match.additiveMask.getType().getShape();
  auto b = broadcastShapes(maskShape, scoresType.getShape());
  return b && ArrayRef<int64_t>(*b) == scoresType.getShape();
}

/// softmax(mask(scale * q @ k^T)) [-> dropout] @ v -> attention(q, k, v).
struct SoftmaxToAttention : public OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp softmax,
                                PatternRewriter &rewriter) const override {
    auto scoresType = cast<RankedTensorType>(softmax.getType());
    int64_t rank = scoresType.getRank();
    if (rank < 2 || softmax.getAxisAttr().getInt() != rank - 1)
      return failure();

    // Forward: [dropout] then probs @ v.
    std::optional<AttentionOutput> forward = matchAttentionOutput(softmax);
    if (!forward)
      return failure();

    // Backward: masks, then scale, then q @ k^T.
    FailureOr<AttentionMask> mask =
        matchAttentionMask(softmax.getInput(), scoresType, maskCache);
    if (failed(mask))
      return failure();
    double scale = 1.0;
    Value scores = mask->scores;
    stripConstantScale(scores, scale);
    auto product = scores.getDefiningOp<MatmulOp>();
    if (!product)
      return failure();
    Value q = product.getLhs();
    stripConstantScale(q, scale);
    Value keyT = product.getRhs();
    // Check every shape before touching the IR.
    if (!haveAttentionShapes(q, keyT, forward->v, forward->output, rank) ||
        !maskFitsScores(*mask, scoresType))
      return failure();

    Location loc = softmax.getLoc();
    Value maskValue = mask->mask;
    if (mask->additiveMask)
      maskValue = rewriter.create<ConstantOp>(loc, mask->additiveMask);
    SmallVector<int64_t> swapLast = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(swapLast[rank - 1], swapLast[rank - 2]);
    Value key = rewriter.create<TransposeOp>(loc, keyT, swapLast);
    rewriter.replaceOpWithNewOp<AttentionOp>(
        forward->output, forward->output.getType(), q, key, forward->v,
        maskValue, rewriter.getF64FloatAttr(scale),
        rewriter.getBoolAttr(mask->causal),
        rewriter.getF64FloatAttr(forward->dropoutRatio),
        rewriter.getBoolAttr(false), rewriter.getBoolAttr(false));
    // Dropout is not Pure (it draws a mask), so it would keep the unfused
    // chain alive; its draw now happens inside the attention.
    if (forward->dropout)
      rewriter.eraseOp(forward->dropout);
    return success();
  }

  /// The meaning of each constant mask, per pass run (the greedy driver
  /// runs one pattern at a time).
  mutable WhereMaskCache maskCache;
};

/// True if `perm` swaps the sequence and head axes of a rank-`rank`
/// attention operand (rank - 3 and rank - 2) and keeps every other axis.
bool swapsHeadsAndSequence(ArrayRef<int64_t> perm, int64_t rank) {
  if (int64_t(perm.size()) != rank || rank < 3)
    return false;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t expected = i == rank - 3   ? rank - 2
                       : i == rank - 2 ? rank - 3
                                       : i;
    if (perm[i] != expected)
      return false;
  }
  return true;
}

/// attention(transpose(q), transpose(k), transpose(v)) read back through a
/// transpose, each swapping the sequence and head axes, ->
/// attention {heads_inner}(q, k, v): the heads are read where the
/// projection wrote them, [..., S, H, D], and the result is written where
/// the next projection reads it. The kernels read the same numbers in the
/// same order, so the result is bit-identical; four copies of an
/// activation go (and four of its gradient in the backward).
struct AttentionHeadsInPlace : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention,
                                PatternRewriter &rewriter) const override {
    if (attention.getHeadsInner())
      return failure();
    if (attention.getKeepProbabilities())
      return failure();
    int64_t rank =
        cast<RankedTensorType>(attention.getOutput().getType()).getRank();
    SmallVector<Value, 3> inner;
    for (Value operand :
         {attention.getQuery(), attention.getKey(), attention.getValue()}) {
      auto transpose = operand.getDefiningOp<TransposeOp>();
      if (!transpose || !swapsHeadsAndSequence(transpose.getPerm(), rank))
        return failure();
      inner.push_back(transpose.getInput());
    }
    SmallVector<TransposeOp> readers;
    for (Operation *user : attention->getUsers()) {
      auto transpose = dyn_cast<TransposeOp>(user);
      if (!transpose || !swapsHeadsAndSequence(transpose.getPerm(), rank))
        return failure();
      readers.push_back(transpose);
    }
    if (readers.empty())
      return failure();
    auto fused = rewriter.create<AttentionOp>(
        attention.getLoc(), readers.front().getType(), inner[0], inner[1],
        inner[2], attention.getMask(), attention.getScaleAttr(),
        attention.getCausalAttr(), attention.getDropoutRatioAttr(),
        rewriter.getBoolAttr(true), rewriter.getBoolAttr(false));
    // Discardable attributes (a dropout's rng_stream) ride along.
    fused->setDiscardableAttrs(attention->getDiscardableAttrDictionary());
    for (TransposeOp reader : readers)
      rewriter.replaceOp(reader, fused.getOutput());
    rewriter.eraseOp(attention);
    return success();
  }
};

struct RaiseGraphPass
    : public strata::impl::RaiseGraphPassBase<RaiseGraphPass> {
  using RaiseGraphPassBase::RaiseGraphPassBase;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    // Attention first: its q @ k^T would otherwise look like a linear layer.
    if (fuseAttention) {
      RewritePatternSet patterns(context);
      patterns.add<SoftmaxToAttention>(context);
      TransposeOp::getCanonicalizationPatterns(patterns, context);
      if (failed(applyPatternsAndFoldGreedily(getOperation(),
                                              std::move(patterns))))
        return signalPassFailure();
    }
    RewritePatternSet patterns(context);
    patterns.add<MatmulToLinear, FoldBiasIntoLinear, ErfToGelu, TanhToGelu,
                 DecomposedLayerNorm, AttentionHeadsInPlace>(context);
    ReshapeOp::getCanonicalizationPatterns(patterns, context);
    TransposeOp::getCanonicalizationPatterns(patterns, context);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
