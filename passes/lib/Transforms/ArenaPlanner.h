//===- ArenaPlanner.h - Lifetimes and offsets of a function's values -*- C++ -*-===//
//
// The core of strata-plan-memory, shared with strata-schedule (which checks
// a prefetch order against the memory budget with it): every result of
// `func` that needs arena bytes (not a constant, not written into a state's
// own storage) lives from its op to its last user (one the `reduce` stream
// reads last lives until the next reduction); an in-place-safe op's
// result takes the bytes of an operand that dies there; offsets are chosen
// greedily by size with best-fit gaps, multiples of `alignment`. Also the
// module's persistent tensors and constants, counted the same way by both.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_ARENAPLANNER_H
#define STRATA_TRANSFORMS_ARENAPLANNER_H

#include "strata/Dialect/Graph/IR/GraphDialect.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <string>
#include <vector>

namespace strata::memory {

struct ArenaPlan {
  int64_t arenaBytes = 0; // the planned peak
  int64_t liveBytes = 0;  // the most bytes live at once: the lower bound
  int64_t peakPosition = -1; // the first op position where they are live
  /// The host tier's activation arena (sched.offload activation results),
  /// planned the same way, apart from the device one.
  int64_t hostArenaBytes = 0, hostLiveBytes = 0;
  /// Each value's offset in its arena (sched::isHostActivation says which).
  llvm::DenseMap<mlir::Value, int64_t> offsets;
};

ArenaPlan planArena(mlir::func::FuncOp func, int64_t alignment);

/// Bytes of a tensor as the runtime stores it (i1 as one byte).
inline int64_t storageBytes(mlir::Type type) {
  return sched::storageBytes(type);
}

/// `bytes` rounded up to `alignment` (at least one element's worth).
inline int64_t alignBytes(int64_t bytes, int64_t alignment) {
  return (std::max<int64_t>(bytes, 1) + alignment - 1) / alignment * alignment;
}

/// A persistent tensor: a named function argument (a state or an input),
/// one however many functions see it.
struct PersistentTensor {
  std::string name;
  graph::Role role = graph::Role::Input;
  int64_t bytes = 0;
  /// sched.tier, once strata-plan-memory moved it.
  sched::Tier tier = sched::Tier::Device;
};

/// The module's persistent tensors in first-seen order, and its constants.
struct PersistentState {
  std::vector<PersistentTensor> tensors;
  llvm::StringMap<size_t> index; // by name
  int64_t constantBytes = 0;     // every graph.constant, aligned

  /// The aligned bytes of the tensors on `tier`.
  int64_t tierBytes(sched::Tier tier, int64_t alignment) const;
};

PersistentState collectPersistentState(mlir::ModuleOp module,
                                       int64_t alignment);

/// The largest arena any function of `module` needs, as planArena plans it.
int64_t largestArena(mlir::ModuleOp module, int64_t alignment);

/// Removes a function's memory plan (its arena and every op's slots): a
/// pass that changes the ops makes it stale; strata-plan-memory plans again.
void dropMemoryPlan(mlir::func::FuncOp func);

/// Fails with an error naming `pass` unless `alignment` is a power of two.
mlir::LogicalResult checkAlignment(mlir::ModuleOp module, uint64_t alignment,
                                   llvm::StringRef pass);

} // namespace strata::memory

#endif // STRATA_TRANSFORMS_ARENAPLANNER_H
