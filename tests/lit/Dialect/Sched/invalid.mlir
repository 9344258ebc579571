// RUN: strata-opt %s -split-input-file -verify-diagnostics

func.func @unknown_group(%w: tensor<10xf32>) {
  // expected-error @+2 {{failed to parse Sched_GroupAttr parameter 'value' which is to be a `::strata::sched::Group`}}
  // expected-error @+1 {{expected ::strata::sched::Group to be one of: partition, replication, world, inter, intra}}
  %0 = sched.all_gather node %w : tensor<10xf32> -> tensor<20xf32>
  return
}

// -----

func.func @no_operands() {
  // expected-error @+1 {{needs one result per operand and at least one}}
  "sched.all_reduce"() {group = #sched<group world>} : () -> ()
  return
}

// -----

func.func @gather_not_a_multiple(%w: tensor<10xf32>) {
  // expected-error @+1 {{operand 0: 25 elements are not a whole number of 10-element shards}}
  %0 = sched.all_gather partition %w : tensor<10xf32> -> tensor<25xf32>
  return
}

// -----

func.func @gather_groups_differ(%w: tensor<10xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operand 1 implies a group of 4, operand 0 of 2}}
  %0:2 = sched.all_gather partition %w, %b : tensor<10xf32>, tensor<3xf32> -> tensor<20xf32>, tensor<12xf32>
  return
}

// -----

func.func @gather_not_flat(%w: tensor<2x5xf32>) {
  // expected-error @+1 {{operand 0 and its result must be 1-D}}
  %0 = sched.all_gather partition %w : tensor<2x5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @scatter_element_type(%g: tensor<20xf32>) {
  // expected-error @+1 {{operand 0 and its result have different element types}}
  %0 = sched.reduce_scatter partition %g : tensor<20xf32> -> tensor<10xf16>
  return
}

// -----

func.func @reduce_types(%g: tensor<20xf32>) {
  // expected-error @+1 {{operand 0 and its result have different types}}
  %0 = sched.all_reduce replication %g : tensor<20xf32> -> tensor<10xf32>
  return
}

// -----

func.func @local_shard_size(%g: tensor<20xf32>) {
  // expected-error @+1 {{result must be a 1-D slice of the 1-D operand}}
  %0 = sched.local_shard partition %g : tensor<20xf32> -> tensor<7xf32>
  return
}

// -----

func.func @reload_tier(%m: tensor<8xf32>) {
  // expected-error @+2 {{failed to parse Sched_TierAttr parameter 'value' which is to be a `::strata::sched::Tier`}}
  // expected-error @+1 {{expected ::strata::sched::Tier to be one of: device, host, ssd}}
  %0 = sched.reload tape %m : tensor<8xf32>
  return
}

// -----

func.func @offload_tier(%m: tensor<8xf32>) {
  // expected-error @+1 {{moves between the device and host or ssd, not device}}
  %0 = sched.offload device %m : tensor<8xf32>
  return
}

// -----

func.func @activation_to_ssd(%x: tensor<8xf32>) {
  %a = graph.tanh %x : tensor<8xf32>
  // expected-error @+1 {{offloads activations to the host tier only, not ssd}}
  %s = sched.offload activation ssd %a : tensor<8xf32>
  return
}

// -----

func.func @activation_of_argument(%x: tensor<8xf32>) {
  // expected-error @+1 {{with 'activation' must copy a value an op computed, not a function argument}}
  %s = sched.offload activation host %x : tensor<8xf32>
  return
}

// -----

// The host copy is no device memory: only a reload may read it.
func.func @host_copy_read_by_kernel(%x: tensor<8xf32>) -> tensor<8xf32> {
  %a = graph.tanh %x : tensor<8xf32>
  // expected-error @+1 {{with 'activation' has a result only 'sched.reload activation' may read, but 'graph.exp' reads it}}
  %s = sched.offload activation host %a : tensor<8xf32>
  %b = graph.exp %s : tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

func.func @activation_reload_of_state(%m: tensor<8xf32>) {
  // expected-error @+1 {{with 'activation' must read the result of a 'sched.offload activation'}}
  %r = sched.reload activation host %m : tensor<8xf32>
  return
}

// -----

func.func @state_reload_of_value(%x: tensor<8xf32>) {
  %a = graph.tanh %x : tensor<8xf32>
  // expected-error @+1 {{reloads persistent state, a function argument; a value an op computed is reloaded with 'activation' from its 'sched.offload activation'}}
  %r = sched.reload host %a : tensor<8xf32>
  return
}

// -----

// A host copy's slot is in the host activation arena, checked against its
// size.
func.func @outside_host_arena(%x: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 64, live = 32, host = 32>} {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  // expected-error @+1 {{result 0 of 'sched.offload' lies at [32, 64), outside its function's host activation arena of 32 bytes}}
  %s = sched.offload activation host %a {sched.slots = [#sched.slot<32, 32>]} : tensor<8xf32>
  %r = sched.reload activation host %s {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Two host copies live at once in the same bytes of the host arena (the
// device arena's bytes [0, 32) are another memory: %a and %s share them).
func.func @host_overlap(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {sched.arena = #sched.arena<size = 128, live = 64, host = 64>} {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  %s = sched.offload activation host %a {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  %b = graph.exp %x {sched.slots = [#sched.slot<32, 32>]} : tensor<8xf32>
  // expected-error @+1 {{result 0 of 'sched.offload' at [0, 32) overlaps result 0 of 'sched.offload' at [0, 32) while both are live}}
  %t = sched.offload activation host %b {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  %r = sched.reload activation host %s {sched.slots = [#sched.slot<64, 32>]} : tensor<8xf32>
  %q = sched.reload activation host %t {sched.slots = [#sched.slot<96, 32>]} : tensor<8xf32>
  return %r, %q : tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @offloaded_counts() attributes {
    // expected-error @+1 {{offloaded values and bytes must be >= 0 and both 0 or both positive, got values = 0, bytes = 64}}
    sched.offloaded = #sched.offloaded<values = 0, bytes = 64, arena_before = 128, live_before = 64, at_peak = 0>} {
  return
}

// -----

// A wait on a token that no sched.record produces could never complete.
func.func @wait_never_produced(%t: !sched.token) {
  // expected-error @+1 {{token 0 is not produced by a sched.record: the wait could never complete}}
  sched.wait %t on compute
  return
}

// -----

func.func @wait_own_stream() {
  %t = sched.record on compute
  // expected-error @+1 {{token 0 was recorded on its own stream (compute): a stream is ordered already, the wait does nothing}}
  sched.wait %t on compute
  return
}

// -----

func.func @unknown_stream() {
  // expected-error @+2 {{expected ::strata::sched::Stream to be one of: compute, collective, h2d, d2h, ssd}}
  // expected-error @+2 {{failed to parse Sched_StreamAttr parameter 'value' which is to be a `::strata::sched::Stream`}}
  %t = sched.record on network
  return
}

// -----

// Two values live at once in the same bytes of the arena: %a is still read
// by the add when %b is written over it.
func.func @overlap(%x: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 128, live = 64>} {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  // expected-error @+1 {{result 0 of 'graph.exp' at [0, 32) overlaps result 0 of 'graph.tanh' at [0, 32) while both are live: the memory plan gives two live values the same bytes}}
  %b = graph.exp %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  %c = graph.add %a, %b {sched.slots = [#sched.slot<64, 32>]} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// The same bytes reused once the first value is dead: no error. An
// in-place op (add of same-typed operands) may write its result over an
// operand that dies there.
func.func @reuse_after_death(%x: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 64, live = 64>} {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  %b = graph.exp %a {sched.slots = [#sched.slot<32, 32>]} : tensor<8xf32>
  %c = graph.exp %b {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  %d = graph.add %c, %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %d : tensor<8xf32>
}

// -----

// In place, but over an operand that is still read later: an error.
func.func @in_place_too_early(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {sched.arena = #sched.arena<size = 64, live = 64>} {
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>
  // expected-error @+1 {{result 0 of 'graph.add' at [0, 32) overlaps result 0 of 'graph.tanh' at [0, 32) while both are live}}
  %b = graph.add %a, %x {sched.slots = [#sched.slot<0, 32>]} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @outside_arena(%x: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 64, live = 32>} {
  // expected-error @+1 {{result 0 of 'graph.tanh' lies at [64, 96), outside its function's arena of 64 bytes}}
  %a = graph.tanh %x {sched.slots = [#sched.slot<64, 32>]} : tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

func.func @slot_too_small(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{result 0 needs 32 bytes but its slot has 16}}
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 16>]} : tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

func.func @slot_count(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{has 2 memory slots for 1 results}}
  %a = graph.tanh %x {sched.slots = [#sched.slot<0, 32>, unit]} : tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

func.func @unplanned_op(%x: tensor<8xf32>) -> tensor<8xf32> attributes {sched.arena = #sched.arena<size = 64, live = 32>} {
  // expected-error @+1 {{has no 'sched.slots' in a function with a memory plan}}
  %a = graph.tanh %x : tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

func.func @arena_bound(%x: tensor<8xf32>) attributes {
    // expected-error @+1 {{an arena's lower bound must lie in [0, size], got size = 32, live = 64}}
    sched.arena = #sched.arena<size = 32, live = 64>} {
  return
}

// -----

// expected-error @+1 {{has unknown sched dialect attribute 'sched.colour'}}
func.func @unknown_attribute() attributes {sched.colour = 3 : i64} {
  return
}

// -----

// expected-error @+1 {{'sched.stream' must be a #sched<stream ...>}}
func.func @stream_not_enum() attributes {sched.stream = "compute"} {
  return
}

// -----

// expected-error @+1 {{argument 0: 'sched.tier' must be a #sched<tier ...>}}
func.func @tier_not_enum(%m: tensor<8xf32> {sched.tier = "host"}) {
  return
}

// -----

// A stage past the pipeline's last.
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [3]>} {
  func.func @stage_past_last(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{runs on stage 2 of a pipeline of 2 stages}}
    %0 = graph.tanh %x {sched.stage = 2 : i64} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

func.func @stage_without_pipeline(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has 'sched.stage' but its module has no 'sched.pipeline'}}
  %0 = graph.tanh %x {sched.stage = 0 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{pipeline boundaries must be strictly increasing layer indices above 0, got [3, 3]}}
module attributes {sched.pipeline = #sched.pipeline<stages = 3, boundaries = [3, 3]>} {
}

// -----

// expected-error @+1 {{'sched.pipeline' must be a #sched.pipeline on a module}}
func.func @pipeline_on_a_function() attributes {sched.pipeline = #sched.pipeline<stages = 1, boundaries = []>} {
  return
}

// -----

module attributes {sched.pipeline = #sched.pipeline<stages = 3, boundaries = [1, 2]>} {
  func.func @send_to_itself(%h: tensor<4xf32>) {
    // expected-error @+1 {{'sched.send' op on stage 2 names its own stage}}
    sched.send %h to 2 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 2 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @recv_from_no_stage() -> tensor<4xf32> {
    // expected-error @+1 {{'sched.recv' op names stage 2 of a pipeline of 2 stages}}
    %h = sched.recv from 2 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    return %h : tensor<4xf32>
  }
}

// -----

module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @send_without_a_stage(%h: tensor<4xf32>) {
    // expected-error @+1 {{'sched.send' op needs a 'sched.stage': the stage it runs on}}
    sched.send %h to 1 {micro_batch = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

func.func @send_outside_a_pipeline(%h: tensor<4xf32>) {
  // expected-error @+1 {{'sched.send' op needs a module with 'sched.pipeline'}}
  sched.send %h to 1 {micro_batch = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @negative_micro_batch(%h: tensor<4xf32>) {
    // expected-error @+1 {{'sched.send' op needs a non-negative micro_batch and tag, got -1 and 0}}
    sched.send %h to 1 {micro_batch = -1 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

// expected-error @+1 {{'sched.schedule' must be "1f1b" or "zb" on a function}}
func.func @unknown_schedule() attributes {sched.schedule = "gpipe"} {
  return
}

// -----

// expected-error @+1 {{'sched.stage_cost' must be array<f64: F, B, W> of non-negative costs on a function}}
func.func @two_costs() attributes {sched.stage_cost = array<f64: 1.0, 2.0>} {
  return
}
