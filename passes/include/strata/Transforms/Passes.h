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

/// Options of the training step: the loss and backward, the optimizer step
/// and the distribution over a topology.
struct TrainingPipelineOptions
    : public mlir::PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> dtype{*this, "dtype",
                            llvm::cl::desc("fp32, bf16 or fp16"),
                            llvm::cl::init("fp32")};
  Option<std::string> precisionStorage{
      *this, "precision-storage",
      llvm::cl::desc("narrow or f32 (strata-mixed-precision's storage)"),
      llvm::cl::init("narrow")};
  ListOption<std::string> freeze{
      *this, "freeze", llvm::cl::desc("Parameter globs kept fixed")};
  Option<std::string> logits{*this, "logits",
                             llvm::cl::desc("The output the loss reads"),
                             llvm::cl::init("")};
  Option<int64_t> ignoreIndex{*this, "ignore-index",
                              llvm::cl::desc("Label the loss ignores"),
                              llvm::cl::init(-100)};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw or sgd"),
                                llvm::cl::init("adamw")};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.9)};
  Option<double> dampening{*this, "dampening", llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::init(false)};
  Option<double> clipNorm{*this, "clip-norm", llvm::cl::init(0.0)};
  Option<unsigned> accum{*this, "accum", llvm::cl::init(1)};
  Option<unsigned> world{*this, "world", llvm::cl::init(1)};
  Option<unsigned> ranksPerNode{*this, "ranks-per-node", llvm::cl::init(1)};
  Option<unsigned> partition{*this, "partition", llvm::cl::init(1)};
  Option<bool> hierarchical{*this, "hierarchical", llvm::cl::init(false)};
  Option<std::string> gradSync{*this, "grad-sync", llvm::cl::init("2hop")};
  Option<uint64_t> bucketBytes{*this, "bucket-bytes",
                               llvm::cl::init(32ull << 20)};
  Option<bool> distribute{
      *this, "distribute",
      llvm::cl::desc("Run strata-partition when world > 1"),
      llvm::cl::init(true)};
};

/// The training step, in order: strata-mixed-precision (bf16/fp16),
/// strata-autodiff (each rank's loss weighted 1/world), strata-optimizer,
/// strata-partition (world > 1), canonicalize, CSE. `strata-compile
/// --emit=distributed` prints its result.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Options of the schedule and the memory plan.
struct MemoryPipelineOptions
    : public mlir::PassPipelineOptions<MemoryPipelineOptions> {
  Option<uint64_t> gpuMemory{*this, "gpu-memory", llvm::cl::init(0)};
  Option<uint64_t> hostMemory{*this, "host-memory", llvm::cl::init(0)};
  Option<uint64_t> ssdMemory{*this, "ssd-memory", llvm::cl::init(0)};
  Option<std::string> recompute{*this, "recompute", llvm::cl::init("none")};
  Option<uint64_t> pageSize{*this, "page-size", llvm::cl::init(4ull << 20)};
  Option<unsigned> prefetchDepth{*this, "prefetch-depth", llvm::cl::init(1)};
  Option<uint64_t> prefetchBytes{*this, "prefetch-bytes", llvm::cl::init(0)};
  Option<bool> fuseElementwise{*this, "fuse-elementwise", llvm::cl::init(true)};
  Option<bool> groupUpdates{*this, "group-updates", llvm::cl::init(true)};
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
