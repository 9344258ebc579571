//===- RoundToTest.cpp - bf16 / fp16 rounding and storage ------------------===//
//
// graph.round_to (the f32 emulation), the narrow storage of NarrowFloat.h
// against LLVM's APFloat, graph.cast to and from bf16 / fp16, and the CPU's
// narrow-operand adapter: a product on narrow tensors computes what the
// emulation computes.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/NarrowFloat.h"

#include "llvm/ADT/APFloat.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace strata::runtime;

namespace {

std::vector<float> roundTo(const char *dtype, std::vector<float> values) {
  std::vector<float> out(values.size());
  TensorView in{values.data(), DType::F32, {int64_t(values.size())}};
  TensorView result{out.data(), DType::F32, {int64_t(values.size())}};
  KernelAttrs attrs;
  attrs.set("dtype", std::string(dtype));
  std::vector<TensorView> ins{in}, outs{result};
  KernelContext ctx{ins, outs, attrs};
  Status s = (*getCpuKernels().lookup("graph.round_to"))(ctx);
  EXPECT_TRUE(s.isOk()) << s.message();
  return out;
}

TEST(RoundToTest, Bf16RoundsToNearestEven) {
  float inf = std::numeric_limits<float>::infinity();
  std::vector<float> got = roundTo(
      "bf16", {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -1.0f - 0x1p-7f, 3.0e38f,
               inf, 0.0f});
  EXPECT_EQ(got[0], 1.0f);               // tie -> even
  EXPECT_EQ(got[1], 1.0f + 0x1p-6f);     // tie -> even (up)
  EXPECT_EQ(got[2], -1.0f - 0x1p-7f);    // representable
  EXPECT_EQ(got[3], 0x1.c4p+127f);       // 226/128 * 2^127: fp32 range
  EXPECT_EQ(got[4], inf);
  EXPECT_EQ(got[5], 0.0f);
}

TEST(RoundToTest, Fp16RangeAndSubnormals) {
  std::vector<float> got = roundTo(
      "fp16", {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65520.0f,
               -70000.0f, 1.0e-8f, 3.0e-8f, 0x1p-20f + 0x1p-25f});
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 1.0f + 0x1p-9f);
  EXPECT_EQ(got[2], 65504.0f);
  EXPECT_TRUE(std::isinf(got[3]) && got[3] > 0);
  EXPECT_TRUE(std::isinf(got[4]) && got[4] < 0);
  EXPECT_EQ(got[5], 0.0f);               // below half the smallest subnormal
  EXPECT_EQ(got[6], 0x1p-24f);           // the smallest subnormal
  EXPECT_EQ(got[7], 0x1p-20f);           // subnormal spacing is 2^-24
}

uint32_t bitsOf(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

/// LLVM's conversion of `v` to `semantics` (round to nearest even), as
/// 16 bits.
uint16_t apfloatBits(float v, const llvm::fltSemantics &semantics) {
  llvm::APFloat f(v);
  bool lost;
  f.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &lost);
  return uint16_t(f.bitcastToAPInt().getZExtValue());
}

TEST(NarrowFloatTest, StorageMatchesApFloatAndRoundTo) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> values = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.0f,
                               65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f,
                               0x1p-14f, 0x1.ffcp-15f, 3.0e38f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < 200000; ++i) {
    uint32_t b = any(rng);
    if (i % 2) // most of them in fp16's range
      b = (b & 0x8fffffffu) | 0x30000000u;
    float v;
    std::memcpy(&v, &b, 4);
    if (!std::isnan(v))
      values.push_back(v);
  }
  for (float v : values) {
    ASSERT_EQ(bf16Bits(v), apfloatBits(v, llvm::APFloat::BFloat())) << v;
    ASSERT_EQ(fp16Bits(v), apfloatBits(v, llvm::APFloat::IEEEhalf())) << v;
    ASSERT_EQ(bitsOf(fromBf16Bits(bf16Bits(v))), bitsOf(roundToBf16(v))) << v;
    ASSERT_EQ(bitsOf(fromFp16Bits(fp16Bits(v))), bitsOf(roundToFp16(v))) << v;
  }
  // Every narrow value widens exactly and comes back; NaN stays NaN.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    float b = fromBf16Bits(uint16_t(h)), f = fromFp16Bits(uint16_t(h));
    if (std::isnan(b))
      EXPECT_TRUE(std::isnan(fromBf16Bits(bf16Bits(b))));
    else
      ASSERT_EQ(bf16Bits(b), h);
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(fromFp16Bits(fp16Bits(f))));
    else
      ASSERT_EQ(fp16Bits(f), h) << h;
  }
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(fromBf16Bits(bf16Bits(nan))));
  EXPECT_TRUE(std::isnan(fromFp16Bits(fp16Bits(nan))));
}

/// Runs the CPU kernel of `op` on `inputs` into `outputs`.
void runCpu(const char *op, std::vector<TensorView> inputs,
            std::vector<TensorView> outputs, const KernelAttrs &attrs) {
  KernelContext ctx{inputs, outputs, attrs};
  const KernelFn *fn = getCpuKernels().lookup(op);
  ASSERT_NE(fn, nullptr) << op;
  Status s = (*fn)(ctx);
  ASSERT_TRUE(s.isOk()) << op << ": " << s.message();
}

TEST(NarrowFloatTest, CastAndNarrowLinearEqualTheEmulation) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const int64_t m = 5, k = 37, n = 11;
  std::vector<float> x(m * k), w(n * k), bias(n);
  for (auto *v : {&x, &w, &bias})
    for (float &e : *v)
      e = d(rng);
  KernelAttrs none, transposed, bf16;
  transposed.set("transpose_weight", int64_t(1));
  bf16.set("dtype", std::string("bf16"));
  auto f32View = [](std::vector<float> &v, std::vector<int64_t> shape) {
    return TensorView{v.data(), DType::F32, std::move(shape)};
  };
  auto bf16View = [](std::vector<uint16_t> &v, std::vector<int64_t> shape) {
    return TensorView{v.data(), DType::BF16, std::move(shape)};
  };
  // The emulation: round_to each operand, f32 linear, round_to the result.
  std::vector<float> xr(x.size()), wr(w.size()), br(bias.size()),
      y(m * n), yr(m * n);
  runCpu("graph.round_to", {f32View(x, {m, k})}, {f32View(xr, {m, k})}, bf16);
  runCpu("graph.round_to", {f32View(w, {n, k})}, {f32View(wr, {n, k})}, bf16);
  runCpu("graph.round_to", {f32View(bias, {n})}, {f32View(br, {n})}, bf16);
  runCpu("graph.linear",
         {f32View(xr, {m, k}), f32View(wr, {n, k}), f32View(br, {n})},
         {f32View(y, {m, n})}, transposed);
  runCpu("graph.round_to", {f32View(y, {m, n})}, {f32View(yr, {m, n})}, bf16);
  // Narrow storage: cast to bf16, linear on bf16, cast back.
  std::vector<uint16_t> xn(x.size()), wn(w.size()), bn(bias.size()),
      yn(m * n);
  std::vector<float> back(m * n);
  runCpu("graph.cast", {f32View(x, {m, k})}, {bf16View(xn, {m, k})}, none);
  runCpu("graph.cast", {f32View(w, {n, k})}, {bf16View(wn, {n, k})}, none);
  runCpu("graph.cast", {f32View(bias, {n})}, {bf16View(bn, {n})}, none);
  runCpu("graph.linear",
         {bf16View(xn, {m, k}), bf16View(wn, {n, k}), bf16View(bn, {n})},
         {bf16View(yn, {m, n})}, transposed);
  runCpu("graph.cast", {bf16View(yn, {m, n})}, {f32View(back, {m, n})}, none);
  for (int64_t i = 0; i < m * n; ++i)
    ASSERT_EQ(bitsOf(back[i]), bitsOf(yr[i])) << i;
  // The result really is rounded: not every f32 product is a bf16 value.
  int64_t inexact = 0;
  for (int64_t i = 0; i < m * n; ++i)
    inexact += y[i] != yr[i];
  EXPECT_GT(inexact, 0);
}

TEST(NarrowFloatTest, CastToNarrowFromWideTypesIsRefused) {
  std::vector<double> x(4, 1.5);
  std::vector<uint16_t> y(4);
  TensorView in{x.data(), DType::F64, {4}}, out{y.data(), DType::BF16, {4}};
  std::vector<TensorView> ins{in}, outs{out};
  KernelAttrs none;
  KernelContext ctx{ins, outs, none};
  Status s = (*getCpuKernels().lookup("graph.cast"))(ctx);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "graph.cast: f64 to bf16 is not supported (cast through f32)");
}

} // namespace
