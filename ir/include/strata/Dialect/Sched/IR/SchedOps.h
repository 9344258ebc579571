//===- SchedOps.h - The sched dialect ---------------------------*- C++ -*-===//

#ifndef STRATA_DIALECT_SCHED_IR_SCHEDOPS_H
#define STRATA_DIALECT_SCHED_IR_SCHEDOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "strata/Dialect/Sched/IR/SchedOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "strata/Dialect/Sched/IR/SchedOps.h.inc"

#endif // STRATA_DIALECT_SCHED_IR_SCHEDOPS_H
