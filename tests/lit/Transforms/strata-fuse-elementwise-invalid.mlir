// RUN: strata-opt %s --split-input-file -verify-diagnostics

// graph.fused_elementwise's verifier checks its body: only ops the fused
// kernels run, one element each, the inputs' and results' element types,
// the kernels' limits.

func.func @not_fusible(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    // expected-error @+1 {{'graph.softmax' op cannot run in a graph.fused_elementwise body}}
    %s = graph.softmax %a {axis = 0 : i64} : tensor<f32>
    graph.yield %s : tensor<f32>
  }
  return %y : tensor<4xf32>
}

// -----

func.func @parameters(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    // expected-error @+1 {{'graph.unary_grad' op cannot run in a graph.fused_elementwise body}}
    %g = graph.unary_grad %a, %a, %a {alpha = 2.0e-01 : f64, kind = #graph<unary leaky_relu>} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<f32>
    graph.yield %g : tensor<f32>
  }
  return %y : tensor<4xf32>
}

// -----

func.func @argument_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body argument 0 must be one element of its input, 'tensor<f32>', got 'tensor<bf16>'}}
  %y = graph.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<bf16>):
    %n = graph.neg %a : tensor<bf16>
    %w = graph.cast %n : tensor<bf16> to tensor<f32>
    graph.yield %w : tensor<f32>
  }
  return %y : tensor<4xf32>
}

// -----

func.func @yield_type(%x: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{body yields 'tensor<f32>' for result 'tensor<4xbf16>'}}
  %y = graph.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xbf16> {
  ^bb0(%a: tensor<f32>):
    %n = graph.neg %a : tensor<f32>
    graph.yield %n : tensor<f32>
  }
  return %y : tensor<4xbf16>
}

// -----

func.func @broadcast(%x: tensor<4xf32>, %z: tensor<3xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{input 'tensor<3xf32>' does not broadcast to the results}}
  %y = graph.fused_elementwise %x, %z : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = graph.add %a, %b : tensor<f32>, tensor<f32> -> tensor<f32>
    graph.yield %s : tensor<f32>
  }
  return %y : tensor<4xf32>
}

// -----

func.func @empty(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body must hold 1 to 24 ops, got 0}}
  %y = graph.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    graph.yield %a : tensor<f32>
  }
  return %y : tensor<4xf32>
}
