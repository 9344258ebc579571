//===- StateUpdates.h - Results written over persistent state ---*- C++ -*-===//
//
// A training function returns the new values of its persistent state
// (parameters, gradients, optimizer states) by name. A returned value can be
// computed straight into its state's storage when its producer runs after
// every other read of the old value and reads the old value only
// elementwise; otherwise it lives in its own buffer and is copied over the
// state at the end. Codegen and strata-plan-memory both ask here, so the
// memory plan and the artifact agree.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_GRAPH_IR_STATEUPDATES_H
#define STRATA_DIALECT_GRAPH_IR_STATEUPDATES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace strata::graph {

/// Whether `op` may write its results over an operand's storage: it reads
/// each element before writing the same element and nothing else.
bool isInPlaceSafe(mlir::Operation *op);

/// The operand whose storage result `result` of `op` may take (an
/// in-place-safe op reads each element of it before writing the same
/// element of the result): AdamW's moments and parameter, SGD's parameter
/// and momentum, a same-typed add/sub/mul's first operand, a reshape's
/// operand; none otherwise.
std::optional<unsigned> inPlaceOperand(mlir::Operation *op, unsigned result);

/// The returned values of `func` computed straight into their state's
/// storage, each with the state's name.
llvm::DenseMap<mlir::Value, llvm::StringRef>
findInPlaceStateUpdates(mlir::func::FuncOp func);

} // namespace strata::graph

#endif // STRATA_DIALECT_GRAPH_IR_STATEUPDATES_H
