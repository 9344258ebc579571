// RUN: strata-opt %s | strata-opt | FileCheck %s
// RUN: strata-opt %s --mlir-print-op-generic | strata-opt | FileCheck %s

// CHECK-LABEL: func.func @collectives
func.func @collectives(%w: tensor<10xf32>, %b: tensor<3xf32>, %g: tensor<20xf32>,
                       %s: tensor<f32>) -> (tensor<20xf32>, tensor<6xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>) {
  // CHECK: %{{.*}}:2 = sched.all_gather %{{.*}}, %{{.*}} {group = "partition"} : tensor<10xf32>, tensor<3xf32> -> tensor<20xf32>, tensor<6xf32>
  %0:2 = sched.all_gather %w, %b {group = "partition"} : tensor<10xf32>, tensor<3xf32> -> tensor<20xf32>, tensor<6xf32>
  // CHECK: sched.reduce_scatter %{{.*}} {group = "partition"} : tensor<20xf32> -> tensor<10xf32>
  %1 = sched.reduce_scatter %g {group = "partition"} : tensor<20xf32> -> tensor<10xf32>
  // CHECK: sched.all_reduce %{{.*}} {group = "replication"} : tensor<10xf32> -> tensor<10xf32>
  %2 = sched.all_reduce %1 {group = "replication"} : tensor<10xf32> -> tensor<10xf32>
  // CHECK: sched.local_shard %{{.*}} {group = "partition"} : tensor<20xf32> -> tensor<10xf32>
  %3 = sched.local_shard %g {group = "partition"} : tensor<20xf32> -> tensor<10xf32>
  // CHECK: sched.all_reduce %{{.*}} {group = "world"} : tensor<f32> -> tensor<f32>
  %4 = sched.all_reduce %s {group = "world"} : tensor<f32> -> tensor<f32>
  return %0#0, %0#1, %2, %3, %4 : tensor<20xf32>, tensor<6xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>
}

// Collectives are not CSE'd: two gathers of one shard stay two.
// CHECK-LABEL: func.func @not_cse
// CHECK-COUNT-2: sched.all_gather
func.func @not_cse(%w: tensor<10xf32>) -> (tensor<20xf32>, tensor<20xf32>) {
  %0 = sched.all_gather %w {group = "partition"} : tensor<10xf32> -> tensor<20xf32>
  %1 = sched.all_gather %w {group = "partition"} : tensor<10xf32> -> tensor<20xf32>
  return %0, %1 : tensor<20xf32>, tensor<20xf32>
}

// CHECK-LABEL: func.func @moves
// CHECK: %[[R:.*]] = sched.reload %{{.*}} {tier = "host"} : tensor<8xf32>
// CHECK: sched.offload %[[R]] {tier = "ssd"} : tensor<8xf32>
func.func @moves(%m: tensor<8xf32>) -> tensor<8xf32> {
  %0 = sched.reload %m {tier = "host"} : tensor<8xf32>
  %1 = sched.offload %0 {tier = "ssd"} : tensor<8xf32>
  return %1 : tensor<8xf32>
}
