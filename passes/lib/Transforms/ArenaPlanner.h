//===- ArenaPlanner.h - Lifetimes and offsets of a function's values -*- C++ -*-===//
//
// The core of strata-plan-memory, shared with strata-schedule (which checks
// a prefetch order against the memory budget with it): every result of
// `func` that needs arena bytes (not a constant, not written into a state's
// own storage) lives from its op to its last user; an in-place-safe op's
// result takes the bytes of an operand that dies there; offsets are chosen
// greedily by size with best-fit gaps, multiples of `alignment`.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_ARENAPLANNER_H
#define STRATA_TRANSFORMS_ARENAPLANNER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace strata::memory {

struct ArenaPlan {
  int64_t arenaBytes = 0; // the planned peak
  int64_t liveBytes = 0;  // the most bytes live at once: the lower bound
  llvm::DenseMap<mlir::Value, int64_t> offsets;
};

ArenaPlan planArena(mlir::func::FuncOp func, int64_t alignment);

/// Bytes of a tensor as the runtime stores it (i1 as one byte).
int64_t storageBytes(mlir::Type type);

} // namespace strata::memory

#endif // STRATA_TRANSFORMS_ARENAPLANNER_H
