// RUN: strata-opt %s -split-input-file -verify-diagnostics

// Regression (was a verifier gap): graph.layer_norm rejects a negative epsilon, but
// graph.batch_norm accepts one (BatchNormOp::inferReturnTypes checks only
// the momentum). Expected to match layer_norm.

func.func @batch_norm_epsilon(%x: tensor<2x8x4xf32>, %c: tensor<8xf32>) {
  // expected-error @+2 {{epsilon must be >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = graph.batch_norm %x, %c, %c, %c, %c {epsilon = -1.0 : f64, momentum = 0.1 : f64, training = true} : (tensor<2x8x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}
