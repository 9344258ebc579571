//===- KeepAttentionProbabilities.cpp - Save softmax for the backward -----===//
//
// graph.attention_grad makes the forward's probabilities again; this pass
// has the forward keep them (a second result) and hands them over, so the
// gradient skips q @ k^T and the exponentials. Passes.td describes it.
//
//===----------------------------------------------------------------------===//

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_KEEPATTENTIONPROBABILITIESPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

/// True if `grad` is the gradient of `forward`: the same operands and the
/// same attributes (a dropout's rng_stream included).
bool isGradientOf(AttentionGradOp grad, AttentionOp forward) {
  if (grad.getQuery() != forward.getQuery() ||
      grad.getKey() != forward.getKey() ||
      grad.getValue() != forward.getValue() ||
      grad.getMask() != forward.getMask() ||
      grad.getScaleAttr() != forward.getScaleAttr() ||
      grad.getCausal() != forward.getCausal() ||
      grad.getDropoutRatioAttr() != forward.getDropoutRatioAttr() ||
      grad.getHeadsInner() != forward.getHeadsInner())
    return false;
  return grad->getAttr("rng_stream") == forward->getAttr("rng_stream");
}

struct KeepAttentionProbabilitiesPass
    : public strata::impl::KeepAttentionProbabilitiesPassBase<
          KeepAttentionProbabilitiesPass> {
  void runOnOperation() override {
    SmallVector<AttentionGradOp> grads;
    getOperation().walk([&](AttentionGradOp grad) {
      if (!grad.getKeepProbabilities())
        grads.push_back(grad);
    });
    for (AttentionGradOp grad : grads) {
      // The forward: the user of the query that the gradient repeats.
      AttentionOp forward;
      for (Operation *user : grad.getQuery().getUsers())
        if (auto candidate = dyn_cast<AttentionOp>(user))
          if (!candidate.getKeepProbabilities() &&
              isGradientOf(grad, candidate) &&
              candidate->getBlock() == grad->getBlock() &&
              candidate->isBeforeInBlock(grad))
            forward = candidate;
      if (!forward)
        continue;
      Type element = getElementTypeOrSelf(forward.getQuery().getType());
      if (!element.isF32() && !element.isF64())
        continue;
      OpBuilder builder(forward);
      auto kept = builder.create<AttentionOp>(
          forward.getLoc(), forward.getQuery(), forward.getKey(),
          forward.getValue(), forward.getMask(), forward.getScaleAttr(),
          forward.getCausalAttr(), forward.getDropoutRatioAttr(),
          forward.getHeadsInnerAttr(), builder.getBoolAttr(true));
      kept->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
      forward.getOutput().replaceAllUsesWith(kept.getOutput());
      forward.erase();
      grad.getProbabilitiesMutable().assign(kept.getProbabilities());
      grad.setKeepProbabilities(true);
    }
  }
};

} // namespace
