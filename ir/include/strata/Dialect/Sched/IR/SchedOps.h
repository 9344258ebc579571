//===- SchedOps.h - The sched dialect ---------------------------*- C++ -*-===//

#ifndef STRATA_DIALECT_SCHED_IR_SCHEDOPS_H
#define STRATA_DIALECT_SCHED_IR_SCHEDOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "strata/Dialect/Sched/IR/SchedOpsDialect.h.inc"
#include "strata/Dialect/Sched/IR/SchedEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "strata/Dialect/Sched/IR/SchedAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "strata/Dialect/Sched/IR/SchedTypes.h.inc"

#define GET_OP_CLASSES
#include "strata/Dialect/Sched/IR/SchedOps.h.inc"

namespace strata::sched {

/// The stream an op runs on: its `sched.stream`, or a record's or wait's
/// own; none when strata-schedule has not run.
std::optional<Stream> getStream(mlir::Operation *op);
void setStream(mlir::Operation *op, Stream stream);

/// The tier of function argument `index` (device when it has none).
Tier getArgumentTier(mlir::FunctionOpInterface func, unsigned index);

/// Whether `value` is a `sched.offload activation` result: a copy in the
/// host tier's activation arena, not in device memory.
bool isHostActivation(mlir::Value value);

/// The bytes a tensor takes in memory (i1 as one byte each).
int64_t storageBytes(mlir::Type type);

/// The action of a pipeline stage program an op belongs to: phase 'F'
/// (forward), 'B' (backward: input gradient) or 'W' (weight gradient) of
/// micro-batch `microBatch`.
struct Action {
  char phase;
  int64_t microBatch;
};

/// `loc` marked with `action` (strata-stage-programs). The mark is a fused
/// location's metadata, so CSE and canonicalization, which ignore
/// locations, treat the micro-batches' copies of an op as before.
mlir::Location withAction(mlir::Location loc, Action action);

/// The action marked on `loc` or on any location it fuses; none for an op
/// no stage program placed (or one a later pass built).
std::optional<Action> getAction(mlir::Location loc);

} // namespace strata::sched

#endif // STRATA_DIALECT_SCHED_IR_SCHEDOPS_H
