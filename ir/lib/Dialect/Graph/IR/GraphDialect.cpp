//===- GraphDialect.cpp - The graph dialect -------------------------------===//

#include "strata/Dialect/Graph/IR/GraphDialect.h"
#include "strata/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace strata::graph;

#include "llvm/ADT/TypeSwitch.h"

#include "strata/Dialect/Graph/IR/GraphOpsDialect.cpp.inc"
#include "strata/Dialect/Graph/IR/GraphInterfaces.cpp.inc"
#include "strata/Dialect/Graph/IR/GraphEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "strata/Dialect/Graph/IR/GraphAttrs.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "strata/Dialect/Graph/IR/GraphOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "strata/Dialect/Graph/IR/GraphAttrs.cpp.inc"
      >();
  registerGradientModels(*getContext());
}

/// The graph.* entries of an argument's or result's attributes.
static LogicalResult verifyValueAttribute(Operation *op, StringRef what,
                                          unsigned index, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  bool ok = true;
  if (name == kRoleAttrName)
    ok = isa<RoleAttr>(attr.getValue());
  else if (name == kNameAttrName)
    ok = isa<StringAttr>(attr.getValue());
  else if (name == "graph.shards" || name == "graph.int_high")
    ok = isa<IntegerAttr>(attr.getValue());
  else if (name == "graph.full_shape")
    ok = isa<DenseI64ArrayAttr>(attr.getValue());
  else
    return op->emitOpError() << what << " " << index
                             << " has unknown graph dialect attribute '"
                             << name << "'";
  if (!ok)
    return op->emitOpError()
           << what << " " << index << ": '" << name << "' has the wrong kind "
           << "of value (" << attr.getValue() << ")";
  return success();
}

LogicalResult GraphDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned region,
                                                     unsigned index,
                                                     NamedAttribute attr) {
  return verifyValueAttribute(op, "argument", index, attr);
}

LogicalResult GraphDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned region,
                                                        unsigned index,
                                                        NamedAttribute attr) {
  return verifyValueAttribute(op, "result", index, attr);
}

std::optional<Role> strata::graph::getArgumentRole(FunctionOpInterface func,
                                                   unsigned index) {
  if (auto role = func.getArgAttrOfType<RoleAttr>(index, kRoleAttrName))
    return role.getValue();
  return std::nullopt;
}

std::optional<Role> strata::graph::getResultRole(FunctionOpInterface func,
                                                 unsigned index) {
  if (auto role = func.getResultAttrOfType<RoleAttr>(index, kRoleAttrName))
    return role.getValue();
  return std::nullopt;
}

NamedAttribute strata::graph::roleEntry(MLIRContext *context, Role role) {
  return NamedAttribute(StringAttr::get(context, kRoleAttrName),
                        RoleAttr::get(context, role));
}

NamedAttribute strata::graph::nameEntry(MLIRContext *context, StringRef name) {
  return NamedAttribute(StringAttr::get(context, kNameAttrName),
                        StringAttr::get(context, name));
}

DictionaryAttr strata::graph::roleAndName(MLIRContext *context, Role role,
                                          StringRef name) {
  NamedAttribute entries[] = {nameEntry(context, name),
                              roleEntry(context, role)};
  return DictionaryAttr::get(context, entries);
}

bool strata::graph::isStateRole(Role role) {
  return role == Role::Parameter || role == Role::Buffer ||
         role == Role::Gradient || role == Role::OptimizerState;
}

static StringRef statePrefix(StateKind kind) {
  switch (kind) {
  case StateKind::Gradient:
    return "grad:";
  case StateKind::AdamWExpAvg:
    return "adamw.exp_avg:";
  case StateKind::AdamWExpAvgSq:
    return "adamw.exp_avg_sq:";
  case StateKind::SGDMomentum:
    return "sgd.momentum:";
  }
  llvm_unreachable("unknown state kind");
}

std::string strata::graph::stateName(StateKind kind, StringRef parameter) {
  return (statePrefix(kind) + parameter).str();
}

std::optional<StringRef> strata::graph::stateParameter(StateKind kind,
                                                       StringRef name) {
  if (!name.starts_with(statePrefix(kind)))
    return std::nullopt;
  return name.drop_front(statePrefix(kind).size());
}

std::optional<StringRef> strata::graph::enumName(Attribute attr) {
  return llvm::TypeSwitch<Attribute, std::optional<StringRef>>(attr)
      .Case([](GeluApproximationAttr a) {
        return stringifyGeluApproximation(a.getValue());
      })
      .Case([](ReductionAttr a) { return stringifyReduction(a.getValue()); })
      .Case([](PadModeAttr a) { return stringifyPadMode(a.getValue()); })
      .Case([](UnaryKindAttr a) { return stringifyUnaryKind(a.getValue()); })
      .Case([](NarrowFloatAttr a) { return stringifyNarrowFloat(a.getValue()); })
      .Default([](Attribute) { return std::nullopt; });
}

bool strata::graph::isPipelineScalar(StringRef name) {
  return name.starts_with("strata.");
}

Role strata::graph::stateRole(StateKind kind) {
  return kind == StateKind::Gradient ? Role::Gradient : Role::OptimizerState;
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
  // The first name, depth first (a stage program's op nests its fused
  // location under its action's mark).
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location inner : fused.getLocations())
      if (std::string name = onnxNodeName(inner); !name.empty())
        return name;
  return "";
}
