//===- GraphDialect.h - The graph dialect -----------------------*- C++ -*-===//
//
// Declares the graph dialect: tensor ops of a training step with value
// semantics on static shapes.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_GRAPH_IR_GRAPHDIALECT_H
#define STRATA_DIALECT_GRAPH_IR_GRAPHDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "strata/Dialect/Graph/IR/GraphOpsDialect.h.inc"

#include <string>

namespace strata::graph {

/// Argument and result attribute names shared by the importer and passes.
/// On arguments `graph.role` is "input", "parameter" or "buffer"; on results
/// it is "output" or "buffer" (a buffer's new value). `graph.name` is the
/// ONNX graph input, initializer or output the value stands for. The module
/// carries the ONNX graph's name as `graph.model`.
inline constexpr llvm::StringLiteral kRoleAttrName = "graph.role";
inline constexpr llvm::StringLiteral kNameAttrName = "graph.name";
/// Function attribute: the ONNX names of the results, in order.
inline constexpr llvm::StringLiteral kOutputNamesAttrName = "graph.outputs";

/// The ONNX node an op came from: the importer names each op's location
/// after its node (a NameLoc, possibly fused); "" when there is none.
std::string onnxNodeName(mlir::Location loc);

/// Attaches each differentiable op's GradientOpInterface (GraphGradients.cpp);
/// called when the dialect is loaded.
void registerGradientModels(mlir::MLIRContext &context);

} // namespace strata::graph

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHDIALECT_H
