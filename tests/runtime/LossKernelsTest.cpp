//===- LossKernelsTest.cpp - CPU cross-entropy kernel ---------------------===//
//
// Logits are randn * 1.5 rounded to two decimals; expected values were
// computed with torch.nn.functional.cross_entropy (PyTorch 1.13) in the
// logits' dtype. f32 at 1e-6 relative.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

KernelAttrs reduce(const char *reduction) {
  KernelAttrs a;
  a.set("reduction", std::string(reduction));
  return a;
}

KernelAttrs reduceIgnoring(const char *reduction, int64_t ignoreIndex) {
  KernelAttrs a = reduce(reduction);
  a.set("ignore_index", ignoreIndex);
  return a;
}

TEST(LossKernels, CrossEntropyMeanF32) {
  // F.cross_entropy(x, torch.tensor([1, 0, 4, 2])), x [4, 5]
  OwnedTensor x =
      f32({4, 5}, {-3.47f, -0.56f, -1.59f, 1.5f,   -0.03f, 0.32f,  0.27f,
                   -1.25f, 0.36f,  1.1f,   -1.98f, 1.97f,  -1.03f, 2.23f,
                   -0.67f, -1.34f, 1.01f,  1.57f,  0.23f,  -1.12f});
  OwnedTensor y = i64({4}, {1, 0, 4, 2});
  OwnedTensor loss(DType::F32, {});
  // No reduction attribute: "mean" is the ODS default.
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y}, {&loss}));
  expectClose(loss.values<float>(), {2.0696013f}, 1e-6);

  // i32 labels read the same.
  OwnedTensor y32 = OwnedTensor::of<int32_t>(DType::I32, {4}, {1, 0, 4, 2});
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y32}, {&loss}));
  expectClose(loss.values<float>(), {2.0696013f}, 1e-6);
}

TEST(LossKernels, CrossEntropyWeightedReductionsF64) {
  // F.cross_entropy(x, torch.tensor([3, 0, 1]), weight=w, reduction=...)
  // in float64, x [3, 4]
  OwnedTensor x = f64({3, 4}, {-1.54, -0.75, 0.41, -1.38, -0.06, 0.43, -0.01,
                               -1.37, -1.63, -0.4, 0.28, -0.33});
  OwnedTensor y = i64({3}, {3, 0, 1});
  OwnedTensor w = f64({4}, {3.19, 0.15, 0.19, 1.25});
  OwnedTensor scalar(DType::F64, {});
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y, &w}, {&scalar},
                           reduce("sum")));
  expectClose(scalar.values<double>(), {7.4476687756906355}, 1e-13);
  // mean = sum(w[y] * nll) / sum(w[y])
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y, &w}, {&scalar},
                           reduce("mean")));
  expectClose(scalar.values<double>(), {1.6225857899108138}, 1e-13);
  OwnedTensor none(DType::F64, {3});
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y, &w}, {&none},
                           reduce("none")));
  expectClose(none.values<double>(),
              {2.8426300172069743, 4.384903287490495, 0.22013547099316641},
              1e-13);
}

// Logits [2, 3, 4] (classes in dim 1) and labels [2, 4] holding -100.
OwnedTensor logits3d() {
  return f32({2, 3, 4},
             {-0.88f, 4.25f,  1.36f,  1.42f,  -1.56f, 1.46f, -0.11f, 1.3f,
              -0.78f, -0.89f, -1.34f, -0.67f, -1.05f, 0.49f, -1.31f, 0.59f,
              0.57f,  -0.1f,  -1.13f, 0.55f,  -0.26f, 1.46f, 0.62f,  -0.75f});
}

TEST(LossKernels, CrossEntropy3DLayoutWithIgnoreIndex) {
  OwnedTensor x = logits3d();
  OwnedTensor y = i64({2, 4}, {0, 2, -100, 1, 2, -100, 0, 0});
  OwnedTensor w = f32({3}, {0.47f, 0.3f, 0.37f});
  OwnedTensor scalar(DType::F32, {});
  // F.cross_entropy(x, y, weight=w) (ignore_index=-100 is PyTorch's default)
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y, &w}, {&scalar},
                           reduceIgnoring("mean", -100)));
  expectClose(scalar.values<float>(), {1.84652948f}, 1e-6);
  // F.cross_entropy(x, y)
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y}, {&scalar},
                           reduceIgnoring("mean", -100)));
  expectClose(scalar.values<float>(), {1.88501537f}, 1e-6);
  // F.cross_entropy(x, y, reduction='none'): ignored positions are 0.
  OwnedTensor none(DType::F32, {2, 4});
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y}, {&none},
                           reduceIgnoring("none", -100)));
  expectClose(none.values<float>(),
              {0.960035026f, 5.20511198f, 0.0f, 0.81843704f, 1.32099915f, 0.0f,
               2.20681477f, 0.798693419f},
              1e-6);

  // ignore_index may be a real class: F.cross_entropy(x, y1,
  // ignore_index=1, reduction='sum') with y1 = y.clamp(min=1).
  OwnedTensor y1 = i64({2, 4}, {1, 2, 1, 1, 2, 1, 1, 1});
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y1}, {&scalar},
                           reduceIgnoring("sum", 1)));
  expectClose(scalar.values<float>(), {6.52611113f}, 1e-6);
}

TEST(LossKernels, CrossEntropy4DLayout) {
  // F.cross_entropy(x, y), x [2, 3, 2, 2], y [2, 2, 2]
  OwnedTensor x =
      f32({2, 3, 2, 2},
          {-0.89f, 0.93f, -2.23f, 2.04f, 0.63f,  0.52f,  -0.52f, -1.81f,
           1.29f,  2.08f, -0.18f, 2.33f, -0.48f, 2.34f,  -0.31f, 1.64f,
           0.29f,  1.13f, -0.49f, 2.14f, 0.15f,  -2.14f, 1.25f,  1.31f});
  OwnedTensor y = i64({2, 2, 2}, {0, 1, 2, 2, 1, 1, 0, 2});
  OwnedTensor scalar(DType::F32, {});
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y}, {&scalar}));
  expectClose(scalar.values<float>(), {1.44829273f}, 1e-6);
}

TEST(LossKernels, CrossEntropyAllIgnored) {
  // F.cross_entropy(torch.zeros(2, 3), torch.tensor([-100, -100])) is nan
  // (0 / 0); with reduction='sum' it is 0.
  OwnedTensor x(DType::F32, {2, 3});
  OwnedTensor y = i64({2}, {-100, -100});
  OwnedTensor scalar(DType::F32, {});
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y}, {&scalar},
                           reduceIgnoring("mean", -100)));
  EXPECT_TRUE(std::isnan(scalar.values<float>()[0]));
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy", {&x, &y}, {&scalar},
                           reduceIgnoring("sum", -100)));
  EXPECT_EQ(scalar.values<float>()[0], 0.0f);
}

TEST(LossKernels, CrossEntropyErrors) {
  OwnedTensor x(DType::F32, {2, 3});
  OwnedTensor scalar(DType::F32, {});
  OwnedTensor outOfRange = i64({2}, {0, 3});
  Status s = runCpuKernel("graph.cross_entropy", {&x, &outOfRange}, {&scalar});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("label 3"), std::string::npos);
  // -100 is only ignored when ignore_index says so.
  OwnedTensor minus100 = i64({2}, {-100, 1});
  EXPECT_FALSE(runCpuKernel("graph.cross_entropy", {&x, &minus100}, {&scalar}));
  EXPECT_FALSE(runCpuKernel("graph.cross_entropy", {&x, &minus100}, {&scalar},
                            reduceIgnoring("mean", -1)));

  OwnedTensor y = i64({2}, {0, 1});
  EXPECT_FALSE(
      runCpuKernel("graph.cross_entropy", {&x, &y}, {&scalar}, reduce("max")));
  OwnedTensor none(DType::F32, {2});
  EXPECT_FALSE(runCpuKernel("graph.cross_entropy", {&x, &y}, {&none}));
  EXPECT_FALSE(
      runCpuKernel("graph.cross_entropy", {&x, &y}, {&scalar}, reduce("none")));
  OwnedTensor w2(DType::F32, {2});
  EXPECT_FALSE(runCpuKernel("graph.cross_entropy", {&x, &y, &w2}, {&scalar}));
  OwnedTensor floatLabels = f32({2}, {0, 1});
  EXPECT_FALSE(
      runCpuKernel("graph.cross_entropy", {&x, &floatLabels}, {&scalar}));
  OwnedTensor y3 = i64({3}, {0, 1, 2});
  EXPECT_FALSE(runCpuKernel("graph.cross_entropy", {&x, &y3}, {&scalar}));
  OwnedTensor flat(DType::F32, {3});
  EXPECT_FALSE(runCpuKernel("graph.cross_entropy", {&flat, &y}, {&scalar}));
}

} // namespace
