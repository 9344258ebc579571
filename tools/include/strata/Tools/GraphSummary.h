//===- GraphSummary.h - A readable summary of an imported graph -*- C++ -*-===//

#ifndef STRATA_TOOLS_GRAPHSUMMARY_H
#define STRATA_TOOLS_GRAPHSUMMARY_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace strata {

/// Prints inputs, outputs, parameters (with counts and bytes), buffers and op
/// counts of every function in `module`.
void printGraphSummary(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace strata

#endif // STRATA_TOOLS_GRAPHSUMMARY_H
