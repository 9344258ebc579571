//===- ArtifactWriter.h - Graph IR to a training artifact -------*- C++ -*-===//
//
// Codegen: lowers `@main` (and, for training, `@micro_step` and
// `@optimizer_step`) to the runtime's plan (runtime/schema/plan.proto), one
// program each over shared tensors. Every graph op becomes one instruction that
// names the op, its operand and result tensors and its attributes, so no op
// needs a case here; constants travel in the plan, parameters and buffers
// in params.bin.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_CODEGEN_ARTIFACTWRITER_H
#define STRATA_CODEGEN_ARTIFACTWRITER_H

#include "strata/Transforms/TrainingOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>

namespace strata::codegen {

/// Returns the initial bytes of a parameter or buffer, by ONNX name.
using WeightSource = std::function<llvm::Expected<std::string>(llvm::StringRef)>;

/// The training configuration recorded in the artifact (strata-run's
/// defaults; the IR already holds what shapes the computation): the
/// options of TrainingOptions.def.
using TrainingOptions = strata::TrainingConfig;

/// The ranks the artifact runs on (strata-partition's options).
struct TopologyOptions {
  unsigned world = 1, ranksPerNode = 1, partition = 1;
  bool hierarchical = false;
  GradSync gradSync = GradSync::TwoHop;
  /// The largest coalesced bucket (0: one parameter a bucket).
  uint64_t bucketBytes = 32ull << 20;
};

struct ArtifactOptions {
  /// Folded into the fingerprint: the compile options that shaped the IR.
  std::string optionsSummary;
  /// Set for a training artifact: then @micro_step and @optimizer_step
  /// become programs next to @main's "forward".
  std::optional<TrainingOptions> training;
  /// Set for a distributed artifact (world > 1).
  std::optional<TopologyOptions> topology;
  /// Writes further files into the staging folder before it is renamed
  /// into place (strata-compile keeps the user's model there).
  std::function<llvm::Error(llvm::StringRef stagingDir)> extraFiles;
  /// Hashed into Plan.model_fingerprint: the model and training
  /// configuration a checkpoint must share to be resumed (resharded) by
  /// this artifact.
  std::string modelIdentity;
  /// A plan-only artifact (strata-compile --no-weights): no initial value
  /// is read and no params.bin written; strata-inspect and the simulator
  /// read it, strata-run refuses it.
  bool weightless = false;
};

/// Writes `dir` (plan.pb and params.bin) for `module`'s @main. The folder is
/// written beside `dir` and renamed into place, so a failed or interrupted
/// write leaves any previous artifact intact.
llvm::Error writeArtifact(mlir::ModuleOp module, llvm::StringRef dir,
                          const WeightSource &weights,
                          const ArtifactOptions &options = {});

} // namespace strata::codegen

#endif // STRATA_CODEGEN_ARTIFACTWRITER_H
