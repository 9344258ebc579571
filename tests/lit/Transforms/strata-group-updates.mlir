// RUN: strata-opt %s --strata-group-updates --split-input-file | FileCheck %s
// RUN: strata-opt %s "--strata-group-updates=max-bytes=4096" --split-input-file | FileCheck %s --check-prefix=CAP

// The optimizer step of three parameters: the norms' pieces become one
// sum_squares of three operands where the first stood, the updates one
// AdamW of three parameters, results in the same order. With groups of at
// most 4096 operand bytes, w1 and w2 (2048 bytes of AdamW tensors each)
// fill a group and w3 starts another; the sum_squares (1024 bytes each)
// still fit one.
// CHECK-LABEL: func.func @adamw
// CHECK: %[[S:.*]]:3 = graph.sum_squares %arg1, %arg5, %arg9 : (tensor<128xf32>, tensor<128xf32>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
// CHECK: graph.add %[[S]]#0, %[[S]]#1
// CHECK: %[[U:.*]]:9 = graph.adamw_update %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %{{.*}} {beta1
// CHECK-NOT: graph.adamw_update
// CHECK: return %{{.*}}, %[[U]]#0, %[[U]]#1, %[[U]]#2, %[[U]]#3, %[[U]]#4, %[[U]]#5, %[[U]]#6, %[[U]]#7, %[[U]]#8
// CAP-LABEL: func.func @adamw
// CAP: graph.sum_squares %arg1, %arg5, %arg9 :
// CAP: %[[A:.*]]:6 = graph.adamw_update %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg12
// CAP: %[[B:.*]]:3 = graph.adamw_update %arg8, %arg9, %arg10, %arg11, %arg12
// CAP: return %{{.*}}, %[[A]]#0, %[[A]]#1, %[[A]]#2, %[[A]]#3, %[[A]]#4, %[[A]]#5, %[[B]]#0, %[[B]]#1, %[[B]]#2
func.func @adamw(%w1: tensor<128xf32>, %g1: tensor<128xf32>, %m1: tensor<128xf32>, %v1: tensor<128xf32>,
                 %w2: tensor<128xf32>, %g2: tensor<128xf32>, %m2: tensor<128xf32>, %v2: tensor<128xf32>,
                 %w3: tensor<16xf32>, %g3: tensor<16xf32>, %m3: tensor<16xf32>, %v3: tensor<16xf32>,
                 %lr: tensor<f64>, %step: tensor<i64>)
    -> (tensor<f32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %s1 = graph.sum_squares %g1 : (tensor<128xf32>) -> tensor<f32>
  %s2 = graph.sum_squares %g2 : (tensor<128xf32>) -> tensor<f32>
  %a = graph.add %s1, %s2 : tensor<f32>, tensor<f32> -> tensor<f32>
  %s3 = graph.sum_squares %g3 : (tensor<16xf32>) -> tensor<f32>
  %t = graph.add %a, %s3 : tensor<f32>, tensor<f32> -> tensor<f32>
  %n = graph.sqrt %t : tensor<f32>
  %p1, %m1n, %v1n = graph.adamw_update %w1, %g1, %m1, %v1, %lr, %step, %n {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>)
  %p2, %m2n, %v2n = graph.adamw_update %w2, %g2, %m2, %v2, %lr, %step, %n {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>)
  %p3, %m3n, %v3n = graph.adamw_update %w3, %g3, %m3, %v3, %lr, %step, %n {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %n, %p1, %m1n, %v1n, %p2, %m2n, %v2n, %p3, %m3n, %v3n : tensor<f32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Updates merge only with the same attributes, scalars and element type:
// w1 and w3 (weight decay 0.01) merge; w2 (no weight decay, a parameter
// group of its own) stays alone, as does the f64 parameter and the update
// with another grad_scale.
// CHECK-LABEL: func.func @keys
// CHECK: graph.adamw_update %arg0, %arg1, %arg2, %arg3, %arg12, %arg13, %arg14, %arg15, %arg16, %arg17, %arg18 {{.*}}weight_decay = 1.000000e-02
// CHECK: graph.adamw_update %arg4, %arg5, %arg6, %arg7, %arg16, %arg17, %arg18 {{.*}}weight_decay = 0.000000e+00
// CHECK: graph.adamw_update %arg8, %arg9, %arg10, %arg11, %arg16, %arg17, %arg18 {{.*}}tensor<8xf64>
// CHECK: graph.adamw_update %arg0, %arg1, %arg2, %arg3, %arg16, %arg17, %arg19
func.func @keys(%w1: tensor<8xf32>, %g1: tensor<8xf32>, %m1: tensor<8xf32>, %v1: tensor<8xf32>,
                %w2: tensor<8xf32>, %g2: tensor<8xf32>, %m2: tensor<8xf32>, %v2: tensor<8xf32>,
                %w4: tensor<8xf64>, %g4: tensor<8xf64>, %m4: tensor<8xf64>, %v4: tensor<8xf64>,
                %w3: tensor<8xf32>, %g3: tensor<8xf32>, %m3: tensor<8xf32>, %v3: tensor<8xf32>,
                %lr: tensor<f64>, %step: tensor<i64>, %scale: tensor<f32>, %other: tensor<f32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf64>, tensor<8xf32>, tensor<8xf32>) {
  %p1:3 = graph.adamw_update %w1, %g1, %m1, %v1, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %p2:3 = graph.adamw_update %w2, %g2, %m2, %v2, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %p4:3 = graph.adamw_update %w4, %g4, %m4, %v4, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<8xf64>, tensor<8xf64>, tensor<8xf64>)
  %p3:3 = graph.adamw_update %w3, %g3, %m3, %v3, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %p5:3 = graph.adamw_update %w1, %g1, %m1, %v1, %lr, %step, %other {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1#0, %p2#0, %p4#0, %p3#0, %p5#0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf64>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A later update whose operand is computed after the group's first member
// cannot move up to it (w2), and one whose state another op reads in
// between would no longer run in place (w3): each starts a new group, which
// the next update joins (w4). SGD merges as AdamW does.
// CHECK-LABEL: func.func @order
// CHECK: %[[A:.*]]:2 = graph.sgd_update %arg0, %arg1, %arg2, %arg12, %arg13, %arg14
// CHECK: %[[G:.*]] = graph.mul %arg4
// CHECK: %[[B:.*]]:2 = graph.sgd_update %arg3, %[[G]], %arg5, %arg12, %arg13, %arg14
// CHECK: %[[R:.*]] = graph.neg %arg6
// CHECK: %[[C:.*]]:4 = graph.sgd_update %arg6, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg13, %arg14
// CHECK-NOT: graph.sgd_update
// CHECK: return %[[A]]#0, %[[B]]#0, %[[C]]#0, %[[C]]#2, %[[R]]
func.func @order(%w1: tensor<4xf32>, %g1: tensor<4xf32>, %b1: tensor<4xf32>,
                 %w2: tensor<4xf32>, %g2: tensor<4xf32>, %b2: tensor<4xf32>,
                 %w3: tensor<4xf32>, %g3: tensor<4xf32>, %b3: tensor<4xf32>,
                 %w4: tensor<4xf32>, %g4: tensor<4xf32>, %b4: tensor<4xf32>,
                 %lr: tensor<f64>, %step: tensor<i64>, %scale: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %p1:2 = graph.sgd_update %w1, %g1, %b1, %lr, %step, %scale {dampening = 0.0 : f64, momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  %g = graph.mul %g2, %g2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %p2:2 = graph.sgd_update %w2, %g, %b2, %lr, %step, %scale {dampening = 0.0 : f64, momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  %r = graph.neg %w3 : tensor<4xf32>
  %p3:2 = graph.sgd_update %w3, %g3, %b3, %lr, %step, %scale {dampening = 0.0 : f64, momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  %p4:2 = graph.sgd_update %w4, %g4, %b4, %lr, %step, %scale {dampening = 0.0 : f64, momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %p1#0, %p2#0, %p3#0, %p4#0, %r : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
