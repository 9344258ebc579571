// RUN: strata-opt %s --split-input-file --strata-mixed-precision | FileCheck %s
// RUN: strata-opt %s --split-input-file "--strata-mixed-precision=dtype=fp16 storage=f32" | FileCheck %s --check-prefix=EMUL
// RUN: not strata-opt %s --split-input-file "--strata-mixed-precision=dtype=fp8" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not strata-opt %s --split-input-file "--strata-mixed-precision=dtype=fp32" 2>&1 | FileCheck %s --check-prefix=FP32

// strata-mixed-precision alone, on the ops autocast runs in low precision
// (linear, matmul, attention, conv); the rest (tanh) stays f32.
// Narrow storage (the default): the operands are cast to bf16, the product
// is bf16, and it is widened for its f32 readers.
// CHECK-LABEL: func.func @linear
// CHECK: %[[X:.*]] = graph.cast %arg0 : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK: %[[W:.*]] = graph.cast %arg1 : tensor<3x4xf32> to tensor<3x4xbf16>
// CHECK: %[[B:.*]] = graph.cast %arg2 : tensor<3xf32> to tensor<3xbf16>
// CHECK: %[[Y:.*]] = graph.linear %[[X]], %[[W]], %[[B]] {{.*}} -> tensor<2x3xbf16>
// CHECK: %[[WIDE:.*]] = graph.cast %[[Y]] : tensor<2x3xbf16> to tensor<2x3xf32>
// CHECK: graph.tanh %[[WIDE]] : tensor<2x3xf32>
// The f32 emulation: the same values, kept in f32 and rounded.
// EMUL-LABEL: func.func @linear
// EMUL: %[[X:.*]] = graph.round_to fp16 %arg0 : tensor<2x4xf32>
// EMUL: %[[W:.*]] = graph.round_to fp16 %arg1
// EMUL: %[[B:.*]] = graph.round_to fp16 %arg2
// EMUL: %[[Y:.*]] = graph.linear %[[X]], %[[W]], %[[B]] {{.*}} -> tensor<2x3xf32>
// EMUL: %[[R:.*]] = graph.round_to fp16 %[[Y]]
// EMUL: graph.tanh %[[R]]
// BAD: for the --dtype option: Cannot find option named 'fp8'!
// FP32: error: strata-mixed-precision: dtype must be bf16 or fp16, not fp32
func.func @linear(%x: tensor<2x4xf32>, %w: tensor<3x4xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %y = graph.linear %x, %w, %b {transpose_weight = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %t = graph.tanh %y : tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}

// -----

// Attention's additive mask keeps f32 (-inf must survive bf16); q, k, v go
// narrow.
// CHECK-LABEL: func.func @attention
// CHECK: %[[Q:.*]] = graph.cast %arg0 : tensor<1x2x4x8xf32> to tensor<1x2x4x8xbf16>
// CHECK: %[[K:.*]] = graph.cast %arg0
// CHECK: %[[V:.*]] = graph.cast %arg0
// CHECK-NOT: graph.cast %arg1
// CHECK: graph.attention %[[Q]], %[[K]], %[[V]], %arg1
func.func @attention(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %a = graph.attention %q, %q, %q, %m {scale = 0.35 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32>
  return %a : tensor<1x2x4x8xf32>
}
