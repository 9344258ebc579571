//===- FuseElementwise.cpp - Chains of elementwise ops as one kernel ------===//
//
// strata-fuse-elementwise: groups elementwise ops into
// graph.fused_elementwise (its program format: the runtime's
// FusedProgram.h). See Passes.td for the rules.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <climits>
#include <memory>
#include <optional>
#include <string>

namespace strata {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

// The runtime's limits (FusedProgram.h).
constexpr unsigned kMaxInputs = 8, kMaxInstructions = 24, kMaxResults = 4,
                   kMaxRank = 6;

RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool isNarrow(Type t) { return t.isBF16() || t.isF16(); }

/// The wide type (f32 or f64) a fusible op computes in; none when the op
/// is not fusible (graph::fusedCodeOf says which ops the kernels run).
struct Fusible {
  Type wide;
};

std::optional<Fusible> fusible(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0)
    return std::nullopt;
  // Every operand and the result: a float; the non-narrow ones one type.
  Type wide;
  SmallVector<Value> values(op->getOperands());
  values.push_back(op->getResult(0));
  // A where's condition is an i1, read as 0 or 1.
  if (isa<WhereOp>(op)) {
    if (!tensorOf(values.front()).getElementType().isInteger(1))
      return std::nullopt;
    values.erase(values.begin());
  }
  for (Value v : values) {
    Type e = tensorOf(v).getElementType();
    if (!isa<FloatType>(e))
      return std::nullopt;
    if (isNarrow(e))
      continue;
    if (!e.isF32() && !e.isF64())
      return std::nullopt;
    if (wide && wide != e)
      return std::nullopt;
    wide = e;
  }
  if (tensorOf(op->getResult(0)).getRank() > int64_t(kMaxRank))
    return std::nullopt;
  if (!fusedCodeOf(op) || !wide)
    return std::nullopt;
  return Fusible{wide};
}

struct Group {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 16> members;
  Type wide;
  SmallVector<int64_t> shape;

  /// Values the group reads from outside, in order of first use.
  llvm::SetVector<Value> inputs(Operation *extra = nullptr) const {
    llvm::SetVector<Value> in;
    auto add = [&](Operation *op) {
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || (!members.contains(def) && def != extra))
          in.insert(v);
      }
    };
    for (Operation *op : ops)
      add(op);
    if (extra)
      add(extra);
    return in;
  }

  /// Whether `user` is a member (counting `extra` as one).
  bool inside(Operation *user, Operation *extra) const {
    return members.contains(user) || user == extra;
  }

  /// Members' results (with `extra`'s) used outside the group.
  unsigned countResults(Operation *extra) const {
    unsigned n = 0;
    auto count = [&](Operation *op) {
      for (Operation *user : op->getResult(0).getUsers())
        if (!inside(user, extra)) {
          ++n;
          return;
        }
    };
    for (Operation *op : ops)
      count(op);
    count(extra);
    return n;
  }

  /// This group and `other` as one, members in block order (an order the
  /// program may run them in: block order is a topological one).
  Group unitedWith(const Group &other) const {
    Group u;
    u.wide = wide;
    u.shape = shape;
    SmallVector<Operation *> all(ops.begin(), ops.end());
    all.append(other.ops.begin(), other.ops.end());
    llvm::sort(all, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *op : all) {
      u.ops.push_back(op);
      u.members.insert(op);
    }
    return u;
  }

  void clear() {
    ops.clear();
    members.clear();
  }

  /// `op` may join: every use of the group's values outside it comes after
  /// `op`, and the limits hold.
  bool canAppend(Operation *op) const {
    for (Operation *member : ops)
      for (Operation *user : member->getResult(0).getUsers())
        if (!inside(user, op) && !op->isBeforeInBlock(user))
          return false;
    return ops.size() + 1 <= kMaxInstructions &&
           inputs(op).size() <= kMaxInputs &&
           countResults(op) <= kMaxResults;
  }
};

struct FuseElementwisePass
    : public strata::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      recomputeWidenings(block);
      fuseBlock(block);
    }
  }

  /// A bf16 / fp16 value widened to f32 and read in several places (the
  /// forward's next op, and much later the backward's gradient) is widened
  /// again right before a later reader: the narrow tensor is what stays
  /// alive, at half the bytes, and the copy fuses into its reader's chain.
  /// Exact: widening is. A reader that cannot fuse and comes before
  /// anything as large as the wide value is made keeps reading the last
  /// widening instead (a copy there would be a kernel of its own that
  /// saves no memory: a language model's loss and its gradient, both
  /// reading the widened logits, ran three casts of the logits on an H200
  /// where two suffice, 1 ms of a GPT-2 124M step).
  void recomputeWidenings(Block &block) {
    for (Operation &op : block) {
      auto cast = dyn_cast<CastOp>(&op);
      if (!cast || !isNarrow(tensorOf(cast.getInput()).getElementType()) ||
          isNarrow(tensorOf(cast.getOutput()).getElementType()))
        continue;
      SmallVector<Operation *> readers;
      for (Operation *user : cast->getUsers())
        if (user->getBlock() == &block && !llvm::is_contained(readers, user))
          readers.push_back(user);
      if (readers.size() < 2)
        continue;
      llvm::sort(readers, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      int64_t wideBytes = bytesOf(tensorOf(cast.getOutput()));
      Value current = cast.getResult();
      Operation *previous = readers.front();
      for (Operation *reader : llvm::drop_begin(readers)) {
        if (!fusible(reader) && !allocatesBetween(previous, reader, wideBytes)) {
          reader->replaceUsesOfWith(cast.getResult(), current);
          previous = reader;
          continue;
        }
        OpBuilder b(reader);
        Operation *again = b.clone(*cast);
        reader->replaceUsesOfWith(cast.getResult(), again->getResult(0));
        current = again->getResult(0);
        previous = reader;
      }
    }
  }

  /// A tensor's bytes as the runtime stores it; a dynamic one counts as
  /// too large to keep alive.
  static int64_t bytesOf(RankedTensorType t) {
    return t.hasStaticShape() ? sched::storageBytes(t) : INT64_MAX;
  }

  /// Whether the ops strictly between `from` and `to` (one block, `from`
  /// first) make results of `bytes` or more together: a value kept alive
  /// across them could raise the peak. Stops as soon as they do.
  static bool allocatesBetween(Operation *from, Operation *to, int64_t bytes) {
    int64_t made = 0;
    for (Operation *op = from->getNextNode(); op && op != to;
         op = op->getNextNode())
      for (Value r : op->getResults())
        if (auto t = dyn_cast<RankedTensorType>(r.getType())) {
          if (!t.getElementType().isIntOrFloat())
            return true;
          int64_t b = bytesOf(t);
          if (b >= bytes - made)
            return true;
          made += b;
        }
    return false;
  }

  void fuseBlock(Block &block) {
    std::vector<std::unique_ptr<Group>> groups;
    DenseMap<Operation *, Group *> groupOf;
    for (Operation &op : block) {
      std::optional<Fusible> f = fusible(&op);
      if (!f)
        continue;
      ArrayRef<int64_t> shape = tensorOf(op.getResult(0)).getShape();
      Group *chosen = nullptr;
      for (Value operand : op.getOperands()) {
        Group *g = groupOf.lookup(operand.getDefiningOp());
        if (g && g->wide == f->wide && ArrayRef<int64_t>(g->shape) == shape &&
            g->canAppend(&op)) {
          chosen = g;
          break;
        }
      }
      if (!chosen) {
        groups.push_back(std::make_unique<Group>());
        chosen = groups.back().get();
        chosen->wide = f->wide;
        chosen->shape.assign(shape.begin(), shape.end());
      }
      // The op's other operands' groups join too where they can (two
      // chains meeting: a widened operand and the chain it is added to).
      for (Value operand : op.getOperands()) {
        Group *other = groupOf.lookup(operand.getDefiningOp());
        if (!other || other == chosen || other->wide != f->wide ||
            ArrayRef<int64_t>(other->shape) != shape)
          continue;
        Group merged = chosen->unitedWith(*other);
        if (!merged.canAppend(&op))
          continue;
        *chosen = std::move(merged);
        for (Operation *member : other->ops)
          groupOf[member] = chosen;
        other->clear();
      }
      chosen->ops.push_back(&op);
      chosen->members.insert(&op);
      groupOf[&op] = chosen;
    }
    for (const auto &g : groups)
      if (g->ops.size() > 1)
        materialize(*g);
  }

  /// The group as one graph.fused_elementwise: its body is the members,
  /// cloned to compute one element each.
  void materialize(Group &g) {
    llvm::SetVector<Value> inputs = g.inputs();
    SmallVector<Value> outputs;
    SmallVector<Type> resultTypes;
    for (Operation *op : g.ops) {
      Value result = op->getResult(0);
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !g.members.contains(user);
          })) {
        outputs.push_back(result);
        resultTypes.push_back(result.getType());
      }
    }
    Operation *last = g.ops.back();
    OpBuilder b(last);
    auto fused = b.create<FusedElementwiseOp>(last->getLoc(), resultTypes,
                                              inputs.getArrayRef());
    Block &body = fused.getBody().front();
    IRMapping element;
    for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
      element.map(input, arg);
    OpBuilder inside = OpBuilder::atBlockEnd(&body);
    for (Operation *op : g.ops) {
      Operation *clone = inside.clone(*op, element);
      for (OpResult r : clone->getResults())
        r.setType(RankedTensorType::get({}, tensorOf(r).getElementType()));
    }
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(element.lookup(v));
    inside.create<YieldOp>(last->getLoc(), yielded);
    for (auto [value, replacement] : llvm::zip(outputs, fused.getResults()))
      value.replaceUsesWithIf(replacement, [&](OpOperand &use) {
        return !g.members.contains(use.getOwner());
      });
    for (Operation *op : llvm::reverse(g.ops))
      op->erase();
  }
};

} // namespace
