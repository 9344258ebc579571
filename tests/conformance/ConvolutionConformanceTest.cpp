//===- ConvolutionConformanceTest.cpp - Conv and pooling: CUDA vs CPU -----===//
//
// graph.conv, graph.max_pool, graph.avg_pool and their gradients on both
// backends: 1, 2 and 3 spatial dims, groups (depthwise too), strides,
// asymmetric pads, dilations, ceil_mode, count_include_pad, odd sizes, f32
// and f64, and the CPU's errors (same message). The convolutions sum in
// the element type in another order than the CPU's GEMM (f32 rtol 1e-4,
// atol 1e-5 scaled by the spread of a sum of K products of values in
// [-1, 1), max(1, sqrt(K) / 3)); the pools pick and add exactly as the CPU
// does and must match exactly.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

/// The CPU's output size (ConvolutionKernels.cpp's windowOutputSize).
int64_t windowOut(int64_t input, int64_t kernel, int64_t stride,
                  int64_t padBegin, int64_t padEnd, int64_t dilation,
                  bool ceilMode) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t numerator =
      input + padBegin + padEnd - span + (ceilMode ? stride - 1 : 0);
  if (numerator < 0)
    return 0;
  int64_t out = numerator / stride + 1;
  if (ceilMode && (out - 1) * stride >= input + padBegin)
    --out;
  return out;
}

struct Geometry {
  std::vector<int64_t> in, kernel, strides, pads, dilations;
  std::vector<int64_t> out(bool ceilMode, bool dilated = true) const {
    size_t n = in.size();
    std::vector<int64_t> o;
    for (size_t d = 0; d < n; ++d)
      o.push_back(windowOut(in[d], kernel[d], strides[d], pads[d], pads[n + d],
                            dilated ? dilations[d] : 1, ceilMode));
    return o;
  }
};

std::vector<int64_t> concat(std::vector<int64_t> a,
                            const std::vector<int64_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

KernelAttrs convAttrs(const Geometry &g, int64_t groups) {
  KernelAttrs a;
  a.set("strides", g.strides);
  a.set("pads", g.pads);
  a.set("dilations", g.dilations);
  a.set("groups", groups);
  return a;
}

double rtolFor(DType t) { return t == DType::F32 ? 1e-4 : 1e-10; }
/// For sums of `k` products: cancellation leaves errors of the sums'
/// spread, not of each result's size.
double atolFor(DType t, int64_t k) {
  return (t == DType::F32 ? 1e-5 : 1e-12) *
         std::max(1.0, std::sqrt(double(k)) / 3);
}

/// conv, conv_grad_input and conv_grad_weight of one geometry.
void expectConv(DType t, int64_t batch, int64_t channels, int64_t outChannels,
                int64_t groups, const Geometry &g, bool bias,
                std::mt19937_64 &rng) {
  std::vector<int64_t> x = concat({batch, channels}, g.in);
  std::vector<int64_t> w = concat({outChannels, channels / groups}, g.kernel);
  std::vector<int64_t> y = concat({batch, outChannels}, g.out(false));
  int64_t taps = 1, positions = 1;
  for (size_t d = 0; d < g.in.size(); ++d)
    taps *= g.kernel[d], positions *= g.out(false)[d];
  Case fwd;
  fwd.op = "graph.conv";
  fwd.rtol = rtolFor(t);
  fwd.atol = atolFor(t, channels / groups * taps);
  fwd.inputs = {randomTensor(t, x, rng), randomTensor(t, w, rng)};
  if (bias)
    fwd.inputs.push_back(randomTensor(t, {outChannels}, rng));
  fwd.outputs = {zeros(t, y)};
  fwd.attrs = convAttrs(g, groups);
  expectConformance(fwd);

  Case gi = fwd;
  gi.op = "graph.conv_grad_input";
  gi.atol = atolFor(t, outChannels / groups * taps);
  gi.inputs = {randomTensor(t, y, rng), fwd.inputs[1]};
  gi.outputs = {fromValues(t, x, std::vector<double>(size_t(fwd.inputs[0].numel()), 5.0))};
  expectConformance(gi);

  Case gw = fwd;
  gw.op = "graph.conv_grad_weight";
  gw.atol = atolFor(t, batch * positions);
  gw.inputs = {gi.inputs[0], fwd.inputs[0]};
  gw.outputs = {fromValues(t, w, std::vector<double>(size_t(fwd.inputs[1].numel()), 5.0))};
  expectConformance(gw);
}

TEST(ConvolutionConformance, Conv2d) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  for (DType t : {DType::F32, DType::F64}) {
    // 3x3, pad 1, stride 1: a ResNet block's shape (small).
    expectConv(t, 2, 8, 16, 1, {{9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
               true, rng);
    // Strided, asymmetric pads, dilated, no bias.
    expectConv(t, 3, 4, 6, 1, {{11, 7}, {3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}},
               false, rng);
    // Groups and depthwise.
    expectConv(t, 2, 6, 9, 3, {{8, 10}, {3, 3}, {1, 2}, {1, 1, 1, 1}, {1, 1}},
               true, rng);
    expectConv(t, 2, 5, 5, 5, {{7, 7}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}},
               true, rng);
    // Pointwise (1x1) and a kernel as large as the input.
    expectConv(t, 4, 16, 8, 1, {{5, 6}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
               true, rng);
    expectConv(t, 1, 3, 2, 1, {{4, 4}, {4, 4}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
               false, rng);
    // A stem: 7x7 stride 2 pad 3 over 3 channels.
    expectConv(t, 1, 3, 8, 1, {{24, 24}, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}},
               true, rng);
  }
}

TEST(ConvolutionConformance, ImplicitGemmTilesAndSplits) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  // Several 64 x 64 tiles, cut on both sides, in every pass.
  expectConv(DType::F32, 2, 72, 80, 1,
             {{9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, true, rng);
  // Few tiles and long sums: split over blocks, added in order
  // (ConvImplicitGemm.cuh); the weight gradient sums 2 x 32 x 32.
  expectConv(DType::F32, 2, 64, 8, 1,
             {{32, 32}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, false, rng);
  expectConv(DType::F64, 1, 64, 8, 1,
             {{4, 4}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}}, true, rng);
  // A ResNet-50 stage-1 block at batch 8.
  expectConv(DType::F32, 8, 64, 64, 1,
             {{56, 56}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, false, rng);
}

TEST(ConvolutionConformance, Conv1dAnd3d) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  for (DType t : {DType::F32, DType::F64}) {
    expectConv(t, 2, 3, 4, 1, {{17}, {3}, {2}, {1, 2}, {2}}, true, rng);
    expectConv(t, 1, 4, 4, 2, {{1}, {1}, {1}, {0, 0}, {1}}, false, rng);
    expectConv(t, 2, 2, 3, 1,
               {{5, 6, 7}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 1}, {1, 1, 2}},
               true, rng);
  }
}

TEST(ConvolutionConformance, ConvErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  Geometry g{{6, 6}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}};
  auto base = [&] {
    Case c;
    c.op = "graph.conv";
    c.inputs = {randomTensor(DType::F32, {1, 4, 6, 6}, rng),
                randomTensor(DType::F32, {2, 4, 3, 3}, rng),
                randomTensor(DType::F32, {2}, rng)};
    c.outputs = {zeros(DType::F32, {1, 2, 4, 4})};
    c.attrs = convAttrs(g, 1);
    return c;
  };
  Case badOut = base();
  badOut.outputs = {zeros(DType::F32, {1, 2, 5, 5})};
  expectConformance(badOut);
  Case badGroups = base();
  badGroups.attrs.set("groups", int64_t(3));
  expectConformance(badGroups);
  Case badBias = base();
  badBias.inputs[2] = randomTensor(DType::F32, {3}, rng);
  expectConformance(badBias);
  Case types = base();
  types.inputs[1] = randomTensor(DType::F64, {2, 4, 3, 3}, rng);
  expectConformance(types);
  Case rank = base();
  rank.inputs[0] = randomTensor(DType::F32, {4, 6}, rng);
  expectConformance(rank);
  Case badStride = base();
  badStride.attrs.set("strides", std::vector<int64_t>{0, 1});
  expectConformance(badStride);
  Case shortPads = base();
  shortPads.attrs.set("pads", std::vector<int64_t>{0, 0});
  expectConformance(shortPads);
  Case gradIn = base();
  gradIn.op = "graph.conv_grad_input";
  gradIn.inputs = {randomTensor(DType::F32, {1, 2, 5, 5}, rng),
                   gradIn.inputs[1]};
  gradIn.outputs = {zeros(DType::F32, {1, 4, 6, 6})};
  expectConformance(gradIn);
  Case gradW = base();
  gradW.op = "graph.conv_grad_weight";
  gradW.inputs = {randomTensor(DType::F32, {1, 2, 4, 4}, rng),
                  randomTensor(DType::F32, {1, 3, 6, 6}, rng)};
  gradW.outputs = {zeros(DType::F32, {2, 4, 3, 3})};
  expectConformance(gradW);
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

KernelAttrs poolAttrs(const Geometry &g, bool ceilMode, bool dilations,
                      bool countIncludePad) {
  KernelAttrs a;
  a.set("kernel_shape", g.kernel);
  a.set("strides", g.strides);
  a.set("pads", g.pads);
  if (dilations)
    a.set("dilations", g.dilations);
  a.set("ceil_mode", int64_t(ceilMode));
  a.set("count_include_pad", int64_t(countIncludePad));
  return a;
}

/// max_pool and max_pool_grad of one geometry; `ties` draws few distinct
/// values, so windows hold several maxima (the first one wins).
void expectMaxPool(DType t, std::vector<int64_t> planes, const Geometry &g,
                   bool ceilMode, bool ties, std::mt19937_64 &rng) {
  std::vector<int64_t> x = concat(planes, g.in);
  std::vector<int64_t> y = concat(planes, g.out(ceilMode));
  CaseTensor input = randomTensor(t, x, rng, -2, 2);
  if (ties) {
    CaseTensor levels = randomTensor(DType::I32, x, rng, -2, 3);
    std::vector<double> v(size_t(levels.numel()));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = double(reinterpret_cast<const int32_t *>(levels.bytes.data())[i]);
    input = fromValues(t, x, v);
  }
  Case fwd;
  fwd.op = "graph.max_pool";
  fwd.rtol = fwd.atol = 0;
  fwd.inputs = {input};
  fwd.outputs = {zeros(t, y)};
  fwd.attrs = poolAttrs(g, ceilMode, true, false);
  expectConformance(fwd);
  Case grad = fwd;
  grad.op = "graph.max_pool_grad";
  grad.inputs = {randomTensor(t, y, rng), input};
  grad.outputs = {fromValues(t, x, std::vector<double>(size_t(input.numel()), 3.0))};
  expectConformance(grad);
}

void expectAvgPool(DType t, std::vector<int64_t> planes, const Geometry &g,
                   bool ceilMode, bool countIncludePad, std::mt19937_64 &rng) {
  std::vector<int64_t> x = concat(planes, g.in);
  std::vector<int64_t> y = concat(planes, g.out(ceilMode, false));
  Case fwd;
  fwd.op = "graph.avg_pool";
  fwd.rtol = fwd.atol = 0;
  fwd.inputs = {randomTensor(t, x, rng)};
  fwd.outputs = {zeros(t, y)};
  fwd.attrs = poolAttrs(g, ceilMode, false, countIncludePad);
  expectConformance(fwd);
  Case grad = fwd;
  grad.op = "graph.avg_pool_grad";
  grad.inputs = {randomTensor(t, y, rng)};
  grad.outputs = {fromValues(t, x, std::vector<double>(size_t(fwd.inputs[0].numel()), 3.0))};
  expectConformance(grad);
}

TEST(ConvolutionConformance, MaxPool) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(4);
  for (DType t : {DType::F32, DType::F64})
    for (bool ceilMode : {false, true})
      for (bool ties : {false, true}) {
        expectMaxPool(t, {2, 3}, {{8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
                      ceilMode, ties, rng);
        // Overlapping windows: an element can be picked by several.
        expectMaxPool(t, {2, 3}, {{9, 7}, {3, 3}, {2, 1}, {1, 1, 0, 1}, {1, 1}},
                      ceilMode, ties, rng);
        expectMaxPool(t, {1, 4},
                      {{11, 10}, {3, 2}, {3, 2}, {1, 0, 0, 1}, {2, 3}},
                      ceilMode, ties, rng);
        expectMaxPool(t, {3, 2}, {{13}, {4}, {3}, {2, 1}, {1}}, ceilMode, ties,
                      rng);
        expectMaxPool(t, {1, 2},
                      {{5, 6, 7}, {2, 3, 2}, {2, 2, 1}, {1, 1, 0, 0, 1, 0},
                       {1, 1, 2}},
                      ceilMode, ties, rng);
        // Global pooling.
        expectMaxPool(t, {4, 5}, {{7, 7}, {7, 7}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
                      ceilMode, ties, rng);
      }
}

TEST(ConvolutionConformance, MaxPoolNaNAndInfinity) {
  STRATA_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::F32, DType::F64}) {
    Geometry g{{4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}};
    CaseTensor x = fromValues(t, {1, 1, 4, 4},
                              {1, nan, 3, 2, 0, 5, -inf, -inf, -inf, -inf, 4,
                               nan, -inf, -inf, nan, 1});
    Case fwd;
    fwd.op = "graph.max_pool";
    fwd.rtol = fwd.atol = 0;
    fwd.inputs = {x};
    fwd.outputs = {zeros(t, {1, 1, 2, 2})};
    fwd.attrs = poolAttrs(g, false, true, false);
    expectConformance(fwd);
    Case grad = fwd;
    grad.op = "graph.max_pool_grad";
    grad.inputs = {fromValues(t, {1, 1, 2, 2}, {1, 2, 3, 4}), x};
    grad.outputs = {zeros(t, {1, 1, 4, 4})};
    expectConformance(grad);
  }
}

TEST(ConvolutionConformance, AvgPool) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  for (DType t : {DType::F32, DType::F64})
    for (bool ceilMode : {false, true})
      for (bool countIncludePad : {false, true}) {
        expectAvgPool(t, {2, 3}, {{8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
                      ceilMode, countIncludePad, rng);
        expectAvgPool(t, {2, 3}, {{9, 7}, {3, 3}, {2, 1}, {1, 1, 0, 1}, {1, 1}},
                      ceilMode, countIncludePad, rng);
        expectAvgPool(t, {1, 4}, {{10, 11}, {3, 4}, {3, 3}, {1, 0, 0, 2}, {1, 1}},
                      ceilMode, countIncludePad, rng);
        expectAvgPool(t, {3, 2}, {{13}, {4}, {3}, {2, 1}, {1}}, ceilMode,
                      countIncludePad, rng);
        expectAvgPool(t, {1, 2},
                      {{5, 6, 7}, {2, 3, 2}, {2, 2, 1}, {1, 1, 0, 0, 1, 0},
                       {1, 1, 1}},
                      ceilMode, countIncludePad, rng);
        expectAvgPool(t, {4, 5}, {{7, 7}, {7, 7}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
                      ceilMode, countIncludePad, rng);
      }
}

TEST(ConvolutionConformance, PoolErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  Geometry g{{6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}};
  for (const char *op : {"graph.max_pool", "graph.avg_pool"}) {
    Case c;
    c.op = op;
    c.inputs = {randomTensor(DType::F32, {1, 2, 6, 6}, rng)};
    c.outputs = {zeros(DType::F32, {1, 2, 3, 3})};
    c.attrs = poolAttrs(g, false, false, false);
    Case badOut = c;
    badOut.outputs = {zeros(DType::F32, {1, 2, 2, 2})};
    expectConformance(badOut);
    Case noKernel = c;
    noKernel.attrs = KernelAttrs();
    expectConformance(noKernel);
    Case rank = c;
    rank.inputs = {randomTensor(DType::F32, {2, 6}, rng)};
    expectConformance(rank);
    Case ints = c;
    ints.inputs = {zeros(DType::I32, {1, 2, 6, 6})};
    ints.outputs = {zeros(DType::I32, {1, 2, 3, 3})};
    expectConformance(ints);
  }
  Case maxGrad;
  maxGrad.op = "graph.max_pool_grad";
  maxGrad.inputs = {randomTensor(DType::F32, {1, 2, 2, 2}, rng),
                    randomTensor(DType::F32, {1, 2, 6, 6}, rng)};
  maxGrad.outputs = {zeros(DType::F32, {1, 2, 6, 6})};
  maxGrad.attrs = poolAttrs(g, false, false, false);
  expectConformance(maxGrad);
  Case maxGradOut = maxGrad;
  maxGradOut.inputs[0] = randomTensor(DType::F32, {1, 2, 3, 3}, rng);
  maxGradOut.outputs = {zeros(DType::F32, {1, 2, 6, 5})};
  expectConformance(maxGradOut);
  Case avgGrad;
  avgGrad.op = "graph.avg_pool_grad";
  avgGrad.inputs = {randomTensor(DType::F32, {1, 2, 3, 3}, rng)};
  avgGrad.outputs = {zeros(DType::F64, {1, 2, 6, 6})};
  avgGrad.attrs = poolAttrs(g, false, false, false);
  expectConformance(avgGrad);
}

} // namespace
