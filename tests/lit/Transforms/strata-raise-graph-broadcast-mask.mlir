// RUN: strata-opt %s --strata-raise-graph -split-input-file | FileCheck %s

// Regression (was a miscompile): SoftmaxToAttention classifies a constant mask as causal
// from the mask's own shape (classifyMask in RaiseGraph.cpp), not from the
// [..., S, T] scores it broadcasts to. A mask whose S or T dim is 1 then
// matches "masked iff j > i" trivially, and the pass emits
// `causal = true`, changing which keys each query sees. Expected: such masks
// stay (as an additive mask operand), never causal.

// A [1, T] keep mask hides keys 1..7 from every query (a key-padding mask);
// it is not causal.
// CHECK-LABEL: func.func @key_padding_mask
// CHECK: graph.attention %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} {
// CHECK-NOT: causal = true
// CHECK: return
func.func @key_padding_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %keep = graph.constant dense<[[true, false, false, false, false, false, false, false]]> : tensor<1x8xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.where %keep, %s, %ninf : tensor<1x8xi1>, tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// An [S, 1] mask that keeps everything hides nothing; it is not causal.
// CHECK-LABEL: func.func @all_keep_column
// CHECK: graph.attention
// CHECK-NOT: causal = true
// CHECK: return
func.func @all_keep_column(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %keep = graph.constant dense<[[true], [true], [true], [true], [true], [true], [true], [true]]> : tensor<8x1xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.where %keep, %s, %ninf : tensor<8x1xi1>, tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// The additive form of the key-padding mask; not causal either.
// CHECK-LABEL: func.func @additive_row
// CHECK: graph.attention %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} {
// CHECK-NOT: causal = true
// CHECK: return
func.func @additive_row(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %mask = graph.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000]]> : tensor<1x8xf32>
  %m = graph.add %s, %mask : tensor<2x4x8x8xf32>, tensor<1x8xf32> -> tensor<2x4x8x8xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}
