//===- Pipelines.cpp - Strata pass pipelines ------------------------------===//
//
// Pass order lives here, once, so strata-compile and strata-opt run exactly
// the same sequence.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

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

void strata::registerAllStrataPasses() {
  registerStrataPasses();
  PassPipelineRegistration<GraphPipelineOptions>(
      "strata-graph-pipeline",
      "The cleanup that follows ONNX import: fold, raise patterns, CSE",
      buildGraphPipeline);
}
