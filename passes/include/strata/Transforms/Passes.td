//===- Passes.td - Strata passes ---------------------------*- tablegen -*-===//
//
// Every Strata pass, grouped by the stage of the flow it belongs to. Flags
// start with `strata-`; options are Option<>s.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_PASSES_TD
#define STRATA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Graph cleanup after import
//===----------------------------------------------------------------------===//

def RaiseGraphPass : Pass<"strata-raise-graph", "::mlir::func::FuncOp"> {
  let summary = "Recognise linear, GELU, LayerNorm and attention as single ops";
  let description = [{
    Exporters decompose the modules a user wrote; the passes after import
    want them whole. This pass rewrites:
    - `matmul(x, W)` with a rank-2 `W` into `linear`, folding a following
      `add` of a rank-1 bias and a `transpose` of the weight;
    - `0.5 * x * (1 + erf(x / sqrt(2)))` into `gelu {approximate = "none"}`
      and the tanh form into `gelu {approximate = "tanh"}`;
    - a hand-written layer norm, `(x - mean(x)) / sqrt(var(x) + eps)
      [* scale] [+ bias]` over trailing axes (also with a reciprocal square
      root), into `layer_norm`;
    - `softmax(q @ k^T * scale (+ mask | masked_fill(-inf))) [dropout] @ v`
      into `attention`, with `causal = true` when the mask is the constant
      causal mask. A finite fill of at most -1e9 (torch.finfo(dtype).min)
      counts as -inf when every row keeps at least one score: its exponent
      then underflows to exactly 0, as -inf's does.

    Before:
    ```mlir
    %0 = graph.matmul %x, %w : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
    %1 = graph.add %0, %b : tensor<8x256xf32>, tensor<256xf32> -> tensor<8x256xf32>
    ```
    After:
    ```mlir
    %1 = graph.linear %x, %w, %b : (tensor<8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
  let options = [
    Option<"fuseAttention", "fuse-attention", "bool", /*default=*/"true",
           "Recognise scaled-dot-product attention">,
  ];
}

#endif // STRATA_TRANSFORMS_PASSES_TD
