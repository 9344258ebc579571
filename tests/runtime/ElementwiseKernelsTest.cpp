//===- ElementwiseKernelsTest.cpp - CPU elementwise kernels ---------------===//
//
// Expected values were computed with PyTorch 1.13 (float32) where a formula
// has a PyTorch-specific form (GELU, softplus), and by hand otherwise.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

TEST(ElementwiseKernels, AddBroadcastsLikeNumpy) {
  OwnedTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor b = f32({3}, {10, 20, 30});
  OwnedTensor y(DType::F32, {2, 3});
  ASSERT_TRUE(runCpuKernel("graph.add", {&a, &b}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));

  OwnedTensor col = f32({2, 1}, {100, 200});
  OwnedTensor z(DType::F32, {2, 3});
  ASSERT_TRUE(runCpuKernel("graph.sub", {&a, &col}, {&z}));
  EXPECT_EQ(z.values<float>(),
            (std::vector<float>{-99, -98, -97, -196, -195, -194}));
}

TEST(ElementwiseKernels, ComparisonsAndWhere) {
  OwnedTensor a = f32({4}, {1, 2, 3, 4});
  OwnedTensor b = f32({}, {2.5f});
  OwnedTensor less(DType::I1, {4});
  ASSERT_TRUE(runCpuKernel("graph.less", {&a, &b}, {&less}));
  EXPECT_EQ(less.values<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 0}));
  OwnedTensor fill = f32({}, {-INFINITY});
  OwnedTensor y(DType::F32, {4});
  ASSERT_TRUE(runCpuKernel("graph.where", {&less, &fill, &a}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{-INFINITY, -INFINITY, 3, 4}));
}

TEST(ElementwiseKernels, GeluMatchesPyTorch) {
  // torch.nn.functional.gelu(torch.tensor([-3., -1., -0.5, 0., 0.5, 1., 3.]))
  OwnedTensor x = f32({7}, {-3, -1, -0.5f, 0, 0.5f, 1, 3});
  OwnedTensor y(DType::F32, {7});
  ASSERT_TRUE(runCpuKernel("graph.gelu", {&x}, {&y}));
  std::vector<float> exact{-4.0496e-03f, -1.5866e-01f, -1.5427e-01f, 0.0f,
                           3.4573e-01f,  8.4134e-01f,  2.9960e+00f};
  for (size_t i = 0; i < exact.size(); ++i)
    EXPECT_NEAR(y.values<float>()[i], exact[i], 1e-4) << i;

  KernelAttrs tanh;
  tanh.set("approximate", std::string("tanh"));
  ASSERT_TRUE(runCpuKernel("graph.gelu", {&x}, {&y}, tanh));
  // gelu(x, approximate='tanh') at 1.0 and -3.0.
  EXPECT_NEAR(y.values<float>()[5], 0.8411920f, 1e-6);
  EXPECT_NEAR(y.values<float>()[0], -3.6374e-03f, 1e-6);
}

TEST(ElementwiseKernels, SoftplusIsLinearAboveThreshold) {
  OwnedTensor x = f64({3}, {0.0, 20.5, -30.0});
  OwnedTensor y(DType::F64, {3});
  ASSERT_TRUE(runCpuKernel("graph.softplus", {&x}, {&y}));
  EXPECT_DOUBLE_EQ(y.values<double>()[0], std::log(2.0));
  EXPECT_DOUBLE_EQ(y.values<double>()[1], 20.5);
  EXPECT_NEAR(y.values<double>()[2], std::exp(-30.0), 1e-20);
}

TEST(ElementwiseKernels, SoftsignDividesByOnePlusAbs) {
  OwnedTensor x = f32({5}, {-3.0f, -0.0f, 1.0f, 1e30f, NAN});
  OwnedTensor y(DType::F32, {5});
  ASSERT_TRUE(runCpuKernel("graph.softsign", {&x}, {&y}));
  std::vector<float> v = y.values<float>();
  EXPECT_EQ(v[0], -0.75f);
  EXPECT_TRUE(v[1] == 0.0f && std::signbit(v[1])); // -0 / 1
  EXPECT_EQ(v[2], 0.5f);
  EXPECT_EQ(v[3], 1.0f);
  EXPECT_TRUE(std::isnan(v[4]));
}

TEST(ElementwiseKernels, CastTruncatesAndMapsToBool) {
  OwnedTensor x = f32({4}, {-1.7f, 0.0f, 2.9f, 0.25f});
  OwnedTensor i(DType::I64, {4});
  ASSERT_TRUE(runCpuKernel("graph.cast", {&x}, {&i}));
  EXPECT_EQ(i.values<int64_t>(), (std::vector<int64_t>{-1, 0, 2, 0}));
  OwnedTensor b(DType::I1, {4});
  ASSERT_TRUE(runCpuKernel("graph.cast", {&x}, {&b}));
  EXPECT_EQ(b.values<uint8_t>(), (std::vector<uint8_t>{1, 0, 1, 1}));
}

TEST(ElementwiseKernels, MaxPropagatesNaN) {
  OwnedTensor a = f32({2}, {NAN, 1});
  OwnedTensor b = f32({2}, {0, 2});
  OwnedTensor y(DType::F32, {2});
  ASSERT_TRUE(runCpuKernel("graph.max", {&a, &b}, {&y}));
  EXPECT_TRUE(std::isnan(y.values<float>()[0]));
  EXPECT_EQ(y.values<float>()[1], 2);
}

TEST(ElementwiseKernels, WrongArityIsAnError) {
  OwnedTensor a = f32({2}, {1, 2});
  OwnedTensor y(DType::F32, {2});
  Status s = runCpuKernel("graph.add", {&a}, {&y});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("graph.add: expected 2 inputs"), std::string::npos);
}

} // namespace
