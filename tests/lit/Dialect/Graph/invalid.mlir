// RUN: strata-opt %s -split-input-file -verify-diagnostics

// One case per verifier and type-inference error of the graph dialect. Ops
// that infer their result type report the specific problem, then "failed to
// infer returned types". Not reachable from IR (an ODS or trait check fires
// first, as the cases below show): "operands must be ranked tensors",
// "shapes ... do not broadcast" (binary ops), "condition ... do not
// broadcast" (where) and concat's "needs at least one input".

func.func @constant_vector() {
  // expected-error @+1 {{value must be a ranked tensor}}
  %0 = graph.constant dense<1.0> : vector<4xf32>
  return
}

// -----

func.func @gelu_approximate(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::strata::graph::GeluApproximation to be one of: none, tanh}}
  // expected-error @+1 {{failed to parse Graph_GeluApproximationAttr parameter 'value'}}
  %0 = graph.gelu %x {approximate = #graph<approximation fast>} : tensor<4xf32>
  return
}

// -----

func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operands don't have broadcast-compatible shapes}}
  %0 = graph.add %a, %b : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @add_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result type '1x3' not broadcast compatible with broadcasted operands's shapes '2x3'}}
  %0 = graph.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<1x3xf32>
  return
}

// -----

func.func @equal_result_not_i1(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xi1>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.equal %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @where_element_types(%c: tensor<3xi1>, %a: tensor<3xf32>, %b: tensor<3xi64>) {
  // expected-error @+2 {{lhs and rhs element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.where %c, %a, %b : tensor<3xi1>, tensor<3xf32>, tensor<3xi64> -> tensor<3xf32>
  return
}

// -----

func.func @where_no_broadcast(%c: tensor<2xi1>, %a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operands don't have broadcast-compatible shapes}}
  %0 = graph.where %c, %a, %b : tensor<2xi1>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{operands must have rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.matmul %a, %b : tensor<3xf32>, tensor<3x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs 2x3, rhs 4x5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<3x3x4xf32>) {
  // expected-error @+2 {{batch dims of 2x2x3 and 3x3x4 do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x3x4xf32> -> tensor<2x2x4xf32>
  return
}

// -----

func.func @linear_rank(%x: tensor<2x3xf32>, %w: tensor<3xf32>) {
  // expected-error @+2 {{input must have rank >= 1 and weight rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.linear %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @linear_mismatch(%x: tensor<2x3xf32>, %w: tensor<4x5xf32>) {
  // expected-error @+2 {{input 2x3 does not match weight 4x5 (transposed)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.linear %x, %w {transpose_weight = true} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x3xf32>, %w: tensor<3x5xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{bias must have shape 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.linear %x, %w, %b : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<3xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x3xf32>, %g: tensor<3xf32>) {
  // expected-error @+2 {{axis 2 must be in [0, rank) for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x3xf32>, %g: tensor<2x3xf32>) {
  // expected-error @+2 {{scale and bias must have shape 3, got 2x3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x3xf32>, %g: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.layer_norm %x, %g {axis = 1 : i64, epsilon = -1.0 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_rank(%x: tensor<8xf32>, %c: tensor<8xf32>) {
  // expected-error @+2 {{input must have rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = graph.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64, training = true} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_channels(%x: tensor<2x8x4xf32>, %c: tensor<8xf32>, %d: tensor<4xf32>) {
  // expected-error @+2 {{per-channel operands must have shape 8, got 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = graph.batch_norm %x, %c, %c, %d, %c {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64, training = true} : (tensor<2x8x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<2x8x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_momentum(%x: tensor<2x8x4xf32>, %c: tensor<8xf32>) {
  // expected-error @+2 {{momentum must be in [0, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = graph.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-05 : f64, momentum = 1.5 : f64, training = true} : (tensor<2x8x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 must be in [0, 2)}}
  %0 = graph.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis -1 must be in [0, 2)}}
  %0 = graph.log_softmax %x {axis = -1 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @dropout_ratio(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{ratio must be in [0, 1), got 1.000000e+00}}
  %0, %1 = graph.dropout %x {ratio = 1.0 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>, tensor<2x3xi1>
  return
}

// -----

func.func @attention_rank(%q: tensor<4x8xf32>, %k: tensor<2x4x8xf32>) {
  // expected-error @+2 {{query, key and value must have one rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_heads_inner_rank(%q: tensor<4x8xf32>) {
  // expected-error @+2 {{query, key and value must have one rank >= 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %q, %q {heads_inner = true, scale = 1.0 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// heads_inner: [B, S, H, D]; the key's 3 heads are not the query's 4.
func.func @attention_heads_inner_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>) {
  // expected-error @+2 {{batch dims differ: query 2x4x8x16, key 2x3x8x16, value 2x3x8x16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %k, %k {heads_inner = true, scale = 1.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x4x8xf32>, %k: tensor<3x4x8xf32>) {
  // expected-error @+2 {{batch dims differ: query 2x4x8, key 3x4x8, value 3x4x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x4x8xf32>, tensor<3x4x8xf32>, tensor<3x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @attention_head(%q: tensor<2x4x8xf32>, %k: tensor<2x4x6xf32>) {
  // expected-error @+2 {{query and key head sizes differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x4x8xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @attention_lengths(%q: tensor<2x4x8xf32>, %k: tensor<2x5x8xf32>, %v: tensor<2x6x8xf32>) {
  // expected-error @+2 {{key and value lengths differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8xf32>, tensor<2x5x8xf32>, tensor<2x6x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @attention_mask(%q: tensor<2x4x8xf32>, %m: tensor<4x5xf32>) {
  // expected-error @+2 {{mask 4x5 does not broadcast to the scores 2x4x4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %q, %q, %m {scale = 1.0 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x5xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @attention_dropout(%q: tensor<2x4x8xf32>) {
  // expected-error @+2 {{dropout_ratio must be in [0, 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.attention %q, %q, %q {scale = 1.0 : f64, dropout_ratio = -0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @embedding_rank(%t: tensor<10xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{table must have rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.embedding %t, %i : (tensor<10xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @gather_axis(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{axis 2 must be in [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.gather %x, %i {axis = 2 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @cross_entropy_rank(%l: tensor<8xf32>, %y: tensor<8xi64>) {
  // expected-error @+2 {{logits must have rank >= 2 [N, C, ...]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.cross_entropy %l, %y : (tensor<8xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<8x4xf32>, %y: tensor<4xi64>) {
  // expected-error @+2 {{labels must have shape 8, got 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.cross_entropy %l, %y : (tensor<8x4xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_weight(%l: tensor<8x4xf32>, %y: tensor<8xi64>, %w: tensor<8xf32>) {
  // expected-error @+2 {{weight must have shape 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.cross_entropy %l, %y, %w : (tensor<8x4xf32>, tensor<8xi64>, tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_reduction(%l: tensor<8x4xf32>, %y: tensor<8xi64>) {
  // expected-error @+2 {{expected ::strata::graph::Reduction to be one of: none, sum, mean}}
  // expected-error @+1 {{failed to parse Graph_ReductionAttr parameter 'value'}}
  %0 = graph.cross_entropy %l, %y {reduction = #graph<reduction max>} : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{element counts differ: 2x3 vs 7}}
  %0 = graph.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

func.func @broadcast_to(%x: tensor<3x2xf32>) {
  // expected-error @+1 {{cannot broadcast 3x2 to 3x4}}
  %0 = graph.broadcast_to %x : tensor<3x2xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @transpose_size(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{perm must have 2 entries}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.transpose %x {perm = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{perm is not a permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.transpose %x {perm = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @slice_entries(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{offsets, sizes and strides need one entry per dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.slice %x {offsets = array<i64: 0>, sizes = array<i64: 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{dim 1: stride must be non-zero and size >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.slice %x {offsets = array<i64: 0, 0>, sizes = array<i64: 2, 3>, strides = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{dim 1: slice [1 +2 x2] is out of bounds for size 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.slice %x {offsets = array<i64: 0, 1>, sizes = array<i64: 2, 2>, strides = array<i64: 1, 2>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{expected 1 or more operands, but found 0}}
  %0 = graph.concat {axis = 0 : i64} : () -> tensor<0xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 must be in [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.concat %x, %x {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_rank(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error @+2 {{inputs must have one rank}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.concat %x, %y {axis = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @concat_dims(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+2 {{inputs differ in dim 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.concat %x, %y {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @split_axis(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{axis 2 is out of range}}
  %0:2 = graph.split %x {axis = 2 : i64} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @split_none(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{needs at least one result}}
  graph.split %x {axis = 1 : i64} : (tensor<2x4xf32>) -> ()
  return
}

// -----

func.func @split_rank(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{results must have the input's rank and element type}}
  %0:2 = graph.split %x {axis = 1 : i64} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<4xf32>)
  return
}

// -----

func.func @split_dim(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{result differs from the input in dim 0}}
  %0:2 = graph.split %x {axis = 1 : i64} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<3x2xf32>)
  return
}

// -----

func.func @split_sum(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{result sizes along the axis sum to 5, expected 4}}
  %0:2 = graph.split %x {axis = 1 : i64} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @pad_entries(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{pads needs two entries per dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.pad %x {pads = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @pad_mode(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{expected ::strata::graph::PadMode to be one of: constant, reflect, edge}}
  // expected-error @+1 {{failed to parse Graph_PadModeAttr parameter 'value'}}
  %0 = graph.pad %x {mode = #graph<pad_mode wrap>, pads = array<i64: 0, 1, 0, 1>} : (tensor<2x4xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{pads must be >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.pad %x {pads = array<i64: 0, -1, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @pad_reflect(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{reflect pads must be smaller than the dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.pad %x {mode = #graph<pad_mode reflect>, pads = array<i64: 2, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @trilu_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{input must have rank >= 2}}
  %0 = graph.trilu %x {k = 0 : i64, upper = true} : tensor<4xf32>
  return
}

// -----

func.func @reduce_axis(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{axis 2 must be in [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.reduce_sum %x {axes = array<i64: 2>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @reduce_repeat(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{axis 1 repeats}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.reduce_max %x {axes = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+2 {{input [N, C, x...] and weight [M, C/g, k...] must have one rank >= 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {dilations = array<i64>, groups = 1 : i64, pads = array<i64>, strides = array<i64>} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<2x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{channels do not match: input 2x3x8x8, weight 4x2x3x3, groups 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{bias must have shape 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w, %b {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_window_attrs(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{window attributes need one entry per spatial dim (2) and pads two}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{kernel, strides and dilations must be >= 1 and pads >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 0, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_fit(%x: tensor<2x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{window does not fit spatial dim 0 of size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x1x1xf32>
  return
}

// -----

func.func @max_pool_rank(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{input must have rank >= 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.max_pool %x {ceil_mode = false, dilations = array<i64>, kernel_shape = array<i64>, pads = array<i64>, strides = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @avg_pool_rank(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{input must have rank >= 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.avg_pool %x {ceil_mode = false, count_include_pad = false, kernel_shape = array<i64>, pads = array<i64>, strides = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @pool_pads(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+2 {{kernel, strides and dilations must be >= 1 and pads >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.max_pool %x {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, -1, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = graph.cast %x : tensor<2x3xf32> to tensor<3x2xi64>
  return
}

// -----

func.func @transpose_result_type(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dropout_mask_type(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>', 'tensor<2x3xi1>' are incompatible with return type(s) of operation 'tensor<2x3xf32>', 'tensor<3x2xi1>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = graph.dropout %x {ratio = 0.5 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>, tensor<3x2xi1>
  return
}
