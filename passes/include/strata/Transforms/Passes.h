//===- Passes.h - Strata passes ---------------------------------*- C++ -*-===//

#ifndef STRATA_TRANSFORMS_PASSES_H
#define STRATA_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace strata {

#define GEN_PASS_DECL
#include "strata/Transforms/Passes.h.inc"

/// Options of the graph cleanup that follows import.
struct GraphPipelineOptions
    : public mlir::PassPipelineOptions<GraphPipelineOptions> {
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("Recognise attention"),
                             llvm::cl::init(true)};
};

/// The cleanup run on every imported module, in order: canonicalize (folds
/// what the importer left), CSE, raise patterns into single ops, canonicalize
/// and CSE. `strata-compile --emit=graph` prints its result;
/// `strata-opt --strata-graph-pipeline` runs the same sequence.
void buildGraphPipeline(mlir::OpPassManager &pm,
                        const GraphPipelineOptions &options);

/// Registers every Strata pass (the generated registerStrataPasses) and
/// every pipeline with the global registry.
void registerAllStrataPasses();

#define GEN_PASS_REGISTRATION
#include "strata/Transforms/Passes.h.inc"

} // namespace strata

#endif // STRATA_TRANSFORMS_PASSES_H
