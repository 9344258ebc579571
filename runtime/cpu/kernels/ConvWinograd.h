//===- ConvWinograd.h - Winograd F(2x2, 3x3) convolutions on the CPU ------===//
//
// 3 x 3, stride 1, undilated, ungrouped f32 convolutions by Lavin and
// Gray's Winograd F(2 x 2, 3 x 3): every 2 x 2 block of outputs ("tile")
// comes from a 4 x 4 block of input through 16 elementwise products in the
// transformed domain, 2.25x fewer multiplies than the direct sum. The
// products over channels are 16 GEMMs, one per transformed element, over
// blocks of tiles. graph.conv, graph.conv_grad_input (the same convolution
// of dy with the kernel flipped and its channels swapped) and
// graph.conv_grad_weight (the transposed products, summed over tiles in the
// transformed domain) take this path where winogradApplies says so
// (ConvolutionKernels.cpp); the results round differently from im2col's
// direct sums, within a few float ulps of the sum's magnitude. A non-finite
// input stays non-finite in the outputs, but may turn their Inf into NaN
// and reach the other outputs of its tile (Inf - Inf in the transforms).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CPU_CONVWINOGRAD_H
#define STRATA_RUNTIME_CPU_CONVWINOGRAD_H

#include "strata/Runtime/WindowPlan.h"

#include <cstdint>

namespace strata::runtime::cpu {

/// One 3 x 3 convolution's sizes: x [batch, cin, inH, inW] ->
/// y [batch, cout, outH, outW], outputs at input offset -padTop, -padLeft
/// (outH and outW may leave some of the end padding unread).
struct Conv3x3Shape {
  int64_t batch = 0, cin = 0, cout = 0, inH = 0, inW = 0, outH = 0, outW = 0;
  int64_t padTop = 0, padLeft = 0;
};

/// Whether the Winograd path takes this convolution: 2-D, one group, a
/// 3 x 3 kernel, unit strides and dilations, every pad at most 2 (the
/// gradient's flipped pads 2 - p stay non-negative), and at least 16 input
/// and output channels (below that the transforms cost more than the
/// multiplies they save), over at least 64 tiles of 2 x 2 outputs in the
/// batch, 256 for conv_grad_weight (`gradWeight`; fewer make GEMMs too
/// thin to beat im2col's). STRATA_CONV_WINOGRAD=0 in the environment turns
/// the path off (im2col's direct sums everywhere, as before it existed).
bool winogradApplies(const window::ConvGeometry &geometry, int64_t batch,
                     bool gradWeight);

/// The Conv3x3Shape of graph.conv's x [N, C, H, W] with this geometry.
Conv3x3Shape conv3x3Shape(const window::ConvGeometry &geometry, int64_t batch);

/// y = conv(x, weight [cout, cin, 3, 3]) + bias (bias may be null).
void winogradConv3x3(const Conv3x3Shape &s, const float *x, const float *weight,
                     const float *bias, float *y);

/// dx [batch, cin, inH, inW] of y = conv(x, weight) given dy.
void winogradConv3x3GradInput(const Conv3x3Shape &s, const float *dy,
                              const float *weight, float *dx);

/// dw [cout, cin, 3, 3] of y = conv(x, weight) given dy and x.
void winogradConv3x3GradWeight(const Conv3x3Shape &s, const float *dy,
                               const float *x, float *dw);

} // namespace strata::runtime::cpu

#endif // STRATA_RUNTIME_CPU_CONVWINOGRAD_H
