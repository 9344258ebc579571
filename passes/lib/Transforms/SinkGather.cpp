//===- SinkGather.cpp - Compute only the rows a gather keeps --------------===//
//
// A classifier that reads one position of a sequence (a ViT's or a BERT
// classifier's class token, `x[:, 0]`) is exported as a `graph.gather` after
// the last block. Every op between the last mixing of positions (attention)
// and that gather works row by row, so the rows the gather drops are computed
// for nothing, forward and backward. This pass moves the gather ahead of such
// ops, so they compute only the rows it keeps. Each op computes the kept rows
// exactly as before; only products and sums over fewer rows change.
//
//===----------------------------------------------------------------------===//

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace strata {
#define GEN_PASS_DEF_SINKGATHERPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

/// True if the two index tensors select the same positions.
bool sameIndices(Value a, Value b) {
  if (a == b)
    return true;
  DenseElementsAttr x, y;
  return matchPattern(a, m_Constant(&x)) && matchPattern(b, m_Constant(&y)) &&
         x == y;
}

/// Every user of `value` if each is a gather of it equivalent to `gather`
/// (same axis, same indices); empty otherwise. Sinking serves them all at
/// once, or none: a user that needs every row keeps the op whole.
SmallVector<GatherOp> equivalentGathers(Value value, GatherOp gather) {
  SmallVector<GatherOp> gathers;
  for (OpOperand &use : value.getUses()) {
    auto g = dyn_cast<GatherOp>(use.getOwner());
    if (!g || use.getOperandNumber() != 0 || g.getAxis() != gather.getAxis() ||
        !sameIndices(g.getIndices(), gather.getIndices()))
      return {};
    gathers.push_back(g);
  }
  return gathers;
}

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Moves `graph.gather %y, %i {axis = a}` ahead of the op producing %y when
/// that op computes each position along `a` from the same position of its
/// operands, and every user of %y is such a gather.
struct SinkGather : public OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp gather,
                                PatternRewriter &rewriter) const override {
    Value source = gather.getInput();
    Operation *producer = source.getDefiningOp();
    if (!producer || producer->getNumResults() != 1)
      return failure();
    Value indices = gather.getIndices();
    int64_t indexRank = rankOf(indices);
    int64_t axis = gather.getAxis();
    // Only a selection of fewer positions than the axis has pays; index
    // tensors of rank 0 (the axis goes) and 1 (it shrinks) are handled.
    if (indexRank > 1 ||
        cast<RankedTensorType>(indices.getType()).getNumElements() >=
            shapeOf(source)[axis])
      return failure();
    SmallVector<GatherOp> gathers = equivalentGathers(source, gather);
    if (gathers.empty())
      return failure();

    // Each new gather goes right after the value it gathers (and its
    // indices), where that value is made, so the program keeps the order
    // of the model (pipeline stages take their ops in that order); the
    // ops over the gathered values go where the producer was.
    Block *block = producer->getBlock();
    auto latest = [&](ArrayRef<Value> values) -> Operation * {
      Operation *last = nullptr;
      for (Value v : values)
        if (Operation *def = v.getDefiningOp();
            def && def->getBlock() == block &&
            (!last || last->isBeforeInBlock(def)))
          last = def;
      return last;
    };
    auto setPointAfter = [&](Operation *op) {
      if (op)
        rewriter.setInsertionPointAfter(op);
      else
        rewriter.setInsertionPointToStart(block);
    };
    Operation *anchor = producer;
    if (Operation *def = latest({indices}); def && producer->isBeforeInBlock(def))
      anchor = def;
    Location loc = gather.getLoc();
    auto gatherWith = [&](Value v, Value index, int64_t ax) -> Value {
      setPointAfter(latest({v, index}));
      Value g = rewriter.create<GatherOp>(loc, v, index,
                                          rewriter.getI64IntegerAttr(ax));
      if (anchor->isBeforeInBlock(g.getDefiningOp()))
        anchor = g.getDefiningOp();
      setPointAfter(anchor);
      return g;
    };
    auto gatherOf = [&](Value v, int64_t ax) {
      return gatherWith(v, indices, ax);
    };
    setPointAfter(anchor);
    // The producer again, over `operands`, yielding `type` (the gather's
    // unless said otherwise).
    auto cloneWith = [&](ArrayRef<std::pair<unsigned, Value>> operands,
                         Type type = {}) -> Operation * {
      Operation *clone = rewriter.clone(*producer);
      for (auto [index, value] : operands)
        clone->setOperand(index, value);
      clone->getResult(0).setType(type ? type : gather.getType());
      return clone;
    };
    // The axis index of a dim after `axis` once the gather has run.
    auto shifted = [&](int64_t dim) {
      return dim > axis ? dim - 1 + indexRank : dim;
    };

    Value replacement;
    if (isa<CastOp>(producer) ||
        (producer->hasTrait<OpTrait::Elementwise>() &&
         producer->getNumOperands() == 1)) {
      replacement =
          cloneWith({{0, gatherOf(producer->getOperand(0), axis)}})->getResult(0);
    } else if (producer->hasTrait<OpTrait::ResultsBroadcastableShape>() &&
               producer->getNumOperands() == 2) {
      // Operands align to the right; one that does not reach the axis is
      // read whole by every kept row, as before.
      // Checked before any op is made: a pattern that fails must leave
      // the IR as it found it.
      int64_t rank = rankOf(source);
      for (Value operand : producer->getOperands()) {
        int64_t lead = rank - rankOf(operand);
        if (axis >= lead &&
            shapeOf(operand)[axis - lead] != shapeOf(source)[axis])
          return failure(); // broadcast along the axis
      }
      SmallVector<std::pair<unsigned, Value>> operands;
      for (unsigned i = 0; i < 2; ++i) {
        Value operand = producer->getOperand(i);
        int64_t lead = rank - rankOf(operand);
        if (axis >= lead)
          operands.push_back({i, gatherOf(operand, axis - lead)});
      }
      replacement = cloneWith(operands)->getResult(0);
    } else if (auto linear = dyn_cast<LinearOp>(producer)) {
      if (axis >= rankOf(source) - 1)
        return failure();
      replacement = cloneWith({{0, gatherOf(linear.getInput(), axis)}})
                        ->getResult(0);
    } else if (auto norm = dyn_cast<LayerNormOp>(producer)) {
      int64_t normAxis = norm.getAxisAttr().getInt();
      if (axis >= normAxis)
        return failure();
      Operation *clone = cloneWith({{0, gatherOf(norm.getInput(), axis)}});
      clone->setAttr("axis", rewriter.getI64IntegerAttr(shifted(normAxis)));
      replacement = clone->getResult(0);
    } else if (isa<SoftmaxOp, LogSoftmaxOp>(producer)) {
      int64_t opAxis =
          cast<IntegerAttr>(producer->getAttr("axis")).getInt();
      if (axis == opAxis)
        return failure();
      Operation *clone = cloneWith({{0, gatherOf(producer->getOperand(0), axis)}});
      clone->setAttr("axis", rewriter.getI64IntegerAttr(shifted(opAxis)));
      replacement = clone->getResult(0);
    } else if (auto reshape = dyn_cast<ReshapeOp>(producer)) {
      // Only a reshape that keeps every dim up to the axis.
      ArrayRef<int64_t> in = shapeOf(reshape.getInput()), out = shapeOf(source);
      if (int64_t(in.size()) <= axis ||
          in.take_front(axis + 1) != out.take_front(axis + 1))
        return failure();
      Value inner = gatherOf(reshape.getInput(), axis);
      replacement = rewriter.create<ReshapeOp>(loc, gather.getType(), inner);
    } else if (auto transpose = dyn_cast<TransposeOp>(producer)) {
      ArrayRef<int64_t> perm = transpose.getPerm();
      int64_t inAxis = perm[axis];
      Value inner = gatherOf(transpose.getInput(), inAxis);
      SmallVector<int64_t> newPerm;
      for (int64_t d = 0, e = perm.size(); d < e; ++d) {
        if (d == axis && indexRank == 0)
          continue;
        int64_t p = perm[d];
        newPerm.push_back(indexRank == 0 && p > inAxis ? p - 1 : p);
      }
      replacement = rewriter.create<TransposeOp>(
          loc, inner, rewriter.getDenseI64ArrayAttr(newPerm));
    } else if (auto attention = dyn_cast<AttentionOp>(producer)) {
      // The query positions: every output row reads its query row and all
      // keys. Without a mask, causality or dropout, a row's result does
      // not depend on where it sits.
      if (axis != attention.getSequenceAxis() || attention.getMask() ||
          attention.getCausal() ||
          attention.getDropoutRatio().convertToDouble() != 0.0)
        return failure();
      Value rowIndices = indices;
      if (indexRank == 0) {
        setPointAfter(latest({indices}));
        rowIndices = rewriter.create<ReshapeOp>(
            loc,
            RankedTensorType::get(
                {1}, cast<RankedTensorType>(indices.getType()).getElementType()),
            indices);
        setPointAfter(anchor);
      }
      Value query = gatherWith(attention.getQuery(), rowIndices, axis);
      // The output keeps the query axis, as many positions as it kept.
      SmallVector<int64_t> shape(shapeOf(source));
      shape[axis] = shapeOf(rowIndices)[0];
      replacement =
          cloneWith({{0, query}},
                    RankedTensorType::get(
                        shape, cast<RankedTensorType>(source.getType())
                                   .getElementType()))
              ->getResult(0);
      if (indexRank == 0)
        replacement =
            rewriter.create<ReshapeOp>(loc, gather.getType(), replacement);
    } else {
      return failure();
    }

    for (GatherOp g : gathers)
      rewriter.replaceOp(g, replacement);
    // Now unused: erased here so that the gathers just made see their
    // operands' users as they are (the driver would erase it later).
    rewriter.eraseOp(producer);
    return success();
  }
};

struct SinkGatherPass
    : public strata::impl::SinkGatherPassBase<SinkGatherPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<SinkGather>(context);
    TransposeOp::getCanonicalizationPatterns(patterns, context);
    ReshapeOp::getCanonicalizationPatterns(patterns, context);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
