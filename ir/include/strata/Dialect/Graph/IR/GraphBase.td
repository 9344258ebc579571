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

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::strata::graph";
  let summary = "Tensor computations of a training step, with value semantics";
  let description = [{
    The graph dialect holds the model as the importer understood it: every
    shape is static, shape arithmetic is folded away, and common patterns
    (linear layers, GELU, scaled-dot-product attention) are single ops.
    Parameters are arguments of the enclosing `func.func`, annotated with
    `graph.role` and `graph.name` (the ONNX initializer they came from).
  }];
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
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
