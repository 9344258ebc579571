//===- ArtifactWriter.h - Graph IR to a training artifact -------*- C++ -*-===//
//
// Codegen: lowers the `func.func @main` of a module to the runtime's plan
// (runtime/schema/plan.proto). Every graph op becomes one instruction that
// names the op, its operand and result tensors and its attributes, so no op
// needs a case here; constants travel in the plan, parameters and buffers
// in params.bin.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_CODEGEN_ARTIFACTWRITER_H
#define STRATA_CODEGEN_ARTIFACTWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>

namespace strata::codegen {

/// Returns the initial bytes of a parameter or buffer, by ONNX name.
using WeightSource = std::function<llvm::Expected<std::string>(llvm::StringRef)>;

struct ArtifactOptions {
  /// Folded into the fingerprint: the compile options that shaped the IR.
  std::string optionsSummary;
};

/// Writes `dir` (plan.pb and params.bin) for `module`'s @main. The folder is
/// written beside `dir` and renamed into place, so a failed or interrupted
/// write leaves any previous artifact intact.
llvm::Error writeArtifact(mlir::ModuleOp module, llvm::StringRef dir,
                          const WeightSource &weights,
                          const ArtifactOptions &options = {});

} // namespace strata::codegen

#endif // STRATA_CODEGEN_ARTIFACTWRITER_H
