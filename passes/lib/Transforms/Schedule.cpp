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

  /// The first op outside the chain that reads what it fetched.
  static Operation *
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

  /// The most bytes live at once (every value from its op to its last
  /// user), and the most fetched bytes waiting for their consumers.
  void measure(Block &body, const std::vector<Fetch> &fetches, int64_t &live,
               int64_t &waiting) {
    DenseMap<Operation *, int64_t> position;
    int64_t n = 0;
    for (Operation &op : body)
      position[&op] = n++;
    std::vector<int64_t> delta(n + 1, 0), held(n + 1, 0);
    for (Operation &op : body) {
      if (isa<graph::ConstantOp>(op))
        continue;
      for (Value v : op.getResults()) {
        if (sched::isHostActivation(v))
          continue; // in the host tier's arena, not the device's
        int64_t first = position[&op], last = first;
        for (Operation *user : v.getUsers())
          last = std::max(last, position.lookup(user));
        delta[first] += memory::storageBytes(v.getType());
        delta[last + 1] -= memory::storageBytes(v.getType());
      }
    }
    auto before = [&](Operation *a, Operation *b) {
      return position.lookup(a) < position.lookup(b);
    };
    for (const Fetch &f : fetches)
      if (Operation *consumer = consumerOf(f, before)) {
        held[position[f.chain.front()]] += f.bytes;
        held[position[consumer]] -= f.bytes;
      }
    live = waiting = 0;
    int64_t a = 0, w = 0;
    for (int64_t i = 0; i <= n; ++i) {
      live = std::max(live, a += delta[i]);
      waiting = std::max(waiting, w += held[i]);
    }
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
    int64_t live, waiting;
    measure(body, fetches, live, waiting);
    // The limits the moves must keep: the caps, or what the order holds
    // before any move when that is already more.
    // The arena a plan lays out runs a little over the bytes live at once
    // (alignment, gaps): the first plan's ratio, and 2 % more, is left for
    // it.
    double slack = 1.02;
    auto arena =
        func->getAttrOfType<sched::ArenaAttr>(sched::SchedDialect::kArenaAttrName);
    if (arena && arena.getLive() > 0)
      slack *= std::max(1.0, double(arena.getSize()) / double(arena.getLive()));
    int64_t liveCap =
        gpuMemory ? std::max<int64_t>(int64_t(double(int64_t(gpuMemory) -
                                                     persistent) /
                                              slack),
                                      live)
                  : INT64_MAX;
    int64_t waitCap = prefetchBytes ? std::max<int64_t>(prefetchBytes, waiting)
                                    : INT64_MAX;
    BlockOrder order(body);
    auto before = [&](Operation *a, Operation *b) {
      return order.before(a, b);
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
        for (Operation *c : f.chain)
          c->moveBefore(target);
        order.moved(f.chain, target);
        // Without a cap every move stands: nothing to measure (measuring is
        // linear in the block, per move).
        if (liveCap == INT64_MAX && waitCap == INT64_MAX)
          break;
        // Moving the chain earlier keeps at most all its values live longer
        // and its fetched bytes waiting longer: while those bounds stay
        // under the caps the move stands unmeasured (measuring after every
        // move made a budgeted compile quadratic); over them, the exact
        // measure decides, as it always did.
        int64_t chainBytes = 0;
        for (Operation *c : f.chain)
          for (Value v : c->getResults())
            chainBytes += memory::storageBytes(v.getType());
        if (live + chainBytes <= liveCap && waiting + f.bytes <= waitCap) {
          live += chainBytes;
          waiting += f.bytes;
          break;
        }
        int64_t liveBefore = live, waitingBefore = waiting;
        measure(body, fetches, live, waiting);
        if (live <= liveCap && waiting <= waitCap)
          break;
        live = liveBefore;
        waiting = waitingBefore;
        // Back where it was.
        for (Operation *c : f.chain)
          home ? c->moveBefore(home) : c->moveBefore(body.getTerminator());
        order.moved(f.chain, home ? home : body.getTerminator());
      }
    }
  }
};

} // namespace
