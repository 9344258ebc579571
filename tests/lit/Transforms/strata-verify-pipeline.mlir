// RUN: not strata-opt %s -split-input-file --strata-verify-pipeline 2>&1 | FileCheck %s

// Planted bugs in stage programs that strata-stage-programs would not
// write; the verifier proves the real ones (strata-stage-programs.mlir).

// A correct exchange passes: nothing is printed for it.
// CHECK-NOT: good
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @pipeline_step_0(%h0: tensor<4xf32>, %h1: tensor<4xf32>) attributes {sched.stage = 0 : i64} {
    sched.send %h0 to 1 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    sched.send %h1 to 1 {micro_batch = 1 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    %g0 = sched.recv from 1 {micro_batch = 0 : i64, tag = 1 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    %g1 = sched.recv from 1 {micro_batch = 1 : i64, tag = 1 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @pipeline_step_1() attributes {sched.stage = 1 : i64} {
    %a0 = sched.recv from 0 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    sched.send %a0 to 0 {micro_batch = 0 : i64, tag = 1 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    %a1 = sched.recv from 0 {micro_batch = 1 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    sched.send %a1 to 0 {micro_batch = 1 : i64, tag = 1 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    return
  }
}

// -----

// A dropped receive: stage 1 never receives micro-batch 1's activation.
// CHECK: error: strata-verify-pipeline: stage 0 sends value 0 of micro-batch 1 to stage 1, which never receives it
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @pipeline_step_0(%h0: tensor<4xf32>, %h1: tensor<4xf32>) attributes {sched.stage = 0 : i64} {
    sched.send %h0 to 1 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    sched.send %h1 to 1 {micro_batch = 1 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @pipeline_step_1() attributes {sched.stage = 1 : i64} {
    %a0 = sched.recv from 0 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    return
  }
}

// -----

// Swapped micro-batches: stage 1 takes micro-batch 1 first.
// CHECK: error: strata-verify-pipeline: stage 1 waits for value 0 of micro-batch 1 from stage 0, but stage 0 sent value 0 of micro-batch 0 first
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @pipeline_step_0(%h0: tensor<4xf32>, %h1: tensor<4xf32>) attributes {sched.stage = 0 : i64} {
    sched.send %h0 to 1 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    sched.send %h1 to 1 {micro_batch = 1 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @pipeline_step_1() attributes {sched.stage = 1 : i64} {
    %a1 = sched.recv from 0 {micro_batch = 1 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    %a0 = sched.recv from 0 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    return
  }
}

// -----

// A cycle: each stage receives before it sends what the other waits for.
// CHECK: error: strata-verify-pipeline: the schedule deadlocks: stage 0 waits for value 1 of micro-batch 0 from stage 1; stage 1 waits for value 0 of micro-batch 0 from stage 0
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @pipeline_step_0(%h0: tensor<4xf32>) attributes {sched.stage = 0 : i64} {
    %g0 = sched.recv from 1 {micro_batch = 0 : i64, tag = 1 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    sched.send %h0 to 1 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @pipeline_step_1(%g: tensor<4xf32>) attributes {sched.stage = 1 : i64} {
    %a0 = sched.recv from 0 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    sched.send %g to 0 {micro_batch = 0 : i64, tag = 1 : i64, sched.stage = 1 : i64} : tensor<4xf32>
    return
  }
}

// -----

// A stage without its program.
// CHECK: error: strata-verify-pipeline: stage 1 has no @pipeline_step_1
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [1]>} {
  func.func @pipeline_step_0() attributes {sched.stage = 0 : i64} {
    return
  }
}
