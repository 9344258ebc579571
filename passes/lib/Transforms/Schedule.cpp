//===- Schedule.cpp - Streams and prefetch ---------------------------------===//
//
// strata-schedule puts every op on a stream and hoists fetches (all-gathers,
// reloads) ahead of their consumers as far as the prefetch depth, the
// prefetch bytes and the memory budget allow (Angel-PTM's hoisting, in both
// passes). strata-insert-events (InsertEvents.cpp) then orders the streams;
// strata-verify-schedule (VerifySchedule.cpp) proves the order.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ArenaPlanner.h"
#include "ScheduleAnalysis.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <random>

namespace strata {
#define GEN_PASS_DEF_SCHEDULEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

using sched::Stream;

/// Parameter all-gathers on `collective`, gradient reductions on `reduce`
/// (as DeepSpeed and FSDP2 reduce on a stream of their own): the next
/// layer's gather never queues behind a bucket's reduction.
Stream streamOf(Operation *op) {
  if (isa<sched::AllGatherOp>(op))
    return Stream::Collective;
  if (isa<sched::ReduceScatterOp, sched::AllReduceOp>(op))
    return Stream::Reduce;
  if (auto reload = dyn_cast<sched::ReloadOp>(op))
    return reload.getTier() == sched::Tier::Ssd ? Stream::Ssd
                                                : Stream::HostToDevice;
  if (auto offload = dyn_cast<sched::OffloadOp>(op))
    return offload.getTier() == sched::Tier::Ssd ? Stream::Ssd
                                                 : Stream::DeviceToHost;
  return Stream::Compute;
}

/// A fetch: its first op (a stage-1 all-gather or a reload) and the ops that
/// only rearrange what it brought, in block order.
struct Fetch {
  SmallVector<Operation *> chain;
  int64_t bytes = 0; // what the chain hands its consumers
};

bool isFetchRoot(Operation *op) {
  if (isa<sched::ReloadOp>(op))
    return true;
  if (auto gather = dyn_cast<sched::AllGatherOp>(op))
    return gather.getGroup() == sched::Group::Partition ||
           gather.getGroup() == sched::Group::Inter;
  return false;
}

/// Ops that only move or rearrange what a fetch brought: the all-gathers
/// of a reloaded shard or of a hierarchical stage, splits, concats, slices,
/// reshapes (a chain op joins a fetch when all its operands come from it).
bool isChainOp(Operation *op) {
  return isa<sched::AllGatherOp, graph::SplitOp, graph::ConcatOp,
             graph::SliceOp, graph::ReshapeOp>(op);
}

/// The first op outside the chain that reads what it fetched.
Operation *
consumerOf(const Fetch &f,
           llvm::function_ref<bool(Operation *, Operation *)> before) {
  Operation *first = nullptr;
  for (Operation *c : f.chain)
    for (Value v : c->getResults())
      for (Operation *user : v.getUsers())
        if (!llvm::is_contained(f.chain, user) &&
            (!first || before(user, first)))
          first = user;
  return first;
}

/// The order of a block's ops while fetches move, kept by hand: MLIR
/// invalidates a block's whole order on every move, so each
/// `isBeforeInBlock` after a move renumbered the block, and hoisting F
/// fetches cost F times the block (a budgeted plan with thousands of
/// offloaded activations took minutes). A moved chain is numbered between
/// its new neighbours; the block is numbered again only when no room is
/// left between two of them.
class BlockOrder {
public:
  explicit BlockOrder(Block &body) : body(body) { renumber(); }

  bool before(Operation *a, Operation *b) const {
    return position.lookup(a) < position.lookup(b);
  }

  /// After `ops` (in order) moved to just before `next` (null: the end).
  void moved(ArrayRef<Operation *> ops, Operation *next) {
    Operation *prev = ops.front()->getPrevNode();
    double lo = prev ? position.lookup(prev) : 0;
    double hi = next ? position.lookup(next) : end;
    double step = (hi - lo) / double(ops.size() + 1);
    if (!(step > 1e-12 * std::max(1.0, std::abs(hi)))) {
      renumber();
      return;
    }
    for (size_t i = 0; i < ops.size(); ++i)
      position[ops[i]] = lo + step * double(i + 1);
  }

  void renumber() {
    double n = 0;
    for (Operation &op : body)
      position[&op] = n += double(1 << 20);
    end = n + double(1 << 20);
  }

private:
  Block &body;
  DenseMap<Operation *, double> position;
  double end = 0;
};

/// The most bytes live at once and the most fetched bytes waiting, kept
/// exact while chains move. Each op of the block is a node of a treap in
/// block order; a value's bytes come live at its op and leave after its last
/// user, and a fetch's bytes wait from its first op up to its consumer. A
/// subtree keeps its sum and its highest prefix, so the block's peaks are the
/// root's, and moving a chain re-counts only the values and fetches its ops
/// touch: O(chain log n) a move instead of a pass over the block (measuring
/// the block after each move made a budgeted compile quadratic).
class LiveProfile {
public:
  LiveProfile(Block &body, const std::vector<Fetch> &fetches,
              const BlockOrder &order)
      : body(body), fetches(fetches), order(order), rng(0x5eed) {
    for (Operation &op : body) {
      int id = int(nodes.size());
      nodes.emplace_back();
      nodes.back().priority = uint32_t(rng());
      nodeOf[&op] = id;
      root = merge(root, id);
    }
    for (size_t i = 0; i < fetches.size(); ++i)
      for (Operation *c : fetches[i].chain)
        fetchOf[c] = i;
    for (Operation &op : body)
      for (Value v : op.getResults())
        count(v, +1);
    consumers.assign(fetches.size(), nullptr);
    for (size_t i = 0; i < fetches.size(); ++i)
      countFetch(i, +1);
  }

  int64_t live() const { return std::max<int64_t>(0, nodes[root].liveMax); }
  int64_t waiting() const {
    return std::max<int64_t>(0, nodes[root].waitMax);
  }

  /// Before `ops` move: what they touch leaves the profile.
  void beginMove(ArrayRef<Operation *> ops) {
    touched.clear();
    touchedFetches.clear();
    for (Operation *op : ops) {
      for (Value v : op->getResults())
        touched.insert(v);
      for (Value v : op->getOperands()) {
        touched.insert(v);
        if (Operation *def = v.getDefiningOp())
          if (auto it = fetchOf.find(def); it != fetchOf.end())
            touchedFetches.insert(it->second);
      }
      if (auto it = fetchOf.find(op); it != fetchOf.end())
        touchedFetches.insert(it->second);
    }
    for (Value v : touched)
      count(v, -1);
    for (size_t i : touchedFetches)
      countFetch(i, -1);
  }

  /// After they moved (in order) to just before `next`, the block and
  /// `order` already updated: they take their new places, and what they
  /// touch is counted again.
  void endMove(ArrayRef<Operation *> ops, Operation *next) {
    for (Operation *op : ops) {
      int before, moved, after;
      split(root, rank(nodeOf.lookup(op)), before, after);
      split(after, 1, moved, after);
      root = merge(before, after);
      split(root, next ? rank(nodeOf.lookup(next)) : nodes[root].size, before,
            after);
      root = merge(merge(before, moved), after);
    }
    for (Value v : touched)
      count(v, +1);
    for (size_t i : touchedFetches)
      countFetch(i, +1);
  }

private:
  struct Node {
    int left = -1, right = -1, parent = -1, size = 1;
    uint32_t priority = 0;
    // Bytes that come live at the op, leave after it, start or stop
    // waiting at it.
    int64_t born = 0, dies = 0, waits = 0;
    // The subtree's sums and highest prefixes (the op's own bytes counted
    // before its peak, the leaving ones after).
    int64_t liveSum = 0, liveMax = 0, waitSum = 0, waitMax = 0;
  };

  static constexpr int64_t kNone = INT64_MIN / 4;

  void pull(int x) {
    Node &n = nodes[x];
    int64_t ls = 0, lm = kNone, ws = 0, wm = kNone;
    n.size = 1;
    if (n.left >= 0) {
      const Node &l = nodes[n.left];
      ls = l.liveSum, lm = l.liveMax, ws = l.waitSum, wm = l.waitMax;
      n.size += l.size;
    }
    lm = std::max(lm, ls + n.born);
    ls += n.born - n.dies;
    wm = std::max(wm, ws + n.waits);
    ws += n.waits;
    if (n.right >= 0) {
      const Node &r = nodes[n.right];
      lm = std::max(lm, ls + r.liveMax);
      ls += r.liveSum;
      wm = std::max(wm, ws + r.waitMax);
      ws += r.waitSum;
      n.size += r.size;
    }
    n.liveSum = ls, n.liveMax = lm, n.waitSum = ws, n.waitMax = wm;
  }

  void pullUp(int x) {
    for (; x >= 0; x = nodes[x].parent)
      pull(x);
  }

  int merge(int a, int b) {
    if (a < 0 || b < 0) {
      int c = a < 0 ? b : a;
      if (c >= 0)
        nodes[c].parent = -1;
      return c;
    }
    if (nodes[a].priority > nodes[b].priority) {
      int r = merge(nodes[a].right, b);
      nodes[a].right = r;
      nodes[r].parent = a;
      nodes[a].parent = -1;
      pull(a);
      return a;
    }
    int l = merge(a, nodes[b].left);
    nodes[b].left = l;
    nodes[l].parent = b;
    nodes[b].parent = -1;
    pull(b);
    return b;
  }

  /// The first `k` nodes of `t` into `a`, the rest into `b`.
  void split(int t, int k, int &a, int &b) {
    if (t < 0) {
      a = b = -1;
      return;
    }
    nodes[t].parent = -1;
    int leftSize = nodes[t].left >= 0 ? nodes[nodes[t].left].size : 0;
    if (k <= leftSize) {
      int l;
      split(nodes[t].left, k, a, l);
      nodes[t].left = l;
      if (l >= 0)
        nodes[l].parent = t;
      pull(t);
      b = t;
    } else {
      int r;
      split(nodes[t].right, k - leftSize - 1, r, b);
      nodes[t].right = r;
      if (r >= 0)
        nodes[r].parent = t;
      pull(t);
      a = t;
    }
  }

  /// How many nodes come before `x`.
  int rank(int x) const {
    auto sizeOf = [&](int t) { return t >= 0 ? nodes[t].size : 0; };
    int r = sizeOf(nodes[x].left);
    for (int p = nodes[x].parent; p >= 0; x = p, p = nodes[p].parent)
      if (nodes[p].right == x)
        r += sizeOf(nodes[p].left) + 1;
    return r;
  }

  /// Add (sign +1) or take out (-1) a value's bytes, from its op to its
  /// last user in the block (as measured: constants and host activations
  /// hold no device bytes here).
  void count(Value v, int sign) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body || isa<graph::ConstantOp>(def) ||
        sched::isHostActivation(v))
      return;
    int64_t bytes = sign * memory::storageBytes(v.getType());
    Operation *last = def;
    for (Operation *user : v.getUsers())
      if (user->getBlock() == &body && order.before(last, user))
        last = user;
    int born = nodeOf.lookup(def), dies = nodeOf.lookup(last);
    nodes[born].born += bytes;
    pullUp(born);
    nodes[dies].dies += bytes;
    pullUp(dies);
  }

  /// Add or take out a fetch's waiting bytes, from its first op to its
  /// consumer (the first op outside the chain that reads it).
  void countFetch(size_t i, int sign) {
    const Fetch &f = fetches[i];
    Operation *consumer = nullptr;
    if (sign > 0) {
      consumer = consumers[i] = consumerOf(
          f, [&](Operation *a, Operation *b) { return order.before(a, b); });
    } else {
      consumer = consumers[i];
    }
    if (!consumer)
      return;
    int64_t bytes = sign * f.bytes;
    int front = nodeOf.lookup(f.chain.front());
    nodes[front].waits += bytes;
    pullUp(front);
    int stop = nodeOf.lookup(consumer);
    nodes[stop].waits -= bytes;
    pullUp(stop);
  }

  Block &body;
  const std::vector<Fetch> &fetches;
  const BlockOrder &order;
  std::mt19937 rng;
  std::vector<Node> nodes;
  int root = -1;
  DenseMap<Operation *, int> nodeOf;
  DenseMap<Operation *, size_t> fetchOf;
  std::vector<Operation *> consumers;
  llvm::SetVector<Value> touched;
  llvm::SetVector<size_t> touchedFetches;
};

struct SchedulePass : public strata::impl::SchedulePassBase<SchedulePass> {
  using SchedulePassBase::SchedulePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t persistent = persistentDeviceBytes(module);
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // The function's own ops (a fused body's ops run inside their op).
      for (Operation &op : func.getBody().front())
        if (!isa<graph::ConstantOp>(op) && !op.hasTrait<OpTrait::IsTerminator>())
          sched::setStream(&op, streamOf(&op));
      // This rank's shard of a reduction (the global sync's all-reduce) is
      // cut on the reduction's stream: the compute stream does not wait for
      // it, and the whole sum is freed as soon as it is cut.
      for (Operation &op : func.getBody().front())
        if (auto shard = dyn_cast<sched::LocalShardOp>(op))
          if (Operation *def = shard.getInput().getDefiningOp();
              def && sched::getStream(def) == Stream::Reduce)
            sched::setStream(&op, Stream::Reduce);
      // A fetch's rearrangements run on the stream of what they rearrange
      // (collectives stay on theirs).
      for (const Fetch &f : findFetches(func.getBody().front()))
        for (Operation *c : f.chain)
          if (c != f.chain.front() &&
              !isa<sched::AllGatherOp>(c) && c->getNumOperands())
            if (Operation *def = c->getOperand(0).getDefiningOp())
              if (std::optional<Stream> stream = sched::getStream(def))
                sched::setStream(c, *stream);
      if (prefetchDepth > 0)
        hoist(func, persistent);
      // A memory plan made for another order no longer holds:
      // strata-plan-memory plans the new one.
      memory::dropMemoryPlan(func);
    }
  }

  /// Device bytes that stay whatever the order: state and inputs on the
  /// device tier, constants (as strata-plan-memory counts them).
  static int64_t persistentDeviceBytes(ModuleOp module) {
    memory::PersistentState state = memory::collectPersistentState(module, 64);
    return state.tierBytes(sched::Tier::Device, 64) + state.constantBytes;
  }

  std::vector<Fetch> findFetches(Block &body) {
    std::vector<Fetch> fetches;
    DenseSet<Operation *> taken;
    for (Operation &op : body) {
      if (!isFetchRoot(&op) || taken.count(&op))
        continue;
      Fetch f;
      llvm::SetVector<Operation *> chain;
      chain.insert(&op);
      // Grow the chain through ops that only rearrange chain values.
      for (size_t i = 0; i < chain.size(); ++i)
        for (Value v : chain[i]->getResults())
          for (Operation *user : v.getUsers())
            if (isChainOp(user) && user->getBlock() == &body &&
                llvm::all_of(user->getOperands(), [&](Value operand) {
                  Operation *def = operand.getDefiningOp();
                  return def && chain.contains(def);
                }))
              chain.insert(user);
      f.chain.assign(chain.begin(), chain.end());
      std::sort(f.chain.begin(), f.chain.end(),
                [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      for (Operation *c : f.chain) {
        taken.insert(c);
        for (Value v : c->getResults())
          if (llvm::any_of(v.getUsers(),
                           [&](Operation *u) { return !chain.contains(u); }))
            f.bytes += memory::storageBytes(v.getType());
      }
      fetches.push_back(std::move(f));
    }
    return fetches;
  }

  /// Prefetch at the configured depth; with a memory budget, the order the
  /// memory plan lays out must fit it, else the next smaller depth (down to
  /// the order as it came).
  void hoist(func::FuncOp func, int64_t persistent) {
    Block &body = func.getBody().front();
    SmallVector<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.push_back(&op);
    auto restore = [&] {
      for (Operation *op : original)
        op->moveBefore(body.getTerminator());
    };
    for (unsigned depth = prefetchDepth; depth > 0; --depth) {
      restore();
      hoistAtDepth(func, persistent, depth);
      if (!gpuMemory ||
          persistent + memory::planArena(func, 64).arenaBytes <=
              int64_t(gpuMemory))
        return;
    }
    restore();
  }

  void hoistAtDepth(func::FuncOp func, int64_t persistent, unsigned depth) {
    Block &body = func.getBody().front();
    std::vector<Fetch> fetches = findFetches(body);
    BlockOrder order(body);
    auto before = [&](Operation *a, Operation *b) {
      return order.before(a, b);
    };
    // Without a cap every move stands and nothing is measured.
    std::optional<LiveProfile> profile;
    int64_t liveCap = INT64_MAX, waitCap = INT64_MAX;
    if (gpuMemory || prefetchBytes) {
      profile.emplace(body, fetches, order);
      // The limits the moves must keep: the caps, or what the order holds
      // before any move when that is already more.
      // The arena a plan lays out runs a little over the bytes live at
      // once (alignment, gaps): the first plan's ratio, and 2 % more, is
      // left for it.
      double slack = 1.02;
      auto arena = func->getAttrOfType<sched::ArenaAttr>(
          sched::SchedDialect::kArenaAttrName);
      if (arena && arena.getLive() > 0)
        slack *=
            std::max(1.0, double(arena.getSize()) / double(arena.getLive()));
      if (gpuMemory)
        liveCap = std::max<int64_t>(
            int64_t(double(int64_t(gpuMemory) - persistent) / slack),
            profile->live());
      if (prefetchBytes)
        waitCap = std::max<int64_t>(prefetchBytes, profile->waiting());
    }
    auto move = [&](ArrayRef<Operation *> chain, Operation *next) {
      if (profile)
        profile->beginMove(chain);
      for (Operation *c : chain)
        next ? c->moveBefore(next) : c->moveBefore(body.getTerminator());
      order.moved(chain, next ? next : body.getTerminator());
      if (profile)
        profile->endMove(chain, next ? next : body.getTerminator());
    };
    for (size_t k = 0; k < fetches.size(); ++k) {
      Fetch &f = fetches[k];
      Operation *home = f.chain.front()->getNextNode();
      while (home && llvm::is_contained(f.chain, home))
        home = home->getNextNode();
      // Try the deepest allowed position first, then shallower ones.
      for (unsigned d = std::min<size_t>(depth, k); d > 0; --d) {
        Operation *target = consumerOf(fetches[k - d], before);
        if (!target)
          target = &body.front();
        if (!order.before(target, f.chain.front()))
          continue;
        // Whatever the chain reads from outside must exist there already.
        bool ready = llvm::all_of(f.chain, [&](Operation *c) {
          return llvm::all_of(c->getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return !def || llvm::is_contained(f.chain, def) ||
                   order.before(def, target);
          });
        });
        if (!ready)
          continue;
        move(f.chain, target);
        if (!profile || (profile->live() <= liveCap &&
                         profile->waiting() <= waitCap))
          break;
        move(f.chain, home); // back where it was
      }
    }
  }
};

} // namespace
