// RUN: strata-opt %s --strata-autodiff | FileCheck %s
// RUN: strata-opt %s "--strata-autodiff=freeze=head* accumulate=true" | FileCheck %s --check-prefix=FREEZE
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --canonicalize | FileCheck %s --check-prefix=OPT
// RUN: strata-opt %s "--strata-autodiff" "--strata-optimizer=optimizer=sgd clip-norm=1.0 accum=2" | FileCheck %s --check-prefix=SGD

// A tied table: the embedding and the output projection share %table; its
// gradient is the sum of both uses. The loss is the cross-entropy of the
// logits against a new `labels` input.
func.func @main(%ids: tensor<2x3xi64> {graph.name = "ids", graph.role = #graph<role input>},
                %table: tensor<5x4xf32> {graph.name = "wte", graph.role = #graph<role parameter>},
                %bias: tensor<5xf32> {graph.name = "head.bias", graph.role = #graph<role parameter>})
    -> (tensor<2x3x5xf32> {graph.name = "logits", graph.role = #graph<role output>}) {
  %e = graph.embedding %table, %ids : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %t = graph.tanh %e : tensor<2x3x4xf32>
  %y = graph.linear %t, %table, %bias {transpose_weight = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[LABELS:.*]]: tensor<2x3xi64> {graph.int_high = 5 : i64, graph.name = "labels", graph.role = #graph<role input>}
// CHECK-SAME: -> (tensor<f32> {graph.name = "strata.loss", graph.role = #graph<role output>}, tensor<5x4xf32> {graph.name = "grad:wte", graph.role = #graph<role gradient>}, tensor<5xf32> {graph.name = "grad:head.bias", graph.role = #graph<role gradient>})
// CHECK: %[[T:.*]] = graph.tanh
// CHECK: %[[FLAT:.*]] = graph.reshape %{{.*}} : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK: %[[LOSS:.*]] = graph.cross_entropy %[[FLAT]], %{{.*}} {ignore_index = -100 : i64}
// CHECK: graph.cross_entropy_grad
// CHECK: %[[HEAD:.*]] = graph.linear_grad_weight
// tanh's derivative reads its output only: the output stands for the input
// too, so the embedding's result need not stay alive for the backward pass.
// CHECK: graph.unary_grad %{{.*}}, %[[T]], %[[T]] {kind = #graph<unary tanh>}
// CHECK: %[[EMB:.*]] = graph.embedding_grad
// CHECK: %[[SUM:.*]] = graph.add %[[HEAD]], %[[EMB]]
// CHECK: return %[[LOSS]], %[[SUM]], %{{.*}} : tensor<f32>, tensor<5x4xf32>, tensor<5xf32>

// Frozen parameters get no gradient; with accumulation each gradient is
// added to its running sum.
// FREEZE-LABEL: func.func @micro_step
// FREEZE-SAME: %[[ACC:[^:]*]]: tensor<5x4xf32> {graph.name = "grad:wte", graph.role = #graph<role gradient>}
// FREEZE-SAME: -> (tensor<f32> {graph.name = "strata.loss", graph.role = #graph<role output>}, tensor<5x4xf32> {graph.name = "grad:wte", graph.role = #graph<role gradient>})
// FREEZE: %[[NEW:.*]] = graph.add %[[ACC]], %{{.*}} : tensor<5x4xf32>
// FREEZE: return %{{.*}}, %[[NEW]]

// OPT-LABEL: func.func @optimizer_step
// OPT-SAME: {graph.name = "adamw.exp_avg:wte", graph.role = #graph<role optimizer_state>}
// OPT-SAME: {graph.name = "strata.lr", graph.role = #graph<role input>}
// OPT: graph.sum_squares
// OPT: graph.sqrt
// OPT: graph.adamw_update {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}

// SGD with clipping over 2 micro-steps: the norm is scaled by 1/2 and the
// clip factor min(1, 1.0 / (norm + 1e-6)) multiplies the gradient scale.
// SGD-LABEL: func.func @optimizer_step
// SGD: %[[HALF:.*]] = graph.constant dense<5.000000e-01> : tensor<f32>
// SGD: %[[NORM:.*]] = graph.mul %{{.*}}, %[[HALF]]
// SGD: graph.div
// SGD: graph.min
// SGD: %[[SCALE:.*]] = graph.mul
// SGD: graph.sgd_update {{.*}}, %[[SCALE]] {dampening = 0.000000e+00 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 1.000000e-02 : f64}
