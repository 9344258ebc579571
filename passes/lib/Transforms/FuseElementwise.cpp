//===- FuseElementwise.cpp - Chains of elementwise ops as one kernel ------===//
//
// strata-fuse-elementwise: groups elementwise ops into
// graph.fused_elementwise (its program format: the runtime's
// FusedProgram.h). See Passes.td for the rules.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

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

/// The program instruction of a fusible op and the wide type (f32 or f64)
/// it computes in; none when the op is not fusible.
struct Fusible {
  std::string name;
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
  std::string name =
      llvm::TypeSwitch<Operation *, std::string>(op)
          .Case([](AddOp) { return "add"; })
          .Case([](SubOp) { return "sub"; })
          .Case([](MulOp) { return "mul"; })
          .Case([](DivOp) { return "div"; })
          .Case([](MaxOp) { return "max"; })
          .Case([](MinOp) { return "min"; })
          .Case([](NegOp) { return "neg"; })
          .Case([](AbsOp) { return "abs"; })
          .Case([](ExpOp) { return "exp"; })
          .Case([](LogOp) { return "log"; })
          .Case([](SqrtOp) { return "sqrt"; })
          .Case([](ReciprocalOp) { return "reciprocal"; })
          .Case([](TanhOp) { return "tanh"; })
          .Case([](ErfOp) { return "erf"; })
          .Case([](SinOp) { return "sin"; })
          .Case([](CosOp) { return "cos"; })
          .Case([](ReluOp) { return "relu"; })
          .Case([](SigmoidOp) { return "sigmoid"; })
          .Case([](SoftplusOp) { return "softplus"; })
          .Case([](HardSwishOp) { return "hard_swish"; })
          .Case([](WhereOp) { return "where"; })
          .Case([](GeluOp g) {
            return g.getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
          })
          .Case([](CastOp c) -> std::string {
            Type from = tensorOf(c.getInput()).getElementType();
            Type to = tensorOf(c.getOutput()).getElementType();
            if (to.isBF16())
              return from.isF32() || isNarrow(from) ? "cast_bf16" : "";
            if (to.isF16())
              return from.isF32() || isNarrow(from) ? "cast_f16" : "";
            // Widening: exact only from a narrow type (f32 -> f64 would
            // mix the wide types, refused above).
            return isNarrow(from) ? "cast_wide" : "";
          })
          .Case([](UnaryGradOp g) -> std::string {
            if (g.getAlpha() || g.getBeta() || g.getMin() || g.getMax())
              return "";
            std::string kind = g.getKind().str();
            static const char *const kKinds[] = {
                "abs", "exp",     "log",      "sqrt",       "reciprocal",
                "tanh", "erf",    "sin",      "cos",        "relu",
                "sigmoid", "softplus", "gelu", "hard_swish", "neg"};
            if (!llvm::is_contained(kKinds, kind))
              return "";
            bool tanh = g.getApproximate() && *g.getApproximate() == "tanh";
            if (tanh && kind != "gelu")
              return "";
            return "grad_" + kind + (tanh ? "_tanh" : "");
          })
          .Default([](Operation *) { return ""; });
  if (name.empty() || !wide)
    return std::nullopt;
  return Fusible{name, wide};
}

struct Group {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 16> members;
  SmallVector<std::string> names;
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
    SmallVector<std::pair<Operation *, std::string>> all;
    for (auto [op, name] : llvm::zip(ops, names))
      all.emplace_back(op, name);
    for (auto [op, name] : llvm::zip(other.ops, other.names))
      all.emplace_back(op, name);
    llvm::sort(all, [](const auto &a, const auto &b) {
      return a.first->isBeforeInBlock(b.first);
    });
    for (auto &[op, name] : all) {
      u.ops.push_back(op);
      u.members.insert(op);
      u.names.push_back(name);
    }
    return u;
  }

  void clear() {
    ops.clear();
    members.clear();
    names.clear();
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
  /// again right before each later reader: the narrow tensor is what stays
  /// alive, at half the bytes, and each copy fuses into its reader's chain.
  /// Exact: widening is.
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
      for (Operation *reader : llvm::drop_begin(readers)) {
        OpBuilder b(reader);
        Operation *again = b.clone(*cast);
        reader->replaceUsesOfWith(cast.getResult(), again->getResult(0));
      }
    }
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
      chosen->names.push_back(f->name);
      groupOf[&op] = chosen;
    }
    for (const auto &g : groups)
      if (g->ops.size() > 1)
        materialize(*g);
  }

  void materialize(Group &g) {
    llvm::SetVector<Value> inputs = g.inputs();
    DenseMap<Value, int64_t> number;
    for (auto [i, v] : llvm::enumerate(inputs))
      number[v] = int64_t(i);
    std::string program;
    SmallVector<Value> outputs;
    SmallVector<int64_t> resultValues;
    SmallVector<Type> resultTypes;
    for (auto [i, op] : llvm::enumerate(g.ops)) {
      if (i)
        program += "; ";
      program += g.names[i];
      for (Value v : op->getOperands()) {
        program += ' ';
        program += std::to_string(number.lookup(v));
      }
      Value result = op->getResult(0);
      number[result] = int64_t(inputs.size() + i);
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !g.members.contains(user);
          })) {
        outputs.push_back(result);
        resultValues.push_back(number[result]);
        resultTypes.push_back(result.getType());
      }
    }
    Operation *last = g.ops.back();
    OpBuilder b(last);
    auto fused = b.create<FusedElementwiseOp>(
        last->getLoc(), resultTypes, inputs.getArrayRef(),
        b.getStringAttr(program), b.getDenseI64ArrayAttr(resultValues));
    for (auto [value, replacement] : llvm::zip(outputs, fused.getResults()))
      value.replaceUsesWithIf(replacement, [&](OpOperand &use) {
        return !g.members.contains(use.getOwner());
      });
    for (Operation *op : llvm::reverse(g.ops))
      op->erase();
  }
};

} // namespace
