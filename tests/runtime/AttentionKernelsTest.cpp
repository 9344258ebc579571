//===- AttentionKernelsTest.cpp - CPU scaled-dot-product attention --------===//
//
// torch 1.13 has no scaled_dot_product_attention, so expected values come
// from the explicit formula, in the inputs' dtype:
//   def attn(q, k, v, scale, mask=None, causal=False):
//       s = (q @ k.transpose(-2, -1)) * scale
//       if mask is not None: s = s + mask
//       if causal:
//           S, T = s.shape[-2:]
//           s = s.masked_fill(torch.ones(S, T, dtype=torch.bool).triu(1),
//                             float('-inf'))
//       return torch.softmax(s, -1) @ v
// Inputs are randn * 1.5 rounded to two decimals. f32 at 1e-6 relative plus
// 1e-6 absolute: the outputs are sums of products of probabilities and
// values, and PyTorch's float softmax differs from our double-accumulated
// one by an ulp or two of each probability.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

KernelAttrs attnAttrs(double scale, bool causal = false, double dropout = 0) {
  KernelAttrs a;
  a.set("scale", scale);
  a.set("causal", int64_t(causal));
  a.set("dropout_ratio", dropout);
  return a;
}

// Case 1: q [2, 3, 4], k [2, 5, 4], v [2, 5, 2].
OwnedTensor case1Q() {
  return f32({2, 3, 4},
             {-3.47f, -0.56f, -1.59f, 1.5f,   -1.33f, -1.91f, -0.93f, -1.3f,
              0.36f,  1.1f,   -1.98f, 1.97f,  -2.23f, -1.07f, 0.78f,  -1.43f,
              1.01f,  1.57f,  0.23f,  -1.12f, -1.09f, 0.13f,  -2.62f, 1.56f});
}
OwnedTensor case1K() {
  return f32({2, 5, 4},
             {1.2f,   0.32f, 0.2f,   -0.05f, 0.69f,  1.68f,  0.55f,  -0.28f,
              -0.02f, -0.3f, -2.48f, 1.37f,  1.73f,  -0.13f, -2.94f, 0.33f,
              -1.56f, 1.46f, -0.11f, 1.3f,   1.49f,  0.17f,  0.22f,  1.61f,
              -1.05f, 0.49f, -1.31f, 0.59f,  1.34f,  1.76f,  -0.59f, 0.67f,
              -0.26f, 1.46f, 0.62f,  -0.75f, -0.71f, 0.43f,  -1.98f, 1.33f});
}
OwnedTensor case1V() {
  return f32({2, 5, 2}, {-0.89f, 0.93f,  -2.23f, 2.04f,  1.66f,  1.28f, -0.95f,
                         -0.9f,  1.29f,  2.08f,  -0.18f, 2.33f,  0.6f,  -1.01f,
                         2.49f,  -0.91f, 0.29f,  1.13f,  -0.49f, 2.14f});
}

TEST(AttentionKernels, PlainF32) {
  // attn(q, k, v, 0.5)
  OwnedTensor q = case1Q(), k = case1K(), v = case1V();
  OwnedTensor y(DType::F32, {2, 3, 2});
  ASSERT_TRUE(
      runCpuKernel("graph.attention", {&q, &k, &v}, {&y}, attnAttrs(0.5)));
  expectClose(y.values<float>(),
              {1.41010022f, 1.69303799f, 0.468234271f, 0.664003074f,
               0.468059838f, 0.468158662f, 0.335937947f, 0.473296463f,
               1.20389402f, 0.272770703f, -0.176491827f, 1.39873099f},
              1e-6, 1e-6);

  // The attributes' defaults: causal false, no dropout.
  KernelAttrs scaleOnly;
  scaleOnly.set("scale", 0.5);
  OwnedTensor y2(DType::F32, {2, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.attention", {&q, &k, &v}, {&y2}, scaleOnly));
  EXPECT_EQ(y2.values<float>(), y.values<float>());
}

TEST(AttentionKernels, CausalWithMaskF64) {
  // attn(q, k, v, 0.5, m, causal=True) in float64, q [1, 2, 3, 4],
  // k [1, 2, 4, 4], v [1, 2, 4, 3], m [3, 4]; S = 3 < T = 4, j > i hidden.
  OwnedTensor q =
      f64({1, 2, 3, 4}, {1.14, 0.33,  -0.72, -0.39, 0.9,  -2.32, -0.16, 1.52,
                         1.01, -0.72, 3.3,   0.2,   1.34, -2.95, 2.23,  -0.3,
                         -1.1, -1.67, -0.2,  2.18,  0.18, 0.04,  1.28,  1.36});
  OwnedTensor k = f64({1, 2, 4, 4},
                      {-0.54, 0.82,  0.9,   0.57,  -0.15, -1.93, 2.12,  0.67,
                       1.94,  -3.39, 1.5,   1.94,  1.21,  1.36,  -0.32, 0.77,
                       -0.04, 2.64,  1.06,  -1,    -1.24, 0.45,  -1.34, 0.79,
                       -1.24, -1.41, -1.59, -2.33, -0.47, 0.38,  -1.53, -1.47});
  OwnedTensor v = f64({1, 2, 4, 3},
                      {1.87,  -0.52, -0.4,  0.49,  -2.63, -0.74, 0.73,  1.01,
                       -0.32, -2.18, -0.5,  -0.29, 0.54,  -0.53, -2.68, -2.49,
                       0.99,  1.53,  -0.29, -2.98, 1.08,  -1.84, -1.76, 0.39});
  OwnedTensor m = f64({3, 4}, {0.55, 0.57, 1.4, -0.15, -1.11, -1.5, -0.04, 0.14,
                               -0.88, 0.77, 1.21, -2.65});
  OwnedTensor y(DType::F64, {1, 2, 3, 3});
  ASSERT_TRUE(runCpuKernel("graph.attention", {&q, &k, &v, &m}, {&y},
                           attnAttrs(0.5, true)));
  expectClose(y.values<double>(),
              {1.8700000000000001, -0.52000000000000002, -0.40000000000000002,
               0.55838246382587964, -2.5254442038604306, -0.72315214659362392,
               0.67345471550067426, 0.11671475313876034, -0.42288834261201746,
               0.54000000000000004, -0.53000000000000003, -2.6800000000000002,
               -2.4490253879732427, 0.9694450791152901, 1.4730682783390601,
               -1.6218428872761259, 0.25460260958408665, 0.59647456199355264},
              1e-12, 1e-14);
}

TEST(AttentionKernels, KeyPaddingMaskBroadcastsOverHeadsAndQueries) {
  // attn(q, k, v, 0.35, m), q [2, 2, 3, 4], k and v [2, 2, 4, 4], m
  // [2, 1, 1, 4] hiding key 3 of batch 0 and keys 1..3 of batch 1 (whose
  // outputs are then v[..., 0, :] exactly).
  OwnedTensor q =
      f32({2, 2, 3, 4},
          {3.15f,  0.18f,  0.46f,  1.29f,  1.04f,  -1.39f, 1.83f,  1.95f,
           -0.22f, -0.01f, -0.05f, -0.26f, -0.13f, -0.61f, -1.16f, 1.12f,
           1.49f,  -0.82f, -1.55f, 0.79f,  2.38f,  -2.0f,  0.2f,   -0.55f,
           1.17f,  -0.95f, 0.97f,  0.64f,  2.67f,  1.6f,   -0.85f, -1.79f,
           -1.65f, 0.24f,  -2.89f, 0.35f,  -1.63f, 0.02f,  -0.19f, 1.25f,
           1.45f,  -2.13f, -0.73f, -1.4f,  -1.65f, 2.73f,  0.93f,  0.86f});
  OwnedTensor k =
      f32({2, 2, 4, 4},
          {0.24f,  -2.07f, -0.82f, -1.56f, -0.03f, -1.52f, -0.72f, 3.62f,
           -0.28f, -0.09f, 1.08f,  -0.12f, 0.28f,  0.08f,  0.46f,  -0.3f,
           -1.28f, 1.02f,  1.53f,  2.09f,  -2.47f, -0.89f, 0.16f,  1.46f,
           -1.69f, 0.65f,  -0.03f, -0.81f, 1.26f,  0.29f,  -1.41f, 1.57f,
           1.25f,  -1.52f, -1.36f, -1.41f, 0.63f,  1.7f,   1.83f,  -1.26f,
           -0.14f, -1.21f, -0.69f, 2.02f,  -1.67f, -0.94f, 1.89f,  0.67f,
           0.06f,  -1.14f, -0.15f, 0.05f,  -1.59f, 0.59f,  0.83f,  0.68f,
           1.67f,  1.4f,   -0.64f, -1.74f, 0.86f,  3.21f,  0.56f,  2.29f});
  OwnedTensor v =
      f32({2, 2, 4, 4},
          {1.72f,  -0.64f, -0.32f, -0.47f, -2.32f, -1.71f, -1.79f, 1.69f,
           0.11f,  0.66f,  2.79f,  0.79f,  -2.07f, 1.35f,  0.72f,  2.0f,
           0.76f,  0.63f,  0.26f,  1.72f,  1.21f,  -4.63f, -1.5f,  -0.96f,
           -3.39f, -1.13f, 0.95f,  -0.04f, -4.14f, -1.06f, 0.58f,  1.23f,
           -2.31f, -0.08f, 0.22f,  1.91f,  -2.04f, 0.76f,  0.58f,  -2.15f,
           1.2f,   -0.97f, -0.05f, 3.67f,  1.2f,   -0.12f, -0.24f, -0.49f,
           0.61f,  1.33f,  -0.67f, -0.1f,  1.11f,  -0.68f, -2.2f,  0.89f,
           1.39f,  1.72f,  1.67f,  -2.16f, 0.47f,  -0.83f, 1.12f,  -2.26f});
  const float inf = INFINITY;
  OwnedTensor m = f32({2, 1, 1, 4}, {0, 0, 0, -inf, 0, -inf, -inf, -inf});
  OwnedTensor y(DType::F32, {2, 2, 3, 4});
  ASSERT_TRUE(
      runCpuKernel("graph.attention", {&q, &k, &v, &m}, {&y}, attnAttrs(0.35)));
  expectClose(y.values<float>(),
              {-1.56945908f,  -1.24471831f,   -0.946397305f, 1.35034502f,
               -1.94474268f,  -1.44224036f,   -1.293015f,    1.52830112f,
               0.136735022f,  -0.456551015f,  0.394311309f,  0.515882254f,
               0.291779876f,  -2.64697695f,   -0.613870323f, -0.0999016538f,
               -0.121233523f, -2.24421096f,   -0.366530061f, 0.0293208361f,
               -0.610753179f, -1.98114049f,   -0.139626652f, 0.0696113259f,
               -2.30999994f,  -0.0799999982f, 0.219999999f,  1.90999997f,
               -2.30999994f,  -0.0799999982f, 0.219999999f,  1.90999997f,
               -2.30999994f,  -0.0799999982f, 0.219999999f,  1.90999997f,
               0.610000014f,  1.33000004f,    -0.670000017f, -0.100000001f,
               0.610000014f,  1.33000004f,    -0.670000017f, -0.100000001f,
               0.610000014f,  1.33000004f,    -0.670000017f, -0.100000001f},
              1e-6, 1e-6);
}

TEST(AttentionKernels, FullyMaskedRowIsNaNLikePyTorch) {
  // attn(q, k, v, 1.0, m) with row 1 of m all -inf: torch.softmax of an all
  // -inf row is NaN (-inf - -inf), so that output row is NaN; the others are
  // unaffected.
  OwnedTensor q = f32({3, 2}, {2.09f, -0.87f, -1.76f, 0.6f, 3.1f, 0.01f});
  OwnedTensor k =
      f32({4, 2}, {1.93f, 0.84f, -0.52f, 0.39f, -0.53f, 0.93f, -2.25f, 1.23f});
  OwnedTensor v =
      f32({4, 2}, {1.17f, 0.39f, -1.3f, 0.39f, -1.23f, 1.75f, 1.22f, -2.95f});
  const float inf = INFINITY;
  OwnedTensor m = f32({3, 4}, {-0.43f, -0.14f, -1.1f, -1.43f, -inf, -inf, -inf,
                               -inf, -inf, -0.65f, 3.67f, 0.68f});
  OwnedTensor y(DType::F32, {3, 2});
  ASSERT_TRUE(
      runCpuKernel("graph.attention", {&q, &k, &v, &m}, {&y}, attnAttrs(1.0)));
  std::vector<float> out = y.values<float>();
  EXPECT_NEAR(out[0], 1.1347099542617798f, 1e-6 * 1.14 + 1e-6);
  EXPECT_NEAR(out[1], 0.3935713768005371f, 1e-6 * 0.4 + 1e-6);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_NEAR(out[4], -1.2303529977798462f, 1e-6 * 1.23 + 1e-6);
  EXPECT_NEAR(out[5], 1.730567216873169f, 1e-6 * 1.73 + 1e-6);
}

TEST(AttentionKernels, DropoutFollowsGraphDropout) {
  // With dropout_ratio, the probabilities [2, 3, 5] are dropped exactly as
  // graph.dropout drops a tensor of that shape with the same seed: compose
  // the same computation from graph.matmul, graph.softmax, graph.dropout.
  OwnedTensor q = case1Q(), k = case1K(), v = case1V();
  const uint64_t seed = 0x5eed1234abcdull;
  const double ratio = 0.4;
  OwnedTensor y(DType::F32, {2, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.attention", {&q, &k, &v}, {&y},
                           attnAttrs(0.5, false, ratio), seed));

  std::vector<float> kv = k.values<float>(), ktv(40);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 5; ++t)
      for (int d = 0; d < 4; ++d)
        ktv[(b * 4 + d) * 5 + t] = kv[(b * 5 + t) * 4 + d];
  OwnedTensor kt = f32({2, 4, 5}, ktv);
  OwnedTensor scores(DType::F32, {2, 3, 5});
  ASSERT_TRUE(runCpuKernel("graph.matmul", {&q, &kt}, {&scores}));
  float *s = scores.view().as<float>();
  for (int i = 0; i < 30; ++i)
    s[i] *= 0.5f;
  OwnedTensor probs(DType::F32, {2, 3, 5});
  KernelAttrs lastAxis;
  lastAxis.set("axis", int64_t(2));
  ASSERT_TRUE(runCpuKernel("graph.softmax", {&scores}, {&probs}, lastAxis));
  OwnedTensor dropped(DType::F32, {2, 3, 5}), mask(DType::I1, {2, 3, 5});
  KernelAttrs ratioAttr;
  ratioAttr.set("ratio", ratio);
  ASSERT_TRUE(runCpuKernel("graph.dropout", {&probs}, {&dropped, &mask},
                           ratioAttr, seed));
  OwnedTensor expected(DType::F32, {2, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.matmul", {&dropped, &v}, {&expected}));
  expectClose(y.values<float>(), expected.values<float>(), 1e-6, 1e-7);

  // Something was dropped and something kept, so the result differs from
  // the dropout-free one.
  std::vector<uint8_t> bits = mask.values<uint8_t>();
  int kept = 0;
  for (uint8_t bit : bits)
    kept += bit;
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 30);
  OwnedTensor plain(DType::F32, {2, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.attention", {&q, &k, &v}, {&plain},
                           attnAttrs(0.5), seed));
  EXPECT_NE(y.values<float>(), plain.values<float>());

  // A replay reproduces it bit for bit; another seed draws another mask.
  OwnedTensor again(DType::F32, {2, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.attention", {&q, &k, &v}, {&again},
                           attnAttrs(0.5, false, ratio), seed));
  EXPECT_EQ(again.values<float>(), y.values<float>());
  OwnedTensor other(DType::F32, {2, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.attention", {&q, &k, &v}, {&other},
                           attnAttrs(0.5, false, ratio), seed + 1));
  EXPECT_NE(other.values<float>(), y.values<float>());
}

TEST(AttentionKernels, Errors) {
  OwnedTensor q(DType::F32, {2, 3, 4}), k(DType::F32, {2, 5, 4}),
      v(DType::F32, {2, 5, 2});
  OwnedTensor y(DType::F32, {2, 3, 2});
  Status s = runCpuKernel("graph.attention", {&q, &k, &v}, {&y});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("scale"), std::string::npos);

  OwnedTensor k3(DType::F32, {2, 5, 3});
  EXPECT_FALSE(
      runCpuKernel("graph.attention", {&q, &k3, &v}, {&y}, attnAttrs(1)));
  OwnedTensor v4(DType::F32, {2, 4, 2});
  EXPECT_FALSE(
      runCpuKernel("graph.attention", {&q, &k, &v4}, {&y}, attnAttrs(1)));
  OwnedTensor kb(DType::F32, {3, 5, 4});
  EXPECT_FALSE(
      runCpuKernel("graph.attention", {&q, &kb, &v}, {&y}, attnAttrs(1)));
  OwnedTensor badMask(DType::F32, {3, 4});
  s = runCpuKernel("graph.attention", {&q, &k, &v, &badMask}, {&y},
                   attnAttrs(1));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("mask"), std::string::npos);
  OwnedTensor bigMask(DType::F32, {1, 2, 3, 5});
  EXPECT_FALSE(runCpuKernel("graph.attention", {&q, &k, &v, &bigMask}, {&y},
                            attnAttrs(1)));
  EXPECT_FALSE(runCpuKernel("graph.attention", {&q, &k, &v}, {&y},
                            attnAttrs(1, false, 1.0)));
  OwnedTensor y64(DType::F64, {2, 3, 2});
  EXPECT_FALSE(
      runCpuKernel("graph.attention", {&q, &k, &v}, {&y64}, attnAttrs(1)));
}

} // namespace

namespace {

/// [B, X, Y, D] -> [B, Y, X, D]: the sequence and head axes swapped.
std::vector<float> swapMiddle(const std::vector<float> &in, int64_t b,
                              int64_t x, int64_t y, int64_t d) {
  std::vector<float> out(in.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < x; ++j)
      for (int64_t k = 0; k < y; ++k)
        for (int64_t e = 0; e < d; ++e)
          out[((i * y + k) * x + j) * d + e] = in[((i * x + j) * y + k) * d + e];
  return out;
}

std::vector<float> noise(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(int(seed >> 9) % 2001 - 1000) / 400.0f;
  }
  return v;
}

} // namespace

TEST(AttentionKernels, HeadsInnerIsThePlainLayoutTransposed) {
  // heads_inner reads q [B, S, H, D] (k, v [B, T, H, D]) in place and
  // writes [B, S, H, Dv]: the same bits as transposing the heads out,
  // attending and transposing back, forward and gradient. S = 70 spans two
  // blocks of query rows; causal, an additive [B, H, S, T] mask and
  // dropout (its counter is the logical [B, H, S, T] index) each once.
  const int64_t B = 2, S = 70, T = 70, H = 3, D = 8, Dv = 5;
  std::vector<float> qv = noise(B * S * H * D, 1), kv = noise(B * T * H * D, 2),
                     vv = noise(B * T * H * Dv, 3), dyv = noise(B * S * H * Dv, 4),
                     mv = noise(B * H * S * T, 5);
  OwnedTensor qIn = f32({B, S, H, D}, qv), kIn = f32({B, T, H, D}, kv),
              vIn = f32({B, T, H, Dv}, vv), dyIn = f32({B, S, H, Dv}, dyv);
  OwnedTensor q = f32({B, H, S, D}, swapMiddle(qv, B, S, H, D)),
              k = f32({B, H, T, D}, swapMiddle(kv, B, T, H, D)),
              v = f32({B, H, T, Dv}, swapMiddle(vv, B, T, H, Dv)),
              dy = f32({B, H, S, Dv}, swapMiddle(dyv, B, S, H, Dv));
  OwnedTensor mask = f32({B, H, S, T}, mv);
  const uint64_t seed = 77;
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    bool causal = variant == 0, masked = variant == 1;
    double ratio = variant == 2 ? 0.3 : 0.0;
    KernelAttrs plain = attnAttrs(0.5, causal, ratio);
    KernelAttrs inner = attnAttrs(0.5, causal, ratio);
    inner.set("heads_inner", int64_t(1));
    std::vector<const OwnedTensor *> plainIn = {&q, &k, &v},
                                     innerIn = {&qIn, &kIn, &vIn};
    if (masked) {
      plainIn.push_back(&mask);
      innerIn.push_back(&mask);
    }
    OwnedTensor y(DType::F32, {B, H, S, Dv}), yIn(DType::F32, {B, S, H, Dv});
    ASSERT_TRUE(runCpuKernel("graph.attention", plainIn, {&y}, plain, seed));
    ASSERT_TRUE(runCpuKernel("graph.attention", innerIn, {&yIn}, inner, seed));
    EXPECT_EQ(yIn.values<float>(), swapMiddle(y.values<float>(), B, H, S, Dv));

    std::vector<const OwnedTensor *> plainGradIn = {&dy, &q, &k, &v},
                                     innerGradIn = {&dyIn, &qIn, &kIn, &vIn};
    if (masked) {
      plainGradIn.push_back(&mask);
      innerGradIn.push_back(&mask);
    }
    OwnedTensor dq(DType::F32, {B, H, S, D}), dk(DType::F32, {B, H, T, D}),
        dv(DType::F32, {B, H, T, Dv});
    OwnedTensor dqIn(DType::F32, {B, S, H, D}), dkIn(DType::F32, {B, T, H, D}),
        dvIn(DType::F32, {B, T, H, Dv});
    ASSERT_TRUE(runCpuKernel("graph.attention_grad", plainGradIn,
                             {&dq, &dk, &dv}, plain, seed));
    ASSERT_TRUE(runCpuKernel("graph.attention_grad", innerGradIn,
                             {&dqIn, &dkIn, &dvIn}, inner, seed));
    EXPECT_EQ(dqIn.values<float>(), swapMiddle(dq.values<float>(), B, H, S, D));
    EXPECT_EQ(dkIn.values<float>(), swapMiddle(dk.values<float>(), B, H, T, D));
    EXPECT_EQ(dvIn.values<float>(),
              swapMiddle(dv.values<float>(), B, H, T, Dv));
  }

  // The plain layout's shapes under heads_inner are refused: [B, H, S, D]
  // read as [B, S', H', D] has 3 heads in the key but 70 in the query.
  KernelAttrs inner = attnAttrs(0.5);
  inner.set("heads_inner", int64_t(1));
  OwnedTensor kOther = f32({B, T, 2, D}, noise(B * T * 2 * D, 6));
  OwnedTensor y(DType::F32, {B, S, H, Dv});
  Status s = runCpuKernel("graph.attention", {&qIn, &kOther, &vIn}, {&y}, inner);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("do not fit"), std::string::npos) << s.message();
}

TEST(AttentionKernels, KeptProbabilitiesGiveTheSameGradients) {
  // keep_probabilities: the forward writes softmax(q k^T * scale + mask
  // [causal]) before dropout into its second result ([B, H, S, T], 0 where
  // a key is hidden), and the gradient reads it instead of making it
  // again: the same output and the same gradients, bit for bit, in both
  // layouts, with causality, a mask and dropout.
  const int64_t B = 2, S = 70, T = 70, H = 3, D = 8, Dv = 5;
  std::vector<float> qv = noise(B * S * H * D, 11), kv = noise(B * T * H * D, 12),
                     vv = noise(B * T * H * Dv, 13),
                     dyv = noise(B * S * H * Dv, 14), mv = noise(B * H * S * T, 15);
  const uint64_t seed = 78;
  for (int inner = 0; inner < 2; ++inner)
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(inner * 10 + variant);
      bool causal = variant == 0, masked = variant == 1;
      double ratio = variant == 2 ? 0.3 : 0.0;
      std::vector<int64_t> qs = inner ? std::vector<int64_t>{B, S, H, D}
                                      : std::vector<int64_t>{B, H, S, D},
                           ks = inner ? std::vector<int64_t>{B, T, H, D}
                                      : std::vector<int64_t>{B, H, T, D},
                           vs = inner ? std::vector<int64_t>{B, T, H, Dv}
                                      : std::vector<int64_t>{B, H, T, Dv},
                           ys = inner ? std::vector<int64_t>{B, S, H, Dv}
                                      : std::vector<int64_t>{B, H, S, Dv};
      OwnedTensor q = f32(qs, qv), k = f32(ks, kv), v = f32(vs, vv),
                  dy = f32(ys, dyv), mask = f32({B, H, S, T}, mv);
      KernelAttrs plain = attnAttrs(0.5, causal, ratio);
      if (inner)
        plain.set("heads_inner", int64_t(1));
      KernelAttrs keep = plain;
      keep.set("keep_probabilities", int64_t(1));
      std::vector<const OwnedTensor *> in = {&q, &k, &v};
      if (masked)
        in.push_back(&mask);
      OwnedTensor y(DType::F32, ys), yKeep(DType::F32, ys),
          probs(DType::F32, {B, H, S, T});
      // Garbage where the kernel must write zeros.
      std::fill_n(probs.view().as<float>(), B * H * S * T, 7.0f);
      ASSERT_TRUE(runCpuKernel("graph.attention", in, {&y}, plain, seed));
      ASSERT_TRUE(
          runCpuKernel("graph.attention", in, {&yKeep, &probs}, keep, seed));
      EXPECT_EQ(yKeep.values<float>(), y.values<float>());
      // Rows of probabilities: sum to 1, 0 past the diagonal when causal.
      std::vector<float> pv = probs.values<float>();
      for (int64_t r = 0; r < B * H * S; r += 13) {
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          sum += pv[r * T + j];
          if (causal && j > r % S)
            EXPECT_EQ(pv[r * T + j], 0.0f) << r << " " << j;
        }
        EXPECT_NEAR(sum, 1.0, 1e-5) << r;
      }

      std::vector<const OwnedTensor *> gradIn = {&dy, &q, &k, &v};
      if (masked)
        gradIn.push_back(&mask);
      std::vector<const OwnedTensor *> gradKeep = gradIn;
      gradKeep.push_back(&probs);
      OwnedTensor dq(DType::F32, qs), dk(DType::F32, ks), dv(DType::F32, vs);
      OwnedTensor dq2(DType::F32, qs), dk2(DType::F32, ks), dv2(DType::F32, vs);
      ASSERT_TRUE(runCpuKernel("graph.attention_grad", gradIn, {&dq, &dk, &dv},
                               plain, seed));
      ASSERT_TRUE(runCpuKernel("graph.attention_grad", gradKeep,
                               {&dq2, &dk2, &dv2}, keep, seed));
      EXPECT_EQ(dq2.values<float>(), dq.values<float>());
      EXPECT_EQ(dk2.values<float>(), dk.values<float>());
      EXPECT_EQ(dv2.values<float>(), dv.values<float>());
    }

  // Probabilities of another shape are refused, forward and gradient.
  KernelAttrs keep = attnAttrs(0.5);
  keep.set("keep_probabilities", int64_t(1));
  OwnedTensor q = f32({B, H, S, D}, qv), k = f32({B, H, T, D}, kv),
              v = f32({B, H, T, Dv}, vv), dy = f32({B, H, S, Dv}, dyv);
  OwnedTensor y(DType::F32, {B, H, S, Dv}), wrong(DType::F32, {B, H, S, T - 1});
  Status st = runCpuKernel("graph.attention", {&q, &k, &v}, {&y, &wrong}, keep);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("probabilities"), std::string::npos)
      << st.message();
  OwnedTensor dq(DType::F32, {B, H, S, D}), dk(DType::F32, {B, H, T, D}),
      dv(DType::F32, {B, H, T, Dv});
  st = runCpuKernel("graph.attention_grad", {&dy, &q, &k, &v, &wrong},
                    {&dq, &dk, &dv}, keep);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("probabilities"), std::string::npos)
      << st.message();
}
