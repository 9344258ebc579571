// RUN: strata-opt %s --split-input-file --strata-offload-activations | FileCheck %s
// RUN: strata-opt %s --split-input-file "--strata-offload-activations=min-bytes=4097" | FileCheck %s --check-prefix=SMALL
// RUN: strata-opt %s --split-input-file --strata-offload-activations --strata-plan-memory | FileCheck %s --check-prefix=PLANNED
// RUN: strata-opt %s --split-input-file "--strata-memory-pipeline=offload-activations=true fuse-elementwise=false" | FileCheck %s --check-prefix=SCHEDULED
// RUN: not strata-opt %s --split-input-file --strata-offload-activations "--strata-plan-memory=host-memory=4095" 2>&1 | FileCheck %s --check-prefix=HOSTFULL

// @micro_step: backward is what follows the loss (the first result's op).
// %t (4096 bytes) is read by forward and, after the loss, by backward: it
// is copied to the host right after its op and brought back right before
// backward reads it. %v is read by backward right after its last forward
// read (nothing to gain); %s (64 bytes) is below min-bytes.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: sched.offloaded = #sched.offloaded<values = 1, bytes = 4096, arena_before = 12352, live_before = 12352, at_peak = 4096>
// CHECK: %[[T:.*]] = graph.tanh %{{.*}} : tensor<32x32xf32>
// CHECK-NEXT: %[[SAVED:.*]] = sched.offload activation host %[[T]] : tensor<32x32xf32>
// CHECK-NEXT: graph.tanh %{{.*}} : tensor<16xf32>
// CHECK-NEXT: graph.exp %[[T]]
// CHECK-NEXT: %[[V:.*]] = graph.exp
// CHECK-NEXT: graph.reduce_sum %[[V]]
// CHECK-NEXT: %[[BACK:.*]] = sched.reload activation host %[[SAVED]] : tensor<32x32xf32>
// CHECK-NEXT: graph.mul %[[V]], %[[BACK]]
// CHECK-NOT: sched.offload
// CHECK: return
// SMALL-LABEL: func.func @micro_step
// SMALL-NOT: sched.offload
// SMALL-NOT: sched.offloaded

// The host copy has a slot in an arena of its own (host = 4096). The
// device arena's lower bound falls from 12352 bytes (%t, %s, %u, %v live
// at %v) to 8260 (%s, %v, the reloaded %t and the loss at the end): by
// 4092, at most the 4096 bytes of %t live at the old peak (at_peak).
// The host activation arena must fit --host-memory beside offloaded state.
// HOSTFULL: error: strata-plan-memory: the host tier needs 4096 bytes (state 0, offloaded activations 4096) but --host-memory is 4095; raise --host-memory or leave out --offload-activations
// PLANNED-LABEL: func.func @micro_step
// PLANNED-SAME: sched.arena = #sched.arena<size = 8320, live = 8260, host = 4096>
// PLANNED: sched.offload activation host %{{.*}} {sched.slots = [#sched.slot<0, 4096>]}

// The whole memory pipeline: the offload on d2h after the tanh, the
// reload on h2d, backward's read waiting for the reload.
// SCHEDULED-LABEL: func.func @micro_step
// SCHEDULED-SAME: sched.streams = [#sched<stream compute>, #sched<stream d2h>, #sched<stream h2d>]
// SCHEDULED: %[[T:.*]] = graph.tanh
// SCHEDULED-NEXT: %[[C:.*]] = sched.record on compute
// SCHEDULED-NEXT: sched.wait %[[C]] on d2h
// SCHEDULED-NEXT: %[[SAVED:.*]] = sched.offload activation host %[[T]] {sched.delayable, sched.slots = [#sched.slot<{{[0-9]+}}, 4096>], sched.stream = #sched<stream d2h>}
// SCHEDULED: sched.wait %{{.*}} on h2d
// SCHEDULED-NEXT: %[[BACK:.*]] = sched.reload activation host %[[SAVED]] {{.*}}sched.stream = #sched<stream h2d>}
// SCHEDULED-NEXT: %[[H:.*]] = sched.record on h2d
// SCHEDULED-NEXT: sched.wait %[[H]] on compute
// SCHEDULED-NEXT: graph.mul %{{.*}}, %[[BACK]]
func.func @micro_step(%w: tensor<32x32xf32> {graph.name = "w", graph.role = #graph<role parameter>}, %b: tensor<16xf32> {graph.name = "b", graph.role = #graph<role parameter>}) -> (tensor<f32> {graph.name = "strata.loss", graph.role = #graph<role output>}, tensor<32x32xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}, tensor<16xf32> {graph.name = "grad:b", graph.role = #graph<role gradient>}) {
  %t = graph.tanh %w : tensor<32x32xf32>
  %s = graph.tanh %b : tensor<16xf32>
  %u = graph.exp %t : tensor<32x32xf32>
  %v = graph.exp %u : tensor<32x32xf32>
  %l = graph.reduce_sum %v {axes = array<i64: 0, 1>, keepdims = false} : (tensor<32x32xf32>) -> tensor<f32>
  %g = graph.mul %v, %t : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %gb = graph.mul %s, %s : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %l, %g, %gb : tensor<f32>, tensor<32x32xf32>, tensor<16xf32>
}

// -----

// A pipelined stage program: backward is what carries sched.backward, and
// each micro-batch's saved value is moved on its own: %h0 is reloaded
// before micro-batch 0's backward, %h1 before micro-batch 1's. The moves
// run on the stage of the ops around them; the reload is backward.
// CHECK-LABEL: func.func @pipeline_step_0
// CHECK-SAME: sched.offloaded = #sched.offloaded<values = 2, bytes = 8192, arena_before = 16384, live_before = 16384, at_peak = 8192>
// CHECK: %[[H0:.*]] = graph.tanh %{{.*}} {sched.stage = 0 : i64}
// CHECK-NEXT: %[[S0:.*]] = sched.offload activation host %[[H0]] {sched.stage = 0 : i64}
// CHECK: %[[H1:.*]] = graph.tanh %{{.*}} {sched.stage = 0 : i64}
// CHECK-NEXT: %[[S1:.*]] = sched.offload activation host %[[H1]] {sched.stage = 0 : i64}
// CHECK: %[[D0:.*]] = sched.recv from 1 {micro_batch = 0
// CHECK-NEXT: %[[B0:.*]] = sched.reload activation host %[[S0]] {sched.backward, sched.stage = 0 : i64}
// CHECK-NEXT: graph.mul %[[D0]], %[[B0]]
// CHECK: %[[D1:.*]] = sched.recv from 1 {micro_batch = 1
// CHECK-NEXT: %[[B1:.*]] = sched.reload activation host %[[S1]] {sched.backward, sched.stage = 0 : i64}
// CHECK-NEXT: graph.mul %[[D1]], %[[B1]]
// Two micro-batches in flight: the host arena holds both copies. The
// device's peak was in forward, h0, h1, y1 and z1 live (16384 bytes);
// with the moves it is 12288, in backward or in forward.
// PLANNED-LABEL: func.func @pipeline_step_0
// PLANNED-SAME: sched.arena = #sched.arena<size = 12288, live = 12288, host = 8192>
// Scheduled, the reloads are prefetched (depth 1): micro-batch 1's is
// issued before micro-batch 0's backward reads its own.
// SCHEDULED-LABEL: func.func @pipeline_step_0
// SCHEDULED-COUNT-2: sched.offload activation host {{.*}}sched.stream = #sched<stream d2h>}
// SCHEDULED: %[[R0:.*]] = sched.reload activation host {{.*}}sched.stream = #sched<stream h2d>}
// SCHEDULED: %[[R1:.*]] = sched.reload activation host {{.*}}sched.stream = #sched<stream h2d>}
// SCHEDULED: graph.mul %{{.*}}, %[[R0]] {sched.backward
// SCHEDULED: graph.mul %{{.*}}, %[[R1]] {sched.backward
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @pipeline_step_0(%x0: tensor<32x32xf32> {graph.name = "x", graph.role = #graph<role input>, sched.micro_batch = 0 : i64}, %x1: tensor<32x32xf32> {graph.name = "x", graph.role = #graph<role input>, sched.micro_batch = 1 : i64}, %w: tensor<32x32xf32> {graph.name = "w", graph.role = #graph<role parameter>}) -> (tensor<32x32xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}) {
    %h0 = graph.tanh %x0 {sched.stage = 0 : i64} : tensor<32x32xf32>
    %y0 = graph.mul %h0, %w {sched.stage = 0 : i64} : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
    %z0 = graph.exp %y0 {sched.stage = 0 : i64} : tensor<32x32xf32>
    sched.send %z0 to 1 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<32x32xf32>
    %h1 = graph.tanh %x1 {sched.stage = 0 : i64} : tensor<32x32xf32>
    %y1 = graph.mul %h1, %w {sched.stage = 0 : i64} : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
    %z1 = graph.exp %y1 {sched.stage = 0 : i64} : tensor<32x32xf32>
    sched.send %z1 to 1 {micro_batch = 1 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<32x32xf32>
    %d0 = sched.recv from 1 {micro_batch = 0 : i64, tag = 1 : i64, sched.backward, sched.stage = 0 : i64} : tensor<32x32xf32>
    %g0 = graph.mul %d0, %h0 {sched.backward, sched.stage = 0 : i64} : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
    %d1 = sched.recv from 1 {micro_batch = 1 : i64, tag = 1 : i64, sched.backward, sched.stage = 0 : i64} : tensor<32x32xf32>
    %g1 = graph.mul %d1, %h1 {sched.backward, sched.stage = 0 : i64} : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
    %g = graph.add %g0, %g1 {sched.backward, sched.stage = 0 : i64} : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
    return %g : tensor<32x32xf32>
  }
}
