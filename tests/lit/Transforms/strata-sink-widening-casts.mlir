// RUN: strata-opt %s --strata-sink-widening-casts --split-input-file | FileCheck %s

// Heads out of a bf16 product: split, reshape, transpose run on bf16 and the
// widen / narrow pair cancels.
// CHECK-LABEL: func.func @heads
// CHECK-NEXT: %[[S:.*]]:2 = graph.split %arg0 {axis = 1 : i64} : (tensor<4x8xbf16>) -> (tensor<4x4xbf16>, tensor<4x4xbf16>)
// CHECK-NEXT: %[[W:.*]] = graph.cast %[[S]]#1 : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[S]]#0 : tensor<4x4xbf16> -> tensor<4x2x2xbf16>
// CHECK-NEXT: %[[T:.*]] = graph.transpose %[[R]] {perm = array<i64: 1, 0, 2>} : (tensor<4x2x2xbf16>) -> tensor<2x4x2xbf16>
// CHECK-NEXT: return %[[T]], %[[W]]
func.func @heads(%x: tensor<4x8xbf16>) -> (tensor<2x4x2xbf16>, tensor<4x4xf32>) {
  %w = graph.cast %x : tensor<4x8xbf16> to tensor<4x8xf32>
  %s:2 = graph.split %w {axis = 1 : i64} : (tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %r = graph.reshape %s#0 : tensor<4x4xf32> -> tensor<4x2x2xf32>
  %t = graph.transpose %r {perm = array<i64: 1, 0, 2>} : (tensor<4x2x2xf32>) -> tensor<2x4x2xf32>
  %n = graph.cast %t : tensor<2x4x2xf32> to tensor<2x4x2xbf16>
  return %n, %s#1 : tensor<2x4x2xbf16>, tensor<4x4xf32>
}

// -----

// A concat of gradients widened from one narrow type concatenates narrow.
// CHECK-LABEL: func.func @concat
// CHECK-NEXT: %[[C:.*]] = graph.concat %arg0, %arg1 {axis = 0 : i64} : (tensor<2x3xf16>, tensor<2x3xf16>) -> tensor<4x3xf16>
// CHECK-NEXT: return %[[C]]
func.func @concat(%a: tensor<2x3xf16>, %b: tensor<2x3xf16>) -> tensor<4x3xf16> {
  %wa = graph.cast %a : tensor<2x3xf16> to tensor<2x3xf32>
  %wb = graph.cast %b : tensor<2x3xf16> to tensor<2x3xf32>
  %c = graph.concat %wa, %wb {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %n = graph.cast %c : tensor<4x3xf32> to tensor<4x3xf16>
  return %n : tensor<4x3xf16>
}

// -----

// Left alone: a widened value with another use (moving the cast would keep
// both copies), mixed narrow types in a concat, a narrowing cast into
// another narrow type (bf16 -> f32 -> f16 rounds), compute ops.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: graph.cast %arg0 : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: graph.reshape %{{.*}} : tensor<4xf32> -> tensor<2x2xf32>
// CHECK-NEXT: graph.cast %arg1 : tensor<2xbf16> to tensor<2xf32>
// CHECK-NEXT: graph.cast %arg2 : tensor<2xf16> to tensor<2xf32>
// CHECK-NEXT: graph.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT: graph.cast %{{.*}} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: graph.neg %{{.*}} : tensor<4xf32>
func.func @kept(%x: tensor<4xbf16>, %y: tensor<2xbf16>, %z: tensor<2xf16>) -> (tensor<2x2xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>) {
  %w = graph.cast %x : tensor<4xbf16> to tensor<4xf32>
  %r = graph.reshape %w : tensor<4xf32> -> tensor<2x2xf32>
  %wy = graph.cast %y : tensor<2xbf16> to tensor<2xf32>
  %wz = graph.cast %z : tensor<2xf16> to tensor<2xf32>
  %c = graph.concat %wy, %wz {axis = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  %h = graph.cast %c : tensor<4xf32> to tensor<4xf16>
  %n = graph.neg %w : tensor<4xf32>
  return %r, %c, %h, %n : tensor<2x2xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>
}
