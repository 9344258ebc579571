// RUN: strata-opt %s --strata-raise-graph -split-input-file | FileCheck %s

// Pattern raising: linear layers, exact and tanh GELU, scaled-dot-product
// attention (causal / boolean / additive masks, scales, dropout), and chains
// that only resemble a pattern and must be left alone (NEGATIVE).

// matmul + rank-1 bias (on either side of the add) is one linear.
// CHECK-LABEL: func.func @matmul_bias
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8x4xf32>, %[[W:[a-z0-9]+]]: tensor<4x2xf32>, %[[B:[a-z0-9]+]]: tensor<2xf32>)
// CHECK-NEXT: %[[Y0:.*]] = graph.linear %[[X]], %[[W]], %[[B]] : (tensor<8x4xf32>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: %[[Y1:.*]] = graph.linear %[[X]], %[[W]], %[[B]] : (tensor<8x4xf32>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: return %[[Y0]], %[[Y1]]
func.func @matmul_bias(%x: tensor<8x4xf32>, %w: tensor<4x2xf32>, %b: tensor<2xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>) {
  %0 = graph.matmul %x, %w : tensor<8x4xf32>, tensor<4x2xf32> -> tensor<8x2xf32>
  %1 = graph.add %0, %b : tensor<8x2xf32>, tensor<2xf32> -> tensor<8x2xf32>
  %2 = graph.matmul %x, %w : tensor<8x4xf32>, tensor<4x2xf32> -> tensor<8x2xf32>
  %3 = graph.add %b, %2 : tensor<2xf32>, tensor<8x2xf32> -> tensor<8x2xf32>
  return %1, %3 : tensor<8x2xf32>, tensor<8x2xf32>
}

// -----

// A transposed rank-2 weight becomes transpose_weight on the untransposed one.
// CHECK-LABEL: func.func @matmul_transposed_weight
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3x8x4xf32>, %[[W:[a-z0-9]+]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.linear %[[X]], %[[W]] {transpose_weight = true} : (tensor<3x8x4xf32>, tensor<2x4xf32>) -> tensor<3x8x2xf32>
// CHECK-NEXT: return %[[Y]]
func.func @matmul_transposed_weight(%x: tensor<3x8x4xf32>, %w: tensor<2x4xf32>) -> tensor<3x8x2xf32> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %0 = graph.matmul %x, %wt : tensor<3x8x4xf32>, tensor<4x2xf32> -> tensor<3x8x2xf32>
  return %0 : tensor<3x8x2xf32>
}

// -----

// NEGATIVE: a batched (rank-3) right operand is not a linear layer.
// CHECK-LABEL: func.func @matmul_batched_weight
// CHECK-NOT: graph.linear
// CHECK: graph.matmul
// CHECK-NEXT: graph.add
func.func @matmul_batched_weight(%x: tensor<3x8x4xf32>, %w: tensor<3x4x2xf32>, %b: tensor<8x2xf32>) -> tensor<3x8x2xf32> {
  %0 = graph.matmul %x, %w : tensor<3x8x4xf32>, tensor<3x4x2xf32> -> tensor<3x8x2xf32>
  %1 = graph.add %0, %b : tensor<3x8x2xf32>, tensor<8x2xf32> -> tensor<3x8x2xf32>
  return %1 : tensor<3x8x2xf32>
}

// -----

// Exact GELU, (0.5 * x) * (1 + erf(x / sqrt(2))).
// CHECK-LABEL: func.func @gelu_half_x_first
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.gelu %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_half_x_first(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %sqrt2 = graph.constant dense<1.41421354> : tensor<f32>
  %d = graph.div %x, %sqrt2 : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %e = graph.erf %d : tensor<8x16xf32>
  %i = graph.add %e, %one : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %hx = graph.mul %half, %x : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %y = graph.mul %hx, %i : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Exact GELU, (x * (1 + erf(x / sqrt(2)))) * 0.5.
// CHECK-LABEL: func.func @gelu_x_inner_then_half
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.gelu %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_x_inner_then_half(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %sqrt2 = graph.constant dense<1.41421354> : tensor<f32>
  %d = graph.div %x, %sqrt2 : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %e = graph.erf %d : tensor<8x16xf32>
  %i = graph.add %e, %one : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %xi = graph.mul %x, %i : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %y = graph.mul %xi, %half : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Exact GELU, x * ((1 + erf(x / sqrt(2))) * 0.5).
// CHECK-LABEL: func.func @gelu_half_inner_then_x
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.gelu %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_half_inner_then_x(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %sqrt2 = graph.constant dense<1.41421354> : tensor<f32>
  %d = graph.div %x, %sqrt2 : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %e = graph.erf %d : tensor<8x16xf32>
  %i = graph.add %one, %e : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %hi = graph.mul %i, %half : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %y = graph.mul %x, %hi : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Exact GELU with x * (1 / sqrt(2)) instead of x / sqrt(2).
// CHECK-LABEL: func.func @gelu_mul_inv_sqrt2
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.gelu %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_mul_inv_sqrt2(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %inv = graph.constant dense<0.707106769> : tensor<f32>
  %d = graph.mul %x, %inv : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %e = graph.erf %d : tensor<8x16xf32>
  %i = graph.add %e, %one : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %hx = graph.mul %x, %half : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %y = graph.mul %hx, %i : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// tanh GELU with pow(x, 3).
// CHECK-LABEL: func.func @gelu_tanh_pow
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.gelu %[[X]] {approximate = #graph<approximation tanh>} : tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh_pow(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %three = graph.constant dense<3.000000e+00> : tensor<f32>
  %c = graph.constant dense<4.471500e-02> : tensor<f32>
  %s = graph.constant dense<0.797884583> : tensor<f32>
  %x3 = graph.pow %x, %three : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %cx3 = graph.mul %c, %x3 : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %inner = graph.add %x, %cx3 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %arg = graph.mul %s, %inner : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %t = graph.tanh %arg : tensor<8x16xf32>
  %i = graph.add %one, %t : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %hx = graph.mul %half, %x : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %y = graph.mul %hx, %i : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// tanh GELU with (x * x) * x.
// CHECK-LABEL: func.func @gelu_tanh_mul
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.gelu %[[X]] {approximate = #graph<approximation tanh>} : tensor<8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh_mul(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %three = graph.constant dense<3.000000e+00> : tensor<f32>
  %c = graph.constant dense<4.471500e-02> : tensor<f32>
  %s = graph.constant dense<0.797884583> : tensor<f32>
  %x2 = graph.mul %x, %x : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %x3 = graph.mul %x2, %x : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %cx3 = graph.mul %c, %x3 : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %inner = graph.add %x, %cx3 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %arg = graph.mul %s, %inner : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %t = graph.tanh %arg : tensor<8x16xf32>
  %i = graph.add %one, %t : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %hx = graph.mul %half, %x : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %y = graph.mul %hx, %i : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// NEGATIVE: 0.4 instead of 0.5 is not GELU.
// CHECK-LABEL: func.func @gelu_wrong_half
// CHECK-NOT: graph.gelu
// CHECK: graph.erf
// CHECK-NOT: graph.gelu
// CHECK: return
func.func @gelu_wrong_half(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %half = graph.constant dense<4.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %sqrt2 = graph.constant dense<1.41421354> : tensor<f32>
  %d = graph.div %x, %sqrt2 : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %e = graph.erf %d : tensor<8x16xf32>
  %i = graph.add %e, %one : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %hx = graph.mul %half, %x : tensor<f32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %y = graph.mul %hx, %i : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Causal attention from where(tril, scores, -inf), scale by mul.
// CHECK-LABEL: func.func @attention_causal_where
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_causal_where(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %scale = graph.constant dense<2.500000e-01> : tensor<f32>
  %ss = graph.mul %s, %scale : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %keep = graph.constant dense<[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]> : tensor<8x8xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.where %keep, %ss, %ninf : tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Causal attention from masked_fill(triu(1), -inf) with a [1, 1, S, T] mask,
// scale by div.
// CHECK-LABEL: func.func @attention_causal_masked_fill
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_causal_masked_fill(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %scale = graph.constant dense<4.000000e+00> : tensor<f32>
  %ss = graph.div %s, %scale : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %hide = graph.constant dense<[[[[false, true, true, true, true, true, true, true], [false, false, true, true, true, true, true, true], [false, false, false, true, true, true, true, true], [false, false, false, false, true, true, true, true], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true], [false, false, false, false, false, false, false, true], [false, false, false, false, false, false, false, false]]]]> : tensor<1x1x8x8xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.where %hide, %ninf, %ss : tensor<1x1x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Causal attention from an additive constant 0 / -inf mask.
// CHECK-LABEL: func.func @attention_causal_additive
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_causal_additive(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %scale = graph.constant dense<2.500000e-01> : tensor<f32>
  %ss = graph.mul %scale, %s : tensor<f32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %mask = graph.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<8x8xf32>
  %m = graph.add %ss, %mask : tensor<2x4x8x8xf32>, tensor<8x8xf32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// A constant non-causal boolean mask becomes an additive 0 / -inf mask operand
// of the mask's shape.
// CHECK-LABEL: func.func @attention_boolean_mask
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[M:.*]] = graph.constant dense<{{\[\[}}0.000000e+00, 0.000000e+00, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0xFF800000,
// CHECK-SAME: : tensor<8x8xf32>
// CHECK-NEXT: %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]], %[[M]] {scale = 1.000000e+00 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<8x8xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_boolean_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %keep = graph.constant dense<[[true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [false, true, true, true, false, false, false, false], [false, false, true, true, true, false, false, false], [false, false, false, true, true, true, false, false], [false, false, false, false, true, true, true, false], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true]]> : tensor<8x8xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.where %keep, %s, %ninf : tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// A runtime additive mask (on either side of the add) is the mask operand.
// CHECK-LABEL: func.func @attention_runtime_mask
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[M:[a-z0-9]+]]: tensor<2x1x1x8xf32>)
// CHECK-NEXT: %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]], %[[M]] {scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_runtime_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %mask: tensor<2x1x1x8xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %scale = graph.constant dense<2.500000e-01> : tensor<f32>
  %ss = graph.mul %s, %scale : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %m = graph.add %mask, %ss : tensor<2x1x1x8xf32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// A scale on q multiplies into the scale of the scores.
// CHECK-LABEL: func.func @attention_scale_on_q
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_scale_on_q(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %scale = graph.constant dense<5.000000e-01> : tensor<f32>
  %qs = graph.mul %q, %scale : tensor<2x4x8x16xf32>, tensor<f32> -> tensor<2x4x8x16xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %qs, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %s2 = graph.constant dense<5.000000e-01> : tensor<f32>
  %m = graph.mul %s, %s2 : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Dropout of the probabilities (mask unused) is carried as dropout_ratio and
// the dropout op is gone.
// CHECK-LABEL: func.func @attention_dropout
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] {dropout_ratio = 1.000000e-01 : f64, scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_dropout(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %scale = graph.constant dense<2.500000e-01> : tensor<f32>
  %m = graph.mul %s, %scale : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %d, %dm = graph.dropout %p {ratio = 1.000000e-01 : f64} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>, tensor<2x4x8x8xi1>
  %o = graph.matmul %d, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// NEGATIVE: where with a finite fill value is not a mask attention can take.
// CHECK-LABEL: func.func @attention_finite_fill
// CHECK-NOT: graph.attention
// CHECK: graph.where
// CHECK: graph.softmax
// CHECK-NOT: graph.attention
// CHECK: return
func.func @attention_finite_fill(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %keep = graph.constant dense<[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]> : tensor<8x8xi1>
  %fill = graph.constant dense<-1.000000e+04> : tensor<f32>
  %m = graph.where %keep, %s, %fill : tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// NEGATIVE: softmax over the query axis is not attention.
// CHECK-LABEL: func.func @attention_softmax_not_last_axis
// CHECK-NOT: graph.attention
// CHECK: graph.softmax %{{.*}} {axis = 2 : i64}
// CHECK-NOT: graph.attention
// CHECK: return
func.func @attention_softmax_not_last_axis(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %s {axis = 2 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// NEGATIVE: a dropout whose mask is used elsewhere cannot be absorbed.
// CHECK-LABEL: func.func @attention_dropout_mask_used
// CHECK-NOT: graph.attention
// CHECK: graph.softmax
// CHECK: graph.dropout
// CHECK-NOT: graph.attention
// CHECK: return
func.func @attention_dropout_mask_used(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xi1>) {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %d, %dm = graph.dropout %p {ratio = 1.000000e-01 : f64} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>, tensor<2x4x8x8xi1>
  %o = graph.matmul %d, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o, %dm : tensor<2x4x8x16xf32>, tensor<2x4x8x8xi1>
}

// -----

// Attention between transposes that swap the sequence and head axes reads
// the heads where the projection wrote them ([B, S, H, D]): heads_inner,
// and no transpose left on either side.
// CHECK-LABEL: func.func @attention_heads_in_place
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x4x16xf32>, %[[K:.*]]: tensor<2x8x4x16xf32>, %[[V:.*]]: tensor<2x8x4x16xf32>)
// CHECK-NOT: graph.transpose
// CHECK: %[[A:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] {causal = true, heads_inner = true, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NOT: graph.transpose
// CHECK: return %[[A]]
func.func @attention_heads_in_place(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %qt = graph.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %a = graph.attention %qt, %kt, %vt {causal = true, scale = 0.25 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// NEGATIVE: the result is also read in the [B, H, S, D] layout, so the
// attention stays as it is.
// CHECK-LABEL: func.func @attention_heads_result_read_as_is
// CHECK-COUNT-4: graph.transpose
// CHECK-NOT: heads_inner
func.func @attention_heads_result_read_as_is(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>) {
  %qt = graph.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %a = graph.attention %qt, %kt, %vt {scale = 0.25 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  return %y, %a : tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>
}

// -----

// NEGATIVE: the key's transpose moves the batch axis, not the heads.
// CHECK-LABEL: func.func @attention_heads_other_perm
// CHECK-NOT: heads_inner
func.func @attention_heads_other_perm(%q: tensor<2x8x4x16xf32>, %k: tensor<4x2x8x16xf32>, %v: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %qt = graph.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %kt = graph.transpose %k {perm = array<i64: 1, 0, 2, 3>} : (tensor<4x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %a = graph.attention %qt, %kt, %vt {scale = 0.25 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}
