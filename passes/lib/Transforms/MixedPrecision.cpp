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

namespace strata {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
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
    if (dtype != "bf16" && dtype != "fp16") {
      getOperation().emitError("strata-mixed-precision: dtype must be bf16 "
                               "or fp16, not '")
          << dtype << "'";
      return signalPassFailure();
    }
    if (storage != "narrow" && storage != "f32") {
      getOperation().emitError("strata-mixed-precision: storage must be "
                               "narrow or f32, not '")
          << storage << "'";
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    Type narrowType = dtype == "bf16" ? Type(b.getBF16Type())
                                      : Type(b.getF16Type());
    getOperation().walk([&](Operation *op) {
      if (!isa<LinearOp, MatmulOp, AttentionOp, ConvOp>(op))
        return;
      if (storage == "narrow" && !batchBroadcasts(op))
        storeNarrow(b, op, narrowType);
      else
        roundInF32(b, op, b.getStringAttr(dtype));
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
  static void roundInF32(OpBuilder &b, Operation *op, StringAttr type) {
    b.setInsertionPoint(op);
    for (OpOperand &operand : op->getOpOperands())
      if (isLowPrecisionOperand(op, operand))
        operand.set(b.create<RoundToOp>(op->getLoc(), operand.get().getType(),
                                        operand.get(), type));
    b.setInsertionPointAfter(op);
    for (Value result : op->getResults()) {
      if (!isF32(result))
        continue;
      auto rounded =
          b.create<RoundToOp>(op->getLoc(), result.getType(), result, type);
      result.replaceAllUsesExcept(rounded, rounded);
    }
  }
};

} // namespace
