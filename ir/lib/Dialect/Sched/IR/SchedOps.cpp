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

/// Communication reads its operand and has effects beyond its result (it
/// waits for the group), so it is neither CSE'd nor hoisted.
void collectiveEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  effects.emplace_back(MemoryEffects::Read::get());
  effects.emplace_back(MemoryEffects::Write::get());
}

LogicalResult verifyCollective(Operation *op, int64_t factorIn,
                               int64_t factorOut) {
  auto group = op->getAttrOfType<StringAttr>("group");
  if (!group || !llvm::is_contained(
                    {"partition", "replication", "world", "inter", "intra"},
                    group.getValue()))
    return op->emitOpError("group must be partition, replication, world, "
                           "inter or intra");
  auto in = cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  if (in.getElementType() != out.getElementType())
    return op->emitOpError("operand and result element types differ");
  if (factorIn == 0)
    return in == out ? success()
                     : op->emitOpError("operand and result types differ");
  if (in.getRank() != 1 || out.getRank() != 1)
    return op->emitOpError("operand and result must be 1-D");
  int64_t a = in.getDimSize(0) * factorOut, b = out.getDimSize(0) * factorIn;
  if (a != b && (in.getDimSize(0) % out.getDimSize(0) != 0 &&
                 out.getDimSize(0) % in.getDimSize(0) != 0))
    return op->emitOpError("sizes are not a whole group multiple");
  return success();
}

} // namespace

void AllGatherOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(*this, e);
}
void ReduceScatterOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(*this, e);
}
void AllReduceOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(*this, e);
}

LogicalResult AllGatherOp::verify() {
  if (getOutput().getType().getDimSize(0) % getInput().getType().getDimSize(0))
    return emitOpError("result size must be a multiple of the shard size");
  return verifyCollective(*this, 1, 1);
}
LogicalResult ReduceScatterOp::verify() {
  if (getInput().getType().getDimSize(0) % getOutput().getType().getDimSize(0))
    return emitOpError("operand size must be a multiple of the shard size");
  return verifyCollective(*this, 1, 1);
}
LogicalResult AllReduceOp::verify() { return verifyCollective(*this, 0, 0); }
