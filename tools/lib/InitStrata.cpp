//===- InitStrata.cpp - Register every Strata dialect and pass ------------===//

#include "strata/Tools/InitStrata.h"

#include "strata/Dialect/Graph/IR/GraphDialect.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"
#include "strata/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void strata::registerAllStrataDialectsAndPasses(mlir::DialectRegistry &registry) {
  registry.insert<mlir::func::FuncDialect, graph::GraphDialect,
                  sched::SchedDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  registerAllStrataPasses();
}
