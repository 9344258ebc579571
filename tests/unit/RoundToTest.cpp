//===- RoundToTest.cpp - bf16 / fp16 rounding of graph.round_to -----------===//

#include "strata/Runtime/Kernel.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
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

} // namespace
