//===- GroupUpdates.cpp - Multi-tensor optimizer updates ------------------===//
//
// strata-group-updates: merges per-parameter graph.adamw_update,
// graph.sgd_update and graph.sum_squares ops into multi-tensor ops. See
// Passes.td for the rules.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace strata {
#define GEN_PASS_DEF_GROUPUPDATESPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

/// The operands of a groupable op that are per-tensor (the rest are the
/// shared scalars).
unsigned tensorOperands(Operation *op) {
  if (auto adamw = dyn_cast<AdamWUpdateOp>(op))
    return adamw.getTensors().size();
  if (auto sgd = dyn_cast<SGDUpdateOp>(op))
    return sgd.getTensors().size();
  return op->getNumOperands(); // sum_squares
}

uint64_t tensorBytes(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return uint64_t(type.getNumElements()) *
         ((type.getElementTypeBitWidth() + 7) / 8);
}

/// What ops must share to merge: the op, its attributes, the scalar
/// operands, and the element types of the tensors and results.
struct GroupKey {
  OperationName name;
  DictionaryAttr attrs;
  SmallVector<Value> scalars;
  Type operandElement, resultElement;

  bool operator==(const GroupKey &o) const {
    return name == o.name && attrs == o.attrs && scalars == o.scalars &&
           operandElement == o.operandElement &&
           resultElement == o.resultElement;
  }
};

std::optional<GroupKey> keyOf(Operation *op) {
  if (!isa<AdamWUpdateOp, SGDUpdateOp, SumSquaresOp>(op))
    return std::nullopt;
  unsigned tensors = tensorOperands(op);
  if (tensors == 0 || op->getNumResults() == 0)
    return std::nullopt;
  GroupKey key{op->getName(), op->getAttrDictionary(), {}, {}, {}};
  key.scalars.assign(op->operand_begin() + tensors, op->operand_end());
  key.operandElement = getElementTypeOrSelf(op->getOperand(0).getType());
  key.resultElement = getElementTypeOrSelf(op->getResult(0).getType());
  for (Value v : op->getOperands().take_front(tensors))
    if (getElementTypeOrSelf(v.getType()) != key.operandElement)
      return std::nullopt;
  return key;
}

/// Whether `v` is available at `at`, an op of the block that uses it: a
/// block argument or a value defined outside the block is; a value of the
/// block must be defined before `at`.
bool definedBefore(Value v, Operation *at) {
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != at->getBlock())
    return true;
  return def->isBeforeInBlock(at);
}

struct Group {
  GroupKey key;
  SmallVector<Operation *> members;
  uint64_t bytes = 0;
};

struct GroupUpdatesPass
    : public strata::impl::GroupUpdatesPassBase<GroupUpdatesPass> {
  using GroupUpdatesPassBase::GroupUpdatesPassBase;

  /// Whether `op` may move up to `first`: its operands exist there, and the
  /// operands it updates in place have no reader in between.
  static bool canMoveTo(Operation *op, Operation *first) {
    for (Value v : op->getOperands())
      if (!definedBefore(v, first))
        return false;
    for (OpResult result : op->getResults()) {
      std::optional<unsigned> operand =
          inPlaceOperand(op, result.getResultNumber());
      if (!operand)
        continue;
      for (Operation *user : op->getOperand(*operand).getUsers())
        if (user != op && user->getBlock() == op->getBlock() &&
            first->isBeforeInBlock(user) && user->isBeforeInBlock(op))
          return false;
    }
    return true;
  }

  /// Replaces the members by one op where the first stood.
  static void merge(Group &group) {
    if (group.members.size() < 2)
      return;
    Operation *first = group.members.front();
    unsigned tensors = tensorOperands(first);
    SmallVector<Value> operands;
    SmallVector<Type> types;
    SmallVector<Location> locs;
    for (Operation *member : group.members) {
      llvm::append_range(operands,
                         member->getOperands().take_front(tensorOperands(member)));
      llvm::append_range(types, member->getResultTypes());
      locs.push_back(member->getLoc());
    }
    llvm::append_range(operands, first->getOperands().drop_front(tensors));
    OpBuilder b(first);
    OperationState state(FusedLoc::get(first->getContext(), locs),
                         first->getName());
    state.addOperands(operands);
    state.addTypes(types);
    state.addAttributes(first->getAttrs());
    Operation *merged = b.create(state);
    unsigned next = 0;
    for (Operation *member : group.members) {
      for (Value result : member->getResults())
        result.replaceAllUsesWith(merged->getResult(next++));
      member->erase();
    }
  }

  void runOnOperation() override {
    getOperation().walk([&](Block *block) {
      // Open groups, in the order they were opened.
      SmallVector<Group> open;
      for (Operation &op : llvm::make_early_inc_range(*block)) {
        std::optional<GroupKey> key = keyOf(&op);
        if (!key)
          continue;
        uint64_t bytes = 0;
        for (Value v : op.getOperands().take_front(tensorOperands(&op)))
          bytes += tensorBytes(v);
        Group *group = llvm::find_if(open, [&](Group &g) {
          return g.key == *key;
        });
        if (group != open.end() &&
            (group->bytes + bytes > maxBytes ||
             !canMoveTo(&op, group->members.front()))) {
          merge(*group);
          open.erase(group);
          group = open.end();
        }
        if (group == open.end()) {
          open.push_back(Group{*key, {}, 0});
          group = &open.back();
        }
        group->members.push_back(&op);
        group->bytes += bytes;
      }
      for (Group &group : open)
        merge(group);
    });
  }
};

} // namespace
