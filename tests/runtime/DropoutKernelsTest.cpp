//===- DropoutKernelsTest.cpp - CPU dropout kernel ------------------------===//
//
// The generator is checked against Random123's known-answer vectors; the
// kernel for determinism (the mask is a function of seed and index only),
// its keep rate (statistically, over a large tensor) and its scaling.
// PyTorch draws from another generator, so no mask is compared with it.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"
#include "kernels/KernelUtils.h"

#include <array>
#include <cmath>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

KernelAttrs ratioAttr(double ratio) {
  KernelAttrs a;
  a.set("ratio", ratio);
  return a;
}

TEST(DropoutKernels, PhiloxMatchesRandom123KnownAnswers) {
  // Random123 tests/kat_vectors, "philox4x32 10" lines: ctr, key -> out.
  using cpu::philox4x32_10;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c,
                                     0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6,
                                     0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420,
                                     0x24126ea1}));
}

TEST(DropoutKernels, MaskBitIsTheDocumentedRule) {
  // Seed 0, element 0: counter 0, key 0, word 0 = 0x6627e8d5, so
  // u = 0x6627e8d5 / 2^32 = 0.39904647...: kept iff u >= ratio.
  OwnedTensor x = f32({1}, {3.0f});
  OwnedTensor y(DType::F32, {1}), mask(DType::I1, {1});
  ASSERT_TRUE(runCpuKernel("graph.dropout", {&x}, {&y, &mask}, ratioAttr(0.399),
                           /*seed=*/0));
  EXPECT_EQ(mask.values<uint8_t>()[0], 1);
  EXPECT_EQ(y.values<float>()[0], 3.0f * (1.0f / float(1 - 0.399)));
  ASSERT_TRUE(runCpuKernel("graph.dropout", {&x}, {&y, &mask},
                           ratioAttr(0.3991), /*seed=*/0));
  EXPECT_EQ(mask.values<uint8_t>()[0], 0);
  EXPECT_EQ(y.values<float>()[0], 0.0f);
}

TEST(DropoutKernels, DeterministicPerSeedAndIndex) {
  const int64_t n = 4096;
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = float(i % 17) - 8.0f;
  OwnedTensor x = f32({64, 64}, values);
  OwnedTensor y1(DType::F32, {64, 64}), m1(DType::I1, {64, 64});
  OwnedTensor y2(DType::F32, {64, 64}), m2(DType::I1, {64, 64});
  ASSERT_TRUE(
      runCpuKernel("graph.dropout", {&x}, {&y1, &m1}, ratioAttr(0.5), 42));
  ASSERT_TRUE(
      runCpuKernel("graph.dropout", {&x}, {&y2, &m2}, ratioAttr(0.5), 42));
  EXPECT_EQ(m1.values<uint8_t>(), m2.values<uint8_t>());
  EXPECT_EQ(y1.values<float>(), y2.values<float>());

  // The mask depends on the flat index only: a prefix of the tensor, in any
  // shape and dtype, draws the same bits.
  OwnedTensor prefix = f64({10, 10}, std::vector<double>(100, 1.0));
  OwnedTensor yp(DType::F64, {10, 10}), mp(DType::I1, {10, 10});
  ASSERT_TRUE(
      runCpuKernel("graph.dropout", {&prefix}, {&yp, &mp}, ratioAttr(0.5), 42));
  std::vector<uint8_t> full = m1.values<uint8_t>();
  EXPECT_EQ(mp.values<uint8_t>(),
            std::vector<uint8_t>(full.begin(), full.begin() + 100));

  // Another seed, another mask (2048 of 4096 bits agree on average).
  ASSERT_TRUE(
      runCpuKernel("graph.dropout", {&x}, {&y2, &m2}, ratioAttr(0.5), 43));
  std::vector<uint8_t> a = m1.values<uint8_t>(), b = m2.values<uint8_t>();
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i)
    same += a[i] == b[i];
  EXPECT_NEAR(double(same), n / 2.0, 5 * std::sqrt(n / 4.0));
  // Seeds differing only in the high 32 bits differ too.
  ASSERT_TRUE(runCpuKernel("graph.dropout", {&x}, {&y2, &m2}, ratioAttr(0.5),
                           42 + (uint64_t(1) << 32)));
  EXPECT_NE(m2.values<uint8_t>(), a);
}

TEST(DropoutKernels, KeepRateAndIndependence) {
  // 2^20 elements: the kept fraction is within 5 standard deviations
  // (sqrt(p (1 - p) / n) < 5e-4) of 1 - ratio, and so is the fraction of
  // neighbour pairs both kept, (1 - ratio)^2.
  const int64_t n = int64_t(1) << 20;
  OwnedTensor x(DType::F32, {n});
  OwnedTensor y(DType::F32, {n}), mask(DType::I1, {n});
  for (double ratio : {0.1, 0.5, 0.9}) {
    ASSERT_TRUE(runCpuKernel("graph.dropout", {&x}, {&y, &mask},
                             ratioAttr(ratio), 0x1234567890abcdefull));
    const uint8_t *m = mask.view().as<uint8_t>();
    int64_t kept = 0, pairs = 0;
    for (int64_t i = 0; i < n; ++i) {
      kept += m[i];
      if (i + 1 < n)
        pairs += m[i] & m[i + 1];
    }
    double keep = 1 - ratio;
    EXPECT_NEAR(double(kept) / n, keep, 5 * std::sqrt(keep * ratio / n))
        << ratio;
    double both = keep * keep;
    EXPECT_NEAR(double(pairs) / (n - 1), both,
                5 * std::sqrt(both * (1 - both) / (n - 1)))
        << ratio;
  }
}

TEST(DropoutKernels, ScalesKeptElements) {
  std::vector<double> values(1000);
  for (int i = 0; i < 1000; ++i)
    values[i] = 0.01 * i - 3.3;
  OwnedTensor x = f64({1000}, values);
  OwnedTensor y(DType::F64, {1000}), mask(DType::I1, {1000});
  ASSERT_TRUE(
      runCpuKernel("graph.dropout", {&x}, {&y, &mask}, ratioAttr(0.25), 7));
  std::vector<double> out = y.values<double>();
  std::vector<uint8_t> m = mask.values<uint8_t>();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(m[i] == 0 || m[i] == 1);
    EXPECT_EQ(out[i], m[i] ? values[i] * (1.0 / 0.75) : 0.0) << i;
  }

  // f32, and the same mask for the same seed whatever the dtype.
  std::vector<float> fv(values.begin(), values.end());
  OwnedTensor xf = f32({1000}, fv);
  OwnedTensor yf(DType::F32, {1000}), mf(DType::I1, {1000});
  ASSERT_TRUE(
      runCpuKernel("graph.dropout", {&xf}, {&yf, &mf}, ratioAttr(0.25), 7));
  EXPECT_EQ(mf.values<uint8_t>(), m);
  std::vector<float> outf = yf.values<float>();
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(outf[i], m[i] ? fv[i] * (1.0f / 0.75f) : 0.0f) << i;
}

TEST(DropoutKernels, RatioZeroKeepsEverything) {
  OwnedTensor x = f32({3}, {1.5f, -2, 0.25f});
  OwnedTensor y(DType::F32, {3}), mask(DType::I1, {3});
  ASSERT_TRUE(runCpuKernel("graph.dropout", {&x}, {&y, &mask}, ratioAttr(0)));
  EXPECT_EQ(y.values<float>(), x.values<float>());
  EXPECT_EQ(mask.values<uint8_t>(), (std::vector<uint8_t>{1, 1, 1}));
}

TEST(DropoutKernels, Errors) {
  OwnedTensor x(DType::F32, {4});
  OwnedTensor y(DType::F32, {4}), mask(DType::I1, {4});
  Status s = runCpuKernel("graph.dropout", {&x}, {&y, &mask}, ratioAttr(1.0));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("ratio"), std::string::npos);
  EXPECT_FALSE(
      runCpuKernel("graph.dropout", {&x}, {&y, &mask}, ratioAttr(-0.1)));
  EXPECT_FALSE(runCpuKernel("graph.dropout", {&x}, {&y, &mask}));
  OwnedTensor badMask(DType::F32, {4});
  EXPECT_FALSE(
      runCpuKernel("graph.dropout", {&x}, {&y, &badMask}, ratioAttr(0.5)));
  EXPECT_FALSE(runCpuKernel("graph.dropout", {&x}, {&y}, ratioAttr(0.5)));
  OwnedTensor xi(DType::I64, {4}), yi(DType::I64, {4});
  EXPECT_FALSE(
      runCpuKernel("graph.dropout", {&xi}, {&yi, &mask}, ratioAttr(0.5)));
}

} // namespace
