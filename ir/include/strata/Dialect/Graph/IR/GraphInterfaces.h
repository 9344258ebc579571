//===- GraphInterfaces.h - Graph dialect interfaces -------------*- C++ -*-===//

#ifndef STRATA_DIALECT_GRAPH_IR_GRAPHINTERFACES_H
#define STRATA_DIALECT_GRAPH_IR_GRAPHINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "strata/Dialect/Graph/IR/GraphInterfaces.h.inc"

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHINTERFACES_H
