// RUN: strata-opt %s -split-input-file -verify-diagnostics

func.func @unknown_group(%w: tensor<10xf32>) {
  // expected-error @+1 {{group must be partition, replication, world, inter or intra, got 'node'}}
  %0 = sched.all_gather %w {group = "node"} : tensor<10xf32> -> tensor<20xf32>
  return
}

// -----

func.func @no_operands() {
  // expected-error @+1 {{needs one result per operand and at least one}}
  "sched.all_reduce"() {group = "world"} : () -> ()
  return
}

// -----

func.func @gather_not_a_multiple(%w: tensor<10xf32>) {
  // expected-error @+1 {{operand 0: 25 elements are not a whole number of 10-element shards}}
  %0 = sched.all_gather %w {group = "partition"} : tensor<10xf32> -> tensor<25xf32>
  return
}

// -----

func.func @gather_groups_differ(%w: tensor<10xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operand 1 implies a group of 4, operand 0 of 2}}
  %0:2 = sched.all_gather %w, %b {group = "partition"} : tensor<10xf32>, tensor<3xf32> -> tensor<20xf32>, tensor<12xf32>
  return
}

// -----

func.func @gather_not_flat(%w: tensor<2x5xf32>) {
  // expected-error @+1 {{operand 0 and its result must be 1-D}}
  %0 = sched.all_gather %w {group = "partition"} : tensor<2x5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @scatter_element_type(%g: tensor<20xf32>) {
  // expected-error @+1 {{operand 0 and its result have different element types}}
  %0 = sched.reduce_scatter %g {group = "partition"} : tensor<20xf32> -> tensor<10xf16>
  return
}

// -----

func.func @reduce_types(%g: tensor<20xf32>) {
  // expected-error @+1 {{operand 0 and its result have different types}}
  %0 = sched.all_reduce %g {group = "replication"} : tensor<20xf32> -> tensor<10xf32>
  return
}

// -----

func.func @local_shard_size(%g: tensor<20xf32>) {
  // expected-error @+1 {{result must be a 1-D slice of the 1-D operand}}
  %0 = sched.local_shard %g {group = "partition"} : tensor<20xf32> -> tensor<7xf32>
  return
}

// -----

func.func @reload_tier(%m: tensor<8xf32>) {
  // expected-error @+1 {{tier must be host or ssd, got 'tape'}}
  %0 = sched.reload %m {tier = "tape"} : tensor<8xf32>
  return
}

// -----

func.func @offload_tier(%m: tensor<8xf32>) {
  // expected-error @+1 {{tier must be host or ssd, got 'device'}}
  %0 = sched.offload %m {tier = "device"} : tensor<8xf32>
  return
}
