//===- GraphBase.td - The graph dialect definition ---------*- tablegen -*-===//
//
// The `graph` dialect says *what* a training step computes: tensor ops with
// value semantics on static shapes, as imported from ONNX and extended later
// with gradients and optimizer updates.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_GRAPH_IR_GRAPHBASE_TD
#define STRATA_DIALECT_GRAPH_IR_GRAPHBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::strata::graph";
  let summary = "Tensor computations of a training step, with value semantics";
  let description = [{
    The graph dialect holds the model as the importer understood it: every
    shape is static, shape arithmetic is folded away, and common patterns
    (linear layers, GELU, scaled-dot-product attention) are single ops.
    Parameters are arguments of the enclosing `func.func`, annotated with
    `graph.role` (a `#graph<role ...>`) and `graph.name` (the ONNX
    initializer they came from).
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Roles of a function's arguments and results
//===----------------------------------------------------------------------===//

def Graph_RoleInput : I32EnumAttrCase<"Input", 0, "input">;
def Graph_RoleParameter : I32EnumAttrCase<"Parameter", 1, "parameter">;
def Graph_RoleBuffer : I32EnumAttrCase<"Buffer", 2, "buffer">;
def Graph_RoleGradient : I32EnumAttrCase<"Gradient", 3, "gradient">;
def Graph_RoleOptimizerState
    : I32EnumAttrCase<"OptimizerState", 4, "optimizer_state">;
def Graph_RoleOutput : I32EnumAttrCase<"Output", 5, "output">;
def Graph_Role : I32EnumAttr<"Role", "what a function argument or result stands for", [
    Graph_RoleInput, Graph_RoleParameter, Graph_RoleBuffer, Graph_RoleGradient,
    Graph_RoleOptimizerState, Graph_RoleOutput]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::strata::graph";
}
def Graph_RoleAttr : EnumAttr<Graph_Dialect, Graph_Role, "role"> {
  let summary = [{What a training function's argument or result stands for:
    input (fed per step), parameter (trainable), buffer (non-trainable
    state: batch-norm statistics), gradient (a parameter's accumulated
    gradient), optimizer_state (AdamW's moments, SGD's momentum, the loss
    scale), output (a result read after the step)}];
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// Every shape is static: the importer resolves each dimension or fails.
def Graph_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def Graph_IntTensor : StaticShapeTensorOf<[AnySignlessInteger]>;
def Graph_BoolTensor : StaticShapeTensorOf<[I1]>;
def Graph_Tensor : StaticShapeTensorOf<[AnyType]>;

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHBASE_TD
