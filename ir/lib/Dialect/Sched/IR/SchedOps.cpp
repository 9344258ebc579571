//===- SchedOps.cpp - The sched dialect -----------------------------------===//

#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace strata::sched;

#include "strata/Dialect/Sched/IR/SchedOpsDialect.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "strata/Dialect/Sched/IR/SchedOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "strata/Dialect/Sched/IR/SchedOps.cpp.inc"

namespace {

/// Communication reads its operands and has effects beyond its results (it
/// waits for the group), so it is neither CSE'd nor hoisted.
void collectiveEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  effects.emplace_back(MemoryEffects::Read::get());
  effects.emplace_back(MemoryEffects::Write::get());
}

LogicalResult verifyGroup(Operation *op, StringRef group) {
  if (!llvm::is_contained(
          {"partition", "replication", "world", "inter", "intra"}, group))
    return op->emitOpError("group must be partition, replication, world, "
                           "inter or intra, got '")
           << group << "'";
  return success();
}

enum class Sizes { Same, Gathered, Scattered };

/// Operand i and result i pair up; `sizes` says how their sizes relate, by
/// one group size G shared by every pair.
LogicalResult verifyCollective(Operation *op, StringRef group, Sizes sizes) {
  if (failed(verifyGroup(op, group)))
    return failure();
  if (op->getNumOperands() == 0 ||
      op->getNumOperands() != op->getNumResults())
    return op->emitOpError("needs one result per operand and at least one");
  int64_t factor = 0;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    auto in = cast<RankedTensorType>(op->getOperand(i).getType());
    auto out = cast<RankedTensorType>(op->getResult(i).getType());
    if (in.getElementType() != out.getElementType())
      return op->emitOpError("operand ")
             << i << " and its result have different element types";
    if (sizes == Sizes::Same) {
      if (in != out)
        return op->emitOpError("operand ")
               << i << " and its result have different types";
      continue;
    }
    if (in.getRank() != 1 || out.getRank() != 1)
      return op->emitOpError("operand ") << i << " and its result must be 1-D";
    int64_t big = sizes == Sizes::Gathered ? out.getDimSize(0)
                                           : in.getDimSize(0);
    int64_t small = sizes == Sizes::Gathered ? in.getDimSize(0)
                                             : out.getDimSize(0);
    if (small == 0 || big % small != 0)
      return op->emitOpError("operand ")
             << i << ": " << big << " elements are not a whole number of "
             << small << "-element shards";
    if (factor && big / small != factor)
      return op->emitOpError("operand ")
             << i << " implies a group of " << big / small << ", operand 0 of "
             << factor;
    factor = big / small;
  }
  return success();
}

} // namespace

void AllGatherOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}
void ReduceScatterOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}
void AllReduceOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}

LogicalResult AllGatherOp::verify() {
  return verifyCollective(*this, getGroup(), Sizes::Gathered);
}
LogicalResult ReduceScatterOp::verify() {
  return verifyCollective(*this, getGroup(), Sizes::Scattered);
}
LogicalResult AllReduceOp::verify() {
  return verifyCollective(*this, getGroup(), Sizes::Same);
}

LogicalResult LocalShardOp::verify() {
  if (failed(verifyGroup(*this, getGroup())))
    return failure();
  auto in = getInput().getType(), out = getOutput().getType();
  if (in.getElementType() != out.getElementType() || in.getRank() != 1 ||
      out.getRank() != 1 || out.getDimSize(0) == 0 ||
      in.getDimSize(0) % out.getDimSize(0) != 0)
    return emitOpError("result must be a 1-D slice of the 1-D operand, a "
                       "whole number of times smaller, of its element type");
  return success();
}

void ReloadOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}
void OffloadOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}

static LogicalResult verifyTier(Operation *op, StringRef tier) {
  if (tier != "host" && tier != "ssd")
    return op->emitOpError("tier must be host or ssd, got '") << tier << "'";
  return success();
}
LogicalResult ReloadOp::verify() { return verifyTier(*this, getTier()); }
LogicalResult OffloadOp::verify() { return verifyTier(*this, getTier()); }
