// RUN: strata-opt %s -split-input-file -verify-diagnostics --strata-verify-schedule

// Deliberately broken schedules; each must be caught, naming the two
// instructions. The ops carry what strata-schedule, strata-plan-memory and
// strata-insert-events would have left (streams, offsets, ids, waits).

// A compute op reads an all-gather's result with no wait for it.
func.func @read_before_produced(%s: tensor<4xf32> {graph.name = "s", graph.role = "parameter"}) -> (tensor<8xf32> {graph.name = "y", graph.role = "output"}) {
  %g = sched.all_gather %s {group = "partition", memory.offsets = array<i64: 0>, sched.id = 0 : i64, sched.stream = "collective"} : tensor<4xf32> -> tensor<8xf32>
  // expected-error @+1 {{strata-verify-schedule: @read_before_produced: 'graph.tanh' (instruction 1 on stream compute) and 'sched.all_gather' (instruction 0 on stream collective) touch the same bytes, one writing, and no wait orders them}}
  %y = graph.tanh %g {memory.offsets = array<i64: 64>, sched.id = 1 : i64, sched.stream = "compute"} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Memory reused too early: the gather writes the bytes %a lived in while
// the compute stream may still be reading them (exp reads %a).
func.func @reuse_while_read(%x: tensor<8xf32> {graph.name = "x", graph.role = "input"}, %s: tensor<4xf32> {graph.name = "s", graph.role = "parameter"}) -> (tensor<8xf32> {graph.name = "y", graph.role = "output"}) {
  %a = graph.tanh %x {memory.offsets = array<i64: 0>, sched.id = 0 : i64, sched.stream = "compute"} : tensor<8xf32>
  %b = graph.exp %a {memory.offsets = array<i64: 64>, sched.id = 1 : i64, sched.stream = "compute"} : tensor<8xf32>
  // expected-error @+1 {{'sched.all_gather' (instruction 2 on stream collective) and 'graph.tanh' (instruction 0 on stream compute) touch the same bytes, one writing, and no wait orders them}}
  %g = sched.all_gather %s {group = "partition", memory.offsets = array<i64: 0>, sched.id = 2 : i64, sched.stream = "collective"} : tensor<4xf32> -> tensor<8xf32>
  %y = graph.add %b, %g {memory.offsets = array<i64: 128>, sched.id = 3 : i64, sched.stream = "compute", sched.waits = array<i64: 2>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// The same with the wait the events pass would insert: no error.
func.func @reuse_after_wait(%x: tensor<8xf32> {graph.name = "x", graph.role = "input"}, %s: tensor<4xf32> {graph.name = "s", graph.role = "parameter"}) -> (tensor<8xf32> {graph.name = "y", graph.role = "output"}) {
  %a = graph.tanh %x {memory.offsets = array<i64: 0>, sched.id = 0 : i64, sched.stream = "compute"} : tensor<8xf32>
  %b = graph.exp %a {memory.offsets = array<i64: 64>, sched.id = 1 : i64, sched.stream = "compute"} : tensor<8xf32>
  %g = sched.all_gather %s {group = "partition", memory.offsets = array<i64: 0>, sched.id = 2 : i64, sched.stream = "collective", sched.waits = array<i64: 1>} : tensor<4xf32> -> tensor<8xf32>
  %y = graph.add %b, %g {memory.offsets = array<i64: 128>, sched.id = 3 : i64, sched.stream = "compute", sched.waits = array<i64: 2>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A state written on one stream (the offload into m's host storage) while
// another may still be reading it (the reload), and the offload reads %n
// with no wait for the add that computes it.
func.func @state_race(%m: tensor<8xf32> {graph.name = "m", graph.role = "optimizer_state", memory.tier = "host"}, %x: tensor<8xf32> {graph.name = "x", graph.role = "input"}) -> (tensor<8xf32> {graph.name = "m", graph.role = "optimizer_state"}, tensor<8xf32> {graph.name = "y", graph.role = "output"}) {
  %r = sched.reload %m {memory.offsets = array<i64: 0>, sched.id = 0 : i64, sched.stream = "h2d", tier = "host"} : tensor<8xf32>
  %n = graph.add %r, %x {memory.offsets = array<i64: 0>, sched.id = 1 : i64, sched.stream = "compute", sched.waits = array<i64: 0>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{'sched.offload' (instruction 2 on stream d2h) and 'sched.reload' (instruction 0 on stream h2d) touch the same bytes, one writing, and no wait orders them}}
  %o = sched.offload %n {memory.offsets = array<i64: -1>, sched.id = 2 : i64, sched.stream = "d2h", tier = "host"} : tensor<8xf32>
  %y = graph.tanh %x {memory.offsets = array<i64: 64>, sched.id = 3 : i64, sched.stream = "compute"} : tensor<8xf32>
  return %o, %y : tensor<8xf32>, tensor<8xf32>
}

// -----

// A wait on an instruction that runs later: it could wait forever.
func.func @wait_on_later(%x: tensor<8xf32> {graph.name = "x", graph.role = "input"}) -> (tensor<8xf32> {graph.name = "y", graph.role = "output"}) {
  // expected-error @+1 {{'graph.tanh' (instruction 0 on stream compute) waits for instruction 1, which does not run before it (a wait must name an earlier instruction)}}
  %a = graph.tanh %x {memory.offsets = array<i64: 0>, sched.id = 0 : i64, sched.stream = "compute", sched.waits = array<i64: 1>} : tensor<8xf32>
  %y = graph.exp %a {memory.offsets = array<i64: 64>, sched.id = 1 : i64, sched.stream = "compute"} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Collectives on two streams: the ranks could issue them in different
// orders.
func.func @two_collective_streams(%s: tensor<4xf32> {graph.name = "s", graph.role = "parameter"}, %t: tensor<4xf32> {graph.name = "t", graph.role = "parameter"}) -> (tensor<8xf32> {graph.name = "y", graph.role = "output"}) {
  %g = sched.all_gather %s {group = "partition", memory.offsets = array<i64: 0>, sched.id = 0 : i64, sched.stream = "collective"} : tensor<4xf32> -> tensor<8xf32>
  // expected-error @+1 {{'sched.all_gather' (instruction 1 on stream compute) is a collective off stream collective: the ranks could issue collectives in different orders and deadlock}}
  %h = sched.all_gather %t {group = "partition", memory.offsets = array<i64: 64>, sched.id = 1 : i64, sched.stream = "compute"} : tensor<4xf32> -> tensor<8xf32>
  %y = graph.add %g, %h {memory.offsets = array<i64: 128>, sched.id = 2 : i64, sched.stream = "compute", sched.waits = array<i64: 0>} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @unscheduled(%x: tensor<8xf32> {graph.name = "x", graph.role = "input"}) -> (tensor<8xf32> {graph.name = "y", graph.role = "output"}) {
  // expected-error @+1 {{has no stream: run strata-schedule first}}
  %y = graph.tanh %x {memory.offsets = array<i64: 0>} : tensor<8xf32>
  return %y : tensor<8xf32>
}
