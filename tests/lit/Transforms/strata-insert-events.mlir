// RUN: strata-opt %s --strata-insert-events | FileCheck %s
// RUN: strata-opt %s --strata-insert-events --strata-verify-schedule -o /dev/null

// strata-insert-events alone, on ops that carry what strata-schedule and
// strata-plan-memory left (streams, slots).
// - The first gather writes the bytes %a lived in: it waits for the exp,
//   %a's last reader (a token recorded right after it).
// - Each add reads a gather's result: it waits for a token recorded right
//   after that gather.
// - The last add writes over the first gather's bytes: the wait for that
//   gather already orders them, so no new wait.
// CHECK-LABEL: func.func @step
// CHECK-SAME: attributes {sched.streams = [#sched<stream compute>, #sched<stream collective>]}
// CHECK: graph.tanh
// CHECK-NEXT: graph.exp
// CHECK-NEXT: %[[E:.*]] = sched.record on compute
// CHECK-NEXT: sched.wait %[[E]] on collective
// CHECK-NEXT: sched.all_gather partition
// CHECK-NEXT: %[[G:.*]] = sched.record on collective
// CHECK-NEXT: sched.all_gather partition
// CHECK-NEXT: %[[H:.*]] = sched.record on collective
// CHECK-NEXT: sched.wait %[[G]] on compute
// CHECK-NEXT: graph.add
// CHECK-NEXT: sched.wait %[[H]] on compute
// CHECK-NEXT: graph.add
// CHECK-NEXT: return
func.func @step(%x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}, %s: tensor<4xf32> {graph.name = "s", graph.role = #graph<role parameter>}) -> (tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  %b = graph.exp %a {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  %h = sched.all_gather partition %s {sched.slots = [#sched.slot<128, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  %c = graph.add %b, %g {sched.slots = [#sched.slot<192, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %y = graph.add %c, %h {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}
