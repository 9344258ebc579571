//===- Passes.h - Strata passes ---------------------------------*- C++ -*-===//

#ifndef STRATA_TRANSFORMS_PASSES_H
#define STRATA_TRANSFORMS_PASSES_H

#include "strata/Transforms/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "strata/Transforms/TrainingOptions.h"

namespace strata {

#define GEN_PASS_DECL
#include "strata/Transforms/Passes.h.inc"

/// Options of the graph cleanup that follows import.
struct GraphPipelineOptions
    : public mlir::PassPipelineOptions<GraphPipelineOptions> {
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("Recognise attention"),
                             llvm::cl::init(true)};
  Option<bool> sinkGather{
      *this, "sink-gather",
      llvm::cl::desc("Compute only the positions a gather keeps"),
      llvm::cl::init(true)};
};

/// The cleanup run on every imported module, in order: canonicalize (folds
/// what the importer left), CSE, raise patterns into single ops, canonicalize
/// and CSE. `strata-compile --emit=graph` prints its result;
/// `strata-opt --strata-graph-pipeline` runs the same sequence.
void buildGraphPipeline(mlir::OpPassManager &pm,
                        const GraphPipelineOptions &options);

/// Options of the training step: the loss and backward, the optimizer step
/// and the distribution over a topology (TrainingOptions.def's training and
/// topology rows).
struct TrainingPipelineOptions
    : public mlir::PassPipelineOptions<TrainingPipelineOptions> {
#define STRATA_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC, ...)                  \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::init(DEFAULT) __VA_OPT__(, ) __VA_ARGS__};
#define STRATA_TRAINING_OPTION STRATA_OPTION
#define STRATA_TOPOLOGY_OPTION STRATA_OPTION
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_OPTION
  ListOption<std::string> freeze{
      *this, "freeze", llvm::cl::desc("Parameter globs kept fixed")};
  Option<bool> distribute{
      *this, "distribute",
      llvm::cl::desc("Run strata-partition when world > 1"),
      llvm::cl::init(true)};
  /// With pipeline stages: strata-recompute before strata-stage-programs
  /// (layers or always; the memory pipeline's runs on @micro_step, which
  /// stages replace).
  Option<Recompute> stageRecompute{
      *this, "stage-recompute",
      llvm::cl::desc("With pipeline stages: recompute none, always or "
                     "layers inside the stages"),
      llvm::cl::init(Recompute::None),
      llvm::cl::values(clEnumValN(Recompute::None, "none", ""),
                       clEnumValN(Recompute::Auto, "auto", ""),
                       clEnumValN(Recompute::Always, "always", ""),
                       clEnumValN(Recompute::Layers, "layers", ""))};
  /// With stageRecompute = layers: each stage's first N layers only (-1:
  /// every layer; strata-compile's --recompute auto chooses N).
  Option<int64_t> stageRecomputeLayers{
      *this, "stage-recompute-layers",
      llvm::cl::desc("With stage-recompute=layers: each stage's first N "
                     "layers (-1: all)"),
      llvm::cl::init(-1)};

  /// The options from a config (strata-compile's command line).
  static void fill(TrainingPipelineOptions &out, const TrainingConfig &in);
};

/// The training step, in order: strata-mixed-precision (bf16/fp16),
/// strata-autodiff (each rank's loss weighted 1/world), strata-optimizer,
/// strata-partition (world > 1), canonicalize, CSE. `strata-compile
/// --emit=distributed` prints its result.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Options of the schedule and the memory plan (TrainingOptions.def's
/// memory rows).
struct MemoryPipelineOptions
    : public mlir::PassPipelineOptions<MemoryPipelineOptions> {
#define STRATA_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC, ...)                  \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::init(DEFAULT) __VA_OPT__(, ) __VA_ARGS__};
#define STRATA_MEMORY_OPTION STRATA_OPTION
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_OPTION
  /// strata-offload-activations' min-bytes: strata-compile, offloading
  /// activations by itself under a budget, tries the largest first.
  Option<uint64_t> offloadMinBytes{
      *this, "offload-min-bytes",
      llvm::cl::desc("With offload-activations: the smallest activation "
                     "moved"),
      llvm::cl::init(4096)};

  /// The options from a config (strata-compile's command line).
  static void fill(MemoryPipelineOptions &out, const TrainingConfig &in);
};

/// What an artifact is written from, in order: strata-group-updates
/// (unless group-updates=false; groups of at most 256 MiB, or an eighth of
/// gpu-memory when that is smaller), strata-fuse-elementwise (unless
/// fuse-elementwise=false), strata-plan-memory (tiers,
/// moves, recomputation, a first plan), strata-schedule, strata-plan-memory
/// (the final order's offsets), strata-insert-events,
/// strata-verify-schedule. `strata-compile --emit=memory` prints its
/// result.
void buildMemoryPipeline(mlir::OpPassManager &pm,
                         const MemoryPipelineOptions &options);

/// Registers every Strata pass (the generated registerStrataPasses) and
/// every pipeline with the global registry.
void registerAllStrataPasses();

#define GEN_PASS_REGISTRATION
#include "strata/Transforms/Passes.h.inc"

} // namespace strata

#endif // STRATA_TRANSFORMS_PASSES_H
