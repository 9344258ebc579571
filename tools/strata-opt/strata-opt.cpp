//===- strata-opt.cpp - mlir-opt with Strata's dialects and passes --------===//

#include "strata/Tools/InitStrata.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  strata::registerAllStrataDialectsAndPasses(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Strata optimizer driver: runs Strata passes on IR\n",
      registry));
}
