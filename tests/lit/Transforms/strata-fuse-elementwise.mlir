// RUN: strata-opt %s --strata-fuse-elementwise --split-input-file | FileCheck %s

// A product's result widened, added to the residual, the sum narrowed for
// the next product and kept wide for the next residual: one kernel, two
// results; the widened intermediate is never stored.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[F:.*]]:2 = graph.fused_elementwise %arg0, %arg1, %arg2 : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<bf16>, %[[R:.*]]: tensor<f32>, %[[S:.*]]: tensor<f32>):
// CHECK-NEXT: %[[W:.*]] = graph.cast %[[Y]] : tensor<bf16> to tensor<f32>
// CHECK-NEXT: %[[A:.*]] = graph.add %[[R]], %[[W]] : tensor<f32>, tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[G:.*]] = graph.gelu %[[A]] {approximate = #graph<approximation tanh>} : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[G]], %[[S]] : tensor<f32>, tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[N:.*]] = graph.cast %[[M]] : tensor<f32> to tensor<bf16>
// CHECK-NEXT: graph.yield %[[A]], %[[N]] : tensor<f32>, tensor<bf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]#0, %[[F]]#1
func.func @chain(%y: tensor<4x8xbf16>, %r: tensor<4x8xf32>, %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %w = graph.cast %y : tensor<4x8xbf16> to tensor<4x8xf32>
  %a = graph.add %r, %w : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %g = graph.gelu %a {approximate = #graph<approximation tanh>} : tensor<4x8xf32>
  %m = graph.mul %g, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %n = graph.cast %m : tensor<4x8xf32> to tensor<4x8xbf16>
  return %a, %n : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// The backward of gelu: widen the product's gradient, unary_grad, narrow.
// CHECK-LABEL: func.func @backward
// CHECK-NEXT: graph.fused_elementwise %arg0, %arg1, %arg2 : (tensor<16xbf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xbf16> {
// CHECK-NEXT: ^bb0(%[[DY:.*]]: tensor<bf16>, %[[X:.*]]: tensor<f32>, %[[Y:.*]]: tensor<f32>):
// CHECK-NEXT: %[[W:.*]] = graph.cast %[[DY]] : tensor<bf16> to tensor<f32>
// CHECK-NEXT: %[[D:.*]] = graph.unary_grad %[[W]], %[[X]], %[[Y]] {kind = #graph<unary gelu>}
// CHECK-NEXT: %[[N:.*]] = graph.cast %[[D]] : tensor<f32> to tensor<bf16>
// CHECK-NEXT: graph.yield %[[N]] : tensor<bf16>
func.func @backward(%dy: tensor<16xbf16>, %x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xbf16> {
  %w = graph.cast %dy : tensor<16xbf16> to tensor<16xf32>
  %d = graph.unary_grad %w, %x, %y {kind = #graph<unary gelu>} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %n = graph.cast %d : tensor<16xf32> to tensor<16xbf16>
  return %n : tensor<16xbf16>
}

// -----

// Two chains that meet: the backward of gelu reads the forward product's
// value widened again (its own chain, started first) and the incoming
// gradient's chain; the op that reads both joins them into one kernel.
// CHECK-LABEL: func.func @meeting
// CHECK-NEXT: %[[F:.*]] = graph.fused_elementwise %arg0, %arg1 :
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<bf16>, %[[DY:.*]]: tensor<bf16>):
// CHECK-NEXT: %[[WX:.*]] = graph.cast %[[X]]
// CHECK-NEXT: %[[WD:.*]] = graph.cast %[[DY]]
// CHECK-NEXT: %[[D:.*]] = graph.unary_grad %[[WD]], %[[WX]], %[[WX]]
// CHECK-NEXT: %[[N:.*]] = graph.cast %[[D]]
// CHECK-NEXT: graph.yield %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @meeting(%x: tensor<16xbf16>, %dy: tensor<16xbf16>) -> tensor<16xbf16> {
  %wx = graph.cast %x : tensor<16xbf16> to tensor<16xf32>
  %wd = graph.cast %dy : tensor<16xbf16> to tensor<16xf32>
  %d = graph.unary_grad %wd, %wx, %wx {kind = #graph<unary gelu>} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %n = graph.cast %d : tensor<16xf32> to tensor<16xbf16>
  return %n : tensor<16xbf16>
}

// -----

// Two chains that meet but may not merge: the first one's value is read
// between them (by a reduce_sum), before the op that would join them.
// CHECK-LABEL: func.func @meetingTooLate
// CHECK-NEXT: graph.exp %arg0
// CHECK-NEXT: graph.reduce_sum
// CHECK-NEXT: graph.fused_elementwise %arg1, %{{.*}} :
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<f32>, %[[E:.*]]: tensor<f32>):
// CHECK-NEXT: %[[N:.*]] = graph.neg %[[Y]]
// CHECK-NEXT: graph.add %[[E]], %[[N]]
func.func @meetingTooLate(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<1xf32>) {
  %e = graph.exp %x : tensor<4xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 0>, keepdims = true} : (tensor<4xf32>) -> tensor<1xf32>
  %n = graph.neg %y : tensor<4xf32>
  %a = graph.add %e, %n : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %a, %s : tensor<4xf32>, tensor<1xf32>
}

// -----

// Not fused: an op between the two that reads the first one's value and
// feeds the second (the fused op would have to stand before its own
// operand); integer arithmetic; a unary_grad with parameters; another
// shape.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: graph.exp
// CHECK-NEXT: graph.reduce_sum
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.add %arg1, %arg1 : tensor<4xi64>
// CHECK-NEXT: graph.mul %arg1
// CHECK-NEXT: graph.unary_grad {{.*}}alpha
// CHECK-NEXT: graph.reduce_sum
// CHECK-NEXT: graph.neg
// CHECK-NEXT: return
func.func @kept(%x: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>, tensor<4xf32>, tensor<f32>) {
  %e = graph.exp %x : tensor<4xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 0>, keepdims = true} : (tensor<4xf32>) -> tensor<1xf32>
  %a = graph.add %e, %s : tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
  %j = graph.add %i, %i : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  %k = graph.mul %i, %j : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  %g = graph.unary_grad %a, %x, %x {kind = #graph<unary leaky_relu>, alpha = 2.0e-01 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = graph.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %n = graph.neg %r : tensor<f32>
  return %a, %k, %g, %n : tensor<4xf32>, tensor<4xi64>, tensor<4xf32>, tensor<f32>
}

// -----

// A language model's loss and its gradient read the widened logits one
// after the other, with nothing as large made between them: they share one
// widening (another would be a cast kernel of its own saving no memory).
// CHECK-LABEL: func.func @lossAndGradientShareTheWidening
// CHECK-NEXT: %[[W:.*]] = graph.cast %arg0 : tensor<64x32xbf16> to tensor<64x32xf32>
// CHECK-NEXT: graph.cross_entropy %[[W]], %arg1
// CHECK-NEXT: graph.cross_entropy_grad %arg2, %[[W]], %arg1
// CHECK-NOT: graph.cast
func.func @lossAndGradientShareTheWidening(%logits: tensor<64x32xbf16>, %labels: tensor<64xi64>, %seed: tensor<f32>) -> (tensor<f32>, tensor<64x32xf32>) {
  %w = graph.cast %logits : tensor<64x32xbf16> to tensor<64x32xf32>
  %l = graph.cross_entropy %w, %labels {ignore_index = -100 : i64} : (tensor<64x32xf32>, tensor<64xi64>) -> tensor<f32>
  %g = graph.cross_entropy_grad %seed, %w, %labels {ignore_index = -100 : i64} : (tensor<f32>, tensor<64x32xf32>, tensor<64xi64>) -> tensor<64x32xf32>
  return %l, %g : tensor<f32>, tensor<64x32xf32>
}

// -----

// The same reader after something as large as the wide logits is made
// (here an f32 tensor of 64 x 32): the narrow tensor is what stays alive,
// and the widening is made again right before the later reader.
// CHECK-LABEL: func.func @farReaderWidensAgain
// CHECK-NEXT: %[[W:.*]] = graph.cast %arg0 : tensor<64x32xbf16> to tensor<64x32xf32>
// CHECK-NEXT: graph.cross_entropy %[[W]], %arg1
// CHECK-NEXT: graph.exp %arg3
// CHECK-NEXT: %[[W2:.*]] = graph.cast %arg0 : tensor<64x32xbf16> to tensor<64x32xf32>
// CHECK-NEXT: graph.cross_entropy_grad %arg2, %[[W2]], %arg1
func.func @farReaderWidensAgain(%logits: tensor<64x32xbf16>, %labels: tensor<64xi64>, %seed: tensor<f32>, %big: tensor<64x32xf32>) -> (tensor<f32>, tensor<64x32xf32>, tensor<64x32xf32>) {
  %w = graph.cast %logits : tensor<64x32xbf16> to tensor<64x32xf32>
  %l = graph.cross_entropy %w, %labels {ignore_index = -100 : i64} : (tensor<64x32xf32>, tensor<64xi64>) -> tensor<f32>
  %e = graph.exp %big : tensor<64x32xf32>
  %g = graph.cross_entropy_grad %seed, %w, %labels {ignore_index = -100 : i64} : (tensor<f32>, tensor<64x32xf32>, tensor<64xi64>) -> tensor<64x32xf32>
  return %l, %g, %e : tensor<f32>, tensor<64x32xf32>, tensor<64x32xf32>
}
