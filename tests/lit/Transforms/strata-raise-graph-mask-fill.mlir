// RUN: strata-opt %s --strata-raise-graph -split-input-file | FileCheck %s

// A finite fill at or below -1e9 (torch.finfo(float32).min, as HF-style code
// writes it) acts as -inf while every row keeps a score.

// CHECK-LABEL: func.func @finite_fill_causal
// CHECK: graph.attention {{.*}}causal = true
// CHECK-NOT: graph.softmax
func.func @finite_fill_causal(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = graph.matmul %q, %k : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %keep = graph.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %min = graph.constant dense<-3.40282347E+38> : tensor<f32>
  %m = graph.where %keep, %s, %min : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<1x2x3x3xf32>
  %o = graph.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// A fully masked row would softmax to uniform with the finite fill but not
// with -inf: left alone.

// CHECK-LABEL: func.func @finite_fill_fully_masked_row
// CHECK-NOT: graph.attention
// CHECK: graph.softmax
func.func @finite_fill_fully_masked_row(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = graph.matmul %q, %k : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %keep = graph.constant dense<[[[[false, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %min = graph.constant dense<-3.40282347E+38> : tensor<f32>
  %m = graph.where %keep, %s, %min : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<1x2x3x3xf32>
  %o = graph.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// A finite fill above the threshold is not -inf.

// CHECK-LABEL: func.func @small_fill
// CHECK-NOT: graph.attention
// CHECK: graph.softmax
func.func @small_fill(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = graph.matmul %q, %k : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %keep = graph.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %min = graph.constant dense<-1.0e+04> : tensor<f32>
  %m = graph.where %keep, %s, %min : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %p = graph.softmax %m {axis = 3 : i64} : tensor<1x2x3x3xf32>
  %o = graph.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}
