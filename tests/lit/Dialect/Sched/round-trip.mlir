// RUN: strata-opt %s | strata-opt | FileCheck %s
// RUN: strata-opt %s --mlir-print-op-generic | strata-opt | FileCheck %s

// CHECK-LABEL: func.func @collectives
func.func @collectives(%w: tensor<10xf32>, %b: tensor<3xf32>, %g: tensor<20xf32>,
                       %s: tensor<f32>) -> (tensor<20xf32>, tensor<6xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>) {
  // CHECK: %{{.*}}:2 = sched.all_gather partition %{{.*}}, %{{.*}} : tensor<10xf32>, tensor<3xf32> -> tensor<20xf32>, tensor<6xf32>
  %0:2 = sched.all_gather partition %w, %b : tensor<10xf32>, tensor<3xf32> -> tensor<20xf32>, tensor<6xf32>
  // CHECK: sched.reduce_scatter partition %{{.*}} : tensor<20xf32> -> tensor<10xf32>
  %1 = sched.reduce_scatter partition %g : tensor<20xf32> -> tensor<10xf32>
  // CHECK: sched.all_reduce replication %{{.*}} : tensor<10xf32> -> tensor<10xf32>
  %2 = sched.all_reduce replication %1 : tensor<10xf32> -> tensor<10xf32>
  // CHECK: sched.local_shard partition %{{.*}} : tensor<20xf32> -> tensor<10xf32>
  %3 = sched.local_shard partition %g : tensor<20xf32> -> tensor<10xf32>
  // CHECK: sched.all_reduce world %{{.*}} : tensor<f32> -> tensor<f32>
  %4 = sched.all_reduce world %s : tensor<f32> -> tensor<f32>
  return %0#0, %0#1, %2, %3, %4 : tensor<20xf32>, tensor<6xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>
}

// Collectives are not CSE'd: two gathers of one shard stay two.
// CHECK-LABEL: func.func @not_cse
// CHECK-COUNT-2: sched.all_gather
func.func @not_cse(%w: tensor<10xf32>) -> (tensor<20xf32>, tensor<20xf32>) {
  %0 = sched.all_gather partition %w : tensor<10xf32> -> tensor<20xf32>
  %1 = sched.all_gather partition %w : tensor<10xf32> -> tensor<20xf32>
  return %0, %1 : tensor<20xf32>, tensor<20xf32>
}

// CHECK-LABEL: func.func @moves
// CHECK: %[[R:.*]] = sched.reload host %{{.*}} : tensor<8xf32>
// CHECK: sched.offload ssd %[[R]] : tensor<8xf32>
func.func @moves(%m: tensor<8xf32>) -> tensor<8xf32> {
  %0 = sched.reload host %m : tensor<8xf32>
  %1 = sched.offload ssd %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// An activation's moves: its copy in the host activation arena (a slot
// there, the arena's `host` bytes), brought back for backward; what the
// function moved; the module's host activation arena.
// CHECK-LABEL: module attributes {sched.memory_plan = #sched.memory_plan<arena = 128, live = 96, page_size = 4096, alignment = 64, device = 128, host = 64, ssd = 0, budget = 0, host_arena = 64>}
// CHECK: func.func @activation_moves(%{{.*}}: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 128, live = 96, host = 64>, sched.offloaded = #sched.offloaded<values = 1, bytes = 32, arena_before = 128, live_before = 96, at_peak = 32>}
// CHECK: %[[A:.*]] = graph.tanh
// CHECK: %[[S:.*]] = sched.offload activation host %[[A]] {sched.slots = [#sched.slot<0, 64>]} : tensor<8xf32>
// CHECK: %[[R:.*]] = sched.reload activation host %[[S]] {sched.slots = [#sched.slot<0, 64>]} : tensor<8xf32>
module attributes {sched.memory_plan = #sched.memory_plan<arena = 128, live = 96, page_size = 4096, alignment = 64, device = 128, host = 64, ssd = 0, budget = 0, host_arena = 64>} {
  func.func @activation_moves(%x: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 128, live = 96, host = 64>, sched.offloaded = #sched.offloaded<values = 1, bytes = 32, arena_before = 128, live_before = 96, at_peak = 32>} {
    %a = graph.tanh %x {sched.slots = [#sched.slot<0, 64>]} : tensor<8xf32>
    %s = sched.offload activation host %a {sched.slots = [#sched.slot<0, 64>]} : tensor<8xf32>
    %b = graph.exp %a {sched.slots = [#sched.slot<64, 64>]} : tensor<8xf32>
    %r = sched.reload activation host %s {sched.slots = [#sched.slot<0, 64>]} : tensor<8xf32>
    %c = graph.add %b, %r {sched.slots = [#sched.slot<64, 64>]} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    return %c : tensor<8xf32>
  }
}

// -----

// The schedule and the memory plan: streams, events, slots, the arena, a
// tier on an argument, the module's totals.
// CHECK-LABEL: module attributes {sched.memory_plan = #sched.memory_plan<arena = 128, live = 96, page_size = 4096, alignment = 64, device = 192, host = 64, ssd = 0, budget = 0>}
// CHECK: func.func @planned(%{{.*}}: tensor<4xf32> {sched.tier = #sched<tier host>}, %{{.*}}: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 128, live = 96>, sched.streams = [#sched<stream compute>, #sched<stream collective>]}
// CHECK: %[[G:.*]] = sched.all_gather partition %{{.*}} {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
// CHECK: %[[T:.*]] = sched.record on collective
// CHECK: sched.wait %[[T]] on compute
// CHECK: graph.add %{{.*}}, %[[G]] {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>}
module attributes {sched.memory_plan = #sched.memory_plan<arena = 128, live = 96, page_size = 4096, alignment = 64, device = 192, host = 64, ssd = 0, budget = 0>} {
  func.func @planned(%s: tensor<4xf32> {sched.tier = #sched<tier host>}, %x: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 128, live = 96>, sched.streams = [#sched<stream compute>, #sched<stream collective>]} {
    %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
    %t = sched.record on collective
    sched.wait %t on compute
    %y = graph.add %x, %g {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}
