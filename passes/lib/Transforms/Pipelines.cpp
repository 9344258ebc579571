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

using namespace mlir;

void strata::buildGraphPipeline(OpPassManager &pm,
                                const GraphPipelineOptions &options) {
  pm.addPass(createCanonicalizerPass());
  // Patterns match on value identity (the x of GELU, the x - mean of a
  // LayerNorm), so common subexpressions are merged first.
  pm.addPass(createCSEPass());
  RaiseGraphPassOptions raise;
  raise.fuseAttention = options.fuseAttention;
  pm.addNestedPass<func::FuncOp>(createRaiseGraphPass(raise));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void strata::buildTrainingPipeline(OpPassManager &pm,
                                   const TrainingPipelineOptions &options) {
  if (options.dtype != "fp32") {
    MixedPrecisionPassOptions precision;
    precision.dtype = options.dtype;
    precision.storage = options.precisionStorage;
    pm.addNestedPass<func::FuncOp>(createMixedPrecisionPass(precision));
  }
  bool lossScale = options.dtype == "fp16";
  AutodiffPassOptions autodiff;
  autodiff.freeze = llvm::SmallVector<std::string>(options.freeze.begin(),
                                                   options.freeze.end());
  autodiff.logits = options.logits;
  autodiff.ignoreIndex = options.ignoreIndex;
  autodiff.accumulate = options.accum > 1;
  autodiff.lossScale = lossScale;
  // Every rank's loss is the mean over its micro-batch; the step's loss is
  // their mean, so each backward pass is seeded with 1/N.
  autodiff.lossWeight = 1.0 / std::max(1u, unsigned(options.world));
  pm.addPass(createAutodiffPass(autodiff));
  OptimizerPassOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.weightDecay = options.weightDecay;
  optimizer.momentum = options.momentum;
  optimizer.dampening = options.dampening;
  optimizer.nesterov = options.nesterov;
  optimizer.clipNorm = options.clipNorm;
  optimizer.accum = options.accum;
  optimizer.lossScale = lossScale;
  pm.addPass(createOptimizerPass(optimizer));
  if (options.world > 1 && options.distribute) {
    PartitionPassOptions partition;
    partition.world = options.world;
    partition.ranksPerNode = options.ranksPerNode;
    partition.partition = options.partition;
    partition.hierarchical = options.hierarchical;
    partition.gradSync = options.gradSync;
    partition.bucketBytes = options.bucketBytes;
    pm.addPass(createPartitionPass(partition));
  }
  // Narrow storage: attention's heads and their gradients move as bf16.
  if (options.dtype != "fp32" && options.precisionStorage == "narrow")
    pm.addNestedPass<func::FuncOp>(createSinkWideningCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void strata::buildMemoryPipeline(OpPassManager &pm,
                                 const MemoryPipelineOptions &options) {
  PlanMemoryPassOptions memory;
  memory.pageSize = options.pageSize;
  memory.gpuMemory = options.gpuMemory;
  memory.ssdMemory = options.ssdMemory;
  memory.recompute = options.recompute;
  OffloadStatePassOptions offload;
  offload.gpuMemory = options.gpuMemory;
  offload.hostMemory = options.hostMemory;
  offload.ssdMemory = options.ssdMemory;
  RecomputePassOptions recompute;
  recompute.mode = options.recompute;
  recompute.gpuMemory = options.gpuMemory;
  SchedulePassOptions schedule;
  schedule.prefetchDepth = options.prefetchDepth;
  schedule.prefetchBytes = options.prefetchBytes;
  schedule.gpuMemory = options.gpuMemory;
  if (options.groupUpdates) {
    // A group's tensors are resident together: keep it a small part of a
    // GPU budget.
    GroupUpdatesPassOptions group;
    if (options.gpuMemory > 0)
      group.maxBytes = std::min<uint64_t>(group.maxBytes, options.gpuMemory / 8);
    pm.addNestedPass<func::FuncOp>(createGroupUpdatesPass(group));
  }
  if (options.fuseElementwise)
    pm.addNestedPass<func::FuncOp>(createFuseElementwisePass());
  // Recomputation of everything (always); state off the device and, when
  // that is not enough, recomputation (auto); a first plan; streams and
  // prefetch on that order; the plan of the final order; the events; their
  // proof; what the runtime needs decided.
  if (options.recompute == "always")
    pm.addPass(createRecomputePass(recompute));
  if (options.gpuMemory > 0) {
    pm.addPass(createOffloadStatePass(offload));
    if (options.recompute == "auto")
      pm.addPass(createRecomputePass(recompute));
  }
  pm.addPass(createPlanMemoryPass(memory));
  pm.addPass(createSchedulePass(schedule));
  pm.addPass(createPlanMemoryPass(memory));
  pm.addPass(createInsertEventsPass());
  pm.addPass(createVerifySchedulePass());
  pm.addPass(createPlanExecutionPass());
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
