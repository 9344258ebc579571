// RUN: strata-opt %s | strata-opt | FileCheck %s
// RUN: strata-opt %s --mlir-print-op-generic | strata-opt | FileCheck %s

// A value passed from stage 0 to stage 1 and its gradient back.
// CHECK: module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [4]>}
module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [4]>} {
  // CHECK-LABEL: func.func @stage0
  // CHECK: sched.send %{{.*}} to 1 {micro_batch = 3 : i64, sched.stage = 0 : i64, tag = 0 : i64} : tensor<8x32xf32>
  // CHECK: sched.recv from 1 {micro_batch = 3 : i64, sched.stage = 0 : i64, tag = 1 : i64} : tensor<8x32xf32>
  func.func @stage0(%h: tensor<8x32xf32>) -> tensor<8x32xf32> {
    sched.send %h to 1 {micro_batch = 3 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<8x32xf32>
    %g = sched.recv from 1 {micro_batch = 3 : i64, tag = 1 : i64, sched.stage = 0 : i64} : tensor<8x32xf32>
    return %g : tensor<8x32xf32>
  }
  // CHECK-LABEL: func.func @stage1
  // CHECK: sched.recv from 0
  // CHECK: sched.send %{{.*}} to 0
  func.func @stage1(%g: tensor<8x32xf32>) -> tensor<8x32xf32> {
    %h = sched.recv from 0 {micro_batch = 3 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<8x32xf32>
    sched.send %g to 0 {micro_batch = 3 : i64, tag = 1 : i64, sched.stage = 1 : i64} : tensor<8x32xf32>
    return %h : tensor<8x32xf32>
  }
}
