//===- ConvolutionGradKernelsTest.cpp - Gradients of conv and pooling -----===//
//
// conv_grad_input, conv_grad_weight, max_pool_grad and avg_pool_grad against
// central differences of graph.conv, graph.max_pool and graph.avg_pool over
// 1-d, 2-d and 3-d windows with groups, strides, asymmetric pads, dilations
// and ceil_mode; max_pool's ties against PyTorch 1.13 (F.max_pool2d, then
// backward with dy = 1..n): the first maximum in window order takes the
// gradient and padding never does.
//
//===----------------------------------------------------------------------===//

#include "GradKernelTestUtils.h"

#include <algorithm>
#include <numeric>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

/// PyTorch's pooling output size with separate pads (the forward's rule).
int64_t windowOut(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                  int64_t padEnd, int64_t dilation, bool ceilMode) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t num = in + padBegin + padEnd - span + (ceilMode ? stride - 1 : 0);
  int64_t out = num / stride + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool ceilMode = false;

  std::vector<int64_t> outShape(const std::vector<int64_t> &x,
                                int64_t channels) const {
    size_t n = kernel.size();
    std::vector<int64_t> out{x[0], channels};
    for (size_t d = 0; d < n; ++d)
      out.push_back(windowOut(x[d + 2], kernel[d], strides[d], pads[d],
                              pads[d + n], dilations.empty() ? 1 : dilations[d],
                              ceilMode));
    return out;
  }
};

//===----------------------------------------------------------------------===//
// conv
//===----------------------------------------------------------------------===//

struct ConvCase {
  std::vector<int64_t> x, w;
  int64_t groups;
  std::vector<int64_t> strides, pads, dilations;
};

void checkConv(std::mt19937_64 &rng, const ConvCase &c) {
  KernelAttrs attrs;
  attrs.set("strides", c.strides);
  attrs.set("pads", c.pads);
  attrs.set("dilations", c.dilations);
  attrs.set("groups", c.groups);
  Window win{std::vector<int64_t>(c.w.begin() + 2, c.w.end()), c.strides,
             c.pads, c.dilations};
  std::vector<int64_t> yShape = win.outShape(c.x, c.w[0]);
  OwnedTensor x = randomF64(rng, c.x), wt = randomF64(rng, c.w);
  OwnedTensor bias = randomF64(rng, {c.w[0]}), y(DType::F64, yShape);
  OwnedTensor w = randomF64(rng, yShape);
  OwnedTensor dx(DType::F64, c.x), dw(DType::F64, c.w);
  // Stale results: the kernels must start from zero.
  std::fill_n(dx.view().as<double>(), dx.view().numel(), 3.0);
  std::fill_n(dw.view().as<double>(), dw.view().numel(), 3.0);
  Status s = runCpuKernel("graph.conv_grad_input", {&w, &wt}, {&dx}, attrs);
  ASSERT_TRUE(s) << s.message();
  s = runCpuKernel("graph.conv_grad_weight", {&w, &x}, {&dw}, attrs);
  ASSERT_TRUE(s) << s.message();
  Forward f{"graph.conv", {&x, &wt, &bias}, {&y}, attrs};
  std::vector<double> wv = w.values<double>();
  expectGradient(dx.values<double>(), f.numericGradient(0, wv));
  expectGradient(dw.values<double>(), f.numericGradient(1, wv));

  OwnedTensor x32 = toF32(x), wt32 = toF32(wt), w32 = toF32(w);
  OwnedTensor dx32(DType::F32, c.x), dw32(DType::F32, c.w);
  ASSERT_TRUE(
      runCpuKernel("graph.conv_grad_input", {&w32, &wt32}, {&dx32}, attrs));
  ASSERT_TRUE(
      runCpuKernel("graph.conv_grad_weight", {&w32, &x32}, {&dw32}, attrs));
  expectF32Matches(dx32, dx);
  expectF32Matches(dw32, dw);
}

TEST(ConvolutionGradKernels, Conv2dGroupsStridesPadsDilations) {
  std::mt19937_64 rng(20);
  checkConv(rng, {{2, 4, 5, 6}, {4, 2, 3, 2}, 2, {2, 1}, {1, 0, 0, 1}, {1, 2}});
  // Depthwise, 1x1 (the forward's pointwise path).
  checkConv(rng, {{1, 3, 3, 4}, {3, 1, 2, 2}, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}});
  checkConv(rng, {{2, 3, 3, 3}, {5, 3, 1, 1}, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}});
}

TEST(ConvolutionGradKernels, Conv1dAnd3d) {
  std::mt19937_64 rng(21);
  checkConv(rng, {{1, 3, 7}, {2, 3, 3}, 1, {2}, {2, 1}, {2}});
  checkConv(rng, {{1, 2, 3, 4, 3},
                  {4, 1, 2, 2, 2},
                  2,
                  {1, 2, 1},
                  {0, 1, 1, 0, 0, 1},
                  {1, 1, 2}});
}

TEST(ConvolutionGradKernels, ConvGradChecksShapes) {
  KernelAttrs attrs;
  attrs.set("strides", std::vector<int64_t>{1, 1});
  attrs.set("pads", std::vector<int64_t>{0, 0, 0, 0});
  attrs.set("dilations", std::vector<int64_t>{1, 1});
  attrs.set("groups", int64_t(1));
  OwnedTensor dy(DType::F32, {1, 2, 3, 3}), wt(DType::F32, {2, 3, 2, 2});
  OwnedTensor dx(DType::F32, {1, 3, 5, 5}); // would give dy [1, 2, 4, 4]
  expectErrorNaming(
      runCpuKernel("graph.conv_grad_input", {&dy, &wt}, {&dx}, attrs),
      "graph.conv_grad_input");
  OwnedTensor x(DType::F32, {1, 4, 4, 4}); // 4 channels, weight has 3
  expectErrorNaming(
      runCpuKernel("graph.conv_grad_weight", {&dy, &x}, {&wt}, attrs),
      "graph.conv_grad_weight");
}

//===----------------------------------------------------------------------===//
// max_pool
//===----------------------------------------------------------------------===//

KernelAttrs poolAttrs(const Window &w, bool countIncludePad = false) {
  KernelAttrs a;
  a.set("kernel_shape", w.kernel);
  a.set("strides", w.strides);
  a.set("pads", w.pads);
  if (!w.dilations.empty())
    a.set("dilations", w.dilations);
  a.set("ceil_mode", int64_t(w.ceilMode));
  a.set("count_include_pad", int64_t(countIncludePad));
  return a;
}

/// Distinct values (a shuffled ramp), so every window has one maximum that
/// a difference step cannot dethrone.
OwnedTensor distinctValues(std::mt19937_64 &rng, std::vector<int64_t> shape) {
  int64_t n = numelOf(shape);
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), rng);
  for (double &x : v)
    x = 0.01 * x - 0.3;
  return f64(std::move(shape), v);
}

void checkMaxPool(std::mt19937_64 &rng, std::vector<int64_t> xShape,
                  const Window &win) {
  KernelAttrs attrs = poolAttrs(win);
  std::vector<int64_t> yShape = win.outShape(xShape, xShape[1]);
  OwnedTensor x = distinctValues(rng, xShape), y(DType::F64, yShape);
  OwnedTensor w = randomF64(rng, yShape), dx(DType::F64, xShape);
  Status s = runCpuKernel("graph.max_pool_grad", {&w, &x}, {&dx}, attrs);
  ASSERT_TRUE(s) << s.message();
  Forward f{"graph.max_pool", {&x}, {&y}, attrs};
  expectGradient(dx.values<double>(), f.numericGradient(0, w.values<double>()));

  OwnedTensor x32 = toF32(x), w32 = toF32(w), dx32(DType::F32, xShape);
  ASSERT_TRUE(
      runCpuKernel("graph.max_pool_grad", {&w32, &x32}, {&dx32}, attrs));
  expectF32Matches(dx32, dx, 1e-6, 1e-6);
}

TEST(ConvolutionGradKernels, MaxPoolGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(22);
  // Overlapping windows, padding, ceil_mode.
  checkMaxPool(rng, {2, 2, 5, 5}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true});
  checkMaxPool(rng, {1, 2, 6, 5},
               {{2, 3}, {1, 2}, {0, 1, 1, 0}, {2, 1}, false});
  checkMaxPool(rng, {2, 1, 9}, {{3}, {2}, {1, 0}, {3}, true});
}

std::vector<float> maxPoolGradOfRamp(std::vector<int64_t> xShape,
                                     std::vector<float> x, const Window &win) {
  KernelAttrs attrs = poolAttrs(win);
  std::vector<int64_t> yShape = win.outShape(xShape, xShape[1]);
  std::vector<float> ramp(static_cast<size_t>(numelOf(yShape)));
  std::iota(ramp.begin(), ramp.end(), 1.0f);
  OwnedTensor in = f32(xShape, x), dy = f32(yShape, ramp);
  OwnedTensor dx(DType::F32, xShape);
  Status s = runCpuKernel("graph.max_pool_grad", {&dy, &in}, {&dx}, attrs);
  EXPECT_TRUE(s) << s.message();
  return dx.values<float>();
}

TEST(ConvolutionGradKernels, MaxPoolGradGoesToTheFirstMaximum) {
  // F.max_pool2d(torch.ones(1, 1, 3, 3), 2, 1)
  EXPECT_EQ(maxPoolGradOfRamp({1, 1, 3, 3}, std::vector<float>(9, 1.0f),
                              {{2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}}),
            (std::vector<float>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
  // F.max_pool2d(x, 2, 1), ties between 3s in scan order.
  EXPECT_EQ(maxPoolGradOfRamp({1, 1, 3, 4},
                              {1, 3, 3, 0, 3, 2, 3, 3, 0, 3, 1, 3},
                              {{2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}}),
            (std::vector<float>{0, 3, 3, 0, 4, 0, 11, 0, 0, 0, 0, 0}));
  // F.max_pool2d(torch.full((1, 1, 3, 4), -2.), 3, 2, padding=1,
  // ceil_mode=True): the padding (-inf) never wins.
  EXPECT_EQ(maxPoolGradOfRamp({1, 1, 3, 4}, std::vector<float>(12, -2.0f),
                              {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true}),
            (std::vector<float>{1, 2, 0, 3, 4, 5, 0, 6, 0, 0, 0, 0}));
}

TEST(ConvolutionGradKernels, MaxPoolGradChecksShapes) {
  Window win{{2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}};
  OwnedTensor dy(DType::F32, {1, 1, 2, 2}), x(DType::F32, {1, 1, 4, 4});
  OwnedTensor dx(DType::F32, {1, 1, 4, 4});
  expectErrorNaming(
      runCpuKernel("graph.max_pool_grad", {&dy, &x}, {&dx}, poolAttrs(win)),
      "graph.max_pool_grad");
  OwnedTensor dy3(DType::F32, {1, 1, 3, 3}), dxWrong(DType::F32, {1, 1, 4, 3});
  expectErrorNaming(runCpuKernel("graph.max_pool_grad", {&dy3, &x}, {&dxWrong},
                                 poolAttrs(win)),
                    "graph.max_pool_grad");
}

//===----------------------------------------------------------------------===//
// avg_pool
//===----------------------------------------------------------------------===//

void checkAvgPool(std::mt19937_64 &rng, std::vector<int64_t> xShape,
                  const Window &win, bool countIncludePad) {
  SCOPED_TRACE(countIncludePad);
  KernelAttrs attrs = poolAttrs(win, countIncludePad);
  std::vector<int64_t> yShape = win.outShape(xShape, xShape[1]);
  OwnedTensor x = randomF64(rng, xShape), y(DType::F64, yShape);
  OwnedTensor w = randomF64(rng, yShape), dx(DType::F64, xShape);
  Status s = runCpuKernel("graph.avg_pool_grad", {&w}, {&dx}, attrs);
  ASSERT_TRUE(s) << s.message();
  Forward f{"graph.avg_pool", {&x}, {&y}, attrs};
  expectGradient(dx.values<double>(), f.numericGradient(0, w.values<double>()));

  OwnedTensor w32 = toF32(w), dx32(DType::F32, xShape);
  ASSERT_TRUE(runCpuKernel("graph.avg_pool_grad", {&w32}, {&dx32}, attrs));
  expectF32Matches(dx32, dx, 1e-6, 1e-6);
}

TEST(ConvolutionGradKernels, AvgPoolGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(23);
  for (bool countIncludePad : {false, true}) {
    // ceil_mode: the last window of dim 3 hangs past the end padding.
    checkAvgPool(rng, {2, 2, 5, 6}, {{3, 2}, {2, 2}, {1, 0, 1, 1}, {}, true},
                 countIncludePad);
    checkAvgPool(rng, {1, 2, 8}, {{4}, {3}, {2, 2}, {}, true}, countIncludePad);
    checkAvgPool(rng, {1, 1, 3, 4, 3},
                 {{2, 3, 2}, {1, 2, 2}, {1, 0, 1, 0, 1, 1}, {}, false},
                 countIncludePad);
  }
}

TEST(ConvolutionGradKernels, AvgPoolGradChecksShapes) {
  Window win{{2, 2}, {2, 2}, {0, 0, 0, 0}, {}};
  OwnedTensor dy(DType::F32, {1, 1, 3, 3}), dx(DType::F32, {1, 1, 4, 4});
  expectErrorNaming(
      runCpuKernel("graph.avg_pool_grad", {&dy}, {&dx}, poolAttrs(win)),
      "graph.avg_pool_grad");
  KernelAttrs noKernel;
  expectErrorNaming(runCpuKernel("graph.avg_pool_grad", {&dy}, {&dx}, noKernel),
                    "graph.avg_pool_grad");
}

} // namespace
