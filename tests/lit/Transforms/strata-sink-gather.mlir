// RUN: strata-opt %s --strata-sink-gather --cse --split-input-file | FileCheck %s

// A classifier reading position 0 after a pre-LN block's MLP: the layer
// norms, the products, GELU and the residual adds compute that position only;
// the block's input, read whole elsewhere, is gathered where the add reads it.
// CHECK-LABEL: func.func @mlp_block
// CHECK-DAG: %[[X0:.*]] = graph.gather %arg0, %[[I:.*]] {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
// CHECK-DAG: %[[N:.*]] = graph.layer_norm %[[X0]], %arg1 {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: %[[H:.*]] = graph.linear %[[N]], %arg2, %arg3 {transpose_weight = true} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK: %[[G:.*]] = graph.gelu %[[H]] : tensor<2x8xf32>
// CHECK: %[[Y:.*]] = graph.linear %[[G]], %arg4 {transpose_weight = true} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[Z:.*]] = graph.add %[[X0]], %[[Y]] : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK: return %[[Z]], %arg0
func.func @mlp_block(%x: tensor<2x5x4xf32>, %g: tensor<4xf32>, %w1: tensor<8x4xf32>, %b1: tensor<8xf32>, %w2: tensor<4x8xf32>) -> (tensor<2x4xf32>, tensor<2x5x4xf32>) {
  %i = graph.constant dense<0> : tensor<i64>
  %n = graph.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x5x4xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
  %h = graph.linear %n, %w1, %b1 {transpose_weight = true} : (tensor<2x5x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %a = graph.gelu %h : tensor<2x5x8xf32>
  %y = graph.linear %a, %w2 {transpose_weight = true} : (tensor<2x5x8xf32>, tensor<4x8xf32>) -> tensor<2x5x4xf32>
  %z = graph.add %x, %y : tensor<2x5x4xf32>, tensor<2x5x4xf32> -> tensor<2x5x4xf32>
  %c = graph.gather %z, %i {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  return %c, %x : tensor<2x4xf32>, tensor<2x5x4xf32>
}

// -----

// Attention's heads out, then the projection: the transpose and reshape
// let the gather through, and attention computes one query row, against
// every key.
// CHECK-LABEL: func.func @attention
// CHECK: %[[Q:.*]] = graph.gather %arg0, %{{.*}} {axis = 2 : i64} : (tensor<2x3x5x4xf32>, tensor<1xi64>) -> tensor<2x3x1x4xf32>
// CHECK: %[[A:.*]] = graph.attention %[[Q]], %arg1, %arg2 {scale = 5.000000e-01 : f64} : (tensor<2x3x1x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x1x4xf32>
// CHECK: %[[R:.*]] = graph.reshape %[[A]] : tensor<2x3x1x4xf32> -> tensor<2x12xf32>
// CHECK: %[[P:.*]] = graph.linear %[[R]], %arg3 : (tensor<2x12xf32>, tensor<12x12xf32>) -> tensor<2x12xf32>
// CHECK: return %[[P]]
func.func @attention(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x4xf32>, %w: tensor<12x12xf32>) -> tensor<2x12xf32> {
  %i = graph.constant dense<0> : tensor<i64>
  %a = graph.attention %q, %k, %v {scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %t = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  %r = graph.reshape %t : tensor<2x5x3x4xf32> -> tensor<2x5x12xf32>
  %p = graph.linear %r, %w : (tensor<2x5x12xf32>, tensor<12x12xf32>) -> tensor<2x5x12xf32>
  %c = graph.gather %p, %i {axis = 1 : i64} : (tensor<2x5x12xf32>, tensor<i64>) -> tensor<2x12xf32>
  return %c : tensor<2x12xf32>
}

// -----

// Where a row's result depends on the other rows or on its place, the
// gather stays: causal attention, softmax along the gathered axis, a
// product along it (the last axis of linear), a layer norm over it, a
// broadcast along it, and a value that another op reads whole.
// CHECK-LABEL: func.func @stays
// CHECK: graph.attention %arg0, %arg0, %arg0 {causal = true
// CHECK-NEXT: graph.gather
// CHECK: graph.softmax
// CHECK-NEXT: graph.gather
// CHECK: graph.linear
// CHECK-NEXT: graph.gather
// CHECK: graph.layer_norm
// CHECK-NEXT: graph.gather
// CHECK: graph.add
// CHECK-NEXT: graph.gather
// CHECK: %[[E:.*]] = graph.exp %arg0
// CHECK-NEXT: graph.gather %[[E]]
func.func @stays(%x: tensor<2x5x4xf32>, %w: tensor<4x4xf32>, %g: tensor<5x4xf32>, %b: tensor<2x1x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x5xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x5x4xf32>) {
  %i = graph.constant dense<0> : tensor<i64>
  %a = graph.attention %x, %x, %x {causal = true, scale = 5.000000e-01 : f64} : (tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %a0 = graph.gather %a, %i {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %s = graph.softmax %x {axis = 1 : i64} : tensor<2x5x4xf32>
  %s0 = graph.gather %s, %i {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %l = graph.linear %x, %w : (tensor<2x5x4xf32>, tensor<4x4xf32>) -> tensor<2x5x4xf32>
  %l0 = graph.gather %l, %i {axis = 2 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x5xf32>
  %n = graph.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x5x4xf32>, tensor<5x4xf32>) -> tensor<2x5x4xf32>
  %n0 = graph.gather %n, %i {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %d = graph.add %x, %b : tensor<2x5x4xf32>, tensor<2x1x4xf32> -> tensor<2x5x4xf32>
  %d0 = graph.gather %d, %i {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %e = graph.exp %x : tensor<2x5x4xf32>
  %e0 = graph.gather %e, %i {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  return %a0, %s0, %l0, %n0, %d0, %e0, %e : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x5xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x5x4xf32>
}
