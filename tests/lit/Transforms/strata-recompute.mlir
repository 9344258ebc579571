// RUN: strata-opt %s "--strata-recompute=mode=always" | FileCheck %s --check-prefix=RECOMPUTE
// RUN: strata-opt %s "--strata-recompute=mode=always" --strata-plan-memory | FileCheck %s --check-prefix=PLANNED
// RUN: strata-opt %s --strata-recompute | FileCheck %s --check-prefix=NORECOMPUTE
// RUN: not strata-opt %s "--strata-recompute=mode=sometimes" 2>&1 | FileCheck %s --check-prefix=BAD

// strata-recompute alone; mode=auto (the default) without a budget changes
// nothing.
// Recomputation (mode=always, in @micro_step): %t = tanh(%x) is
// forward, read again in backward (after the loss); its operand is a
// parameter, always there, so backward makes it again right before it
// reads it, and the forward value dies in forward.
// RECOMPUTE-LABEL: func.func @micro_step
// RECOMPUTE: %[[T:.*]] = graph.tanh %[[W:[^ ]*]] : tensor<16xf32>
// RECOMPUTE: graph.mul %[[T]]
// RECOMPUTE: %[[L:.*]] = graph.reduce_sum
// RECOMPUTE: %[[R:.*]] = graph.tanh %[[W]] {sched.recomputed} : tensor<16xf32>
// RECOMPUTE-NEXT: graph.mul %{{.*}}, %[[R]]
// The clone takes arena bytes of its own once planned.
// PLANNED: graph.tanh %{{.*}} {sched.recomputed, sched.slots = [#sched.slot<{{[0-9]+}}, 64>]}
// BAD: for the --mode option: Cannot find option named 'sometimes'!
// NORECOMPUTE-LABEL: func.func @micro_step
// NORECOMPUTE-NOT: sched.recomputed
func.func @micro_step(%w: tensor<16xf32> {graph.name = "w", graph.role = #graph<role parameter>}) -> (tensor<f32> {graph.name = "strata.loss", graph.role = #graph<role output>}, tensor<16xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}) {
  %t = graph.tanh %w : tensor<16xf32>
  %s = graph.mul %t, %t : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %l = graph.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<16xf32>) -> tensor<f32>
  %g = graph.mul %w, %t : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %l, %g : tensor<f32>, tensor<16xf32>
}
