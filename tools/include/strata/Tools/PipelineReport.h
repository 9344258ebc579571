//===- PipelineReport.h - strata-compile --emit=pipeline --------*- C++ -*-===//
//
// What each pipeline stage holds and passes on: its layers, parameters,
// forward FLOPs and activation bytes, and the tensors that cross each cut.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TOOLS_PIPELINEREPORT_H
#define STRATA_TOOLS_PIPELINEREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace strata {

/// Prints the stages of a module strata-pipeline has cut and the bubble
/// each schedule is predicted to leave with `microBatches` per step; fails
/// (with a diagnostic) when the module has no stages.
mlir::LogicalResult printPipelineReport(mlir::ModuleOp module,
                                        int64_t microBatches,
                                        llvm::raw_ostream &os);

} // namespace strata

#endif // STRATA_TOOLS_PIPELINEREPORT_H
