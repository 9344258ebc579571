// RUN: strata-opt %s --strata-graph-pipeline -split-input-file | FileCheck %s

// A hand-written layer norm over the last dim, scaled and shifted.
// CHECK-LABEL: func.func @div_form
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>, %[[W:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK: %[[Y:.*]] = graph.layer_norm %[[X]], %[[W]], %[[B]] {axis = 1 : i64, epsilon = 9.99999974{{.*}}E-6 : f64}
// CHECK-NEXT: return %[[Y]]
func.func @div_form(%x: tensor<4x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %mean = graph.reduce_mean %x {axes = array<i64: 1>} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %d = graph.sub %x, %mean : tensor<4x16xf32>, tensor<4x1xf32> -> tensor<4x16xf32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %sq = graph.pow %d, %two : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %var = graph.reduce_mean %sq {axes = array<i64: 1>} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %ve = graph.add %var, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %s = graph.sqrt %ve : tensor<4x1xf32>
  %d2 = graph.sub %x, %mean : tensor<4x16xf32>, tensor<4x1xf32> -> tensor<4x16xf32>
  %n = graph.div %d2, %s : tensor<4x16xf32>, tensor<4x1xf32> -> tensor<4x16xf32>
  %scaled = graph.mul %n, %w : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %y = graph.add %scaled, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// rsqrt as 1 / sqrt, variance as d * d, over two trailing dims, no affine:
// the scale becomes ones.
// CHECK-LABEL: func.func @rsqrt_form
// CHECK: %[[ONES:.*]] = graph.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK: graph.layer_norm %{{.*}}, %[[ONES]] {axis = 1 : i64
// CHECK-NOT: graph.sqrt
func.func @rsqrt_form(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %mean = graph.reduce_mean %x {axes = array<i64: 1, 2>} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %d = graph.sub %x, %mean : tensor<2x4x8xf32>, tensor<2x1x1xf32> -> tensor<2x4x8xf32>
  %sq = graph.mul %d, %d : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %var = graph.reduce_mean %sq {axes = array<i64: 1, 2>} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %eps = graph.constant dense<1.0e-6> : tensor<f32>
  %ve = graph.add %var, %eps : tensor<2x1x1xf32>, tensor<f32> -> tensor<2x1x1xf32>
  %s = graph.sqrt %ve : tensor<2x1x1xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %r = graph.div %one, %s : tensor<f32>, tensor<2x1x1xf32> -> tensor<2x1x1xf32>
  %y = graph.mul %d, %r : tensor<2x4x8xf32>, tensor<2x1x1xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Normalizing over a leading dim is not a layer norm: left alone.
// CHECK-LABEL: func.func @leading_axis
// CHECK-NOT: graph.layer_norm
// CHECK: graph.sqrt
func.func @leading_axis(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %mean = graph.reduce_mean %x {axes = array<i64: 0>} : (tensor<4x16xf32>) -> tensor<1x16xf32>
  %d = graph.sub %x, %mean : tensor<4x16xf32>, tensor<1x16xf32> -> tensor<4x16xf32>
  %sq = graph.mul %d, %d : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %var = graph.reduce_mean %sq {axes = array<i64: 0>} : (tensor<4x16xf32>) -> tensor<1x16xf32>
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %ve = graph.add %var, %eps : tensor<1x16xf32>, tensor<f32> -> tensor<1x16xf32>
  %s = graph.sqrt %ve : tensor<1x16xf32>
  %n = graph.div %d, %s : tensor<4x16xf32>, tensor<1x16xf32> -> tensor<4x16xf32>
  return %n : tensor<4x16xf32>
}
