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

//===----------------------------------------------------------------------===//
// Enumerated choices of ops
//===----------------------------------------------------------------------===//

class Graph_Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::strata::graph";
}

def Graph_GeluApproximation : Graph_Enum<"GeluApproximation",
    "how gelu computes the normal CDF", [
    I32EnumAttrCase<"None", 0, "none">, I32EnumAttrCase<"Tanh", 1, "tanh">]>;
def Graph_GeluApproximationAttr
    : EnumAttr<Graph_Dialect, Graph_GeluApproximation, "approximation"> {
  let summary = "gelu: the exact normal CDF (none) or the tanh approximation";
}

def Graph_Reduction : Graph_Enum<"Reduction", "how a loss reduces its elements", [
    I32EnumAttrCase<"None", 0, "none">, I32EnumAttrCase<"Sum", 1, "sum">,
    I32EnumAttrCase<"Mean", 2, "mean">]>;
def Graph_ReductionAttr : EnumAttr<Graph_Dialect, Graph_Reduction, "reduction"> {
  let summary = "A loss's reduction: none (per element), sum or mean";
}

def Graph_PadMode : Graph_Enum<"PadMode", "what pad fills with", [
    I32EnumAttrCase<"Constant", 0, "constant">,
    I32EnumAttrCase<"Reflect", 1, "reflect">, I32EnumAttrCase<"Edge", 2, "edge">]>;
def Graph_PadModeAttr : EnumAttr<Graph_Dialect, Graph_PadMode, "pad_mode"> {
  let summary = [{pad: a constant, the mirror without the edge (reflect), or the
    edge repeated}];
}

// The forward ops unary_grad differentiates.
def Graph_UnaryKind : Graph_Enum<"UnaryKind", "an elementwise unary op", [
    I32EnumAttrCase<"Abs", 0, "abs">, I32EnumAttrCase<"Exp", 1, "exp">,
    I32EnumAttrCase<"Log", 2, "log">, I32EnumAttrCase<"Sqrt", 3, "sqrt">,
    I32EnumAttrCase<"Reciprocal", 4, "reciprocal">,
    I32EnumAttrCase<"Tanh", 5, "tanh">, I32EnumAttrCase<"Erf", 6, "erf">,
    I32EnumAttrCase<"Sin", 7, "sin">, I32EnumAttrCase<"Cos", 8, "cos">,
    I32EnumAttrCase<"Relu", 9, "relu">, I32EnumAttrCase<"Sigmoid", 10, "sigmoid">,
    I32EnumAttrCase<"Softplus", 11, "softplus">,
    I32EnumAttrCase<"Gelu", 12, "gelu">,
    I32EnumAttrCase<"LeakyRelu", 13, "leaky_relu">,
    I32EnumAttrCase<"Elu", 14, "elu">,
    I32EnumAttrCase<"HardSigmoid", 15, "hard_sigmoid">,
    I32EnumAttrCase<"HardSwish", 16, "hard_swish">,
    I32EnumAttrCase<"Clip", 17, "clip">, I32EnumAttrCase<"Neg", 18, "neg">,
    I32EnumAttrCase<"Softsign", 19, "softsign">]>;
def Graph_UnaryKindAttr : EnumAttr<Graph_Dialect, Graph_UnaryKind, "unary"> {
  let summary = "The elementwise unary op a unary_grad differentiates";
}

def Graph_NarrowFloat : Graph_Enum<"NarrowFloat", "a narrow float format", [
    I32EnumAttrCase<"BF16", 0, "bf16">, I32EnumAttrCase<"FP16", 1, "fp16">]>;
def Graph_NarrowFloatAttr : EnumAttr<Graph_Dialect, Graph_NarrowFloat, "narrow"> {
  let summary = "bf16 or fp16: the values round_to keeps";
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
