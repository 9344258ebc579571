// RUN: strata-opt %s --strata-autodiff=accumulate=true --strata-optimizer=accum=2 "--strata-partition=world=4 ranks-per-node=2 partition=2" | FileCheck %s
// RUN: strata-opt %s --strata-autodiff --strata-optimizer "--strata-partition=world=4 partition=1" | FileCheck %s --check-prefix=DP

// The tied table (5x4 = 20 elements) becomes a 10-element shard over the
// partition group; the bias (5 elements) a padded 3-element shard.
func.func @main(%ids: tensor<2x3xi64> {graph.name = "ids", graph.role = "input"},
                %table: tensor<5x4xf32> {graph.name = "wte", graph.role = "parameter"},
                %bias: tensor<5xf32> {graph.name = "head.bias", graph.role = "parameter"})
    -> (tensor<2x3x5xf32> {graph.name = "logits", graph.role = "output"}) {
  %e = graph.embedding %table, %ids : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %t = graph.tanh %e : tensor<2x3x4xf32>
  %y = graph.linear %t, %table, %bias {transpose_weight = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// The forward program gathers too.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[T:[^:]*]]: tensor<10xf32> {graph.name = "wte", graph.role = "parameter", graph.shards = 2 : i64}
// CHECK-SAME: %[[B:[^:]*]]: tensor<3xf32> {graph.name = "head.bias", graph.role = "parameter", graph.shards = 2 : i64}
// CHECK: %[[G:.*]] = sched.all_gather %[[T]] {group = "partition"} : tensor<10xf32> -> tensor<20xf32>
// CHECK: graph.reshape %[[G]] : tensor<20xf32> -> tensor<5x4xf32>
// CHECK: %[[GB:.*]] = sched.all_gather %[[B]] {group = "partition"} : tensor<3xf32> -> tensor<6xf32>
// CHECK: graph.slice %[[GB]] {offsets = array<i64: 0>, sizes = array<i64: 5>, strides = array<i64: 1>} : (tensor<6xf32>) -> tensor<5xf32>

// @micro_step: a gather before the first forward use, another before the
// first backward use; each gradient reduce-scattered into its shard
// accumulator.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[ACC:[^:]*]]: tensor<10xf32> {graph.name = "grad:wte", graph.role = "gradient", graph.shards = 2 : i64}
// CHECK: sched.all_gather %{{.*}} {group = "partition"} : tensor<10xf32> -> tensor<20xf32>
// CHECK: graph.embedding
// CHECK: graph.cross_entropy
// CHECK: graph.cross_entropy_grad
// CHECK: sched.all_gather %{{.*}} {group = "partition"} : tensor<10xf32> -> tensor<20xf32>
// CHECK: graph.embedding_grad
// CHECK: %[[FLAT:.*]] = graph.reshape %{{.*}} : tensor<5x4xf32> -> tensor<20xf32>
// CHECK: %[[RS:.*]] = sched.reduce_scatter %[[FLAT]] {group = "partition"} : tensor<20xf32> -> tensor<10xf32>
// CHECK: %[[SUM:.*]] = graph.add %[[ACC]], %[[RS]] : tensor<10xf32>, tensor<10xf32> -> tensor<10xf32>
// CHECK: graph.pad %{{.*}} {pads = array<i64: 0, 1>} : (tensor<5xf32>) -> tensor<6xf32>
// CHECK: sched.reduce_scatter %{{.*}} {group = "partition"} : tensor<6xf32> -> tensor<3xf32>
// CHECK: return %{{.*}}, %[[SUM]]

// @optimizer_step: the replication all-reduce once per step (2-hop), the
// norm summed over the partition group, updates on shards.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: sched.all_reduce %{{.*}} {group = "replication"} : tensor<3xf32> -> tensor<3xf32>
// CHECK: sched.all_reduce %{{.*}} {group = "replication"} : tensor<10xf32> -> tensor<10xf32>
// CHECK: %[[SQ:.*]] = sched.all_reduce %{{.*}} {group = "partition"} : tensor<f32> -> tensor<f32>
// CHECK: graph.sqrt %[[SQ]]
// CHECK: graph.adamw_update {{.*}} -> (tensor<10xf32>, tensor<10xf32>, tensor<10xf32>)

// Data parallelism (P = 1): nothing is sharded or gathered; the gradients
// are all-reduced over the replication group (every rank) once per step and
// each rank's backward pass is seeded with 1/N (set by strata-compile).
// DP-LABEL: func.func @micro_step
// DP-NOT: sched.
// DP-LABEL: func.func @optimizer_step
// DP: sched.all_reduce %{{.*}} {group = "replication"} : tensor<5xf32> -> tensor<5xf32>
// DP: sched.all_reduce %{{.*}} {group = "replication"} : tensor<5x4xf32> -> tensor<5x4xf32>
// DP-NOT: group = "partition"
