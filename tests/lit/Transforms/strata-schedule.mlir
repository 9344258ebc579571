// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=1024" --strata-plan-memory "--strata-schedule=prefetch-depth=0" | FileCheck %s --check-prefix=DEPTH0
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=1024" --strata-plan-memory "--strata-schedule=prefetch-depth=2" | FileCheck %s --check-prefix=DEPTH2
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=1024" --strata-plan-memory "--strata-schedule=prefetch-depth=2 prefetch-bytes=100" | FileCheck %s --check-prefix=CAPPED
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=1024" --strata-plan-memory --strata-schedule --strata-plan-memory --strata-insert-events --strata-verify-schedule | FileCheck %s --check-prefix=EVENTS
// RUN: strata-opt %s --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=1024" --strata-plan-memory --strata-schedule --strata-plan-memory --strata-insert-events --strata-verify-schedule | FileCheck %s --check-prefix=ACCUM
// RUN: strata-opt %s --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-partition=world=4 ranks-per-node=2 partition=2 grad-sync=global bucket-bytes=1024" --strata-plan-memory --strata-schedule --strata-plan-memory --strata-insert-events --strata-verify-schedule | FileCheck %s --check-prefix=GLOBAL

// Three layers sharded over P = 2; each layer's bucket is one all-gather.
func.func @main(%x: tensor<2x4xf32> {graph.name = "x", graph.role = #graph<role input>},
                %w0: tensor<4x4xf32> {graph.name = "h.0.weight", graph.role = #graph<role parameter>},
                %b0: tensor<4xf32> {graph.name = "h.0.bias", graph.role = #graph<role parameter>},
                %w1: tensor<4x4xf32> {graph.name = "h.1.weight", graph.role = #graph<role parameter>},
                %b1: tensor<4xf32> {graph.name = "h.1.bias", graph.role = #graph<role parameter>},
                %wh: tensor<3x4xf32> {graph.name = "head.weight", graph.role = #graph<role parameter>},
                %bh: tensor<3xf32> {graph.name = "head.bias", graph.role = #graph<role parameter>})
    -> (tensor<2x3xf32> {graph.name = "logits", graph.role = #graph<role output>}) {
  %0 = graph.linear %x, %w0, %b0 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = graph.tanh %0 : tensor<2x4xf32>
  %2 = graph.linear %1, %w1, %b1 {transpose_weight = true} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %3 = graph.tanh %2 : tensor<2x4xf32>
  %4 = graph.linear %3, %wh, %bh {transpose_weight = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %4 : tensor<2x3xf32>
}

// Streams: all-gathers and the reshapes/slices of what they fetched on
// "collective", reductions on "reduce", the rest on "compute". Depth 0: every gather just before
// its layer.
// DEPTH0-LABEL: func.func @main
// DEPTH0: sched.all_gather {{.*}}sched.stream = #sched<stream collective>{{.*}} -> tensor<16xf32>, tensor<4xf32>
// DEPTH0: graph.reshape {{.*}}sched.stream = #sched<stream collective>
// DEPTH0: graph.linear {{.*}}sched.stream = #sched<stream compute>
// DEPTH0: graph.tanh
// DEPTH0: sched.all_gather
// DEPTH0: graph.linear
// DEPTH0: graph.tanh
// DEPTH0: sched.all_gather {{.*}} -> tensor<12xf32>, tensor<4xf32>
// DEPTH0: graph.slice {{.*}}sched.stream = #sched<stream collective>
// DEPTH0: graph.linear
// DEPTH0: return

// Depth 2: each gather is issued two fetches ahead, so all three run
// before the first layer computes.
// DEPTH2-LABEL: func.func @main
// DEPTH2: sched.all_gather {{.*}} -> tensor<16xf32>, tensor<4xf32>
// DEPTH2: sched.all_gather {{.*}} -> tensor<16xf32>, tensor<4xf32>
// DEPTH2: sched.all_gather {{.*}} -> tensor<12xf32>, tensor<4xf32>
// DEPTH2: graph.slice
// DEPTH2: graph.linear
// DEPTH2: graph.tanh
// DEPTH2: graph.linear
// DEPTH2-LABEL: func.func @micro_step

// --prefetch-bytes 100: fetched bytes waiting for their consumers stay
// under 100 (one layer's 80 bytes), so nothing moves.
// CAPPED-LABEL: func.func @main
// CAPPED: sched.all_gather
// CAPPED: graph.linear
// CAPPED: sched.all_gather
// CAPPED: graph.linear
// CAPPED: sched.all_gather
// CAPPED: graph.linear

// Events: a compute op waits for a token recorded after the gather that
// fetched its weight; a reduce-scatter waits for a token recorded right
// after the backward op (the pad to whole shards) that computed what it
// reads. The tokens are SSA values: a wait names its
// record.
// EVENTS-LABEL: func.func @main
// EVENTS-SAME: sched.streams = [#sched<stream compute>, #sched<stream collective>]
// EVENTS: sched.all_gather partition {{.*}}sched.stream = #sched<stream collective>
// EVENTS: %[[T:.*]] = sched.record on collective
// EVENTS: sched.wait %[[T]]{{.*}} on compute
// EVENTS-NEXT: graph.linear {{.*}}sched.stream = #sched<stream compute>
// EVENTS-LABEL: func.func @micro_step
// EVENTS: graph.pad
// EVENTS-NEXT: %[[B:.*]] = sched.record on compute
// EVENTS-NEXT: sched.wait %[[B]] on reduce
// EVENTS-NEXT: sched.reduce_scatter partition {{.*}}sched.stream = #sched<stream reduce>
// EVENTS-LABEL: func.func @optimizer_step
// EVENTS-SAME: sched.streams = [#sched<stream compute>, #sched<stream reduce>]
// EVENTS: sched.all_reduce replication {{.*}}sched.stream = #sched<stream reduce>

// With accumulation: the backward gathers on "collective" and the
// reductions on "reduce" never wait for each other. Late accumulation: the
// adds into the accumulators come after the last backward op. Bucket k's
// gradients stay live until bucket k+1's reduction is issued, so the
// compute stream first waits for a reduction (bucket k's) one bucket
// later, never right after issuing it.
// ACCUM-LABEL: func.func @micro_step
// ACCUM-SAME: sched.streams = [#sched<stream compute>, #sched<stream collective>, #sched<stream reduce>]
// ACCUM: graph.cross_entropy_grad
// ACCUM: sched.all_gather partition {{.*}}sched.stream = #sched<stream collective>
// ACCUM: sched.wait %{{.*}} on reduce
// ACCUM-NEXT: %[[RS2:.*]]:2 = sched.reduce_scatter partition {{.*}}sched.stream = #sched<stream reduce>
// ACCUM-NEXT: %[[T2:.*]] = sched.record on reduce
// ACCUM-NEXT: graph.unary_grad {{.*}}sched.stream = #sched<stream compute>
// ACCUM-NOT: sched.wait %[[T2]]
// ACCUM: %[[RS1:.*]]:2 = sched.reduce_scatter partition {{.*}}sched.stream = #sched<stream reduce>
// ACCUM-NEXT: sched.wait %[[T2]] on compute
// ACCUM-NEXT: graph.unary_grad
// ACCUM: graph.linear_grad_weight
// ACCUM: %[[RS0:.*]]:2 = sched.reduce_scatter partition {{.*}}sched.stream = #sched<stream reduce>
// ACCUM-NEXT: %[[T0:.*]] = sched.record on reduce
// ACCUM-NEXT: sched.wait %[[T0]] on compute
// ACCUM-NEXT: graph.add %{{.*}}, %[[RS0]]#0 {{.*}}sched.stream = #sched<stream compute>
// ACCUM-NEXT: graph.add %{{.*}}, %[[RS0]]#1
// ACCUM-NEXT: graph.add %{{.*}}, %[[RS1]]#0
// ACCUM-NEXT: graph.add %{{.*}}, %[[RS1]]#1
// ACCUM-NEXT: graph.add %{{.*}}, %[[RS2]]#0
// ACCUM-NEXT: graph.add %{{.*}}, %[[RS2]]#1
// ACCUM-NEXT: return

// Global sync: the all-reduce over every rank and the cut of this rank's
// shard of it both run on "reduce"; the adds come last, on "compute".
// GLOBAL-LABEL: func.func @micro_step
// GLOBAL: %[[AR:.*]]:2 = sched.all_reduce world {{.*}}sched.stream = #sched<stream reduce>
// GLOBAL-NEXT: sched.local_shard partition %[[AR]]#0 {{.*}}sched.stream = #sched<stream reduce>
// GLOBAL-NEXT: sched.record on reduce
// GLOBAL-NEXT: sched.local_shard partition %[[AR]]#1 {{.*}}sched.stream = #sched<stream reduce>
// GLOBAL: graph.unary_grad {{.*}}sched.stream = #sched<stream compute>
// GLOBAL: graph.add {{.*}}sched.stream = #sched<stream compute>
// GLOBAL-NOT: graph.unary_grad
// GLOBAL: return
