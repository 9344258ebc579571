//===- StateUpdates.cpp - Results written over persistent state -----------===//

#include "strata/Dialect/Graph/IR/StateUpdates.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace strata::graph {

bool isInPlaceSafe(Operation *op) {
  // A reshape keeps the row-major order: element i of the result is
  // element i of the operand, so over the operand's own bytes it is no
  // copy at all (both backends' kernels skip it when the two coincide).
  if (isa<AdamWUpdateOp, SGDUpdateOp, ReshapeOp>(op))
    return true;
  if (!isa<AddOp, SubOp, MulOp>(op))
    return false;
  Type result = op->getResult(0).getType();
  return llvm::all_of(op->getOperandTypes(),
                      [&](Type t) { return t == result; });
}

std::optional<unsigned> inPlaceOperand(Operation *op, unsigned result) {
  if (!isInPlaceSafe(op))
    return std::nullopt;
  // Per parameter: AdamW's results (param, exp_avg, exp_avg_sq) take
  // operands 0, 2, 3 of its four; SGD's (param, momentum) 0, 2 of three.
  if (isa<AdamWUpdateOp>(op)) {
    static const unsigned operands[] = {0, 2, 3};
    unsigned p = result / AdamWUpdateOp::kResultsPerParameter;
    return p * AdamWUpdateOp::kTensorsPerParameter +
           operands[result % AdamWUpdateOp::kResultsPerParameter];
  }
  if (isa<SGDUpdateOp>(op)) {
    static const unsigned operands[] = {0, 2};
    unsigned p = result / SGDUpdateOp::kResultsPerParameter;
    return p * SGDUpdateOp::kTensorsPerParameter +
           operands[result % SGDUpdateOp::kResultsPerParameter];
  }
  return 0u;
}

llvm::DenseMap<Value, llvm::StringRef>
findInPlaceStateUpdates(func::FuncOp func) {
  llvm::StringMap<BlockArgument> stateArgs;
  for (BlockArgument arg : func.getArguments()) {
    std::optional<Role> role = getArgumentRole(func, arg.getArgNumber());
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  kNameAttrName);
    if (role && name && isStateRole(*role))
      stateArgs[name.getValue()] = arg;
  }
  llvm::DenseMap<Value, llvm::StringRef> inPlace;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    std::optional<Role> role = getResultRole(func, i);
    auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
    if (!role || !name || !isStateRole(*role))
      continue;
    BlockArgument old = stateArgs.lookup(name.getValue());
    if (value == old)
      continue; // unchanged
    Operation *producer = value.getDefiningOp();
    bool safe = producer && !isa<ConstantOp>(producer) &&
                !inPlace.count(value);
    if (safe && old)
      for (Operation *user : old.getUsers())
        if (user == producer ? !isInPlaceSafe(producer)
                             : !user->isBeforeInBlock(producer))
          safe = false;
    if (safe)
      inPlace[value] = name.getValue();
  }
  return inPlace;
}

} // namespace strata::graph
