// RUN: strata-opt %s --strata-pipeline=stages=2 --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-stage-programs=micro-batches=2" --strata-verify-pipeline | FileCheck %s
// RUN: strata-opt %s --strata-pipeline=stages=2 --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-stage-programs=micro-batches=2 schedule=zb" --strata-verify-pipeline | FileCheck %s --check-prefix=ZB
// RUN: not strata-opt %s --strata-stage-programs 2>&1 | FileCheck %s --check-prefix=UNCUT
// Partitioned inside the stages (strata-partition, t = 2, before the cut),
// on three stages:
// RUN: strata-opt %s --strata-pipeline=stages=3 --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-partition=world=2 ranks-per-node=2 partition=2" "--strata-stage-programs=micro-batches=2" --strata-verify-pipeline | FileCheck %s --check-prefix=PART
// Every op carries its action in its location (CSE ignores it): on the
// last stage under zb the receive of micro-batch 1's activation is F1's,
// the send of micro-batch 0's gradient B0's.
// RUN: strata-opt %s --strata-pipeline=stages=2 --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-stage-programs=micro-batches=2 schedule=zb" --mlir-print-debuginfo | FileCheck %s --check-prefix=ACTION
// ACTION-LABEL: func.func @pipeline_step_1(
// ACTION: sched.recv from 0 {micro_batch = 0 : i64, {{.*}} loc(#[[F0:loc[0-9]+]])
// ACTION: sched.send {{.*}} to 0 {micro_batch = 0 : i64, {{.*}} loc(#[[B0:loc[0-9]+]])
// ACTION: sched.recv from 0 {micro_batch = 1 : i64, {{.*}} loc(#[[F1:loc[0-9]+]])
// ACTION-DAG: #[[F0]] = loc(fused<"sched.action F0">
// ACTION-DAG: #[[B0]] = loc(fused<"sched.action B0">
// ACTION-DAG: #[[F1]] = loc(fused<"sched.action F1">

// Two layers a stage; the embedding-like scale `emb` is read on both
// stages (a tied weight): each stage sums its own contributions to its
// gradient over the micro-batches, and the optimizer programs add the two
// sums once per step.
func.func @main(%x: tensor<2x4xf32> {graph.name = "x", graph.role = #graph<role input>},
                %e: tensor<4xf32> {graph.name = "emb.weight", graph.role = #graph<role parameter>},
                %w0: tensor<4x4xf32> {graph.name = "h.0.weight", graph.role = #graph<role parameter>},
                %w1: tensor<4x4xf32> {graph.name = "h.1.weight", graph.role = #graph<role parameter>},
                %w2: tensor<4x4xf32> {graph.name = "h.2.weight", graph.role = #graph<role parameter>},
                %w3: tensor<4x4xf32> {graph.name = "h.3.weight", graph.role = #graph<role parameter>})
    -> (tensor<2x4xf32> {graph.name = "logits", graph.role = #graph<role output>}) {
  %m = graph.mul %x, %e : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %0 = graph.linear %m, %w0 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = graph.tanh %0 : tensor<2x4xf32>
  %2 = graph.linear %1, %w1 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %3 = graph.tanh %2 : tensor<2x4xf32>
  %4 = graph.linear %3, %w2 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %5 = graph.tanh %4 : tensor<2x4xf32>
  %6 = graph.linear %5, %w3 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %7 = graph.mul %6, %e : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return %7 : tensor<2x4xf32>
}

// @micro_step is gone; each stage has its program, the inputs one argument
// per micro-batch, the loss of each micro-batch from the last stage.
// CHECK-NOT: func.func @micro_step
// CHECK-LABEL: func.func @pipeline_step_0(
// CHECK-SAME: graph.name = "x", graph.role = #graph<role input>, sched.micro_batch = 0 : i64
// CHECK-SAME: graph.name = "x", graph.role = #graph<role input>, sched.micro_batch = 1 : i64
// 1F1B on the first of two stages: F0 F1 B0 B1; the gradient accumulators
// chain from micro-batch 0 to 1.
// CHECK: sched.send %{{.*}} to 1 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = 0 : i64}
// CHECK: sched.send %{{.*}} to 1 {micro_batch = 1 : i64, sched.stage = 0 : i64, tag = 0 : i64}
// CHECK: sched.recv from 1 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = 1 : i64}
// CHECK: %[[G0:.*]] = graph.add %arg{{[0-9]+}}, %{{.*}} {sched.backward, sched.stage = 0 : i64} : tensor<4x4xf32>
// CHECK: sched.recv from 1 {micro_batch = 1 : i64, sched.stage = 0 : i64, tag = 1 : i64}
// CHECK: graph.add %[[G0]], %{{.*}} {sched.backward, sched.stage = 0 : i64} : tensor<4x4xf32>
// CHECK: return


// CHECK-LABEL: func.func @pipeline_step_1(
// CHECK-SAME: graph.name = "labels", graph.role = #graph<role input>, sched.micro_batch = 0 : i64
// CHECK-SAME: graph.name = "labels", graph.role = #graph<role input>, sched.micro_batch = 1 : i64
// CHECK-SAME: -> (tensor<f32> {graph.name = "strata.loss#0", graph.role = #graph<role output>}, tensor<f32> {graph.name = "strata.loss#1", graph.role = #graph<role output>}
// Its schedule and its costs per micro-batch (forward FLOPs of its F, B
// and W ops, W split off as zb would, whichever schedule was built).
// CHECK-SAME: attributes {sched.schedule = "1f1b", sched.stage = 1 : i64, sched.stage_cost = array<f64: 1.450000e+02, 1.520000e+02, 1.760000e+02>}
// 1F1B on the last stage: F0 B0 F1 B1.
// CHECK: %[[A0:.*]] = sched.recv from 0 {micro_batch = 0 : i64, sched.stage = 1 : i64, tag = 0 : i64}
// CHECK: graph.cross_entropy
// CHECK: graph.cross_entropy_grad
// CHECK: sched.send %{{.*}} to 0 {micro_batch = 0 : i64, sched.stage = 1 : i64, tag = 1 : i64} : tensor<2x4xf32>
// CHECK: sched.recv from 0 {micro_batch = 1 : i64, sched.stage = 1 : i64, tag = 0 : i64}
// CHECK: graph.cross_entropy
// CHECK: sched.send %{{.*}} to 0 {micro_batch = 1 : i64, sched.stage = 1 : i64, tag = 1 : i64}
// The last stage's own sum of the tied weight's gradient is a result.
// CHECK: return
// CHECK-SAME: tensor<4xf32>

// The optimizer per stage: the tied weight's two sums exchanged and added
// in stage order on both stages (the same bits on both copies), the
// squared norm summed up the chain and the total sent back down; each
// stage updates its own parameters.
// CHECK-LABEL: func.func @optimizer_step_0(
// CHECK: sched.send %arg0 to 1 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = 2 : i64} : tensor<4xf32>
// CHECK: %[[THEIRS:.*]] = sched.recv from 1 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = 2 : i64}
// CHECK: %[[TIED:.*]] = graph.add %arg0, %[[THEIRS]]
// CHECK: graph.sum_squares %[[TIED]]
// CHECK: sched.send %{{.*}} to 1 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = 3 : i64} : tensor<f32>
// CHECK: %[[TOTAL:.*]] = sched.recv from 1 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = 4 : i64} : tensor<f32>
// CHECK: graph.sqrt %[[TOTAL]]
// CHECK: graph.adamw_update %{{.*}}, %[[TIED]],
// CHECK-COUNT-2: graph.adamw_update
// CHECK-NOT: graph.adamw_update
// CHECK-LABEL: func.func @optimizer_step_1(
// CHECK: sched.send %arg0 to 0 {micro_batch = 0 : i64, sched.stage = 1 : i64, tag = 2 : i64}
// CHECK: %[[MINE:.*]] = sched.recv from 0 {micro_batch = 0 : i64, sched.stage = 1 : i64, tag = 2 : i64}
// CHECK: graph.add %[[MINE]], %arg0
// CHECK: %[[BELOW:.*]] = sched.recv from 0 {micro_batch = 0 : i64, sched.stage = 1 : i64, tag = 3 : i64}
// CHECK: %[[SUM:.*]] = graph.add %[[BELOW]], %{{.*}}
// CHECK: sched.send %[[SUM]] to 0 {micro_batch = 0 : i64, sched.stage = 1 : i64, tag = 4 : i64}
// CHECK-COUNT-3: graph.adamw_update
// CHECK-NOT: func.func @optimizer_step(

// Zero bubble, last stage: B sends the input gradients first, W (the
// weight gradients and their accumulation) follows.
// ZB-LABEL: func.func @pipeline_step_1(
// ZB: graph.cross_entropy_grad
// ZB: sched.send %{{.*}} to 0 {micro_batch = 0 : i64, sched.stage = 1 : i64, tag = 1 : i64}
// ZB: graph.linear_grad_weight
// ZB: graph.add
// ZB: sched.recv from 0 {micro_batch = 1 : i64

// Partitioned: the tied weight's gradient still crosses only between its
// two stages, once per step. Each holder sums its own contributions over
// the micro-batches, whole, and reduce-scatters the sum over its stage
// group once (then adds the accumulator, a shard); the optimizer programs
// exchange the shards and add them in stage order. The middle stage moves
// the activations and their gradients only (before: the last stage's
// contribution, relayed through it every micro-batch).
// PART-LABEL: func.func @pipeline_step_0(
// PART-NOT: sched.recv {{.*}}tensor<4xf32>
// PART: %[[SUM0:.*]] = graph.add %{{.*}}, %{{.*}} {sched.backward, sched.stage = 0 : i64} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// PART-NEXT: %[[SHARD0:.*]] = sched.reduce_scatter partition %[[SUM0]] {{.*}}: tensor<4xf32> -> tensor<2xf32>
// PART-NEXT: %[[GRAD0:.*]] = graph.add %arg{{[0-9]+}}, %[[SHARD0]]
// PART-NEXT: return %[[GRAD0]],
// PART-LABEL: func.func @pipeline_step_1(
// PART-NOT: tensor<4xf32>
// PART-COUNT-4: sched.send %{{.*}} : tensor<2x4xf32>
// PART-NOT: sched.send
// PART-NOT: tensor<4xf32>
// PART-LABEL: func.func @pipeline_step_2(
// PART-NOT: sched.send {{.*}}tensor<4xf32>
// PART-NOT: sched.reduce_scatter partition %{{.*}} : tensor<4xf32>
// PART: %[[SUM2:.*]] = graph.add %{{.*}}, %{{.*}} {sched.backward, sched.stage = 2 : i64} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// PART-NEXT: %[[SHARD2:.*]] = sched.reduce_scatter partition %[[SUM2]] {{.*}}: tensor<4xf32> -> tensor<2xf32>
// PART-NEXT: graph.add %arg{{[0-9]+}}, %[[SHARD2]]
// PART-NOT: sched.send {{.*}}tensor<4xf32>
// PART-LABEL: func.func @optimizer_step_0(
// PART: sched.send %arg0 to 2 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = [[TIED:[0-9]+]] : i64} : tensor<2xf32>
// PART-NEXT: %[[THEIRS:.*]] = sched.recv from 2 {micro_batch = 0 : i64, sched.stage = 0 : i64, tag = [[TIED]] : i64} : tensor<2xf32>
// PART-NEXT: graph.add %arg0, %[[THEIRS]]
// PART-NOT: sched.send {{.*}}tensor<2xf32>
// PART-LABEL: func.func @optimizer_step_1(
// PART-NOT: tensor<2xf32>
// PART-LABEL: func.func @optimizer_step_2(
// PART: sched.send %arg0 to 0 {micro_batch = 0 : i64, sched.stage = 2 : i64, tag = [[TIED]] : i64} : tensor<2xf32>
// PART-NEXT: %[[MINE:.*]] = sched.recv from 0 {micro_batch = 0 : i64, sched.stage = 2 : i64, tag = [[TIED]] : i64} : tensor<2xf32>
// PART-NEXT: graph.add %[[MINE]], %arg0
// Its copy is its own update, not a value received from stage 0.
// PART-NOT: sched.recv {{.*}}tensor<2xf32>

// UNCUT: strata-stage-programs: needs a module cut into stages (strata-pipeline) with @micro_step (strata-autodiff)
