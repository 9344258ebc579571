//===- MixedPrecision.cpp - Low-precision compute, fp32 master weights ----===//
//
// strata-mixed-precision: the ops autocast runs in bf16 / fp16 (linear,
// matmul, attention, conv) read their operands rounded to that type and
// produce a rounded result; everything else (normalization, softmax inside
// attention, losses, the optimizer) stays fp32, and the parameters stay fp32
// master weights. Two forms compute the same numbers: narrow storage (the
// operands and results are bf16 / fp16 tensors, cast from and back to f32)
// and the f32 emulation (graph.round_to over f32 tensors).
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace strata {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#define GEN_PASS_DEF_SINKWIDENINGCASTSPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

struct MixedPrecisionPass
    : public strata::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override {
    if (dtype == Precision::FP32) {
      getOperation().emitError("strata-mixed-precision: dtype must be bf16 "
                               "or fp16, not fp32");
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    Type narrowType = dtype == Precision::BF16 ? Type(b.getBF16Type())
                                      : Type(b.getF16Type());
    getOperation().walk([&](Operation *op) {
      if (!isa<LinearOp, MatmulOp, AttentionOp, ConvOp>(op))
        return;
      if (storage == PrecisionStorage::Narrow && !batchBroadcasts(op))
        storeNarrow(b, op, narrowType);
      else
        roundInF32(b, op,
                   dtype == Precision::BF16 ? NarrowFloat::BF16
                                            : NarrowFloat::FP16);
    });
  }

private:
  static bool isF32(Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType().isF32();
  }

  /// The operands the op computes on in low precision: all but an
  /// attention's additive mask (-inf must survive).
  static bool isLowPrecisionOperand(Operation *op, OpOperand &operand) {
    return !(isa<AttentionOp>(op) && operand.getOperandNumber() == 3) &&
           isF32(operand.get());
  }

  /// A matmul whose operands' batch dimensions differ: its gradient sums
  /// over the broadcast, in f32, before rounding.
  static bool batchBroadcasts(Operation *op) {
    auto matmul = dyn_cast<MatmulOp>(op);
    if (!matmul)
      return false;
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType()).getShape();
    auto rhs = cast<RankedTensorType>(matmul.getRhs().getType()).getShape();
    if (lhs.size() < 2 || rhs.size() < 2)
      return true;
    return lhs.drop_back(2) != rhs.drop_back(2);
  }

  /// x -> cast(x) : narrow for each operand (one cast per use, so each
  /// gradient is rounded on its own, as with round_to), results narrow,
  /// widened back for their users.
  static void storeNarrow(OpBuilder &b, Operation *op, Type narrowType) {
    auto withElement = [&](Value v, Type element) {
      return cast<RankedTensorType>(v.getType()).clone(element);
    };
    b.setInsertionPoint(op);
    for (OpOperand &operand : op->getOpOperands())
      if (isLowPrecisionOperand(op, operand))
        operand.set(b.create<CastOp>(op->getLoc(),
                                     withElement(operand.get(), narrowType),
                                     operand.get()));
    b.setInsertionPointAfter(op);
    for (Value result : op->getResults()) {
      if (!isF32(result))
        continue;
      Type wide = result.getType();
      result.setType(withElement(result, narrowType));
      auto widened = b.create<CastOp>(op->getLoc(), wide, result);
      result.replaceAllUsesExcept(widened, widened);
    }
  }

  /// The f32 emulation: round_to on each operand and result.
  static void roundInF32(OpBuilder &b, Operation *op, NarrowFloat type) {
    b.setInsertionPoint(op);
    for (OpOperand &operand : op->getOpOperands())
      if (isLowPrecisionOperand(op, operand))
        operand.set(b.create<RoundToOp>(op->getLoc(), operand.get().getType(),
                                        type, operand.get()));
    b.setInsertionPointAfter(op);
    for (Value result : op->getResults()) {
      if (!isF32(result))
        continue;
      auto rounded =
          b.create<RoundToOp>(op->getLoc(), result.getType(), type, result);
      result.replaceAllUsesExcept(rounded, rounded);
    }
  }
};

//===----------------------------------------------------------------------===//
// strata-sink-widening-casts
//===----------------------------------------------------------------------===//

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// A cast whose result type holds every value of its operand's: bf16 or
/// fp16 to f32 or f64, f32 to f64.
bool isExactWidening(CastOp op) {
  auto from = dyn_cast<FloatType>(elementOf(op.getInput()));
  auto to = dyn_cast<FloatType>(elementOf(op.getOutput()));
  if (!from || !to || from.getWidth() >= to.getWidth())
    return false;
  return !(from.isBF16() && to.isF16());
}

/// An exact widening cast whose only use is the op being rewritten.
CastOp soleWideningCast(Value v) {
  auto cast = v.getDefiningOp<CastOp>();
  return cast && isExactWidening(cast) && cast->hasOneUse() ? cast : CastOp();
}

/// cast(cast(x)) back to x's type, the inner one widening: x.
struct DropRoundTrip : public OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<CastOp>();
    if (!inner || !isExactWidening(inner) ||
        inner.getInput().getType() != op.getType())
      return failure();
    rewriter.replaceOp(op, inner.getInput());
    return success();
  }
};

/// move(widen(x)) -> widen(move(x)) for the data-movement ops: the op runs
/// on the narrow tensor, each result is widened.
struct SinkPastDataMovement : public RewritePattern {
  explicit SinkPastDataMovement(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<ReshapeOp, TransposeOp, SliceOp, SplitOp, ConcatOp>(op) ||
        op->getNumOperands() == 0)
      return failure();
    // Every operand widened from one narrow type (concat has several).
    SmallVector<CastOp> casts;
    for (Value operand : op->getOperands()) {
      CastOp cast = soleWideningCast(operand);
      if (!cast || (!casts.empty() && elementOf(cast.getInput()) !=
                                          elementOf(casts[0].getInput())))
        return failure();
      casts.push_back(cast);
    }
    Type narrow = elementOf(casts[0].getInput());
    Operation *moved = rewriter.clone(*op);
    for (auto [i, cast] : llvm::enumerate(casts))
      moved->setOperand(i, cast.getInput());
    SmallVector<Value> widened;
    for (Value result : moved->getResults()) {
      auto wide = cast<RankedTensorType>(result.getType());
      result.setType(wide.clone(narrow));
      widened.push_back(rewriter.create<CastOp>(op->getLoc(), wide, result));
    }
    rewriter.replaceOp(op, widened);
    for (CastOp cast : casts)
      rewriter.eraseOp(cast);
    return success();
  }
};

struct SinkWideningCastsPass
    : public strata::impl::SinkWideningCastsPassBase<SinkWideningCastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DropRoundTrip, SinkPastDataMovement>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(),
                                            std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
