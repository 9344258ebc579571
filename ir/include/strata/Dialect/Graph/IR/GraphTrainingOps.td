//===- GraphTrainingOps.td - Gradient and optimizer ops ----*- tablegen -*-===//
//
// Ops that only the training passes create: the gradient ops that the
// autodiff pass builds through each op's GradientOpInterface, where the
// gradient is not a short composition of forward ops, and the optimizer
// updates. Every one has a runtime kernel of the same name. Each op's
// attributes are those of the forward op it differentiates; its result types
// are given by the builder (they are the forward operands' types).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_GRAPH_IR_GRAPHTRAININGOPS_TD
#define STRATA_DIALECT_GRAPH_IR_GRAPHTRAININGOPS_TD

class Graph_GradOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat([Pure], traits)> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_UnaryGradOp : Graph_GradOp<"unary_grad", [SameOperandsAndResultType]> {
  let summary = "Gradient of an elementwise unary op";
  let description = [{
    `dx = f'(x) * dy` for the forward op named by `kind` (tanh, gelu,
    clip, ...), given its input `x` and output `y`; the forward op's
    attributes (`approximate`, `alpha`, `beta`, `min`, `max`) ride along.
    ```mlir
    %dx = graph.unary_grad %dy, %x, %y {kind = #graph<unary tanh>} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$input,
                       Graph_FloatTensor:$output, Graph_UnaryKindAttr:$kind,
                       OptionalAttr<Graph_GeluApproximationAttr>:$approximate,
                       OptionalAttr<F64Attr>:$alpha, OptionalAttr<F64Attr>:$beta,
                       OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max);
  let results = (outs Graph_FloatTensor:$input_grad);
}

def Graph_LayerNormGradOp : Graph_GradOp<"layer_norm_grad"> {
  let summary = "Gradients of layer_norm: input, scale, bias";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$input,
                       Graph_FloatTensor:$scale, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$input_grad, Graph_FloatTensor:$scale_grad,
                      Graph_FloatTensor:$bias_grad);
}

def Graph_BatchNormGradOp : Graph_GradOp<"batch_norm_grad"> {
  let summary = "Gradients of batch_norm: input, scale, bias";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$input,
                       Graph_FloatTensor:$scale, Graph_FloatTensor:$running_mean,
                       Graph_FloatTensor:$running_var, F64Attr:$epsilon,
                       BoolAttr:$training);
  let results = (outs Graph_FloatTensor:$input_grad, Graph_FloatTensor:$scale_grad,
                      Graph_FloatTensor:$bias_grad);
}

def Graph_AttentionGradOp : Graph_GradOp<"attention_grad",
                                         [AttrSizedOperandSegments]> {
  let summary = "Gradients of attention: query, key, value";
  let description = [{
    Recomputes the attention probabilities; with dropout it redraws the
    forward's mask, which the shared `rng_stream` attribute identifies.
    `heads_inner` as the forward's: the gradient and the three results in
    the `[..., S, H, D]` layout of the operands. `probabilities`: the
    forward's second result, read instead of made again; given exactly
    when `keep_probabilities` is set (the kernels read it last).
  }];
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$query,
                       Graph_FloatTensor:$key, Graph_FloatTensor:$value,
                       Optional<Graph_FloatTensor>:$mask,
                       Optional<Graph_FloatTensor>:$probabilities,
                       F64Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_ratio,
                       OptionalAttr<I64Attr>:$rng_stream,
                       DefaultValuedAttr<BoolAttr, "false">:$heads_inner,
                       DefaultValuedAttr<BoolAttr, "false">:$keep_probabilities);
  let results = (outs Graph_FloatTensor:$query_grad, Graph_FloatTensor:$key_grad,
                      Graph_FloatTensor:$value_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value (`mask` $mask^)?
    (`probabilities` $probabilities^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Graph_EmbeddingGradOp : Graph_GradOp<"embedding_grad"> {
  let summary = "Gradient of embedding: rows scatter-added into the table";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_IntTensor:$indices);
  let results = (outs Graph_FloatTensor:$table_grad);
}

def Graph_GatherGradOp : Graph_GradOp<"gather_grad"> {
  let summary = "Gradient of gather: scatter-add along an axis";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_IntTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$input_grad);
}

def Graph_CrossEntropyGradOp : Graph_GradOp<"cross_entropy_grad"> {
  let summary = "Gradient of cross_entropy with respect to the logits";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$logits,
                       Graph_IntTensor:$labels, Optional<Graph_FloatTensor>:$weight,
                       DefaultValuedAttr<Graph_ReductionAttr,
                           "::strata::graph::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Graph_FloatTensor:$logits_grad);
}

def Graph_LinearGradWeightOp : Graph_GradOp<"linear_grad_weight"> {
  let summary = "Gradient of linear with respect to its weight";
  let description = [{
    `dy [..., N]`, `x [..., K]` -> `[N, K]` with `transpose_weight`, else
    `[K, N]`: one GEMM over the flattened leading dimensions.
  }];
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$input,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_weight);
  let results = (outs Graph_FloatTensor:$weight_grad);
}

def Graph_ConvGradInputOp : Graph_GradOp<"conv_grad_input"> {
  let summary = "Gradient of conv with respect to its input";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$weight,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Graph_FloatTensor:$input_grad);
}

def Graph_ConvGradWeightOp : Graph_GradOp<"conv_grad_weight"> {
  let summary = "Gradient of conv with respect to its weight";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$input,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Graph_FloatTensor:$weight_grad);
}

def Graph_MaxPoolGradOp : Graph_GradOp<"max_pool_grad"> {
  let summary = "Gradient of max_pool: to the first maximum of each window";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       BoolAttr:$ceil_mode);
  let results = (outs Graph_FloatTensor:$input_grad);
}

def Graph_AvgPoolGradOp : Graph_GradOp<"avg_pool_grad"> {
  let summary = "Gradient of avg_pool";
  let arguments = (ins Graph_FloatTensor:$grad,
                       DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, BoolAttr:$ceil_mode,
                       BoolAttr:$count_include_pad);
  let results = (outs Graph_FloatTensor:$input_grad);
}

def Graph_SliceGradOp : Graph_GradOp<"slice_grad"> {
  let summary = "Gradient of slice: zeros with the slice written back";
  let arguments = (ins Graph_FloatTensor:$grad, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$strides);
  let results = (outs Graph_FloatTensor:$input_grad);
}

def Graph_PadGradOp : Graph_GradOp<"pad_grad"> {
  let summary = "Gradient of pad";
  let arguments = (ins Graph_FloatTensor:$grad, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<Graph_PadModeAttr,
                           "::strata::graph::PadMode::Constant">:$mode,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Graph_FloatTensor:$input_grad);
}

def Graph_FusedElementwiseOp
    : Graph_Op<"fused_elementwise", [Pure, IsolatedFromAbove]> {
  let summary = "A chain of elementwise ops, run as one kernel";
  let description = [{
    Made by `strata-fuse-elementwise`. The body is the chain itself: the
    elementwise ops it replaces, each on one element (rank-0 tensors of
    the element types the ops had), reading the inputs' elements as block
    arguments, yielding one element per result. Every result has one
    shape, to which every input broadcasts; the intermediate values are
    never stored. Allowed in the body: the arithmetic ops, the activations
    without parameters, float casts, `unary_grad` without parameters and
    `where` (graph::fusedCodeOf), at most 24 of them over at most 8 inputs
    and 4 results of rank 6 or less (the kernels' limits).
    ```mlir
    %y = graph.fused_elementwise %x, %b : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xbf16> {
    ^bb0(%a: tensor<f32>, %c: tensor<f32>):
      %0 = graph.add %a, %c : tensor<f32>, tensor<f32> -> tensor<f32>
      %1 = graph.gelu %0 {approximate = #graph<approximation tanh>} : tensor<f32>
      %2 = graph.cast %1 : tensor<f32> to tensor<bf16>
      graph.yield %2 : tensor<bf16>
    }
    ```
  }];
  let arguments = (ins Variadic<Graph_Tensor>:$inputs);
  let results = (outs Variadic<Graph_Tensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type($inputs, $outputs) $body";
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                   "::mlir::ValueRange":$inputs)>
  ];
}

def Graph_YieldOp : Graph_Op<"yield", [Pure, Terminator,
                                       HasParent<"FusedElementwiseOp">]> {
  let summary = "The elements a fused_elementwise body returns";
  let arguments = (ins Variadic<Graph_Tensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

def Graph_SumSquaresOp : Graph_GradOp<"sum_squares"> {
  let summary = "Sum of squares of every element of each operand, as scalars";
  let description = [{
    Result i is the sum of the squares of operand i's elements (accumulated
    in f64, rounded once to the result type). The optimizer step builds one
    per gradient; `strata-group-updates` merges them, so one multi-tensor
    kernel computes many norms.
    ```mlir
    %a, %b = graph.sum_squares %g0, %g1 : (tensor<64x64xf32>, tensor<64xf32>) -> (tensor<f32>, tensor<f32>)
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs);
  let results = (outs Variadic<0DTensorOf<[AnyFloat]>>:$outputs);
  let hasVerifier = 1;
}

def Graph_RoundToOp : Graph_Op<"round_to", [Pure, SameOperandsAndResultType]> {
  let summary = "Rounds to a narrower float type, keeping the storage type";
  let description = [{
    Each element becomes the nearest value of `dtype` (bf16 or fp16, round
    to nearest even; fp16 overflows to inf), still stored in the operand's
    type: the CPU emulation of computing in that type. Mixed precision
    (`strata-mixed-precision`) puts it on the operands and results of the
    ops autocast runs in low precision.
    ```mlir
    %h = graph.round_to bf16 %x : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Graph_NarrowFloatAttr:$dtype, Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$output);
  let assemblyFormat = "`` $dtype $input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Optimizer updates. The runtime may run them in place (results in their
// operands' storage): each is elementwise.
//===----------------------------------------------------------------------===//

def Graph_AdamWUpdateOp : Graph_GradOp<"adamw_update"> {
  let summary = "One AdamW step of one or more parameters (torch.optim.AdamW)";
  let description = [{
    `tensors` holds four per parameter: the parameter, its gradient, exp_avg
    and exp_avg_sq (one type); the results three per parameter: the new
    parameter, exp_avg and exp_avg_sq. `lr` is an f64 scalar, `step` the
    1-based i64 step, `grad_scale` an f32 scalar the gradient is multiplied
    by first (averaging over micro-steps, clipping, loss-scale removal).
    `strata-optimizer` builds one op per parameter; `strata-group-updates`
    merges them into multi-tensor updates (one kernel over many tensors,
    torch's `foreach`/`fused` implementations). Each element is computed as
    torch's single-tensor loop computes it.
    ```mlir
    %p, %m, %v = graph.adamw_update %p0, %g0, %m0, %v0, %lr, %step, %scale {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$tensors,
                       0DTensorOf<[F64]>:$lr, 0DTensorOf<[I64]>:$step,
                       0DTensorOf<[F32]>:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let results = (outs Variadic<Graph_FloatTensor>:$updated);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Operands per parameter (param, grad, exp_avg, exp_avg_sq) and
    /// results per parameter (param, exp_avg, exp_avg_sq).
    static constexpr unsigned kTensorsPerParameter = 4;
    static constexpr unsigned kResultsPerParameter = 3;
    unsigned getNumParameters() {
      return getTensors().size() / kTensorsPerParameter;
    }
  }];
}

def Graph_SGDUpdateOp : Graph_GradOp<"sgd_update"> {
  let summary = "One SGD step of one or more parameters (torch.optim.SGD)";
  let description = [{
    `tensors` holds three per parameter: the parameter, its gradient and its
    momentum buffer; the results two per parameter: the new parameter and
    momentum buffer. The scalars are AdamW's.
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$tensors,
                       0DTensorOf<[F64]>:$lr, 0DTensorOf<[I64]>:$step,
                       0DTensorOf<[F32]>:$grad_scale,
                       F64Attr:$momentum, F64Attr:$dampening,
                       F64Attr:$weight_decay, BoolAttr:$nesterov);
  let results = (outs Variadic<Graph_FloatTensor>:$updated);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    static constexpr unsigned kTensorsPerParameter = 3;
    static constexpr unsigned kResultsPerParameter = 2;
    unsigned getNumParameters() {
      return getTensors().size() / kTensorsPerParameter;
    }
  }];
}

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHTRAININGOPS_TD
