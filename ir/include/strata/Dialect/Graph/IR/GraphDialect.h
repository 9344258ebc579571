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
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "strata/Dialect/Graph/IR/GraphOpsDialect.h.inc"
#include "strata/Dialect/Graph/IR/GraphEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "strata/Dialect/Graph/IR/GraphAttrs.h.inc"

#include <string>

namespace strata::graph {

/// Argument and result attribute names shared by the importer and passes.
/// `graph.role` is a #graph<role ...> (RoleAttr): on an imported model's
/// arguments input, parameter or buffer; on its results output or buffer (a
/// buffer's new value); the training functions add gradient and
/// optimizer_state. `graph.name` is the ONNX graph input, initializer or
/// output the value stands for (a state's name for the states the training
/// pipeline adds: stateName). The module carries the ONNX graph's name as
/// `graph.model`.
inline constexpr llvm::StringLiteral kRoleAttrName = "graph.role";
inline constexpr llvm::StringLiteral kNameAttrName = "graph.name";
/// Function attribute: the ONNX names of the results, in order.
inline constexpr llvm::StringLiteral kOutputNamesAttrName = "graph.outputs";

/// The role of argument or result `index` of `func`, when it has one.
std::optional<Role> getArgumentRole(mlir::FunctionOpInterface func,
                                    unsigned index);
std::optional<Role> getResultRole(mlir::FunctionOpInterface func,
                                  unsigned index);
/// The `graph.role` and `graph.name` entries of an argument's or result's
/// attribute dictionary.
mlir::NamedAttribute roleEntry(mlir::MLIRContext *context, Role role);
mlir::NamedAttribute nameEntry(mlir::MLIRContext *context,
                               llvm::StringRef name);
/// The attribute dictionary of an argument or result with a role and a
/// name (both entries).
mlir::DictionaryAttr roleAndName(mlir::MLIRContext *context, Role role,
                                 llvm::StringRef name);

/// Whether a role names persistent state (parameter, buffer, gradient,
/// optimizer_state): values kept between steps.
bool isStateRole(Role role);

/// The persistent tensors the training pipeline adds for a parameter, and
/// how the artifact and its checkpoints name them.
enum class StateKind { Gradient, AdamWExpAvg, AdamWExpAvgSq, SGDMomentum };
/// "grad:P", "adamw.exp_avg:P", "adamw.exp_avg_sq:P", "sgd.momentum:P".
std::string stateName(StateKind kind, llvm::StringRef parameter);
/// The parameter a state of `kind` belongs to, when `name` is one's name.
std::optional<llvm::StringRef> stateParameter(StateKind kind,
                                              llvm::StringRef name);
/// The role a state of `kind` has.
Role stateRole(StateKind kind);

/// The name of an enumerated choice of a graph op (#graph<reduction mean>
/// -> "mean"), for the artifact's kernel attributes; none for other
/// attributes.
std::optional<llvm::StringRef> enumName(mlir::Attribute attr);

/// Whether `name` is one of the scalars the training pipeline adds for
/// itself ("strata.lr", "strata.step", "strata.loss", "strata.loss_scale",
/// ...): never sharded, never moved off the device.
bool isPipelineScalar(llvm::StringRef name);

/// The ONNX node an op came from: the importer names each op's location
/// after its node (a NameLoc, possibly fused); "" when there is none.
std::string onnxNodeName(mlir::Location loc);

/// Attaches each differentiable op's GradientOpInterface (GraphGradients.cpp);
/// called when the dialect is loaded.
void registerGradientModels(mlir::MLIRContext &context);

} // namespace strata::graph

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHDIALECT_H
