//===- MixedPrecision.cpp - Low-precision compute, fp32 master weights ----===//
//
// strata-mixed-precision: the ops autocast runs in bf16 / fp16 (linear,
// matmul, attention, conv) read their operands rounded to that type and
// produce a rounded result; everything else (normalization, softmax inside
// attention, losses, the optimizer) stays fp32, and the parameters stay fp32
// master weights. On the CPU the rounding is graph.round_to over f32
// storage; the CUDA backend will store those tensors in the narrow type.
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
    OpBuilder b(&getContext());
    StringAttr type = b.getStringAttr(dtype);
    auto isF32 = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getElementType().isF32();
    };
    getOperation().walk([&](Operation *op) {
      if (!isa<graph::LinearOp, graph::MatmulOp, graph::AttentionOp,
               graph::ConvOp>(op))
        return;
      b.setInsertionPoint(op);
      for (OpOperand &operand : op->getOpOperands()) {
        // An additive attention mask stays as it is (-inf must survive).
        if (isa<graph::AttentionOp>(op) && operand.getOperandNumber() == 3)
          continue;
        if (isF32(operand.get()))
          operand.set(b.create<graph::RoundToOp>(op->getLoc(),
                                                 operand.get().getType(),
                                                 operand.get(), type));
      }
      b.setInsertionPointAfter(op);
      for (Value result : op->getResults()) {
        if (!isF32(result))
          continue;
        auto rounded = b.create<graph::RoundToOp>(op->getLoc(),
                                                  result.getType(), result, type);
        result.replaceAllUsesExcept(rounded, rounded);
      }
    });
  }
};

} // namespace
