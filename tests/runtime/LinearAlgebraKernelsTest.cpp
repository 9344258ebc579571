//===- LinearAlgebraKernelsTest.cpp - CPU matmul and linear kernels -------===//
//
// Inputs are randn * 1.5 rounded to two decimals; expected values were
// computed with PyTorch 1.13 in the inputs' dtype (float32 printed with 9
// significant digits, float64 with 17). f32 results are compared at 1e-6
// relative: both sides are float gemms whose summation order may differ.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

TEST(LinearAlgebraKernels, MatmulF32) {
  // a @ b
  OwnedTensor a = f32({2, 3}, {2.31f, -0.44f, -3.27f, 0.85f, -1.63f, -2.1f});
  OwnedTensor b = f32({3, 4}, {0.61f, 1.26f, -1.08f, -0.61f, -0.89f, 0.27f,
                               -1.29f, 1.65f, -1.61f, 0.18f, -0.85f, 0.56f});
  OwnedTensor y(DType::F32, {2, 4});
  ASSERT_TRUE(runCpuKernel("graph.matmul", {&a, &b}, {&y}));
  expectClose(y.values<float>(),
              {7.06540012f, 2.2032001f, 0.852299988f, -3.96630001f, 5.3501997f,
               0.252899975f, 2.96969986f, -4.38399982f},
              1e-6);
}

TEST(LinearAlgebraKernels, MatmulBroadcastsBatchDims) {
  // torch.matmul(a, b) with a [2, 1, 2, 3], b [3, 3, 2] -> [2, 3, 2, 2]
  OwnedTensor a =
      f32({2, 1, 2, 3}, {-1.34f, -2.26f, 0.56f, 2.18f, 1.41f, 1.16f, 0.29f,
                         1.9f, -1.94f, -1.19f, -0.03f, -1.08f});
  OwnedTensor b = f32({3, 3, 2}, {0.78f, -1.43f, -4.72f, -0.17f, 2.54f, -1.0f,
                                  -0.88f, 4.25f, 1.36f, 1.42f, -2.07f, -3.08f,
                                  0.07f, -0.58f, -0.41f, 1.33f, 2.23f, -0.01f});
  OwnedTensor y(DType::F32, {2, 3, 2, 2});
  ASSERT_TRUE(runCpuKernel("graph.matmul", {&a, &b}, {&y}));
  expectClose(y.values<float>(),
              {11.0443993f,  1.74040008f,  -2.00839972f, -4.51709986f,
               -3.05359983f, -10.6289997f, -2.40199995f, 7.69440079f,
               2.08159995f,  -2.2342f,     2.16129994f,  0.599300027f,
               -13.6693993f, 1.20230007f,  -3.52979994f, 2.78679991f,
               6.3446002f,   9.90570068f,  3.2420001f,   -1.77370048f,
               -5.0848999f,  2.37820005f,  -2.47940016f, 0.66110003f},
              1e-6);
}

TEST(LinearAlgebraKernels, MatmulSharedRightMatrixF64) {
  // torch.matmul(a, b) in float64, a [2, 2, 3], b [3, 2] (one folded gemm)
  OwnedTensor a = f64({2, 2, 3}, {-0.69, -0.5, -2.35, 1.85, 2.09, 1.76, 0.65,
                                  -2.6, -2, 1.33, 1.15, 0.09});
  OwnedTensor b = f64({3, 2}, {0.34, 0.83, -0.87, 0.03, 0.2, 1.53});
  OwnedTensor y(DType::F64, {2, 2, 2});
  ASSERT_TRUE(runCpuKernel("graph.matmul", {&a, &b}, {&y}));
  expectClose(y.values<double>(),
              {-0.26960000000000006, -4.1832000000000003, -0.83729999999999982,
               4.2910000000000004, 2.0830000000000002, -2.5985,
               -0.53029999999999988, 1.2761},
              1e-13);

  // The same product with b given a batch dim of 1: the per-batch path.
  OwnedTensor b1 = f64({1, 3, 2}, {0.34, 0.83, -0.87, 0.03, 0.2, 1.53});
  OwnedTensor y1(DType::F64, {2, 2, 2});
  ASSERT_TRUE(runCpuKernel("graph.matmul", {&a, &b1}, {&y1}));
  expectClose(y1.values<double>(), y.values<double>(), 1e-15);
}

TEST(LinearAlgebraKernels, MatmulEmptyContractionIsZero) {
  OwnedTensor a(DType::F32, {2, 0});
  OwnedTensor b(DType::F32, {0, 3});
  OwnedTensor y = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(runCpuKernel("graph.matmul", {&a, &b}, {&y}));
  EXPECT_EQ(y.values<float>(), std::vector<float>(6, 0.0f));
}

TEST(LinearAlgebraKernels, MatmulErrors) {
  OwnedTensor a(DType::F32, {2, 3});
  OwnedTensor b(DType::F32, {4, 2});
  OwnedTensor y(DType::F32, {2, 2});
  Status s = runCpuKernel("graph.matmul", {&a, &b}, {&y});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("graph.matmul:"), std::string::npos);

  OwnedTensor v(DType::F32, {3});
  EXPECT_FALSE(runCpuKernel("graph.matmul", {&a, &v}, {&y}));
  OwnedTensor d(DType::F64, {3, 2});
  EXPECT_FALSE(runCpuKernel("graph.matmul", {&a, &d}, {&y}));
  OwnedTensor c(DType::F32, {3, 2});
  OwnedTensor wrong(DType::F32, {2, 3});
  EXPECT_FALSE(runCpuKernel("graph.matmul", {&a, &c}, {&wrong}));
  OwnedTensor ba(DType::F32, {2, 2, 3}), bb(DType::F32, {3, 3, 2});
  OwnedTensor by(DType::F32, {3, 2, 2});
  EXPECT_FALSE(runCpuKernel("graph.matmul", {&ba, &bb}, {&by}));
  OwnedTensor ia(DType::I64, {2, 3}), ib(DType::I64, {3, 2});
  OwnedTensor iy(DType::I64, {2, 2});
  s = runCpuKernel("graph.matmul", {&ia, &ib}, {&iy});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("not supported"), std::string::npos);
}

TEST(LinearAlgebraKernels, LinearWithBiasF32) {
  // torch.nn.functional.linear(x, w.t(), b), x [2, 2, 3], w [3, 4], b [4]
  OwnedTensor x = f32({2, 2, 3}, {-0.67f, 0.68f, -1.46f, 1.07f, -1.14f, -0.97f,
                                  -0.97f, -0.24f, -2.67f, 1.27f, 0.37f, -0.2f});
  OwnedTensor w = f32({3, 4}, {-0.27f, -0.89f, 0.41f, 0.85f, -1.01f, -1.81f,
                               2.02f, 3.57f, -0.85f, -1.73f, -3.75f, 1.31f});
  OwnedTensor b = f32({4}, {-4.01f, -0.05f, 0.75f, -0.78f});
  OwnedTensor y(DType::F32, {2, 2, 4});
  ASSERT_TRUE(runCpuKernel("graph.linear", {&x, &w, &b}, {&y}));
  expectClose(y.values<float>(),
              {-3.2749002f, 1.84130013f, 7.32390022f, -0.834500015f,
               -2.32300019f, 2.73919988f, 2.52340007f, -5.21099949f,
               -1.23620009f, 5.86679983f, 9.88000011f, -5.95899963f,
               -4.55660009f, -1.50399995f, 2.76810002f, 1.35839987f},
              1e-6);
}

TEST(LinearAlgebraKernels, LinearTransposedWeightNoBiasF64) {
  // torch.nn.functional.linear(x, w) in float64, x [3, 3], w [4, 3]
  OwnedTensor x = f64(
      {3, 3}, {-0.38, -1.58, -0.84, -0.18, -0.25, -0.38, -1.63, 0.01, 0.35});
  OwnedTensor w = f64({4, 3}, {-1.23, -1.02, 2.14, 2.95, 1.15, 2.98, 1.08,
                               -0.74, 1.97, 0.59, 0.13, -0.25});
  OwnedTensor y(DType::F64, {3, 4});
  KernelAttrs attrs;
  attrs.set("transpose_weight", int64_t(1));
  ASSERT_TRUE(runCpuKernel("graph.linear", {&x, &w}, {&y}, attrs));
  expectClose(y.values<double>(),
              {0.28140000000000015, -5.4411999999999994, -0.89599999999999991,
               -0.21959999999999999, -0.33680000000000004, -1.9509000000000001,
               -0.75800000000000001, -0.043699999999999989, 2.7436999999999996,
               -3.7539999999999996, -1.0783, -1.0478999999999998},
              1e-13);

  // Without the attribute the weight reads as [K, N] = [4, 3]: a mismatch.
  OwnedTensor y3(DType::F64, {3, 3});
  EXPECT_FALSE(runCpuKernel("graph.linear", {&x, &w}, {&y3}));
}

TEST(LinearAlgebraKernels, LinearErrors) {
  OwnedTensor x(DType::F32, {2, 3});
  OwnedTensor w(DType::F32, {3, 4});
  OwnedTensor y(DType::F32, {2, 4});
  OwnedTensor badBias(DType::F32, {3});
  Status s = runCpuKernel("graph.linear", {&x, &w, &badBias}, {&y});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("bias"), std::string::npos);
  OwnedTensor w3(DType::F32, {2, 3, 4});
  EXPECT_FALSE(runCpuKernel("graph.linear", {&x, &w3}, {&y}));
  OwnedTensor wd(DType::F64, {3, 4});
  EXPECT_FALSE(runCpuKernel("graph.linear", {&x, &wd}, {&y}));
  OwnedTensor yBad(DType::F32, {2, 3});
  EXPECT_FALSE(runCpuKernel("graph.linear", {&x, &w}, {&yBad}));
  EXPECT_FALSE(runCpuKernel("graph.linear", {&x}, {&y}));
}

} // namespace
