//===- Pipelines.cpp - Strata pass pipelines ------------------------------===//
//
// Pass order lives here, once, so strata-compile and strata-opt run exactly
// the same sequence.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace strata;

void strata::buildGraphPipeline(OpPassManager &pm,
                                const GraphPipelineOptions &options) {
  pm.addPass(createCanonicalizerPass());
  // Patterns match on value identity (the x of GELU, the x - mean of a
  // LayerNorm), so common subexpressions are merged first.
  pm.addPass(createCSEPass());
  RaiseGraphPassOptions raise;
  raise.fuseAttention = options.fuseAttention;
  pm.addNestedPass<func::FuncOp>(createRaiseGraphPass(raise));
  if (options.sinkGather)
    pm.addNestedPass<func::FuncOp>(createSinkGatherPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void strata::buildTrainingPipeline(OpPassManager &pm,
                                   const TrainingPipelineOptions &options) {
  if (options.dtype != Precision::FP32) {
    MixedPrecisionPassOptions precision;
    precision.dtype = options.dtype;
    precision.storage = options.precisionStorage;
    pm.addNestedPass<func::FuncOp>(createMixedPrecisionPass(precision));
  }
  if (options.pipelineStages > 1) {
    PipelinePassOptions pipeline;
    pipeline.stages = options.pipelineStages;
    SmallVector<int64_t> boundaries;
    // Text the pass rejects stands for text that is no list of integers.
    if (!parseStageBoundaries(options.stageBoundaries, boundaries))
      boundaries.assign(1, -1);
    pipeline.boundaries = boundaries;
    pm.addPass(createPipelinePass(pipeline));
  }
  bool lossScale = options.dtype == Precision::FP16;
  AutodiffPassOptions autodiff;
  autodiff.freeze = llvm::SmallVector<std::string>(options.freeze.begin(),
                                                   options.freeze.end());
  autodiff.logits = options.logits;
  autodiff.ignoreIndex = options.ignoreIndex;
  autodiff.accumulate = options.accum > 1;
  autodiff.lossScale = lossScale;
  // Every rank's loss is the mean over its micro-batch; the step's loss is
  // their mean, so each backward pass is seeded with 1/N.
  // With pipeline stages, the ranks of one pipeline share a micro-batch:
  // the data-parallel lanes are the world over the stages.
  unsigned stages = std::max(1u, unsigned(options.pipelineStages));
  autodiff.lossWeight =
      1.0 / std::max(1u, unsigned(options.world) / stages);
  pm.addPass(createAutodiffPass(autodiff));
  if (options.keepAttentionProbabilities)
    pm.addNestedPass<func::FuncOp>(createKeepAttentionProbabilitiesPass());
  OptimizerPassOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  // AdamW's default weight decay is 0.01, SGD's 0 (weight-decay < 0).
  optimizer.weightDecay =
      options.weightDecay >= 0 ? double(options.weightDecay)
      : options.optimizer == Optimizer::AdamW ? 0.01
                                              : 0.0;
  optimizer.momentum = options.momentum;
  optimizer.dampening = options.dampening;
  optimizer.nesterov = options.nesterov;
  optimizer.clipNorm = options.clipNorm;
  optimizer.accum = options.accum;
  optimizer.lossScale = lossScale;
  pm.addPass(createOptimizerPass(optimizer));
  ResolvedTopology topology =
      resolveTopology(options.world, options.gpusPerNode,
                      options.partitionGroup, options.hierarchical,
                      options.pipelineStages);
  // With stages, the partition pass sees one stage's ranks: its groups
  // (the stage group, the replication group at stride p*P) are the same
  // for every stage.
  unsigned stageWorld = std::max(1u, topology.world / stages);
  if (stageWorld > 1 && options.distribute) {
    PartitionPassOptions partition;
    partition.world = stageWorld;
    unsigned k = topology.ranksPerNode;
    partition.ranksPerNode = stageWorld % k == 0 ? k : std::gcd(k, stageWorld);
    partition.partition = topology.partition;
    partition.hierarchical = topology.hierarchical;
    partition.gradSync = options.gradSync;
    partition.bucketBytes = options.bucketBytes;
    if (options.reduceDtype == ReduceDtype::Narrow)
      partition.reduceType =
          options.dtype == Precision::BF16 ? "bf16" : "f16";
    pm.addPass(createPartitionPass(partition));
  }
  if (stages > 1) {
    // strata-recompute works on @micro_step, which the stage programs
    // replace: with stages, every layer (or op) is made again here, its
    // clones marked backward so each stage runs them in its backward.
    if (options.stageRecompute == Recompute::Always ||
        options.stageRecompute == Recompute::Layers) {
      RecomputePassOptions recompute;
      recompute.mode = options.stageRecompute;
      recompute.markBackward = true;
      recompute.layersPerStage = options.stageRecomputeLayers;
      pm.addPass(createRecomputePass(recompute));
    }
    StageProgramsPassOptions stagePrograms;
    stagePrograms.schedule = options.pipelineSchedule;
    stagePrograms.microBatches = std::max(1u, unsigned(options.accum));
    pm.addPass(createStageProgramsPass(stagePrograms));
    pm.addPass(createVerifyPipelinePass());
  }
  // Narrow storage: attention's heads and their gradients move as bf16.
  if (options.dtype != Precision::FP32 &&
      options.precisionStorage == PrecisionStorage::Narrow)
    pm.addNestedPass<func::FuncOp>(createSinkWideningCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void strata::buildMemoryPipeline(OpPassManager &pm,
                                 const MemoryPipelineOptions &options) {
  uint64_t gpuMemory = options.gpuMemory.getValue().bytes;
  PlanMemoryPassOptions memory;
  memory.pageSize = options.pageSize.getValue().bytes;
  memory.gpuMemory = gpuMemory;
  memory.ssdMemory = options.ssdMemory.getValue().bytes;
  memory.recompute = options.recompute;
  memory.offloadActivations = options.offloadActivations;
  memory.hostMemory = options.hostMemory.getValue().bytes;
  OffloadStatePassOptions offload;
  offload.gpuMemory = gpuMemory;
  offload.hostMemory = options.hostMemory.getValue().bytes;
  offload.ssdMemory = options.ssdMemory.getValue().bytes;
  RecomputePassOptions recompute;
  recompute.mode = options.recompute;
  recompute.gpuMemory = gpuMemory;
  SchedulePassOptions schedule;
  schedule.prefetchDepth = options.prefetchDepth;
  schedule.prefetchBytes = options.prefetchBytes.getValue().bytes;
  schedule.gpuMemory = gpuMemory;
  if (options.groupUpdates) {
    // A group's tensors are resident together: keep it a small part of a
    // GPU budget.
    GroupUpdatesPassOptions group;
    if (gpuMemory > 0)
      group.maxBytes = std::min<uint64_t>(group.maxBytes, gpuMemory / 8);
    pm.addNestedPass<func::FuncOp>(createGroupUpdatesPass(group));
  }
  if (options.fuseElementwise)
    pm.addNestedPass<func::FuncOp>(createFuseElementwisePass());
  // Recomputation of everything (always) or of every layer (layers); state
  // off the device and, when that is not enough, recomputation (auto: ops
  // and layers, fewest FLOPs per byte first); saved activations to the
  // host; a first plan; streams and prefetch on that order; the plan of the
  // final order; the events; their proof; what the runtime needs decided.
  if (options.recompute == Recompute::Always ||
      options.recompute == Recompute::Layers)
    pm.addPass(createRecomputePass(recompute));
  if (gpuMemory > 0) {
    pm.addPass(createOffloadStatePass(offload));
    if (options.recompute == Recompute::Auto)
      pm.addPass(createRecomputePass(recompute));
  }
  // Saved activations to the host tier, after recomputation has chosen
  // which backward still reads.
  if (options.offloadActivations)
    pm.addPass(createOffloadActivationsPass(
        OffloadActivationsPassOptions{options.offloadMinBytes}));
  pm.addPass(createPlanMemoryPass(memory));
  pm.addPass(createSchedulePass(schedule));
  pm.addPass(createPlanMemoryPass(memory));
  pm.addPass(createInsertEventsPass());
  pm.addPass(createVerifySchedulePass());
  pm.addPass(createPlanExecutionPass());
}

void strata::TrainingPipelineOptions::fill(TrainingPipelineOptions &out,
                                           const TrainingConfig &in) {
#define STRATA_OPTION(TYPE, FIELD, ...) out.FIELD = in.FIELD;
#define STRATA_TRAINING_OPTION STRATA_OPTION
#define STRATA_TOPOLOGY_OPTION STRATA_OPTION
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_OPTION
  out.freeze = llvm::SmallVector<std::string>(in.freeze.begin(),
                                              in.freeze.end());
  out.stageRecompute = in.recompute;
  out.stageRecomputeLayers = in.stageRecomputeLayers;
}

void strata::MemoryPipelineOptions::fill(MemoryPipelineOptions &out,
                                         const TrainingConfig &in) {
#define STRATA_OPTION(TYPE, FIELD, ...) out.FIELD = in.FIELD;
#define STRATA_MEMORY_OPTION STRATA_OPTION
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_OPTION
}

void strata::registerAllStrataPasses() {
  registerStrataPasses();
  PassPipelineRegistration<GraphPipelineOptions>(
      "strata-graph-pipeline",
      "The cleanup that follows ONNX import: fold, raise patterns, CSE",
      buildGraphPipeline);
  PassPipelineRegistration<TrainingPipelineOptions>(
      "strata-training-pipeline",
      "The training step: mixed precision, autodiff, the optimizer, "
      "distribution",
      buildTrainingPipeline);
  PassPipelineRegistration<MemoryPipelineOptions>(
      "strata-memory-pipeline",
      "The memory plan and the schedule: tiers, streams, offsets, events, "
      "their proof",
      buildMemoryPipeline);
}
