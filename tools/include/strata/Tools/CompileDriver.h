//===- CompileDriver.h - strata-compile -------------------------*- C++ -*-===//

#ifndef STRATA_TOOLS_COMPILEDRIVER_H
#define STRATA_TOOLS_COMPILEDRIVER_H

#include "strata/Codegen/ArtifactWriter.h"
#include "strata/Frontend/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace strata {

/// The graph pipeline's choices (strata-compile --no-fuse-attention,
/// --no-sink-gather).
struct GraphCleanup {
  bool fuseAttention = true;
  bool sinkGather = true;
};

/// Imports `path` and runs the graph pipeline on it: what
/// `strata-compile --emit=graph` prints.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importGraph(mlir::MLIRContext &context, llvm::StringRef path,
            const frontend::ImportOptions &options,
            GraphCleanup cleanup = {});

/// Adds @micro_step (loss, backward) and @optimizer_step to an imported
/// module: the training pipeline with `config`'s options. With a topology
/// of more than one rank and `distribute`, strata-partition follows (the
/// loss is weighted 1/N either way).
llvm::Error buildTrainingStep(mlir::MLIRContext &context, mlir::ModuleOp module,
                              const TrainingConfig &config,
                              bool distribute = true);

/// The whole of strata-compile: parses the command line, imports the model,
/// runs the pipeline up to `--emit`, and prints or writes the result.
/// Returns the process exit code; every error is one line on stderr.
int compileMain(int argc, char **argv);

} // namespace strata

#endif // STRATA_TOOLS_COMPILEDRIVER_H
