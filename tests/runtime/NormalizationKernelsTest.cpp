//===- NormalizationKernelsTest.cpp - CPU normalization and softmax -------===//
//
// Inputs are randn * 1.5 rounded to two decimals (times 2 for the softmax
// inputs); expected values were computed with PyTorch 1.13 in the inputs'
// dtype (float32 printed with 9 significant digits, float64 with 17).
// Tolerance for f32: 1e-6 relative plus 1e-6 absolute. The absolute floor
// is needed because PyTorch's float kernels evaluate x * rstd - mean * rstd,
// which cancels near the mean: an output near 0 is off by about an ulp of
// |x * rstd| (~1e-7) while ours is rounded once from double.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

KernelAttrs layerNormAttrs(int64_t axis, double epsilon) {
  KernelAttrs a;
  a.set("axis", axis);
  a.set("epsilon", epsilon);
  return a;
}

KernelAttrs batchNormAttrs(bool training, double momentum, double epsilon) {
  KernelAttrs a;
  a.set("training", int64_t(training));
  a.set("momentum", momentum);
  a.set("epsilon", epsilon);
  return a;
}

KernelAttrs axisAttr(int64_t axis) {
  KernelAttrs a;
  a.set("axis", axis);
  return a;
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

TEST(NormalizationKernels, LayerNormLastDimF32) {
  // torch.nn.functional.layer_norm(x, (4,), g, b, 1e-5), x [2, 2, 4]
  OwnedTensor x = f32({2, 2, 4}, {-3.47f, -0.56f, -1.59f, 1.5f, -1.33f, -1.91f,
                                  -0.93f, -1.3f, -1.94f, 2.29f, 0.49f, 3.03f,
                                  1.7f, -1.84f, 0.11f, 0.51f});
  OwnedTensor g = f32({4}, {-0.85f, 0.56f, -1.34f, -2.26f});
  OwnedTensor b = f32({4}, {0.56f, 2.18f, 1.41f, 1.16f});
  OwnedTensor y(DType::F32, {2, 2, 4});
  ASSERT_TRUE(runCpuKernel("graph.layer_norm", {&x, &g, &b}, {&y},
                           layerNormAttrs(2, 1e-5)));
  expectClose(y.values<float>(),
              {1.71538973f, 2.32662416f, 1.82803488f, -2.02528787f, 0.46908775f,
               1.31351507f, -0.262076348f, 0.724903584f, 1.84984899f,
               2.5665307f, 1.74394751f, -1.27277863f, -0.494327724f,
               1.31832457f, 1.42051971f, 0.468053311f},
              1e-6, 1e-6);
}

TEST(NormalizationKernels, LayerNormTwoDimsNoBiasF64) {
  // torch.nn.functional.layer_norm(x, (2, 3), g, None, 1e-3) in float64,
  // x [2, 2, 3]: axis 1 normalizes the last two dims.
  OwnedTensor x = f64({2, 2, 3}, {0.29, 1.9, -1.94, -1.19, -0.03, -1.08, 0.78,
                                  -1.97, 0.29, 0.81, -3.33, 0.39});
  OwnedTensor g = f64({2, 3}, {-1.54, -0.75, 0.41, -1.38, -0.06, 0.43});
  OwnedTensor y(DType::F64, {2, 2, 3});
  ASSERT_TRUE(runCpuKernel("graph.layer_norm", {&x, &g}, {&y},
                           layerNormAttrs(1, 1e-3)));
  expectClose(y.values<double>(),
              {-0.77939127751184689, -1.3470358619574332, -0.52504687044663501,
               0.93797762592925904, -0.014982644234113909, -0.25437111409593205,
               -1.2538104919597166, 0.69615659105601024, 0.20651853547641094,
               -1.1497750769413804, 0.1073934399854323, 0.24383696388432813},
              1e-12, 0);
}

TEST(NormalizationKernels, LayerNormConstantRowIsBias) {
  // var = 0: (x - mean) = 0 exactly, so y = bias.
  OwnedTensor x = f32({1, 3}, {2.5f, 2.5f, 2.5f});
  OwnedTensor g = f32({3}, {1, 2, 3});
  OwnedTensor b = f32({3}, {0.25f, -1, 7});
  OwnedTensor y(DType::F32, {1, 3});
  ASSERT_TRUE(runCpuKernel("graph.layer_norm", {&x, &g, &b}, {&y},
                           layerNormAttrs(1, 1e-5)));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{0.25f, -1, 7}));
}

TEST(NormalizationKernels, LayerNormErrors) {
  OwnedTensor x(DType::F32, {2, 4});
  OwnedTensor g(DType::F32, {4});
  OwnedTensor y(DType::F32, {2, 4});
  Status s =
      runCpuKernel("graph.layer_norm", {&x, &g}, {&y}, layerNormAttrs(2, 1e-5));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("axis 2"), std::string::npos);
  EXPECT_FALSE(runCpuKernel("graph.layer_norm", {&x, &g}, {&y},
                            layerNormAttrs(0, 1e-5))); // scale must be [2, 4]
  OwnedTensor g64(DType::F64, {4});
  EXPECT_FALSE(runCpuKernel("graph.layer_norm", {&x, &g64}, {&y},
                            layerNormAttrs(1, 1e-5)));
  KernelAttrs noEpsilon;
  noEpsilon.set("axis", int64_t(1));
  s = runCpuKernel("graph.layer_norm", {&x, &g}, {&y}, noEpsilon);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("epsilon"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

TEST(NormalizationKernels, BatchNormTrainingF32) {
  // torch.nn.functional.batch_norm(x, rm, rv, g, b, training=True,
  //     momentum=0.1, eps=1e-5), x [2, 3, 2, 2]; rm and rv afterwards.
  OwnedTensor x =
      f32({2, 3, 2, 2},
          {0.2f,  -0.05f, 0.69f, 1.68f, 0.55f,  -0.28f, -4.72f, -0.17f,
           1.5f,  -0.12f, 0.27f, 1.43f, -2.64f, 1.52f,  0.2f,   -2.04f,
           0.11f, 2.99f,  0.67f, 2.33f, 0.08f,  2.21f,  1.52f,  1.28f});
  OwnedTensor g = f32({3}, {-0.67f, 0.68f, -1.46f});
  OwnedTensor b = f32({3}, {1.07f, -1.14f, -0.97f});
  OwnedTensor rm = f32({3}, {-0.97f, -0.24f, -2.67f});
  OwnedTensor rv = f32({3}, {1.77f, 0.87f, 0.7f});
  OwnedTensor y(DType::F32, {2, 3, 2, 2}), newMean(DType::F32, {3}),
      newVar(DType::F32, {3});
  ASSERT_TRUE(runCpuKernel("graph.batch_norm", {&x, &g, &b, &rm, &rv},
                           {&y, &newMean, &newVar},
                           batchNormAttrs(true, 0.1, 1e-5)));
  expectClose(y.values<float>(),
              {0.952096999f, 1.06768823f,   0.725538254f,  0.267797083f,
               -1.02496874f, -1.28654659f,  -2.68583083f,  -1.25187969f,
               -1.86513221f, 1.16382694f,   0.434633017f,  -1.73425114f,
               2.26521325f,  0.341775447f,  0.952096999f,  1.98779416f,
               -1.16363657f, -0.255992681f, -0.987150192f, -0.463994414f,
               0.789881349f, -3.19263911f,  -1.90252674f,  -1.45379198f},
              1e-6, 1e-6);
  expectClose(newMean.values<float>(),
              {-0.878500044f, -0.19749999f, -2.30087519f}, 1e-6, 0);
  expectClose(newVar.values<float>(), {1.83297706f, 1.31506288f, 0.699684083f},
              1e-6, 0);
}

TEST(NormalizationKernels, BatchNormTrainingRank2F64) {
  // The same call in float64 with momentum=0.3, eps=1e-3, x [4, 3].
  OwnedTensor x = f64({4, 3}, {-0.27, -0.89, 0.41, 0.85, -1.01, -1.81, 2.02,
                               3.57, -0.85, -1.73, -3.75, 1.31});
  OwnedTensor g = f64({3}, {-4.01, -0.05, 0.75});
  OwnedTensor b = f64({3}, {-0.78, -0.38, -1.58});
  OwnedTensor rm = f64({3}, {-0.84, -0.18, -0.25});
  OwnedTensor rv = f64({3}, {0.88, 2.13, 0.51});
  OwnedTensor y(DType::F64, {4, 3}), newMean(DType::F64, {3}),
      newVar(DType::F64, {3});
  ASSERT_TRUE(runCpuKernel("graph.batch_norm", {&x, &g, &b, &rm, &rv},
                           {&y, &newMean, &newVar},
                           batchNormAttrs(true, 0.3, 1e-3)));
  expectClose(y.values<double>(),
              {0.63049044034474244, -0.37294975860621099, -1.173541208939056,
               -2.6100209302934347, -0.37066319382984697, -2.5725156525906776,
               -5.9951979871208163, -0.45793374946107346, -1.967553731011598,
               4.8547284770695089, -0.31845329810286871, -0.60638940745866898},
              1e-12, 0);
  expectClose(newMean.values<double>(),
              {-0.52274999999999994, -0.28200000000000003, -0.2455}, 1e-12, 0);
  expectClose(newVar.values<double>(),
              {1.3839475000000001, 4.2447999999999997, 0.92318999999999996},
              1e-12, 0);
}

TEST(NormalizationKernels, BatchNormInferenceKeepsRunningStats) {
  // torch.nn.functional.batch_norm(x, rm, rv, g, b, training=False,
  //     eps=1e-5), x [2, 3, 2]
  OwnedTensor x = f32({2, 3, 2}, {0.35f, -1.23f, -1.02f, 2.14f, 2.95f, 1.15f,
                                  2.98f, 1.08f, -0.74f, 1.97f, 0.59f, 0.13f});
  OwnedTensor g = f32({3}, {-0.25f, -0.71f, -2.96f});
  OwnedTensor b = f32({3}, {0.94f, -0.17f, 0.69f});
  OwnedTensor rm = f32({3}, {0.5f, 2.47f, -1.88f});
  OwnedTensor rv = f32({3}, {0.59f, 2.28f, 2.34f});
  OwnedTensor y(DType::F32, {2, 3, 2}), newMean(DType::F32, {3}),
      newVar(DType::F32, {3});
  ASSERT_TRUE(runCpuKernel("graph.batch_norm", {&x, &g, &b, &rm, &rv},
                           {&y, &newMean, &newVar},
                           batchNormAttrs(false, 0.1, 1e-5)));
  expectClose(y.values<float>(),
              {0.988820493f, 1.50306225f, 1.47102571f, -0.0148314256f,
               -8.65608978f, -5.1730752f, 0.132835701f, 0.751227736f,
               1.33936751f, 0.0651039556f, -4.08947039f, -3.19936681f},
              1e-6, 1e-6);
  EXPECT_EQ(newMean.values<float>(), rm.values<float>());
  EXPECT_EQ(newVar.values<float>(), rv.values<float>());
}

TEST(NormalizationKernels, BatchNormErrors) {
  OwnedTensor c3(DType::F32, {3});
  OwnedTensor o1(DType::F32, {3}), o2(DType::F32, {3});
  // One value per channel: PyTorch refuses to train on it too.
  OwnedTensor x1(DType::F32, {1, 3});
  OwnedTensor y1(DType::F32, {1, 3});
  Status s = runCpuKernel("graph.batch_norm", {&x1, &c3, &c3, &c3, &c3},
                          {&y1, &o1, &o2}, batchNormAttrs(true, 0.1, 1e-5));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("more than 1 value"), std::string::npos);
  EXPECT_TRUE(runCpuKernel("graph.batch_norm", {&x1, &c3, &c3, &c3, &c3},
                           {&y1, &o1, &o2}, batchNormAttrs(false, 0.1, 1e-5)));

  OwnedTensor x(DType::F32, {2, 3, 2});
  OwnedTensor y(DType::F32, {2, 3, 2});
  OwnedTensor c4(DType::F32, {4});
  EXPECT_FALSE(runCpuKernel("graph.batch_norm", {&x, &c3, &c4, &c3, &c3},
                            {&y, &o1, &o2}, batchNormAttrs(true, 0.1, 1e-5)));
  EXPECT_FALSE(runCpuKernel("graph.batch_norm", {&x, &c3, &c3, &c3},
                            {&y, &o1, &o2}, batchNormAttrs(true, 0.1, 1e-5)));
  KernelAttrs noTraining;
  noTraining.set("momentum", 0.1);
  noTraining.set("epsilon", 1e-5);
  EXPECT_FALSE(runCpuKernel("graph.batch_norm", {&x, &c3, &c3, &c3, &c3},
                            {&y, &o1, &o2}, noTraining));
  OwnedTensor flat(DType::F32, {3});
  EXPECT_FALSE(runCpuKernel("graph.batch_norm", {&flat, &c3, &c3, &c3, &c3},
                            {&flat, &o1, &o2},
                            batchNormAttrs(true, 0.1, 1e-5)));
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

TEST(NormalizationKernels, SoftmaxAnyAxisF32) {
  // torch.softmax(x, 1), torch.softmax(x, 2), torch.log_softmax(x, 1),
  // x [2, 3, 2]
  OwnedTensor x = f32({2, 3, 2}, {-2.56f, -3.58f, 3.32f, 1.98f, -0.12f, 1.38f,
                                  0.44f, -4.26f, 6.14f, 2.9f, 0.98f, -4.34f});
  OwnedTensor y(DType::F32, {2, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.softmax", {&x}, {&y}, axisAttr(1)));
  expectClose(y.values<float>(),
              {0.00270064222f, 0.00247882702f, 0.966314852f, 0.644055843f,
               0.0309845861f, 0.353465319f, 0.00331583293f, 0.000775894849f,
               0.990994155f, 0.998507917f, 0.00568999164f, 0.000716241309f},
              1e-6, 0);
  ASSERT_TRUE(runCpuKernel("graph.softmax", {&x}, {&y}, axisAttr(2)));
  expectClose(y.values<float>(),
              {0.734972596f, 0.265027404f, 0.792489946f, 0.207510069f,
               0.182425514f, 0.817574441f, 0.990986645f, 0.0090132961f,
               0.962312043f, 0.037687894f, 0.995131135f, 0.00486893067f},
              1e-6, 0);
  ASSERT_TRUE(runCpuKernel("graph.log_softmax", {&x}, {&y}, axisAttr(1)));
  // PyTorch's float32 log_softmax rounds log(sum) in float: results near 0
  // are off by up to 8e-8 absolute (an ulp of log(sum) near 1), so against
  // it a 1e-7 absolute floor is added; at 1e-6 relative alone, ours matches
  // the float64 torch.log_softmax(x.double(), 1).float().
  expectClose(y.values<float>(),
              {-5.91426563f, -5.99996996f, -0.034265589f, -0.439969897f,
               -3.47426534f, -1.03996992f, -5.70904636f, -7.1614933f,
               -0.00904663745f, -0.00149317307f, -5.1690464f, -7.24149323f},
              1e-6, 1e-7);
  expectClose(y.values<float>(),
              {-5.91426563f, -5.99996996f, -0.0342656411f, -0.439969838f,
               -3.47426558f, -1.03996992f, -5.70904636f, -7.16149378f,
               -0.00904662255f, -0.00149325049f, -5.1690464f, -7.2414937f},
              1e-6, 0);
}

TEST(NormalizationKernels, SoftmaxAxis0F64) {
  // torch.log_softmax(x, 0) and torch.softmax(x, 0) in float64, x [3, 2]
  OwnedTensor x = f64({3, 2}, {-4.16, -2.4, -2.78, 2.32, 3.72, -2.3});
  OwnedTensor y(DType::F64, {3, 2});
  ASSERT_TRUE(runCpuKernel("graph.log_softmax", {&x}, {&y}, axisAttr(0)));
  expectClose(y.values<double>(),
              {-7.8818799041222096, -4.7385940292058759, -6.5018799041222088,
               -0.01859402920587629, -0.0018799041222092572,
               -4.6385940292058754},
              1e-13, 0);
  ASSERT_TRUE(runCpuKernel("graph.softmax", {&x}, {&y}, axisAttr(0)));
  expectClose(y.values<double>(),
              {0.00037752268282669545, 0.0087509411079158498,
               0.0015006155263840165, 0.9815777732738229, 0.99812186179078943,
               0.0096712856182612893},
              1e-13, 0);
}

TEST(NormalizationKernels, SoftmaxEdgeRowsLikePyTorch) {
  // torch.softmax(x, 1) / torch.log_softmax(x, 1) of
  // [[1000, 1001, 999], [-inf]*3, [-inf, 0.5, -1], [nan, 1, 2]]:
  // large logits are stable, an all -inf row and a NaN row give NaN.
  const float inf = INFINITY;
  OwnedTensor x = f32(
      {4, 3}, {1000, 1001, 999, -inf, -inf, -inf, -inf, 0.5f, -1, NAN, 1, 2});
  OwnedTensor y(DType::F32, {4, 3});
  ASSERT_TRUE(runCpuKernel("graph.softmax", {&x}, {&y}, axisAttr(1)));
  std::vector<float> p = y.values<float>();
  expectClose(std::vector<float>(p.begin(), p.begin() + 3),
              {0.2447284758090973f, 0.6652409434318542f, 0.09003057330846786f},
              1e-6, 0);
  for (int i = 3; i < 6; ++i)
    EXPECT_TRUE(std::isnan(p[i])) << i;
  expectClose(std::vector<float>(p.begin() + 6, p.begin() + 9),
              {0.0f, 0.8175744414329529f, 0.18242551386356354f}, 1e-6, 0);
  for (int i = 9; i < 12; ++i)
    EXPECT_TRUE(std::isnan(p[i])) << i;

  ASSERT_TRUE(runCpuKernel("graph.log_softmax", {&x}, {&y}, axisAttr(1)));
  std::vector<float> l = y.values<float>();
  expectClose(
      std::vector<float>(l.begin(), l.begin() + 3),
      {-1.4076058864593506f, -0.40760594606399536f, -2.4076058864593506f}, 1e-6,
      0);
  for (int i = 3; i < 6; ++i)
    EXPECT_TRUE(std::isnan(l[i])) << i;
  EXPECT_EQ(l[6], -inf);
  expectClose(std::vector<float>(l.begin() + 7, l.begin() + 9),
              {-0.2014133334159851f, -1.7014133930206299f}, 1e-6, 0);
  for (int i = 9; i < 12; ++i)
    EXPECT_TRUE(std::isnan(l[i])) << i;
}

TEST(NormalizationKernels, SoftmaxErrors) {
  OwnedTensor x(DType::F32, {2, 3});
  OwnedTensor y(DType::F32, {2, 3});
  Status s = runCpuKernel("graph.softmax", {&x}, {&y}, axisAttr(2));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("graph.softmax: axis 2"), std::string::npos);
  EXPECT_FALSE(runCpuKernel("graph.log_softmax", {&x}, {&y}, axisAttr(-1)));
  EXPECT_FALSE(runCpuKernel("graph.softmax", {&x}, {&y}));
  OwnedTensor i(DType::I64, {2, 3});
  EXPECT_FALSE(runCpuKernel("graph.softmax", {&i}, {&i}, axisAttr(1)));
  OwnedTensor y64(DType::F64, {2, 3});
  EXPECT_FALSE(runCpuKernel("graph.softmax", {&x}, {&y64}, axisAttr(1)));
}

} // namespace
