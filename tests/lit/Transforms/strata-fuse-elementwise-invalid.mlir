// graph.fused_elementwise's verifier parses its program: a bad one is a
// one-line error naming what is wrong.
// RUN: not strata-opt %s --split-input-file 2>&1 | FileCheck %s

// CHECK: error: 'graph.fused_elementwise' op unknown instruction 'frobnicate'
func.func @bad(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.fused_elementwise %x {program = "frobnicate 0", result_values = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// CHECK: error: 'graph.fused_elementwise' op operand '3' of 'add' is not a value defined before it
func.func @forward_reference(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.fused_elementwise %x {program = "add 0 3; neg 1", result_values = array<i64: 2>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
