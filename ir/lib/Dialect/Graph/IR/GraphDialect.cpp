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
