//===- GemmStagingTest.cpp - Which products stage a matrix ---------------===//
//
// The CUDA products stage an operand or result whose leading dimension is
// not a multiple of 16 bytes through an aligned copy
// (linalg::stagedLeadingDim): GPT-2's head, over 50,257 words, and not the
// products whose rows are aligned, nor small or batched ones.
//
//===----------------------------------------------------------------------===//

#include "kernels/LinearAlgebraCommon.cuh"

#include <gtest/gtest.h>

namespace strata::runtime::cuda::linalg {
namespace {

constexpr int64_t kMin = int64_t(1) << 20;

GemmProblem plain() {
  GemmProblem p;
  p.calls.resize(1);
  return p;
}

TEST(GemmStaging, GptHeadLogitsAreStagedToSixteenBytes) {
  GemmProblem p = plain();
  // Logits [8192, 50257] row-major: column-major 50257 x 8192, ld 50257.
  EXPECT_EQ(stagedLeadingDim(p, 50257, 8192, 50257, 2, kMin), 50264);
  EXPECT_EQ(stagedLeadingDim(p, 50257, 8192, 50257, 4, kMin), 50260);
  EXPECT_EQ(stagedLeadingDim(p, 50257, 8192, 50257, 8, kMin), 50258);
}

TEST(GemmStaging, AlignedSmallBatchedOrDisabledAreNot) {
  GemmProblem p = plain();
  EXPECT_EQ(stagedLeadingDim(p, 768, 8192, 768, 2, kMin), 768);
  EXPECT_EQ(stagedLeadingDim(p, 33, 7, 33, 2, kMin), 33);
  EXPECT_EQ(stagedLeadingDim(p, 33, 7, 33, 2, 0), 40);
  EXPECT_EQ(stagedLeadingDim(p, 50257, 8192, 50257, 2, -1), 50257);
  GemmProblem batched = plain();
  batched.batch = 4;
  EXPECT_EQ(stagedLeadingDim(batched, 50257, 8192, 50257, 2, kMin), 50257);
  GemmProblem calls = plain();
  calls.calls.resize(3);
  EXPECT_EQ(stagedLeadingDim(calls, 50257, 8192, 50257, 2, kMin), 50257);
}

} // namespace
} // namespace strata::runtime::cuda::linalg
