// RUN: strata-opt %s --strata-optimizer | FileCheck %s
// RUN: strata-opt %s "--strata-optimizer=optimizer=sgd clip-norm=1.0 accum=2" | FileCheck %s --check-prefix=SGD
// RUN: not strata-opt %s "--strata-optimizer=optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=BAD

// strata-optimizer alone: @micro_step returns a gradient per parameter;
// @optimizer_step takes each parameter with its gradient and states (named
// after it), the learning rate and the step, and returns the new values and
// the global gradient norm.
func.func @micro_step(%w: tensor<4xf32> {graph.name = "w", graph.role = #graph<role parameter>}, %x: tensor<4xf32> {graph.name = "x", graph.role = #graph<role input>}) -> (tensor<f32> {graph.name = "strata.loss", graph.role = #graph<role output>}, tensor<4xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}) {
  %p = graph.mul %w, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %l = graph.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// AdamW (the default): two moments per parameter; the norm unscaled.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4xf32> {graph.name = "w", graph.role = #graph<role parameter>}
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<4xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<4xf32> {graph.name = "adamw.exp_avg:w", graph.role = #graph<role optimizer_state>}
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<4xf32> {graph.name = "adamw.exp_avg_sq:w", graph.role = #graph<role optimizer_state>}
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f64> {graph.name = "strata.lr", graph.role = #graph<role input>}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {graph.name = "strata.step", graph.role = #graph<role input>}
// CHECK-SAME: -> (tensor<f32> {graph.name = "strata.grad_norm", graph.role = #graph<role output>}
// CHECK: %[[SS:.*]] = graph.sum_squares %[[G]]
// CHECK: %[[N:.*]] = graph.sqrt %[[SS]]
// CHECK: %[[ONE:.*]] = graph.constant dense<1.000000e+00>
// CHECK: %[[U:.*]]:3 = graph.adamw_update %[[W]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]], %[[ONE]] {beta1 = 9.000000e-01 : f64
// CHECK: return %[[N]], %[[U]]#0, %[[U]]#1, %[[U]]#2

// SGD with clipping over 2 accumulated micro-steps: the gradient is a sum
// of 2, so the norm is halved and the clip coefficient (torch's
// min(1, max / (norm + 1e-6))) scales the update with the 1/2.
// SGD-LABEL: func.func @optimizer_step
// SGD-SAME: {graph.name = "sgd.momentum:w", graph.role = #graph<role optimizer_state>}
// SGD: %[[SS:.*]] = graph.sum_squares
// SGD: %[[RAW:.*]] = graph.sqrt %[[SS]]
// SGD: %[[HALF:.*]] = graph.constant dense<5.000000e-01>
// SGD: %[[N:.*]] = graph.mul %[[RAW]], %[[HALF]]
// SGD: %[[C:.*]] = graph.min
// SGD: %[[S:.*]] = graph.mul %[[C]], %[[HALF]]
// SGD: %[[U:.*]]:2 = graph.sgd_update {{.*}}, %[[S]] {dampening = 0.000000e+00 : f64, momentum = 9.000000e-01 : f64, nesterov = false
// SGD: return %[[N]], %[[U]]#0, %[[U]]#1

// BAD: for the --optimizer option: Cannot find option named 'lamb'!
