// RUN: strata-opt %s --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=1024" | FileCheck %s
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=0" | FileCheck %s --check-prefix=ONE
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 ranks-per-node=2 partition=4 hierarchical=true bucket-bytes=1024" | FileCheck %s --check-prefix=HIER
// RUN: strata-opt %s --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-partition=world=4 ranks-per-node=2 partition=2 grad-sync=global bucket-bytes=1024" | FileCheck %s --check-prefix=GLOBAL
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 partition=1 bucket-bytes=1024" | FileCheck %s --check-prefix=DP
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 partition=1 grad-sync=global bucket-bytes=1024" | FileCheck %s --check-prefix=DPGLOBAL
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 ranks-per-node=2 partition=2 hierarchical=true" 2>&1 | FileCheck %s --check-prefix=NOHIER
// RUN: strata-opt %s --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-partition=world=4 ranks-per-node=2 partition=2 bucket-bytes=1024 reduce-type=bf16" | FileCheck %s --check-prefix=NARROW
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 partition=1 grad-sync=global bucket-bytes=1024 reduce-type=f16" | FileCheck %s --check-prefix=NARROWGLOBAL
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 partition=2 reduce-type=f8" 2>&1 | FileCheck %s --check-prefix=NARROWBAD

// Three layers (h.0, h.1, head), each a weight and a bias. Over P = 2 the
// 4x4 weights become 8-element shards, the 3-element head bias a padded
// 2-element shard.
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

// The forward program gathers each layer's bucket (weight and bias) with one
// coalesced all-gather, before the layer.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W0:[^:]*]]: tensor<8xf32> {graph.full_shape = array<i64: 4, 4>, graph.name = "h.0.weight", graph.role = #graph<role parameter>, graph.shards = 2 : i64}
// CHECK-SAME: %[[B0:[^:]*]]: tensor<2xf32> {graph.full_shape = array<i64: 4>, graph.name = "h.0.bias", graph.role = #graph<role parameter>, graph.shards = 2 : i64}
// CHECK-SAME: tensor<2xf32> {graph.full_shape = array<i64: 3>, graph.name = "head.bias", graph.role = #graph<role parameter>, graph.shards = 2 : i64}
// CHECK: %[[G0:.*]]:2 = sched.all_gather partition %[[W0]], %[[B0]] : tensor<8xf32>, tensor<2xf32> -> tensor<16xf32>, tensor<4xf32>
// CHECK: %[[R0:.*]] = graph.reshape %[[G0]]#0 : tensor<16xf32> -> tensor<4x4xf32>
// CHECK: graph.linear %{{.*}}, %[[R0]], %[[G0]]#1
// CHECK: sched.all_gather {{.*}} : tensor<8xf32>, tensor<2xf32> -> tensor<16xf32>, tensor<4xf32>
// CHECK: graph.linear
// CHECK: %[[GH:.*]]:2 = sched.all_gather {{.*}} : tensor<6xf32>, tensor<2xf32> -> tensor<12xf32>, tensor<4xf32>
// CHECK: graph.slice %[[GH]]#1 {offsets = array<i64: 0>, sizes = array<i64: 3>, strides = array<i64: 1>} : (tensor<4xf32>) -> tensor<3xf32>
// CHECK: graph.linear
// CHECK-NOT: sched.
// CHECK: return

// @micro_step: the same gathers in forward; in backward each layer's
// weight is gathered again (biases and h.0.weight are not needed there);
// each layer's gradients are reduce-scattered together right after the
// last of them is computed; the adds into the shard accumulators come after
// the last backward op (late accumulation), in the buckets' order.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[ACC0:[^:]*]]: tensor<8xf32> {graph.full_shape = array<i64: 4, 4>, graph.name = "grad:h.0.weight", graph.role = #graph<role gradient>, graph.shards = 2 : i64}
// CHECK-COUNT-3: sched.all_gather partition {{.*}} : tensor<{{[0-9]+}}xf32>, tensor<2xf32>
// CHECK: graph.cross_entropy
// CHECK: sched.all_gather partition %{{.*}} : tensor<6xf32> -> tensor<12xf32>
// CHECK: graph.linear_grad_weight
// CHECK: graph.reduce_sum
// CHECK: %[[RSH:.*]]:2 = sched.reduce_scatter partition %{{.*}}, %{{.*}} : tensor<12xf32>, tensor<4xf32> -> tensor<6xf32>, tensor<2xf32>
// CHECK-NOT: graph.add %{{.*}}, %[[RSH]]
// CHECK: sched.all_gather partition %{{.*}} : tensor<8xf32> -> tensor<16xf32>
// CHECK: graph.linear_grad_weight
// CHECK: %[[RS1:.*]]:2 = sched.reduce_scatter {{.*}} : tensor<16xf32>, tensor<4xf32> -> tensor<8xf32>, tensor<2xf32>
// CHECK-NOT: sched.all_gather
// CHECK: graph.linear_grad_weight
// CHECK: %[[RS0:.*]]:2 = sched.reduce_scatter {{.*}} : tensor<16xf32>, tensor<4xf32> -> tensor<8xf32>, tensor<2xf32>
// CHECK-NEXT: %[[SUM0:.*]] = graph.add %[[ACC0]], %[[RS0]]#0 : tensor<8xf32>
// CHECK-NEXT: graph.add %{{.*}}, %[[RS0]]#1 : tensor<2xf32>
// CHECK-NEXT: graph.add %{{.*}}, %[[RS1]]#0 : tensor<8xf32>
// CHECK-NEXT: graph.add %{{.*}}, %[[RS1]]#1 : tensor<2xf32>
// CHECK-NEXT: graph.add %{{.*}}, %[[RSH]]#0 : tensor<6xf32>
// CHECK-NEXT: graph.add %{{.*}}, %[[RSH]]#1 : tensor<2xf32>
// CHECK-NEXT: return %{{.*}}, %[[SUM0]],

// @optimizer_step: the 2-hop boundary all-reduce of each bucket's gradient
// shards over the replication group, once per step; the squared norm summed
// over the partition group; the updates on shards.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: sched.all_reduce replication %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<2xf32> -> tensor<8xf32>, tensor<2xf32>
// CHECK: sched.all_reduce replication %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<2xf32>
// CHECK: sched.all_reduce replication %{{.*}}, %{{.*}} : tensor<6xf32>, tensor<2xf32>
// CHECK: %[[SQ:.*]] = sched.all_reduce partition %{{.*}} : tensor<f32> -> tensor<f32>
// CHECK: graph.sqrt %[[SQ]]
// CHECK: graph.adamw_update {{.*}} -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)

// bucket-bytes=0: one collective per parameter.
// ONE-LABEL: func.func @micro_step
// ONE-COUNT-6: sched.all_gather partition %{{[^,]*}}
// ONE: graph.cross_entropy
// ONE-LABEL: func.func @optimizer_step
// ONE-COUNT-6: sched.all_reduce replication %{{[^,]*}}

// Hierarchical (P = 4 over two nodes of K = 2): (1) one inter-node
// all-gather of the bucket among the ranks with this local rank, giving
// each value's P/K = 2 shards as blocks; (2) one intra-node all-gather of
// those blocks (`blocks = 2`), block i gathered over the node: in order
// [C0, C1, C2, C3]. Two ops whatever P/K (no split, no concat): the IR
// does not grow with the nodes a group spans.
// HIER-LABEL: func.func @micro_step
// HIER: %[[INTER:.*]]:2 = sched.all_gather inter %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<1xf32> -> tensor<8xf32>, tensor<2xf32>
// HIER: %[[INTRA:.*]]:2 = sched.all_gather intra %[[INTER]]#0, %[[INTER]]#1 {blocks = 2 : i64} : tensor<8xf32>, tensor<2xf32> -> tensor<16xf32>, tensor<4xf32>
// HIER-NOT: graph.split
// HIER-NOT: graph.concat
// HIER: graph.reshape %[[INTRA]]#0 : tensor<16xf32> -> tensor<4x4xf32>
// HIER-NOT: group = "partition"} : tensor<{{.*}}> -> tensor<
// HIER: graph.cross_entropy
// HIER: sched.reduce_scatter partition {{.*}}
// HIER-LABEL: func.func @optimizer_step
// HIER-NOT: group = "replication"

// --grad-sync global: the full gradients all-reduced over every rank each
// micro-step, this rank's shard kept; no boundary all-reduce.
// GLOBAL-LABEL: func.func @micro_step
// GLOBAL-NOT: sched.reduce_scatter
// GLOBAL: %[[AR:.*]]:2 = sched.all_reduce world %{{.*}}, %{{.*}} : tensor<12xf32>, tensor<4xf32> -> tensor<12xf32>, tensor<4xf32>
// GLOBAL: %[[MINE:.*]] = sched.local_shard partition %[[AR]]#0 : tensor<12xf32> -> tensor<6xf32>
// GLOBAL: sched.local_shard partition %[[AR]]#1 : tensor<4xf32> -> tensor<2xf32>
// GLOBAL: graph.add %{{.*}}, %[[MINE]] : tensor<6xf32>
// GLOBAL-NOT: sched.reduce_scatter
// GLOBAL-LABEL: func.func @optimizer_step
// GLOBAL-NOT: group = "replication"
// GLOBAL: sched.all_reduce partition %{{.*}} : tensor<f32>

// Data parallelism (P = 1): nothing is sharded or gathered; the gradients
// are summed over the replication group (every rank) once per step, per
// bucket, and each rank's backward pass is seeded with 1/N (set by
// strata-compile).
// DP-LABEL: func.func @micro_step
// DP-NOT: sched.
// DP-LABEL: func.func @optimizer_step
// DP: sched.all_reduce replication %{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4xf32> -> tensor<4x4xf32>, tensor<4xf32>
// DP-NOT: group = "partition"

// DPGLOBAL-LABEL: func.func @micro_step
// DPGLOBAL: sched.all_reduce world %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<3xf32> -> tensor<3x4xf32>, tensor<3xf32>
// DPGLOBAL-NOT: sched.local_shard
// DPGLOBAL-LABEL: func.func @optimizer_step
// DPGLOBAL-NOT: sched.

// NOHIER: error: strata-partition: a hierarchical all-gather needs P > K and K | P, got K = 2, P = 2

// reduce-type=bf16 (strata-compile --reduce-dtype narrow): each bucket's
// gradients are cast to bf16 before the reduce-scatter and the shards
// widened before the f32 accumulation; the 2-hop all-reduce sums bf16
// copies of the accumulated shards and widens them for the update.
// NARROW-LABEL: func.func @micro_step
// NARROW: %[[N0:.*]] = graph.cast %{{.*}} : tensor<12xf32> to tensor<12xbf16>
// NARROW: %[[N1:.*]] = graph.cast %{{.*}} : tensor<4xf32> to tensor<4xbf16>
// NARROW: %[[RSN:.*]]:2 = sched.reduce_scatter partition %[[N0]], %[[N1]] : tensor<12xbf16>, tensor<4xbf16> -> tensor<6xbf16>, tensor<2xbf16>
// NARROW: %[[W0:.*]] = graph.cast %[[RSN]]#0 : tensor<6xbf16> to tensor<6xf32>
// NARROW: graph.add %{{.*}}, %[[W0]] : tensor<6xf32>
// NARROW-NOT: sched.reduce_scatter partition {{.*}} : tensor<{{[0-9]+}}xf32>
// NARROW-LABEL: func.func @optimizer_step
// NARROW: %[[A0:.*]] = graph.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// NARROW: %[[AR:.*]]:2 = sched.all_reduce replication %[[A0]], %{{.*}} : tensor<8xbf16>, tensor<2xbf16> -> tensor<8xbf16>, tensor<2xbf16>
// NARROW: graph.cast %[[AR]]#0 : tensor<8xbf16> to tensor<8xf32>
// NARROW: graph.adamw_update {{.*}} -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)

// NARROWGLOBAL-LABEL: func.func @micro_step
// NARROWGLOBAL: sched.all_reduce world {{.*}} : tensor<4x4xf16>, tensor<4xf16>
// NARROWGLOBAL: graph.cast %{{.*}} : tensor<4x4xf16> to tensor<4x4xf32>

// NARROWBAD: strata-partition: reduce-type is f32, bf16 or f16, got 'f8'
