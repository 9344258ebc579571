//===- ArenaPlanner.cpp - Lifetimes and offsets of a function's values ---===//

#include "ArenaPlanner.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"

#include <algorithm>

using namespace mlir;

namespace strata::memory {

int64_t PersistentState::tierBytes(sched::Tier tier,
                                   int64_t alignment) const {
  int64_t total = 0;
  for (const PersistentTensor &t : tensors)
    if (t.tier == tier)
      total += alignBytes(t.bytes, alignment);
  return total;
}

PersistentState collectPersistentState(ModuleOp module, int64_t alignment) {
  PersistentState state;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    graph::kNameAttrName);
      if (!name || state.index.count(name.getValue()))
        continue;
      state.index[name.getValue()] = state.tensors.size();
      PersistentTensor t;
      t.name = name.getValue().str();
      if (std::optional<graph::Role> role =
              graph::getArgumentRole(func, arg.getArgNumber()))
        t.role = *role;
      t.bytes = storageBytes(arg.getType());
      t.tier = sched::getArgumentTier(func, arg.getArgNumber());
      state.tensors.push_back(std::move(t));
    }
    func.walk([&](graph::ConstantOp c) {
      state.constantBytes += alignBytes(storageBytes(c.getType()), alignment);
    });
  }
  return state;
}

int64_t largestArena(ModuleOp module, int64_t alignment) {
  int64_t arena = 0;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal())
      arena = std::max(arena, planArena(func, alignment).arenaBytes);
  return arena;
}

void dropMemoryPlan(func::FuncOp func) {
  func->removeAttr(sched::SchedDialect::kArenaAttrName);
  func.walk([](Operation *op) {
    op->removeAttr(sched::SchedDialect::kSlotsAttrName);
  });
}

LogicalResult checkAlignment(ModuleOp module, uint64_t alignment,
                             StringRef pass) {
  if (alignment != 0 && (alignment & (alignment - 1)) == 0)
    return success();
  return module.emitError() << pass
                            << ": alignment must be a power of two, got "
                            << alignment;
}

namespace {

struct Interval {
  Value value;
  int64_t first, last; // op positions, inclusive
  int64_t bytes;       // rounded up to the alignment
  int64_t rawBytes;
  int64_t offset = -1;
};

/// Places `groups` (indices into `intervals`) in one arena: sets their
/// offsets, the arena's bytes and its lower bound (the most raw bytes live
/// at one of the `n` positions).
void placeGroups(std::vector<Interval> &intervals,
                 const std::vector<size_t> &groups, int64_t n,
                 int64_t &arenaBytes, int64_t &liveBytes,
                 int64_t &peakPosition) {
  // The lower bound: the most raw bytes live at one position.
  std::vector<int64_t> delta(n + 1, 0);
  for (size_t i : groups) {
    const Interval &iv = intervals[i];
    delta[iv.first] += iv.rawBytes;
    delta[iv.last + 1] -= iv.rawBytes;
  }
  int64_t running = 0;
  for (int64_t i = 0; i < n; ++i)
    if ((running += delta[i]) > liveBytes) {
      liveBytes = running;
      peakPosition = i;
    }

  // Greedy by size, best fit among the gaps left by overlapping tensors.
  std::vector<size_t> order = groups;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    if (intervals[a].bytes != intervals[c].bytes)
      return intervals[a].bytes > intervals[c].bytes;
    return intervals[a].first < intervals[c].first;
  });
  // Where the placed intervals that overlap one in time lie in the arena,
  // as the union of their byte ranges: a segment tree over the positions
  // holds at each node the union of the intervals placed on it (`own`: the
  // intervals that cover the node, in the canonical decomposition of their
  // lifetime) and of those below it (`sub`). A query merges O(log n) of
  // these sorted lists; best fit scans the merged union's gaps. Scanning
  // every placed interval and sorting the overlapping ones for each new
  // one was quadratic (most of a 1024-rank or a 300-layer compile), and
  // copying the lists into one and sorting it took most of a compile that
  // plans the arena a few dozen times (a memory budget); the union has the
  // gaps the sorted scan found, so the plan is the same.
  using Range = std::pair<int64_t, int64_t>; // [start, end)
  using Ranges = std::vector<Range>; // sorted, disjoint, not touching
  auto addRange = [](Ranges &ranges, int64_t start, int64_t end) {
    // The ranges it overlaps or touches: [i, j).
    auto i = std::lower_bound(
        ranges.begin(), ranges.end(), start,
        [](const Range &r, int64_t at) { return r.second < at; });
    auto j = std::upper_bound(
        i, ranges.end(), end,
        [](int64_t at, const Range &r) { return at < r.first; });
    if (i == j) {
      ranges.insert(i, {start, end});
      return;
    }
    i->first = std::min(start, i->first);
    i->second = std::max(end, std::prev(j)->second);
    ranges.erase(std::next(i), j);
  };
  size_t leaves = 1;
  while (leaves < size_t(std::max<int64_t>(n, 1)))
    leaves *= 2;
  std::vector<Ranges> own(2 * leaves), sub(2 * leaves);
  // The tree over positions [0, leaves): node covers [lo, hi).
  auto insert = [&](auto &self, size_t node, int64_t lo, int64_t hi,
                    const Interval &iv) -> void {
    if (iv.last < lo || iv.first >= hi)
      return;
    addRange(sub[node], iv.offset, iv.offset + iv.bytes);
    if (iv.first <= lo && hi - 1 <= iv.last) {
      addRange(own[node], iv.offset, iv.offset + iv.bytes);
      return;
    }
    int64_t mid = (lo + hi) / 2;
    self(self, 2 * node, lo, mid, iv);
    self(self, 2 * node + 1, mid, hi, iv);
  };
  std::vector<const Ranges *> lists; // the sorted lists a query merges
  auto query = [&](auto &self, size_t node, int64_t lo, int64_t hi,
                   const Interval &iv) -> void {
    if (iv.last < lo || iv.first >= hi)
      return;
    if (iv.first <= lo && hi - 1 <= iv.last) {
      if (!sub[node].empty())
        lists.push_back(&sub[node]);
      return;
    }
    if (!own[node].empty())
      lists.push_back(&own[node]);
    int64_t mid = (lo + hi) / 2;
    self(self, 2 * node, lo, mid, iv);
    self(self, 2 * node + 1, mid, hi, iv);
  };
  // The lists' heads, the one with the lowest start on top.
  using Head = std::pair<const Range *, const Range *>; // (next, end)
  std::vector<Head> heads;
  auto later = [](const Head &a, const Head &b) {
    return a.first->first > b.first->first;
  };
  for (size_t i : order) {
    Interval &iv = intervals[i];
    lists.clear();
    query(query, 1, 0, int64_t(leaves), iv);
    heads.clear();
    for (const Ranges *list : lists)
      heads.push_back({list->data(), list->data() + list->size()});
    std::make_heap(heads.begin(), heads.end(), later);
    int64_t best = -1, bestGap = INT64_MAX, start = 0;
    while (!heads.empty()) {
      std::pop_heap(heads.begin(), heads.end(), later);
      Head &head = heads.back();
      auto [offset, end] = *head.first;
      int64_t gap = offset - start;
      if (gap >= iv.bytes && gap < bestGap) {
        best = start;
        bestGap = gap;
      }
      start = std::max(start, end);
      if (++head.first == head.second)
        heads.pop_back();
      else
        std::push_heap(heads.begin(), heads.end(), later);
    }
    iv.offset = best >= 0 ? best : start;
    arenaBytes = std::max(arenaBytes, iv.offset + iv.bytes);
    insert(insert, 1, 0, int64_t(leaves), iv);
  }
}

} // namespace

ArenaPlan planArena(func::FuncOp func, int64_t alignment) {
  Block &body = func.getBody().front();
  llvm::DenseMap<Value, llvm::StringRef> inState =
      graph::findInPlaceStateUpdates(func);
  DenseMap<Operation *, int64_t> position;
  int64_t n = 0;
  for (Operation &op : body)
    position[&op] = n++;

  // The positions of the collectives on the `reduce` stream, in order. A
  // value whose last reader runs on that stream stays live until the next
  // of them is issued (to the end, after the last): the compute stream
  // reuses its bytes only after waiting for a reduction issued a bucket
  // earlier, so each bucket's reduction overlaps the next bucket's
  // backward (two buckets in flight, as DeepSpeed's double-buffered
  // reduction).
  std::vector<int64_t> reductions;
  for (Operation &op : body)
    if (isa<sched::ReduceScatterOp, sched::AllReduceOp>(op) &&
        sched::getStream(&op) == sched::Stream::Reduce)
      reductions.push_back(position[&op]);
  auto nextReduction = [&](int64_t after) {
    auto it = std::upper_bound(reductions.begin(), reductions.end(), after);
    return it == reductions.end() ? n - 1 : *it;
  };

  std::vector<Interval> intervals;
  DenseMap<Value, size_t> index;
  for (Operation &op : body) {
    if (isa<graph::ConstantOp>(op) || op.hasTrait<OpTrait::IsTerminator>())
      continue;
    for (Value result : op.getResults()) {
      if (inState.count(result))
        continue;
      int64_t first = position[&op], last = first;
      Operation *lastUser = nullptr;
      for (Operation *user : result.getUsers())
        if (position.lookup(user) >= last) {
          last = position.lookup(user);
          lastUser = user;
        }
      if (lastUser && sched::getStream(lastUser) == sched::Stream::Reduce)
        last = nextReduction(last);
      int64_t raw = storageBytes(result.getType());
      int64_t bytes = (std::max<int64_t>(raw, 1) + alignment - 1) /
                      alignment * alignment;
      index[result] = intervals.size();
      intervals.push_back({result, first, last, bytes, raw});
    }
  }

  // An in-place-safe op may write a result over an operand that dies
  // there (an offloaded moment reloaded for the update): the two values
  // become one slot, the union of their lifetimes.
  std::vector<size_t> root(intervals.size());
  for (size_t i = 0; i < root.size(); ++i)
    root[i] = i;
  std::vector<bool> donated(intervals.size(), false);
  for (Operation &op : body) {
    for (OpResult result : op.getResults()) {
      auto r = index.find(result);
      std::optional<unsigned> operand =
          graph::inPlaceOperand(&op, result.getResultNumber());
      if (r == index.end() || !operand || *operand >= op.getNumOperands())
        continue;
      auto d = index.find(op.getOperand(*operand));
      if (d == index.end() || donated[d->second] ||
          root[d->second] != d->second ||
          intervals[d->second].last != position[&op] ||
          intervals[d->second].bytes != intervals[r->second].bytes)
        continue;
      donated[d->second] = true;
      root[r->second] = d->second;
      Interval &slot = intervals[d->second];
      slot.last = std::max(slot.last, intervals[r->second].last);
    }
  }
  ArenaPlan plan;
  // The device arena, and apart from it the host tier's activation arena.
  for (bool host : {false, true}) {
    std::vector<size_t> groups;
    for (size_t i = 0; i < intervals.size(); ++i)
      if (root[i] == i && sched::isHostActivation(intervals[i].value) == host)
        groups.push_back(i);
    int64_t hostPeak = -1;
    placeGroups(intervals, groups, n,
                host ? plan.hostArenaBytes : plan.arenaBytes,
                host ? plan.hostLiveBytes : plan.liveBytes,
                host ? hostPeak : plan.peakPosition);
  }

  for (auto [value, i] : index)
    plan.offsets[value] = intervals[root[i]].offset;
  return plan;
}

} // namespace strata::memory
