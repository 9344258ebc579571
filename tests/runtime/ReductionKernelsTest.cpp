//===- ReductionKernelsTest.cpp - CPU reduction kernels -------------------===//
//
// Expected values were computed with PyTorch 1.13 on the tensor kX below:
// torch.manual_seed(0); x = torch.randn(2, 3, 4), printed to 9 significant
// digits (which round-trips float32). f32 results are compared with 1e-6
// relative tolerance, f64 ones (from x.double()) with 1e-15.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>
#include <limits>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

const std::vector<float> kX = {
    -1.12583983f,  -1.1523602f,   -0.250578582f, -0.433878809f, 0.848710358f,
    0.692009151f,  -0.31601277f,  -2.11521935f,  0.468096405f,  -0.157712445f,
    1.44366014f,   0.266049415f,  0.166455343f,  0.87438184f,   -0.143473849f,
    -0.111609332f, 0.931826591f,  1.25900924f,   2.00498056f,   0.0537369028f,
    0.618056655f,  -0.412802219f, -0.841064811f, -2.31604195f};

OwnedTensor x32() { return f32({2, 3, 4}, kX); }
OwnedTensor x64() {
  return f64({2, 3, 4}, std::vector<double>(kX.begin(), kX.end()));
}

KernelAttrs reduceAttrs(std::vector<int64_t> axes, bool keepdims) {
  KernelAttrs a;
  a.set("axes", std::move(axes));
  a.set("keepdims", int64_t(keepdims));
  return a;
}

template <typename T>
void expectNear(const std::vector<T> &got, const std::vector<T> &want,
                double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * std::abs(want[i])) << "at " << i;
}

void expectError(const Status &s, const std::string &text) {
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
}

//===----------------------------------------------------------------------===//
// reduce_sum
//===----------------------------------------------------------------------===//

TEST(ReductionKernels, SumOverInnerAxis) {
  // x.sum(1): the reduced dim is strided, the innermost dim kept.
  OwnedTensor x = x32();
  OwnedTensor y(DType::F32, {2, 4});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({1}, false)));
  expectNear(y.values<float>(),
             {0.190966934f, -0.618063509f, 0.877068758f, -2.28304887f,
              1.71633863f, 1.72058892f, 1.02044189f, -2.37391448f},
             1e-6);
}

TEST(ReductionKernels, SumOverLeadingAxis) {
  // x.sum(0), the bias-gradient shape, in f32 and f64 (x.double().sum(0)).
  OwnedTensor x = x32();
  OwnedTensor y(DType::F32, {3, 4});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({0}, false)));
  std::vector<float> want = {-0.959384501f, -0.277978361f, -0.394052446f,
                             -0.545488119f, 1.78053689f,   1.95101833f,
                             1.68896782f,   -2.06148243f,  1.08615303f,
                             -0.570514679f, 0.602595329f,  -2.04999256f};
  expectNear(y.values<float>(), want, 1e-6);

  // With the keepdims default (true) the result is [1, 3, 4].
  OwnedTensor kept(DType::F32, {1, 3, 4});
  KernelAttrs axesOnly;
  axesOnly.set("axes", std::vector<int64_t>{0});
  ASSERT_TRUE(runCpuKernel("graph.reduce_sum", {&x}, {&kept}, axesOnly));
  EXPECT_EQ(kept.values<float>(), y.values<float>());

  // f64: the two-term sums are exact, so they equal kX's pairwise sums.
  OwnedTensor xd = x64();
  OwnedTensor yd(DType::F64, {3, 4});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&xd}, {&yd}, reduceAttrs({0}, false)));
  for (size_t i = 0; i < 12; ++i)
    EXPECT_EQ(yd.values<double>()[i], double(kX[i]) + double(kX[i + 12]));
}

TEST(ReductionKernels, SumOverSeveralAxes) {
  // x.sum((0, 2), keepdim=True): two reduced runs around a kept one.
  OwnedTensor x = x32();
  OwnedTensor y(DType::F32, {1, 3, 1});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({0, 2}, true)));
  expectNear(y.values<float>(), {-2.17690372f, 3.35904074f, -0.931758881f},
             1e-6);

  // x.sum(): every axis, to a scalar.
  OwnedTensor all(DType::F32, {});
  ASSERT_TRUE(runCpuKernel("graph.reduce_sum", {&x}, {&all},
                           reduceAttrs({0, 1, 2}, false)));
  expectNear(all.values<float>(), {0.250378609f}, 1e-6);

  // No axes: the frontend's noop_with_empty_axes, a copy.
  OwnedTensor same(DType::F32, {2, 3, 4});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&x}, {&same}, reduceAttrs({}, true)));
  EXPECT_EQ(same.values<float>(), kX);

  // Reducing a size-1 dim is a copy too.
  OwnedTensor col = f32({3, 1}, {1, 2, 3});
  OwnedTensor flat(DType::F32, {3});
  ASSERT_TRUE(runCpuKernel("graph.reduce_sum", {&col}, {&flat},
                           reduceAttrs({1}, false)));
  EXPECT_EQ(flat.values<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(ReductionKernels, SumAccumulatesInDouble) {
  // Deliberately more exact than PyTorch: torch.tensor([1e8, 1, 1, 1, 1,
  // -1e8]).sum() gives 3.0 in float32; the double accumulator gives the
  // exact 4.
  OwnedTensor x = f32({6}, {1e8f, 1, 1, 1, 1, -1e8f});
  OwnedTensor y(DType::F32, {});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({0}, false)));
  EXPECT_EQ(y.values<float>()[0], 4.0f);
}

TEST(ReductionKernels, SumOfIntegers) {
  // torch.tensor([[7, -3, 2], [2**31 - 1, 1, 0]], dtype=torch.int32)
  //   .sum(1, dtype=torch.int32) -> [6, -2147483648]: wraps like torch.
  OwnedTensor x =
      OwnedTensor::of<int32_t>(DType::I32, {2, 3}, {7, -3, 2, INT32_MAX, 1, 0});
  OwnedTensor y(DType::I32, {2});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({1}, false)));
  EXPECT_EQ(y.values<int32_t>(), (std::vector<int32_t>{6, INT32_MIN}));

  OwnedTensor xi = i64({2, 3}, {7, -3, 2, -9, 1, 0});
  OwnedTensor yi(DType::I64, {1, 3});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&xi}, {&yi}, reduceAttrs({0}, true)));
  EXPECT_EQ(yi.values<int64_t>(), (std::vector<int64_t>{-2, -2, 2}));

  OwnedTensor b = i1({2}, {1, 1});
  OwnedTensor bs(DType::I1, {});
  expectError(
      runCpuKernel("graph.reduce_sum", {&b}, {&bs}, reduceAttrs({0}, false)),
      "graph.reduce_sum: element type i1 is not supported");
}

TEST(ReductionKernels, SumOfAnEmptyDimIsZero) {
  // torch.zeros(2, 0).sum(1) -> [0., 0.]
  OwnedTensor x(DType::F32, {2, 0});
  OwnedTensor y(DType::F32, {2});
  y.view().as<float>()[0] = 7;
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({1}, false)));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{0, 0}));
  // Both loop orders: the reduced empty dim leading, the kept one inner.
  OwnedTensor xt(DType::F32, {0, 2});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_sum", {&xt}, {&y}, reduceAttrs({0}, false)));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{0, 0}));
}

TEST(ReductionKernels, BadAxesAndShapesAreErrors) {
  OwnedTensor x = x32();
  OwnedTensor y(DType::F32, {2, 4});
  expectError(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({3}, false)),
      "graph.reduce_sum: axis 3 must be in [0, 3)");
  expectError(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({1, 1}, false)),
      "graph.reduce_sum: axis 1 repeats");
  expectError(
      runCpuKernel("graph.reduce_sum", {&x}, {&y}, reduceAttrs({1}, true)),
      "graph.reduce_sum: expected result f32[2x1x4], got f32[2x4]");
  OwnedTensor yd(DType::F64, {2, 4});
  expectError(
      runCpuKernel("graph.reduce_sum", {&x}, {&yd}, reduceAttrs({1}, false)),
      "graph.reduce_sum: element types differ");
  expectError(
      runCpuKernel("graph.reduce_sum", {&x, &x}, {&y}, reduceAttrs({1}, false)),
      "graph.reduce_sum: expected 1 inputs");
}

//===----------------------------------------------------------------------===//
// reduce_mean
//===----------------------------------------------------------------------===//

TEST(ReductionKernels, MeanDividesTheSum) {
  // x.mean((1, 2))
  OwnedTensor x = x32();
  OwnedTensor y(DType::F32, {2});
  ASSERT_TRUE(runCpuKernel("graph.reduce_mean", {&x}, {&y},
                           reduceAttrs({1, 2}, false)));
  expectNear(y.values<float>(), {-0.152756378f, 0.173621237f}, 1e-6);

  // x.double().mean(0, keepdim=True)
  OwnedTensor xd = x64();
  OwnedTensor yd(DType::F64, {1, 3, 4});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_mean", {&xd}, {&yd}, reduceAttrs({0}, true)));
  expectNear(yd.values<double>(),
             {-0.479692243039608, -0.13898918032646179, -0.19702621549367905,
              -0.272744070738554, 0.890268474817276, 0.97550919651985168,
              0.84448389708995819, -1.0307412259280682, 0.5430765300989151,
              -0.28525733202695847, 0.30129766464233398, -1.0249962657690048},
             1e-15);

  // The global-average-pool shape: mean over H and W of [N, C, H, W].
  OwnedTensor img = f32({1, 2, 2, 2}, {1, 2, 3, 4, -1, -1, -1, 5});
  OwnedTensor pooled(DType::F32, {1, 2, 1, 1});
  ASSERT_TRUE(runCpuKernel("graph.reduce_mean", {&img}, {&pooled},
                           reduceAttrs({2, 3}, true)));
  EXPECT_EQ(pooled.values<float>(), (std::vector<float>{2.5f, 0.5f}));
}

TEST(ReductionKernels, MeanSpecialCases) {
  // torch.tensor([1e8, 1, 1, 1, 1, -1e8]).mean() gives 0.5 in float32; the
  // double accumulator gives the exact 4 / 6.
  OwnedTensor x = f32({6}, {1e8f, 1, 1, 1, 1, -1e8f});
  OwnedTensor y(DType::F32, {});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_mean", {&x}, {&y}, reduceAttrs({0}, false)));
  EXPECT_EQ(y.values<float>()[0], float(4.0 / 6.0));

  // torch.zeros(2, 0).mean(1) -> [nan, nan]
  OwnedTensor e(DType::F64, {2, 0});
  OwnedTensor m(DType::F64, {2});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_mean", {&e}, {&m}, reduceAttrs({1}, false)));
  EXPECT_TRUE(std::isnan(m.values<double>()[0]));
  EXPECT_TRUE(std::isnan(m.values<double>()[1]));

  OwnedTensor xi = i64({2}, {1, 2});
  OwnedTensor yi(DType::I64, {});
  expectError(
      runCpuKernel("graph.reduce_mean", {&xi}, {&yi}, reduceAttrs({0}, false)),
      "graph.reduce_mean: element type i64 is not supported");
}

//===----------------------------------------------------------------------===//
// reduce_max
//===----------------------------------------------------------------------===//

TEST(ReductionKernels, MaxOverAxes) {
  // x.amax(2, keepdim=True) and x.amax((0, 1))
  OwnedTensor x = x32();
  OwnedTensor y(DType::F32, {2, 3, 1});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_max", {&x}, {&y}, reduceAttrs({2}, true)));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{-0.250578582f, 0.848710358f, 1.44366014f,
                                0.87438184f, 2.00498056f, 0.618056655f}));
  OwnedTensor z(DType::F32, {4});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_max", {&x}, {&z}, reduceAttrs({0, 1}, false)));
  EXPECT_EQ(z.values<float>(), (std::vector<float>{0.931826591f, 1.25900924f,
                                                   2.00498056f, 0.266049415f}));

  // f64 agrees element for element (max is exact).
  OwnedTensor xd = x64();
  OwnedTensor zd(DType::F64, {4});
  ASSERT_TRUE(runCpuKernel("graph.reduce_max", {&xd}, {&zd},
                           reduceAttrs({0, 1}, false)));
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(zd.values<double>()[i], double(z.values<float>()[i]));
}

TEST(ReductionKernels, MaxPropagatesNaNLikeAmax) {
  // torch.tensor([[1., nan, 3.], [-inf, -inf, -inf]]).amax(1) -> [nan, -inf]
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  OwnedTensor x = f32({2, 3}, {1, nan, 3, -inf, -inf, -inf});
  OwnedTensor y(DType::F32, {2});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_max", {&x}, {&y}, reduceAttrs({1}, false)));
  EXPECT_TRUE(std::isnan(y.values<float>()[0]));
  EXPECT_EQ(y.values<float>()[1], -inf);
  // The same NaN down a column (the other loop order), first and last.
  OwnedTensor c = f64({3, 2}, {nan, 1, 2, 3, 4, nan});
  OwnedTensor cm(DType::F64, {2});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_max", {&c}, {&cm}, reduceAttrs({0}, false)));
  EXPECT_TRUE(std::isnan(cm.values<double>()[0]));
  EXPECT_TRUE(std::isnan(cm.values<double>()[1]));
}

TEST(ReductionKernels, MaxOfIntegers) {
  // torch.tensor([[7, -3, 2], [-9, 1, 0]]).amax(0) -> [7, 1, 2]
  OwnedTensor x = i64({2, 3}, {7, -3, 2, -9, 1, 0});
  OwnedTensor y(DType::I64, {3});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_max", {&x}, {&y}, reduceAttrs({0}, false)));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{7, 1, 2}));
  OwnedTensor xi =
      OwnedTensor::of<int32_t>(DType::I32, {3}, {INT32_MIN, INT32_MIN, -5});
  OwnedTensor yi(DType::I32, {1});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_max", {&xi}, {&yi}, reduceAttrs({0}, true)));
  EXPECT_EQ(yi.values<int32_t>(), (std::vector<int32_t>{-5}));
}

TEST(ReductionKernels, MaxOfAnEmptyDimIsAnError) {
  // torch.zeros(2, 0).amax(1) raises "Expected reduction dim 1 to have
  // non-zero size".
  OwnedTensor x(DType::F32, {2, 0});
  OwnedTensor y(DType::F32, {2});
  expectError(
      runCpuKernel("graph.reduce_max", {&x}, {&y}, reduceAttrs({1}, false)),
      "graph.reduce_max: cannot reduce an empty dim of f32[2x0]");
  // Nothing to compute when the result is empty too.
  OwnedTensor none(DType::F32, {0});
  ASSERT_TRUE(
      runCpuKernel("graph.reduce_max", {&x}, {&none}, reduceAttrs({0}, false)));
}

} // namespace
