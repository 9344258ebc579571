// RUN: strata-opt %s | strata-opt | FileCheck %s
// RUN: strata-opt %s --mlir-print-op-generic | strata-opt | FileCheck %s

// CHECK-LABEL: func.func @ops
func.func @ops(%x: tensor<8x64xf32>, %w: tensor<64x256xf32>, %b: tensor<256xf32>,
               %ids: tensor<8x16xi64>, %table: tensor<100x64xf32>,
               %q: tensor<2x4x16x8xf32>, %labels: tensor<8xi64>,
               %img: tensor<2x3x8x8xf32>, %k: tensor<4x3x3x3xf32>,
               %g: tensor<64xf32>) -> tensor<f32> {
  // CHECK: graph.linear
  %0 = graph.linear %x, %w, %b : (tensor<8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
  // CHECK: graph.gelu {{.*}} {approximate = #graph<approximation tanh>}
  %1 = graph.gelu %0 {approximate = #graph<approximation tanh>} : tensor<8x256xf32>
  // CHECK: graph.layer_norm
  %2 = graph.layer_norm %x, %g, %g {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  // CHECK: graph.embedding
  %3 = graph.embedding %table, %ids : (tensor<100x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
  // CHECK: graph.attention {{.*}} {causal = true
  %4 = graph.attention %q, %q, %q {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  // CHECK: graph.softmax
  %5 = graph.softmax %x {axis = 1 : i64} : tensor<8x64xf32>
  // CHECK: graph.dropout
  %6, %mask = graph.dropout %x {ratio = 0.1 : f64} : tensor<8x64xf32> -> tensor<8x64xf32>, tensor<8x64xi1>
  // CHECK: graph.split
  %7:2 = graph.split %x {axis = 1 : i64} : (tensor<8x64xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>)
  // CHECK: graph.conv
  %8 = graph.conv %img, %k {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: graph.max_pool
  %9 = graph.max_pool %8 {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: graph.avg_pool
  %10 = graph.avg_pool %9 {ceil_mode = true, count_include_pad = false, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  // CHECK: graph.reduce_mean
  %11 = graph.reduce_mean %10 {axes = array<i64: 2, 3>, keepdims = false} : (tensor<2x4x2x2xf32>) -> tensor<2x4xf32>
  // CHECK: graph.where
  %12 = graph.where %mask, %x, %6 : tensor<8x64xi1>, tensor<8x64xf32>, tensor<8x64xf32> -> tensor<8x64xf32>
  // CHECK: graph.slice
  %13 = graph.slice %x {offsets = array<i64: 0, 63>, sizes = array<i64: 8, 32>, strides = array<i64: 1, -2>} : (tensor<8x64xf32>) -> tensor<8x32xf32>
  // CHECK: graph.cross_entropy
  %14 = graph.cross_entropy %5, %labels {ignore_index = -100 : i64, reduction = #graph<reduction mean>} : (tensor<8x64xf32>, tensor<8xi64>) -> tensor<f32>
  return %14 : tensor<f32>
}

// A ceil-mode window longer than the input still yields one output when it
// starts inside it (PyTorch: max_pool1d(len 2, kernel 3, stride 3, ceil)).
// CHECK-LABEL: func.func @ceil_pool_longer_window
// CHECK: graph.max_pool {{.*}} -> tensor<1x1x1xf32>
func.func @ceil_pool_longer_window(%x: tensor<1x1x2xf32>) -> tensor<1x1x1xf32> {
  %0 = graph.max_pool %x {ceil_mode = true, dilations = array<i64: 1>, kernel_shape = array<i64: 3>, pads = array<i64: 0, 0>, strides = array<i64: 3>} : (tensor<1x1x2xf32>) -> tensor<1x1x1xf32>
  return %0 : tensor<1x1x1xf32>
}
