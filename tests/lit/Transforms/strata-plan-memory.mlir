// RUN: strata-opt %s --split-input-file --strata-plan-memory | FileCheck %s
// RUN: strata-opt %s --split-input-file "--strata-plan-memory=alignment=256 page-size=1024" | FileCheck %s --check-prefix=ALIGN
// RUN: not strata-opt %s --split-input-file "--strata-plan-memory=alignment=48" 2>&1 | FileCheck %s --check-prefix=BAD

// A chain: each value lives from its op to the next, so two slots suffice
// and they alternate; an op's result never shares its operand's bytes.
// The input (64 bytes) is device state: 192 device bytes in all.
// CHECK-LABEL: module attributes {sched.memory_plan = #sched.memory_plan<arena = 128, live = 128, page_size = 4194304, alignment = 64, device = 192, host = 0, ssd = 0, budget = 0>}
// CHECK: func.func @chain
// CHECK-SAME: attributes {sched.arena = #sched.arena<size = 128, live = 128>}
// CHECK: graph.tanh %{{.*}} {sched.slots = [#sched.slot<0, {{[0-9]+}}>]}
// CHECK: graph.exp %{{.*}} {sched.slots = [#sched.slot<64, {{[0-9]+}}>]}
// CHECK: graph.neg %{{.*}} {sched.slots = [#sched.slot<0, {{[0-9]+}}>]}
// CHECK: graph.exp %{{.*}} {sched.slots = [#sched.slot<64, {{[0-9]+}}>]}
// ALIGN: #sched.memory_plan<arena = 512, live = 128, page_size = 1024, alignment = 256,
// ALIGN: graph.exp %{{.*}} {sched.slots = [#sched.slot<256, {{[0-9]+}}>]}
// BAD: error: strata-plan-memory: alignment must be a power of two, got 48
func.func @chain(%x: tensor<16xf32> {graph.name = "x", graph.role = #graph<role input>}) -> (tensor<16xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %0 = graph.tanh %x : tensor<16xf32>
  %1 = graph.exp %0 : tensor<16xf32>
  %2 = graph.neg %1 : tensor<16xf32>
  %3 = graph.exp %2 : tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----

// A long-lived value (%big, read at the end) keeps its bytes; the short
// ones reuse the rest. Largest first: %big at 0. The lower bound counts raw
// bytes (a 3-element f32 is 12 bytes), the arena aligned ones.
// CHECK-LABEL: func.func @long_lived
// CHECK-SAME: attributes {sched.arena = #sched.arena<size = 384, live = 332>}
// CHECK: %[[BIG:.*]] = graph.tanh %{{.*}} {sched.slots = [#sched.slot<0, {{[0-9]+}}>]} : tensor<64xf32>
// CHECK: graph.exp %{{.*}} {sched.slots = [#sched.slot<256, {{[0-9]+}}>]} : tensor<16xf32>
// CHECK: graph.neg %{{.*}} {sched.slots = [#sched.slot<320, {{[0-9]+}}>]} : tensor<3xf32>
func.func @long_lived(%x: tensor<64xf32> {graph.name = "x", graph.role = #graph<role input>}, %y: tensor<16xf32> {graph.name = "y", graph.role = #graph<role input>}, %z: tensor<3xf32> {graph.name = "z", graph.role = #graph<role input>}) -> (tensor<64xf32> {graph.name = "big", graph.role = #graph<role output>}, tensor<16xf32> {graph.name = "small", graph.role = #graph<role output>}, tensor<3xf32> {graph.name = "tiny", graph.role = #graph<role output>}) {
  %big = graph.tanh %x : tensor<64xf32>
  %0 = graph.exp %y : tensor<16xf32>
  %1 = graph.neg %z : tensor<3xf32>
  return %big, %0, %1 : tensor<64xf32>, tensor<16xf32>, tensor<3xf32>
}

// -----

// A state update computed straight into its state's storage (the AdamW
// update is the last reader of the old value) takes no arena bytes: -1.
// Constants take none either.
// CHECK-LABEL: func.func @state
// CHECK: graph.constant
// CHECK-NOT: sched.slots
// CHECK: graph.mul %{{.*}} {sched.slots = [#sched.slot<0, {{[0-9]+}}>]}
// CHECK: graph.add %{{.*}} {sched.slots = [unit]}
func.func @state(%w: tensor<8xf32> {graph.name = "w", graph.role = #graph<role parameter>}, %g: tensor<8xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}) -> (tensor<8xf32> {graph.name = "w", graph.role = #graph<role parameter>}) {
  %c = graph.constant dense<0.5> : tensor<8xf32>
  %0 = graph.mul %g, %c : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %1 = graph.add %w, %0 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// A reshape whose operand dies there takes the operand's bytes (row-major:
// the same elements in the same order, so no copy); one whose operand is
// read again later gets its own.
// CHECK-LABEL: func.func @reshapes
// CHECK: %[[T:.*]] = graph.tanh %{{.*}} {sched.slots = [#sched.slot<0, 64>]}
// CHECK-NEXT: graph.reshape %[[T]] {sched.slots = [#sched.slot<0, 64>]}
// CHECK-NEXT: %[[E:.*]] = graph.exp %{{.*}} {sched.slots = [#sched.slot<64, 64>]}
// CHECK-NEXT: graph.reshape %[[E]] {sched.slots = [#sched.slot<0, 64>]}
// CHECK-NEXT: graph.neg %[[E]] {sched.slots = [#sched.slot<128, 64>]}
func.func @reshapes(%x: tensor<16xf32> {graph.name = "x", graph.role = #graph<role input>}) -> (tensor<16xf32> {graph.name = "y", graph.role = #graph<role output>}, tensor<4x4xf32> {graph.name = "z", graph.role = #graph<role output>}) {
  %0 = graph.tanh %x : tensor<16xf32>
  %1 = graph.reshape %0 : tensor<16xf32> -> tensor<4x4xf32>
  %2 = graph.exp %1 : tensor<4x4xf32>
  %3 = graph.reshape %2 : tensor<4x4xf32> -> tensor<16xf32>
  %4 = graph.neg %2 : tensor<4x4xf32>
  return %3, %4 : tensor<16xf32>, tensor<4x4xf32>
}
