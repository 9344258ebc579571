// RUN: strata-opt %s -canonicalize -split-input-file | FileCheck %s

// Regression: folding an elementwise op whose operands are zero-element constants
// crashes (segfault): foldElementwise in GraphFolders.cpp seeds its argument
// vector with values[0][0], which does not exist for an empty tensor. The
// importer reaches it too (see empty-slice-fold.onnxtxt). Expected: the fold
// yields an empty constant (or gives up).

// CHECK-LABEL: func.func @add_empty
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<> : tensor<0xf32>
// CHECK-NEXT: return %[[C]]
func.func @add_empty() -> tensor<0xf32> {
  %a = graph.constant dense<> : tensor<0xf32>
  %0 = graph.add %a, %a : tensor<0xf32>, tensor<0xf32> -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

// CHECK-LABEL: func.func @mul_empty_broadcast
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<> : tensor<0x3xi64>
// CHECK-NEXT: return %[[C]]
func.func @mul_empty_broadcast() -> tensor<0x3xi64> {
  %a = graph.constant dense<> : tensor<0x3xi64>
  %b = graph.constant dense<[1, 2, 3]> : tensor<3xi64>
  %0 = graph.mul %a, %b : tensor<0x3xi64>, tensor<3xi64> -> tensor<0x3xi64>
  return %0 : tensor<0x3xi64>
}
