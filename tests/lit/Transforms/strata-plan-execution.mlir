// RUN: strata-opt %s --strata-plan-execution | FileCheck %s

// What the runtime would otherwise infer: delayable instructions, random
// ops' RNG streams and seed slots, products TF32 computes exactly.

// CHECK-LABEL: func.func @decisions
func.func @decisions(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %s: tensor<4xf32>,
                     %q: tensor<1x1x4x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x3xf32>, tensor<8xf32>, tensor<1x1x4x8xf32>) {
  // CHECK: graph.round_to
  // CHECK-NOT: sched.
  // CHECK-SAME: tensor<2x3xf32>
  %xr = graph.round_to bf16 %x : tensor<2x3xf32>
  %wr = graph.round_to bf16 %w : tensor<3x4xf32>
  %wf = graph.round_to fp16 %w : tensor<3x4xf32>
  // Both factors bf16 values: exact in TF32.
  // CHECK: graph.matmul {{.*}}sched.exact_tf32 = bf16
  %y1 = graph.matmul %xr, %wr : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  // A bf16 and an fp16 factor: TF32's 10 mantissa bits keep both (marked
  // f16, the wider).
  // CHECK: graph.matmul {{.*}}sched.exact_tf32 = f16
  %y2 = graph.matmul %xr, %wf : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  // A factor that is not rounded: not marked.
  // CHECK: graph.matmul
  // CHECK-NOT: sched.exact_tf32
  // CHECK-SAME: -> tensor<2x4xf32>
  %y3 = graph.matmul %x, %wr : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  // A random op: its stream is its instruction number (6: constants and
  // events are not instructions), its seed slot the first.
  // CHECK: graph.dropout {{.*}}sched.rng_stream = 6 : i64, sched.seed_slot = 0 : i64
  %d, %m = graph.dropout %x {ratio = 0.1 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>, tensor<2x3xi1>
  // A collective may be delayed by --inject-delay.
  // CHECK: sched.all_gather partition {{.*}}{sched.delayable}
  %g = sched.all_gather partition %s : tensor<4xf32> -> tensor<8xf32>
  // Attention with dropout that autodiff paired with its gradient: the
  // shared stream, tagged by the top bit (2^63 + 5).
  // CHECK: graph.attention {{.*}}sched.rng_stream = -9223372036854775803 : i64, sched.seed_slot = 1 : i64
  %a = graph.attention %q, %q, %q {dropout_ratio = 0.1 : f64, rng_stream = 5 : i64, scale = 0.35 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %y1, %y2, %d, %g, %a : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x3xf32>, tensor<8xf32>, tensor<1x1x4x8xf32>
}
