//===- ScheduleAnalysis.h - Who touches which bytes on which stream -*- C++ -*-===//
//
// Shared by strata-insert-events and strata-verify-schedule: every op that
// becomes an instruction, in block order, with its stream and the byte
// ranges it reads and writes (activations at their memory-plan offsets in
// the device arena or, offloaded, in the host activation arena; states, inputs and results written into a state in that
// tensor's own storage).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_SCHEDULEANALYSIS_H
#define STRATA_TRANSFORMS_SCHEDULEANALYSIS_H

#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace strata::schedule {

/// Bytes [begin, end) of a region: 0 is the activation arena,
/// kHostArenaRegion the host tier's activation arena; every named tensor (a
/// state, an input) is a region of its own.
struct Range {
  int64_t region, begin, end;
};
inline constexpr int64_t kHostArenaRegion = -1;

/// An instruction: an op that computes, collects or moves (not a
/// constant, a terminator or an event op). `stream` indexes the stream list
/// collectAccesses returns.
struct OpAccess {
  mlir::Operation *op;
  int stream;
  llvm::SmallVector<Range, 4> reads, writes;
};

/// Whether two ops' accesses conflict: overlapping bytes, one writing.
bool conflict(const OpAccess &a, const OpAccess &b);

/// Whether `op` becomes an instruction of the artifact.
bool isInstruction(mlir::Operation *op);

/// The accesses of `func`'s instructions in block order; `streams` gets the
/// streams in order of first use (compute first). Fails with an error on
/// the op when the schedule or the memory plan is missing.
mlir::LogicalResult collectAccesses(mlir::func::FuncOp func,
                                    std::vector<OpAccess> &out,
                                    std::vector<sched::Stream> &streams);

/// "'graph.linear' (instruction 12 on stream compute, node /h.0/mlp)"
std::string describe(const OpAccess &access, int64_t id,
                     const std::vector<sched::Stream> &streams);

} // namespace strata::schedule

#endif // STRATA_TRANSFORMS_SCHEDULEANALYSIS_H
