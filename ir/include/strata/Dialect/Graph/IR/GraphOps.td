//===- GraphOps.td - Graph dialect operations --------------*- tablegen -*-===//
//
// Tensor ops with value semantics on static shapes. Every op states its result
// type; ops whose result type follows from their operands and attributes infer
// it (InferTypeOpAdaptor), so the verifier rejects a mismatched type.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_GRAPH_IR_GRAPHOPS_TD
#define STRATA_DIALECT_GRAPH_IR_GRAPHOPS_TD

include "strata/Dialect/Graph/IR/GraphBase.td"
include "strata/Dialect/Graph/IR/GraphInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_Op<"constant",
    [ConstantLike, Pure, InferTypeOpAdaptor]> {
  let summary = "A tensor literal";
  let description = [{
    A compile-time tensor: folded shape arithmetic, masks, scalars.
    ```mlir
    %c = graph.constant dense<1.0> : tensor<4xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

class Graph_UnaryOp<string mnemonic, Type tensorType = Graph_FloatTensor,
                    list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                      Elementwise], traits)> {
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_NegOp : Graph_UnaryOp<"neg", Graph_Tensor> {
  let hasFolder = 1;
  let summary = "Elementwise negation";
  let description = [{
    ```mlir
    %y = graph.neg %x : tensor<4xf32>
    ```
  }];
}
def Graph_AbsOp : Graph_UnaryOp<"abs", Graph_Tensor> {
  let summary = "Elementwise absolute value";
  let description = [{ `%y = graph.abs %x : tensor<4xf32>` }];
}
def Graph_ExpOp : Graph_UnaryOp<"exp"> {
  let hasFolder = 1;
  let summary = "Elementwise e^x";
  let description = [{ `%y = graph.exp %x : tensor<4xf32>` }];
}
def Graph_LogOp : Graph_UnaryOp<"log"> {
  let summary = "Elementwise natural logarithm";
  let description = [{ `%y = graph.log %x : tensor<4xf32>` }];
}
def Graph_SqrtOp : Graph_UnaryOp<"sqrt"> {
  let hasFolder = 1;
  let summary = "Elementwise square root";
  let description = [{ `%y = graph.sqrt %x : tensor<4xf32>` }];
}
def Graph_ReciprocalOp : Graph_UnaryOp<"reciprocal"> {
  let hasFolder = 1;
  let summary = "Elementwise 1/x";
  let description = [{ `%y = graph.reciprocal %x : tensor<4xf32>` }];
}
def Graph_TanhOp : Graph_UnaryOp<"tanh"> {
  let summary = "Elementwise hyperbolic tangent";
  let description = [{ `%y = graph.tanh %x : tensor<4xf32>` }];
}
def Graph_ErfOp : Graph_UnaryOp<"erf"> {
  let summary = "Elementwise Gauss error function";
  let description = [{ `%y = graph.erf %x : tensor<4xf32>` }];
}
def Graph_SinOp : Graph_UnaryOp<"sin"> {
  let summary = "Elementwise sine";
  let description = [{ `%y = graph.sin %x : tensor<4xf32>` }];
  let hasFolder = 1;
}
def Graph_CosOp : Graph_UnaryOp<"cos"> {
  let summary = "Elementwise cosine";
  let description = [{ `%y = graph.cos %x : tensor<4xf32>` }];
  let hasFolder = 1;
}
def Graph_ReluOp : Graph_UnaryOp<"relu"> {
  let summary = "Elementwise max(x, 0)";
  let description = [{ `%y = graph.relu %x : tensor<4xf32>` }];
}
def Graph_SigmoidOp : Graph_UnaryOp<"sigmoid"> {
  let summary = "Elementwise 1 / (1 + e^-x)";
  let description = [{ `%y = graph.sigmoid %x : tensor<4xf32>` }];
}
def Graph_SoftplusOp : Graph_UnaryOp<"softplus"> {
  let summary = "Elementwise log(1 + e^x)";
  let description = [{ `%y = graph.softplus %x : tensor<4xf32>` }];
}
def Graph_NotOp : Graph_UnaryOp<"not", Graph_BoolTensor> {
  let hasFolder = 1;
  let summary = "Elementwise logical negation";
  let description = [{ `%y = graph.not %x : tensor<4xi1>` }];
}

def Graph_GeluOp : Graph_UnaryOp<"gelu"> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate = #graph<approximation none>` (the default) is x * Phi(x)
    with the exact normal CDF (from `0.5 * x * (1 + erf(x / sqrt(2)))`);
    `tanh` is the tanh approximation
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
    ```mlir
    %y = graph.gelu %x {approximate = #graph<approximation tanh>} : tensor<8x256xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input,
                       DefaultValuedAttr<Graph_GeluApproximationAttr,
                           "::strata::graph::GeluApproximation::None">:$approximate);
}

def Graph_LeakyReluOp : Graph_UnaryOp<"leaky_relu"> {
  let summary = "Elementwise x >= 0 ? x : alpha * x";
  let description = [{ `%y = graph.leaky_relu %x {alpha = 0.01 : f64} : tensor<4xf32>` }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$alpha);
}
def Graph_EluOp : Graph_UnaryOp<"elu"> {
  let summary = "Elementwise x >= 0 ? x : alpha * (e^x - 1)";
  let description = [{ `%y = graph.elu %x {alpha = 1.0 : f64} : tensor<4xf32>` }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$alpha);
}
def Graph_HardSigmoidOp : Graph_UnaryOp<"hard_sigmoid"> {
  let summary = "Elementwise clamp(alpha * x + beta, 0, 1)";
  let description = [{ `%y = graph.hard_sigmoid %x {alpha = 0.2 : f64, beta = 0.5 : f64} : tensor<4xf32>` }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$alpha, F64Attr:$beta);
}
def Graph_HardSwishOp : Graph_UnaryOp<"hard_swish"> {
  let summary = "Elementwise x * clamp(x / 6 + 1 / 2, 0, 1)";
  let description = [{ `%y = graph.hard_swish %x : tensor<4xf32>` }];
}
def Graph_ClipOp : Graph_UnaryOp<"clip"> {
  let summary = "Elementwise clamp to [min, max]; a missing bound is open";
  let description = [{ `%y = graph.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<4xf32>` }];
  let arguments = (ins Graph_FloatTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
}

def Graph_SoftsignOp : Graph_UnaryOp<"softsign"> {
  let summary = "Elementwise x / (1 + |x|)";
  let description = [{ `%y = graph.softsign %x : tensor<4xf32>` }];
}

def Graph_CastOp : Graph_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "Elementwise conversion of the element type";
  let description = [{
    Float to float rounds to nearest even; float to integer truncates toward
    zero; to i1 is `x != 0`.
    ```mlir
    %y = graph.cast %x : tensor<4xi64> to tensor<4xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise binary with numpy broadcasting
//===----------------------------------------------------------------------===//

class Graph_BinaryOp<string mnemonic, Type operandType = Graph_Tensor,
                     list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat([Pure, SameOperandsElementType,
                                      ResultsBroadcastableShape,
                                      InferTypeOpAdaptor], traits)> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($output)
  }];
  bit isComparison = 0;
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::strata::graph::inferBroadcastResultType(
          context, location, adaptor.getLhs().getType(),
          adaptor.getRhs().getType(), /*isComparison=*/}] #
          !if(isComparison, "true", "false") # [{, inferred);
    }
  }];
}

def Graph_AddOp : Graph_BinaryOp<"add", Graph_Tensor, [Commutative]> {
  let summary = "Elementwise lhs + rhs";
  let description = [{
    ```mlir
    %y = graph.add %a, %b : tensor<8x64xf32>, tensor<64xf32> -> tensor<8x64xf32>
    ```
  }];
}
def Graph_SubOp : Graph_BinaryOp<"sub"> {
  let summary = "Elementwise lhs - rhs";
  let description = [{ `%y = graph.sub %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>` }];
}
def Graph_MulOp : Graph_BinaryOp<"mul", Graph_Tensor, [Commutative]> {
  let summary = "Elementwise lhs * rhs";
  let description = [{ `%y = graph.mul %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>` }];
}
def Graph_DivOp : Graph_BinaryOp<"div"> {
  let summary = "Elementwise lhs / rhs (integers truncate toward zero)";
  let description = [{ `%y = graph.div %a, %b : tensor<4xf32>, tensor<f32> -> tensor<4xf32>` }];
}
def Graph_PowOp : Graph_BinaryOp<"pow", Graph_FloatTensor> {
  let summary = "Elementwise lhs ^ rhs";
  let description = [{ `%y = graph.pow %a, %b : tensor<4xf32>, tensor<f32> -> tensor<4xf32>` }];
}
def Graph_MaxOp : Graph_BinaryOp<"max", Graph_Tensor, [Commutative]> {
  let summary = "Elementwise maximum";
  let description = [{ `%y = graph.max %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>` }];
}
def Graph_MinOp : Graph_BinaryOp<"min", Graph_Tensor, [Commutative]> {
  let summary = "Elementwise minimum";
  let description = [{ `%y = graph.min %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>` }];
}
let isComparison = 1 in {
def Graph_EqualOp : Graph_BinaryOp<"equal", Graph_Tensor, [Commutative]> {
  let summary = "Elementwise lhs == rhs, as i1";
  let description = [{ `%y = graph.equal %a, %b : tensor<4xi64>, tensor<i64> -> tensor<4xi1>` }];
}
def Graph_LessOp : Graph_BinaryOp<"less"> {
  let summary = "Elementwise lhs < rhs, as i1";
  let description = [{ `%y = graph.less %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>` }];
}
def Graph_GreaterOp : Graph_BinaryOp<"greater"> {
  let summary = "Elementwise lhs > rhs, as i1";
  let description = [{ `%y = graph.greater %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>` }];
}
def Graph_AndOp : Graph_BinaryOp<"and", Graph_BoolTensor, [Commutative]> {
  let summary = "Elementwise logical and";
  let description = [{ `%y = graph.and %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>` }];
}
def Graph_OrOp : Graph_BinaryOp<"or", Graph_BoolTensor, [Commutative]> {
  let summary = "Elementwise logical or";
  let description = [{ `%y = graph.or %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>` }];
}
}

def Graph_WhereOp : Graph_Op<"where", [Pure, ResultsBroadcastableShape,
                                        InferTypeOpAdaptor]> {
  let summary = "Elementwise select: condition ? lhs : rhs, with broadcasting";
  let description = [{
    ```mlir
    %y = graph.where %mask, %a, %b : tensor<1x1x64x64xi1>, tensor<8x4x64x64xf32>, tensor<f32> -> tensor<8x4x64x64xf32>
    ```
  }];
  let arguments = (ins Graph_BoolTensor:$condition, Graph_Tensor:$lhs,
                       Graph_Tensor:$rhs);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = [{
    $condition `,` $lhs `,` $rhs attr-dict `:` type($condition) `,` type($lhs)
    `,` type($rhs) `->` type($output)
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Graph_MatmulOp : Graph_Op<"matmul", [Pure, SameOperandsElementType,
                                          InferTypeOpAdaptor]> {
  let summary = "Batched matrix product with numpy broadcasting of batch dims";
  let description = [{
    Both operands have rank >= 2; `[..., M, K] x [..., K, N] -> [..., M, N]`,
    with the leading dimensions broadcast.
    ```mlir
    %y = graph.matmul %q, %kt : tensor<8x4x64x16xf32>, tensor<8x4x16x64xf32> -> tensor<8x4x64x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs);
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($output)
  }];
}

def Graph_LinearOp : Graph_Op<"linear", [Pure, InferTypeOpAdaptor]> {
  let summary = "A fully connected layer: input x weight (+ bias)";
  let description = [{
    `input [..., K]`, `weight [K, N]` (or `[N, K]` with `transpose_weight`, as
    `torch.nn.Linear` and ONNX `Gemm transB=1` store it), optional `bias [N]`;
    the result is `[..., N]`. The weight keeps the layout of its ONNX
    initializer so trained weights can be written back unchanged.
    ```mlir
    %y = graph.linear %x, %w, %b {transpose_weight = false} : (tensor<8x64x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                       Optional<Graph_FloatTensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_weight);
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Normalization, activations over an axis
//===----------------------------------------------------------------------===//

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "Layer normalization over the dimensions from `axis` on";
  let description = [{
    `y = (x - mean) / sqrt(var + epsilon) * scale + bias`, mean and biased
    variance over dims `[axis, rank)`; `scale` and `bias` have the shape of
    those dims.
    ```mlir
    %y = graph.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<8x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Optional<Graph_FloatTensor>:$bias, I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_BatchNormOp : Graph_Op<"batch_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "Batch normalization over all dims but the channel dim 1";
  let description = [{
    In training mode the batch statistics normalize the input and the
    running statistics are updated:
    `running = (1 - momentum) * running + momentum * batch` with the unbiased
    batch variance (PyTorch's convention; ONNX's `momentum` is 1 minus this
    one). In inference mode the running statistics normalize and are returned
    unchanged.
    ```mlir
    %y, %m, %v = graph.batch_norm %x, %g, %b, %mean, %var {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64, training = true} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$bias, Graph_FloatTensor:$running_mean,
                       Graph_FloatTensor:$running_var, F64Attr:$epsilon,
                       F64Attr:$momentum, BoolAttr:$training);
  let results = (outs Graph_FloatTensor:$output,
                      Graph_FloatTensor:$new_running_mean,
                      Graph_FloatTensor:$new_running_var);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

class Graph_AxisOp<string mnemonic> : Graph_Op<mnemonic,
    [Pure, SameOperandsAndResultType]> {
  let arguments = (ins Graph_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def Graph_SoftmaxOp : Graph_AxisOp<"softmax"> {
  let summary = "Softmax along one axis";
  let description = [{ `%y = graph.softmax %x {axis = 3 : i64} : tensor<8x4x64x64xf32>` }];
}
def Graph_LogSoftmaxOp : Graph_AxisOp<"log_softmax"> {
  let summary = "Log-softmax along one axis";
  let description = [{ `%y = graph.log_softmax %x {axis = 1 : i64} : tensor<32x10xf32>` }];
}

def Graph_DropoutOp : Graph_Op<"dropout", [InferTypeOpAdaptor]> {
  let summary = "Training-mode dropout: zero with probability ratio, scale the rest";
  let description = [{
    `output = input * mask / (1 - ratio)` with a Bernoulli(1 - ratio) keep
    mask, which is also returned. Not `Pure`: each execution draws a new mask.
    The importer drops dropout with ratio 0 or in inference mode.
    ```mlir
    %y, %mask = graph.dropout %x {ratio = 1.0e-01 : f64} : tensor<8x64xf32> -> tensor<8x64xf32>, tensor<8x64xi1>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$ratio);
  let results = (outs Graph_FloatTensor:$output, Graph_BoolTensor:$mask);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($output) `,` type($mask)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused patterns
//===----------------------------------------------------------------------===//

def Graph_AttentionOp : Graph_Op<"attention", [InferTypeOpAdaptor]> {
  let summary = "Scaled-dot-product attention";
  let description = [{
    `softmax(q @ k^T * scale + mask [causal]) @ v`, where `q [..., S, D]`,
    `k [..., T, D]`, `v [..., T, Dv]` and the result is `[..., S, Dv]`. The
    optional additive `mask` broadcasts to `[..., S, T]`; `causal` hides key
    positions after the query position (`j > i`). `dropout_ratio` applies
    training-mode dropout to the attention probabilities.
    ```mlir
    %o = graph.attention %q, %k, %v {causal = true, dropout_ratio = 0.0 : f64, scale = 2.500000e-01 : f64} : (tensor<8x4x64x16xf32>, tensor<8x4x64x16xf32>, tensor<8x4x64x16xf32>) -> tensor<8x4x64x16xf32>
    ```
    `heads_inner` reads the heads where a projection writes them: `q [...,
    S, H, D]`, `k [..., T, H, D]`, `v [..., T, H, Dv]` and the result
    `[..., S, H, Dv]`, the same as swapping the sequence and head axes of
    every operand, attending, and swapping them back (the mask still
    broadcasts to `[..., H, S, T]`). strata-raise-graph folds those
    transposes into the attention.

    `keep_probabilities` adds a second result, the softmax probabilities
    `[..., H, S, T]` (before dropout; 0 where the mask or causality hides a
    key), for `graph.attention_grad` to read instead of making them again
    (strata-keep-attention-probabilities).
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value,
                       Optional<Graph_FloatTensor>:$mask, F64Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_ratio,
                       DefaultValuedAttr<BoolAttr, "false">:$heads_inner,
                       DefaultValuedAttr<BoolAttr, "false">:$keep_probabilities);
  let results = (outs Graph_FloatTensor:$output,
                      Optional<Graph_FloatTensor>:$probabilities);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`,` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The sequence axis of the query, key, value and result: rank - 3
    /// with heads_inner, rank - 2 otherwise.
    int64_t getSequenceAxis() {
      int64_t rank = ::mlir::cast<::mlir::RankedTensorType>(getQuery().getType()).getRank();
      return getHeadsInner() ? rank - 3 : rank - 2;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Lookups and losses
//===----------------------------------------------------------------------===//

def Graph_EmbeddingOp : Graph_Op<"embedding", [Pure, InferTypeOpAdaptor]> {
  let summary = "Rows of a table selected by integer indices";
  let description = [{
    `table [V, D]`, `indices [...]` -> `[..., D]`. Negative indices count
    from the end, as in ONNX `Gather`.
    ```mlir
    %e = graph.embedding %wte, %ids : (tensor<256x64xf32>, tensor<8x64xi64>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$table, Graph_IntTensor:$indices);
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = "$table `,` $indices attr-dict `:` functional-type(operands, results)";
}

def Graph_GatherOp : Graph_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "ONNX Gather: index along one axis";
  let description = [{
    `input [d0, …, d(axis), …]`, `indices [i…]` ->
    `[d0, …, d(axis-1), i…, d(axis+1), …]`.
    ```mlir
    %y = graph.gather %x, %i {axis = 1 : i64} : (tensor<8x32x64xf32>, tensor<i64>) -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_IntTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Graph_CrossEntropyOp : Graph_Op<"cross_entropy", [Pure, InferTypeOpAdaptor]> {
  let summary = "Softmax cross-entropy of class scores against integer labels";
  let description = [{
    `logits [N, C, d…]` (classes in dim 1, as ONNX), `labels [N, d…]`,
    optional per-class `weight [C]`. `reduction` is `mean` (the default:
    weighted mean over the labels that are not `ignore_index`), `sum` or
    `none`.
    ```mlir
    %l = graph.cross_entropy %logits, %labels {ignore_index = -100 : i64, reduction = #graph<reduction sum>} : (tensor<512x256xf32>, tensor<512xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IntTensor:$labels,
                       Optional<Graph_FloatTensor>:$weight,
                       DefaultValuedAttr<Graph_ReductionAttr,
                           "::strata::graph::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Graph_FloatTensor:$loss);
  let assemblyFormat = [{
    $logits `,` $labels (`,` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Same elements, new static shape (row-major)";
  let description = [{
    ```mlir
    %y = graph.reshape %x : tensor<8x64x64xf32> -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Graph_BroadcastToOp : Graph_Op<"broadcast_to", [Pure, SameOperandsAndResultElementType]> {
  let summary = "Numpy-style broadcast to the result shape (ONNX Expand)";
  let description = [{
    ```mlir
    %y = graph.broadcast_to %x : tensor<1x64xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_TransposeOp : Graph_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "Permute dimensions: result dim i is input dim perm[i]";
  let description = [{
    ```mlir
    %y = graph.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<8x64x4x16xf32>) -> tensor<8x4x64x16xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Graph_SliceOp : Graph_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "Static strided slice";
  let description = [{
    Per dimension: `sizes[i]` elements starting at `offsets[i]`, `strides[i]`
    apart (a negative stride walks backwards).
    ```mlir
    %y = graph.slice %x {offsets = array<i64: 0, 64>, sizes = array<i64: 8, 64>, strides = array<i64: 1, 1>} : (tensor<8x192xf32>) -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$strides);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Graph_ConcatOp : Graph_Op<"concat", [Pure, SameOperandsElementType,
                                          InferTypeOpAdaptor]> {
  let summary = "Concatenate along one axis";
  let description = [{
    ```mlir
    %y = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Graph_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Graph_SplitOp : Graph_Op<"split", [Pure]> {
  let summary = "Split along one axis into the result shapes";
  let description = [{
    ```mlir
    %q, %k, %v = graph.split %x {axis = 2 : i64} : (tensor<8x64x192xf32>) -> (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x64xf32>)
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Graph_Tensor>:$outputs);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_PadOp : Graph_Op<"pad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Pad every dim with a constant, by reflection or by the edge";
  let description = [{
    `pads` holds the begin pads of every dim, then the end pads (ONNX order).
    `mode` is `constant` (the default: fill with `value`), `reflect` (mirror
    without the edge) or `edge` (repeat the edge).
    ```mlir
    %y = graph.pad %x {mode = #graph<pad_mode reflect>, pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x6x6xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<Graph_PadModeAttr,
                           "::strata::graph::PadMode::Constant">:$mode,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Graph_TriluOp : Graph_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "Keep the upper or lower triangle of the last two dims";
  let description = [{
    Elements of the upper (`upper`) or lower triangle relative to diagonal
    `k` are kept, the others become zero.
    ```mlir
    %y = graph.trilu %x {k = 0 : i64, upper = false} : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Graph_ReduceOp<string mnemonic> : Graph_Op<mnemonic,
    [Pure, SameOperandsAndResultElementType, InferTypeOpAdaptor]> {
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs Graph_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}
def Graph_ReduceSumOp : Graph_ReduceOp<"reduce_sum"> {
  let summary = "Sum over axes";
  let description = [{ `%y = graph.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<8x64xf32>) -> tensor<8xf32>` }];
}
def Graph_ReduceMeanOp : Graph_ReduceOp<"reduce_mean"> {
  let summary = "Mean over axes";
  let description = [{ `%y = graph.reduce_mean %x {axes = array<i64: 2, 3>, keepdims = true} : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>` }];
}
def Graph_ReduceMaxOp : Graph_ReduceOp<"reduce_max"> {
  let summary = "Maximum over axes";
  let description = [{ `%y = graph.reduce_max %x {axes = array<i64: 1>, keepdims = true} : (tensor<8x64xf32>) -> tensor<8x1xf32>` }];
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (channels in dim 1, as ONNX)
//===----------------------------------------------------------------------===//

def Graph_ConvOp : Graph_Op<"conv", [Pure, InferTypeOpAdaptor]> {
  let summary = "N-d grouped convolution (cross-correlation)";
  let description = [{
    `input [N, C, x…]`, `weight [M, C/groups, k…]`, optional `bias [M]`.
    `pads` holds the begin pads of each spatial dim, then the end pads.
    ```mlir
    %y = graph.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                       Optional<Graph_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

class Graph_PoolOp<string mnemonic> : Graph_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}
def Graph_MaxPoolOp : Graph_PoolOp<"max_pool"> {
  let summary = "N-d max pooling; padding never wins";
  let description = [{
    ```mlir
    %y = graph.max_pool %x {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       BoolAttr:$ceil_mode);
}
def Graph_AvgPoolOp : Graph_PoolOp<"avg_pool"> {
  let summary = "N-d average pooling";
  let description = [{
    `count_include_pad` divides by the window clipped to the padded input
    (positions that ceil mode adds beyond the padding do not count);
    otherwise by the number of input elements in the window.
    ```mlir
    %y = graph.avg_pool %x {ceil_mode = false, count_include_pad = false, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, BoolAttr:$ceil_mode,
                       BoolAttr:$count_include_pad);
}

include "strata/Dialect/Graph/IR/GraphTrainingOps.td"

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHOPS_TD
