// RUN: strata-opt %s --strata-pipeline=stages=2 | FileCheck %s
// RUN: strata-opt %s "--strata-pipeline=stages=3 boundaries=1,3" | FileCheck %s --check-prefix=GIVEN
// RUN: strata-opt %s --strata-pipeline=stages=2 --strata-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: strata-opt %s --strata-pipeline=stages=1 | FileCheck %s --check-prefix=ONE
// RUN: not strata-opt %s --strata-pipeline=stages=5 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: not strata-opt %s "--strata-pipeline=stages=3 boundaries=2" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not strata-opt %s "--strata-pipeline=stages=2 boundaries=4" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not strata-opt %s "--strata-pipeline=stages=3 boundaries=2,2" 2>&1 | FileCheck %s --check-prefix=ORDER

// Four equal layers (h.0 .. h.3) after an embedding-like scale by a
// parameter of no numbered layer (emb), then a head: the head's cost goes
// to the last layer. A constant is used only on the last stage.
func.func @main(%x: tensor<2x4xf32> {graph.name = "x", graph.role = #graph<role input>},
                %e: tensor<4xf32> {graph.name = "emb.weight", graph.role = #graph<role parameter>},
                %w0: tensor<4x4xf32> {graph.name = "h.0.weight", graph.role = #graph<role parameter>},
                %w1: tensor<4x4xf32> {graph.name = "h.1.weight", graph.role = #graph<role parameter>},
                %w2: tensor<4x4xf32> {graph.name = "h.2.weight", graph.role = #graph<role parameter>},
                %w3: tensor<4x4xf32> {graph.name = "h.3.weight", graph.role = #graph<role parameter>})
    -> (tensor<2x4xf32> {graph.name = "logits", graph.role = #graph<role output>}) {
  %c = graph.constant dense<2.0> : tensor<f32>
  %m = graph.mul %x, %e : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %0 = graph.linear %m, %w0 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = graph.tanh %0 : tensor<2x4xf32>
  %2 = graph.linear %1, %w1 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %3 = graph.tanh %2 : tensor<2x4xf32>
  %4 = graph.linear %3, %w2 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %5 = graph.tanh %4 : tensor<2x4xf32>
  %6 = graph.linear %5, %w3 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %7 = graph.mul %6, %c : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  // The embedding parameter again, on the last stage (a tied weight).
  %8 = graph.mul %7, %e : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return %8 : tensor<2x4xf32>
}

// Balanced by forward FLOPs: layers 0-1 (with the scale) against 2-3 (with
// the two muls of the head).
// CHECK: module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [2]>}
// CHECK: graph.constant {sched.stage = 1 : i64}
// CHECK: graph.mul %{{.*}} {sched.stage = 0 : i64}
// CHECK: graph.linear %{{.*}}, %{{.*}} {sched.stage = 0 : i64
// CHECK: graph.tanh %{{.*}} {sched.stage = 0 : i64}
// CHECK: graph.linear %{{.*}}, %{{.*}} {sched.stage = 0 : i64
// CHECK: graph.tanh %{{.*}} {sched.stage = 0 : i64}
// CHECK: graph.linear %{{.*}}, %{{.*}} {sched.stage = 1 : i64
// CHECK: graph.tanh %{{.*}} {sched.stage = 1 : i64}
// CHECK: graph.linear %{{.*}}, %{{.*}} {sched.stage = 1 : i64
// CHECK: graph.mul %{{.*}} {sched.stage = 1 : i64}
// CHECK: graph.mul %{{.*}} {sched.stage = 1 : i64}

// GIVEN: module attributes {sched.pipeline = #sched.pipeline<stages = 3, boundaries = [1, 3]>}
// GIVEN: graph.linear %{{.*}}, %{{.*}} {sched.stage = 0 : i64
// GIVEN: graph.linear %{{.*}}, %{{.*}} {sched.stage = 1 : i64
// GIVEN: graph.linear %{{.*}}, %{{.*}} {sched.stage = 1 : i64
// GIVEN: graph.linear %{{.*}}, %{{.*}} {sched.stage = 2 : i64

// Autodiff puts each gradient op on the stage of the op it differentiates:
// the loss and the head's gradients on the last stage, the first layers'
// on the first.
// GRAD-LABEL: func.func @micro_step
// GRAD: graph.cross_entropy {{.*}}sched.stage = 1 : i64
// GRAD: graph.cross_entropy_grad {{.*}}sched.stage = 1 : i64
// GRAD: graph.linear_grad_weight {{.*}}sched.stage = 1 : i64
// GRAD: graph.unary_grad {{.*}}sched.stage = 0 : i64
// GRAD: graph.linear_grad_weight {{.*}}sched.stage = 0 : i64
// GRAD: return

// ONE-NOT: sched.stage
// ONE-NOT: sched.pipeline

// MANY: needs at least 5 layers to cut between; the model has 4 (h.0 .. h.3)
// COUNT: --stage-boundaries gives 1 boundaries; 3 stages need 2
// RANGE: --stage-boundaries must be strictly increasing layer indices in 1..3 (the model's layers are h.0 .. h.3), got 4
// ORDER: --stage-boundaries must be strictly increasing layer indices in 1..3 (the model's layers are h.0 .. h.3), got 2
