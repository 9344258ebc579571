//===- WindowPlan.h - Sliding windows of conv and pooling, for every backend -*- C++ -*-===//
//
// graph.conv, graph.max_pool, graph.avg_pool and their gradients slide a
// window over the spatial dims of an [N, C, x...] tensor. Reading and
// checking the window (strides, pads, dilations, the output shape) is the
// same on every backend: the CPU and CUDA kernels both take it from here.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_WINDOWPLAN_H
#define STRATA_RUNTIME_WINDOWPLAN_H

#include "strata/Runtime/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::runtime::window {

/// PyTorch's pooling_output_shape with separate begin and end pads; with
/// ceil_mode the last window must start inside the input or the begin
/// padding. Equals graph::slidingWindowOutputSize (the runtime does not link
/// the IR) wherever that is >= 1; with ceil_mode and a window longer than
/// the padded input, PyTorch (and this) still yields one window where the
/// IR yields none and rejects the op.
int64_t windowOutputSize(int64_t input, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation,
                         bool ceilMode);

/// A sliding window over the spatial dims of an [N, C, x...] tensor.
struct Window {
  size_t spatial = 0;
  std::vector<int64_t> in, out, kernel, strides, padBegin, padEnd, dilations;
  int64_t inPlane = 1, outPlane = 1; // elements per [n, c] plane
};

/// Reads strides, pads and (if `withDilations`) dilations; an absent list
/// means the identity (ones, zeros), as ONNX. Checks them and the output
/// shape [N, outChannels, out...] against the input.
Status readWindow(const std::string &op, const KernelAttrs &attrs,
                  const TensorView &x, const TensorView &y,
                  std::vector<int64_t> kernel, bool withDilations,
                  bool ceilMode, int64_t outChannels, Window &w);

/// graph.conv (x, weight [M, C/groups, k...], optional bias [M]) and its
/// gradients (conv_grad_input: dy, weight -> dx; conv_grad_weight: dy, x ->
/// dw): the arity, dtypes, ranks, channels against groups, the bias and the
/// window. `taps` is the kernel's size; `mg` = m / groups output channels
/// per group, `cg` input channels per group.
struct ConvGeometry {
  int64_t groups = 1, m = 0, cg = 0, mg = 0, taps = 1;
  Window w;
};
/// Also refuses GEMM dimensions (mg, cg * taps, the output plane) beyond
/// BLAS's int range.
Status planConv(const KernelContext &ctx, ConvGeometry &g);
Status planConvGrad(const KernelContext &ctx, bool wantInput,
                    ConvGeometry &g);

/// graph.max_pool / graph.avg_pool (`op`; dilations for max_pool only):
/// the arity, attribute kernel_shape and the window; the output keeps C.
Status planPool(const std::string &op, const KernelContext &ctx,
                bool withDilations, Window &w);
/// graph.max_pool_grad (dy, x -> dx) and graph.avg_pool_grad (dy -> dx):
/// their operands and the forward's window.
Status planMaxPoolGrad(const KernelContext &ctx, Window &w);
Status planAvgPoolGrad(const KernelContext &ctx, Window &w);

} // namespace strata::runtime::window

#endif // STRATA_RUNTIME_WINDOWPLAN_H
