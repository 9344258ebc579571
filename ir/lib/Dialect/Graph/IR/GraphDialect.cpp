//===- GraphDialect.cpp - The graph dialect -------------------------------===//

#include "strata/Dialect/Graph/IR/GraphDialect.h"
#include "strata/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace strata::graph;

#include "strata/Dialect/Graph/IR/GraphOpsDialect.cpp.inc"
#include "strata/Dialect/Graph/IR/GraphInterfaces.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "strata/Dialect/Graph/IR/GraphOps.cpp.inc"
      >();
  registerGradientModels(*getContext());
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

std::string strata::graph::onnxNodeName(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc))
    return name.getName().str();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location inner : fused.getLocations())
      if (auto name = mlir::dyn_cast<mlir::NameLoc>(inner))
        return name.getName().str();
  return "";
}
