// RUN: strata-opt %s -split-input-file -verify-diagnostics --strata-verify-schedule

// Deliberately broken schedules; each must be caught, naming the two
// instructions. The ops carry what strata-schedule, strata-plan-memory and
// strata-insert-events would have left (streams, slots, events).

// A compute op reads an all-gather's result with no wait for it.
func.func @read_before_produced(%s: tensor<4xf32> {graph.name = "s", graph.role = #graph<role parameter>}) -> (tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  // expected-error @+1 {{strata-verify-schedule: @read_before_produced: 'graph.tanh' (instruction 1 on stream compute) and 'sched.all_gather' (instruction 0 on stream collective) touch the same bytes, one writing, and no wait orders them}}
  %y = graph.tanh %g {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Memory reused too early: the gather writes the bytes %a lived in while
// the compute stream may still be reading them (exp reads %a).
func.func @reuse_while_read(%x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}, %s: tensor<4xf32> {graph.name = "s", graph.role = #graph<role parameter>}) -> (tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  %b = graph.exp %a {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  // expected-error @+1 {{'sched.all_gather' (instruction 2 on stream collective) and 'graph.tanh' (instruction 0 on stream compute) touch the same bytes, one writing, and no wait orders them}}
  %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  %t = sched.record on collective
  sched.wait %t on compute
  %y = graph.add %b, %g {sched.slots = [#sched.slot<128, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// The same with the events strata-insert-events would add: no error.
func.func @reuse_after_wait(%x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}, %s: tensor<4xf32> {graph.name = "s", graph.role = #graph<role parameter>}) -> (tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  %b = graph.exp %a {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  %t0 = sched.record on compute
  sched.wait %t0 on collective
  %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  %t1 = sched.record on collective
  sched.wait %t1 on compute
  %y = graph.add %b, %g {sched.slots = [#sched.slot<128, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A token recorded too early orders nothing: the record comes before the
// gather it should follow.
func.func @record_before_producer(%s: tensor<4xf32> {graph.name = "s", graph.role = #graph<role parameter>}) -> (tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %t = sched.record on collective
  %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  sched.wait %t on compute
  // expected-error @+1 {{'graph.tanh' (instruction 1 on stream compute) and 'sched.all_gather' (instruction 0 on stream collective) touch the same bytes, one writing, and no wait orders them}}
  %y = graph.tanh %g {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A state written on one stream (the offload into m's host storage) while
// another may still be reading it (the reload), and the offload reads %n
// with no wait for the add that computes it.
func.func @state_race(%m: tensor<8xf32> {graph.name = "m", graph.role = #graph<role optimizer_state>, sched.tier = #sched<tier host>}, %x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}) -> (tensor<8xf32> {graph.name = "m", graph.role = #graph<role optimizer_state>}, tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %r = sched.reload host %m {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream h2d>} : tensor<8xf32>
  %t = sched.record on h2d
  sched.wait %t on compute
  %n = graph.add %r, %x {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{'sched.offload' (instruction 2 on stream d2h) and 'sched.reload' (instruction 0 on stream h2d) touch the same bytes, one writing, and no wait orders them}}
  %o = sched.offload host %n {sched.slots = [unit], sched.stream = #sched<stream d2h>} : tensor<8xf32>
  %y = graph.tanh %x {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  return %o, %y : tensor<8xf32>, tensor<8xf32>
}

// -----

// Collectives on two streams: the ranks could issue them in different
// orders.
func.func @two_collective_streams(%s: tensor<4xf32> {graph.name = "s", graph.role = #graph<role parameter>}, %t: tensor<4xf32> {graph.name = "t", graph.role = #graph<role parameter>}) -> (tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  // expected-error @+1 {{'sched.all_gather' (instruction 1 on stream compute) is a collective off stream collective and off stream reduce: the ranks could issue collectives in different orders and deadlock}}
  %h = sched.all_gather partition %t {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<4xf32> -> tensor<8xf32>
  %e = sched.record on collective
  sched.wait %e on compute
  %y = graph.add %g, %h {sched.slots = [#sched.slot<128, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Gathers on "collective" and a reduction on "reduce" (communicators of
// its own), each consumer waiting for its producer: no error.
func.func @reduce_stream(%s: tensor<4xf32> {graph.name = "s", graph.role = #graph<role parameter>}, %x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}) -> (tensor<4xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  %g = sched.all_gather partition %s {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
  %t0 = sched.record on collective
  sched.wait %t0 on compute
  %a = graph.add %g, %x {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %t1 = sched.record on compute
  sched.wait %t1 on reduce
  %r = sched.reduce_scatter partition %a {sched.slots = [#sched.slot<128, 64>], sched.stream = #sched<stream reduce>} : tensor<8xf32> -> tensor<4xf32>
  %t2 = sched.record on reduce
  sched.wait %t2 on compute
  %y = graph.tanh %r {sched.slots = [#sched.slot<192, 64>], sched.stream = #sched<stream compute>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A reduction's result read on the compute stream with no wait for the
// reduce stream (late accumulation without its event).
func.func @reduction_read_unordered(%x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}, %acc: tensor<4xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}) -> (tensor<4xf32> {graph.name = "grad:w", graph.role = #graph<role gradient>}) {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  %t1 = sched.record on compute
  sched.wait %t1 on reduce
  %r = sched.reduce_scatter partition %a {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream reduce>} : tensor<8xf32> -> tensor<4xf32>
  %t2 = sched.record on reduce
  // expected-error @+1 {{'graph.add' (instruction 2 on stream compute) and 'sched.reduce_scatter' (instruction 1 on stream reduce) touch the same bytes, one writing, and no wait orders them}}
  %y = graph.add %acc, %r {sched.slots = [#sched.slot<128, 64>], sched.stream = #sched<stream compute>} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The compute stream reuses the bytes a reduction is still reading (its
// operand's slot) before waiting for it.
func.func @reuse_while_reducing(%x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}) -> (tensor<4xf32> {graph.name = "y", graph.role = #graph<role output>}, tensor<8xf32> {graph.name = "z", graph.role = #graph<role output>}) {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  %t1 = sched.record on compute
  sched.wait %t1 on reduce
  %r = sched.reduce_scatter partition %a {sched.slots = [#sched.slot<64, 64>], sched.stream = #sched<stream reduce>} : tensor<8xf32> -> tensor<4xf32>
  %t2 = sched.record on reduce
  // expected-error @+1 {{'graph.exp' (instruction 2 on stream compute) and 'sched.reduce_scatter' (instruction 1 on stream reduce) touch the same bytes, one writing, and no wait orders them}}
  %z = graph.exp %x {sched.slots = [#sched.slot<0, 64>], sched.stream = #sched<stream compute>} : tensor<8xf32>
  sched.wait %t2 on compute
  %y = graph.tanh %r {sched.slots = [#sched.slot<128, 64>], sched.stream = #sched<stream compute>} : tensor<4xf32>
  return %y, %z : tensor<4xf32>, tensor<8xf32>
}

// -----

func.func @unscheduled(%x: tensor<8xf32> {graph.name = "x", graph.role = #graph<role input>}) -> (tensor<8xf32> {graph.name = "y", graph.role = #graph<role output>}) {
  // expected-error @+1 {{has no stream: run strata-schedule first}}
  %y = graph.tanh %x {sched.slots = [#sched.slot<0, 64>]} : tensor<8xf32>
  return %y : tensor<8xf32>
}
