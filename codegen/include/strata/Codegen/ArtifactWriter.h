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

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>

namespace strata::codegen {

/// Returns the initial bytes of a parameter or buffer, by ONNX name.
using WeightSource = std::function<llvm::Expected<std::string>(llvm::StringRef)>;

/// The training configuration recorded in the artifact (strata-run's
/// defaults; the IR already holds what shapes the computation).
struct TrainingOptions {
  std::string optimizer = "adamw";
  double lr = 1e-3, weightDecay = 0.01, beta1 = 0.9, beta2 = 0.999,
         eps = 1e-8, momentum = 0.9, dampening = 0.0;
  bool nesterov = false;
  double clipNorm = 0.0;
  unsigned accum = 1;
  std::string lrSchedule = "constant";
  uint64_t warmupSteps = 0, totalSteps = 100;
  double minLrRatio = 0.1;
  std::string dtype = "fp32";
  /// bf16 / fp16: "narrow" (tensors stored in the narrow type) or "f32"
  /// (the round_to emulation). Not in the artifact: it changes the plan,
  /// not what the runtime is told.
  std::string precisionStorage = "narrow";
  int64_t ignoreIndex = -100;
  std::string logits;
  double lossScale = 65536.0;
};

/// The ranks the artifact runs on (strata-partition's options).
struct TopologyOptions {
  unsigned world = 1, ranksPerNode = 1, partition = 1;
  bool hierarchical = false;
  /// "2hop" or "global".
  std::string gradSync = "2hop";
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
};

/// Writes `dir` (plan.pb and params.bin) for `module`'s @main. The folder is
/// written beside `dir` and renamed into place, so a failed or interrupted
/// write leaves any previous artifact intact.
llvm::Error writeArtifact(mlir::ModuleOp module, llvm::StringRef dir,
                          const WeightSource &weights,
                          const ArtifactOptions &options = {});

} // namespace strata::codegen

#endif // STRATA_CODEGEN_ARTIFACTWRITER_H
