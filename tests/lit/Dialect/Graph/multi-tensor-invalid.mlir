// The multi-tensor ops' verifiers: whole parameters, one type each, one
// result per operand. Each is a one-line error naming what is wrong.
// RUN: not strata-opt %s --split-input-file 2>&1 | FileCheck %s

// CHECK: error: 'graph.adamw_update' op takes 4 tensors per parameter, got 3
func.func @partial(%p: tensor<4xf32>, %lr: tensor<f64>, %step: tensor<i64>, %s: tensor<f32>) -> tensor<4xf32> {
  %r:3 = graph.adamw_update %p, %p, %p, %lr, %step, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// -----

// CHECK: error: 'graph.adamw_update' op updates 2 parameters into 3 results (3 per parameter)
func.func @results(%p: tensor<4xf32>, %lr: tensor<f64>, %step: tensor<i64>, %s: tensor<f32>) -> tensor<4xf32> {
  %r:3 = graph.adamw_update %p, %p, %p, %p, %p, %p, %p, %p, %lr, %step, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// -----

// CHECK: error: 'graph.sgd_update' op parameter 1: operand 'tensor<8xf32>' does not match the parameter 'tensor<4xf32>'
func.func @types(%p: tensor<4xf32>, %q: tensor<8xf32>, %lr: tensor<f64>, %step: tensor<i64>, %s: tensor<f32>) -> tensor<4xf32> {
  %r:4 = graph.sgd_update %p, %p, %p, %p, %q, %p, %lr, %step, %s {dampening = 0.0 : f64, momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// -----

// CHECK: error: 'graph.sum_squares' op has 2 operands but 1 results (one scalar per operand)
func.func @sums(%g: tensor<4xf32>) -> tensor<f32> {
  %s = graph.sum_squares %g, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
