//===- LinearAlgebraConformanceTest.cpp - cuBLASLt products vs the CPU ----===//
//
// graph.matmul, graph.linear and graph.linear_grad_weight on the CUDA
// backend against the CPU's kernels: plain, batched, broadcast batch dims
// (one strided batch, several, or the right matrix folded into the rows),
// the bias epilogue, odd sizes, empty contractions and results, f32 (IEEE:
// the harness's device leaves TF32 off) and f64, and the CPU's errors.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <random>

namespace strata::runtime::conformance {
namespace {

constexpr double kF32Rtol = 1e-4, kF32Atol = 1e-5;
constexpr double kF64Rtol = 1e-12, kF64Atol = 1e-12;

/// Operands uniform in [-1, 1), but operand `small` in [-1/16, 1/16): a
/// weight initialized at 1/sqrt(fan-in), a gradient, so that the long sums
/// stay near 1 and the f32 rounding of the two summation orders well inside
/// atol where a result is near zero.
Case product(const std::string &op, DType dtype,
             const std::vector<std::vector<int64_t>> &inputs,
             const std::vector<int64_t> &result, uint64_t seed,
             bool transposeWeight = false, int small = -1) {
  std::mt19937_64 rng(seed);
  Case c;
  c.op = op;
  for (size_t i = 0; i < inputs.size(); ++i) {
    double range = int(i) == small ? 0.0625 : 1.0;
    c.inputs.push_back(randomTensor(dtype, inputs[i], rng, -range, range));
  }
  c.outputs.push_back(zeros(dtype, result));
  if (transposeWeight)
    c.attrs.set("transpose_weight", int64_t(1));
  bool f32 = dtype == DType::F32;
  c.rtol = f32 ? kF32Rtol : kF64Rtol;
  c.atol = f32 ? kF32Atol : kF64Atol;
  return c;
}

//===----------------------------------------------------------------------===//
// graph.matmul
//===----------------------------------------------------------------------===//

TEST(LinearAlgebraConformance, MatmulSmall) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64})
    expectConformance(product("graph.matmul", t, {{2, 3}, {3, 4}}, {2, 4}, 1));
}

TEST(LinearAlgebraConformance, MatmulBatched) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    expectConformance(
        product("graph.matmul", t, {{2, 5, 7}, {2, 7, 3}}, {2, 5, 3}, 2));
    expectConformance(product("graph.matmul", t, {{3, 4, 17, 9}, {3, 4, 9, 33}},
                              {3, 4, 17, 33}, 3));
  }
}

TEST(LinearAlgebraConformance, MatmulSharedRightMatrixFoldsIntoRows) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    expectConformance(
        product("graph.matmul", t, {{2, 5, 7}, {7, 3}}, {2, 5, 3}, 4));
    expectConformance(product("graph.matmul", t, {{2, 3, 5, 7}, {1, 1, 7, 3}},
                              {2, 3, 5, 3}, 5));
  }
}

TEST(LinearAlgebraConformance, MatmulBroadcastBatchDims) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    // A shared left matrix, broadcast batch dims on either side or both
    // (a cuBLASLt call per batch matrix).
    expectConformance(
        product("graph.matmul", t, {{5, 7}, {4, 7, 3}}, {4, 5, 3}, 6));
    expectConformance(product("graph.matmul", t, {{2, 1, 5, 7}, {1, 3, 7, 3}},
                              {2, 3, 5, 3}, 7));
    expectConformance(product("graph.matmul", t, {{2, 3, 5, 7}, {2, 1, 7, 3}},
                              {2, 3, 5, 3}, 8));
    expectConformance(product("graph.matmul", t, {{3, 1, 5, 7}, {3, 2, 7, 3}},
                              {3, 2, 5, 3}, 9));
  }
}

TEST(LinearAlgebraConformance, MatmulOddSizes) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    expectConformance(
        product("graph.matmul", t, {{37, 129}, {129, 65}}, {37, 65}, 10));
    expectConformance(product("graph.matmul", t, {{3, 13, 31}, {3, 31, 1}},
                              {3, 13, 1}, 11));
    expectConformance(
        product("graph.matmul", t, {{1, 1}, {1, 1}}, {1, 1}, 12));
  }
}

TEST(LinearAlgebraConformance, MisalignedLeadingDimensionsAreStaged) {
  STRATA_REQUIRE_GPU();
  // An odd row length at 2^20 elements or more: the result (and below, an
  // operand) goes through a copy with an aligned leading dimension.
  expectConformance(product("graph.linear", DType::F32,
                            {{48, 24}, {24, 21851}, {21851}}, {48, 21851}, 26,
                            false, 1));
  expectConformance(product("graph.matmul", DType::F32,
                            {{48, 21851}, {21851, 24}}, {48, 24}, 27, false,
                            1));
}

TEST(LinearAlgebraConformance, MatmulEmpty) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    // k == 0: zeros (the result starts non-zero to see the fill).
    Case c = product("graph.matmul", t, {{2, 5, 0}, {2, 0, 3}}, {2, 5, 3}, 13);
    std::mt19937_64 rng(14);
    c.outputs[0] = randomTensor(t, {2, 5, 3}, rng);
    expectConformance(c);
    // m == 0, n == 0, an empty batch: nothing to do.
    expectConformance(
        product("graph.matmul", t, {{2, 0, 4}, {2, 4, 3}}, {2, 0, 3}, 15));
    expectConformance(
        product("graph.matmul", t, {{2, 3, 4}, {2, 4, 0}}, {2, 3, 0}, 16));
    expectConformance(
        product("graph.matmul", t, {{0, 3, 4}, {4, 5}}, {0, 3, 5}, 17));
  }
}

TEST(LinearAlgebraConformance, MatmulErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(18);
  // Element types differ.
  Case c = product("graph.matmul", DType::F32, {{2, 3}, {3, 4}}, {2, 4}, 19);
  c.inputs[1] = randomTensor(DType::F64, {3, 4}, rng);
  expectConformance(c);
  // Rank < 2.
  expectConformance(
      product("graph.matmul", DType::F32, {{3}, {3, 4}}, {4}, 20));
  // Not a matrix product: inner dims, batch dims.
  expectConformance(
      product("graph.matmul", DType::F32, {{2, 3}, {4, 4}}, {2, 4}, 21));
  expectConformance(product("graph.matmul", DType::F32,
                            {{2, 2, 3}, {3, 3, 4}}, {2, 2, 4}, 22));
  // Result shape.
  expectConformance(
      product("graph.matmul", DType::F32, {{2, 3}, {3, 4}}, {2, 5}, 23));
  // Arity.
  expectConformance(
      product("graph.matmul", DType::F32, {{2, 3}}, {2, 3}, 24));
  // Integers are not supported.
  expectConformance(
      product("graph.matmul", DType::I32, {{2, 3}, {3, 4}}, {2, 4}, 25));
}

//===----------------------------------------------------------------------===//
// graph.linear
//===----------------------------------------------------------------------===//

TEST(LinearAlgebraConformance, LinearGptLikeWithBias) {
  STRATA_REQUIRE_GPU();
  // [8*128, 256] x [256, 768] + [768], both weight layouts.
  expectConformance(product("graph.linear", DType::F32,
                            {{8 * 128, 256}, {256, 768}, {768}},
                            {8 * 128, 768}, 30, false, 1));
  expectConformance(product("graph.linear", DType::F32,
                            {{8, 128, 256}, {768, 256}, {768}},
                            {8, 128, 768}, 31, true, 1));
  expectConformance(product("graph.linear", DType::F64,
                            {{8 * 128, 256}, {256, 768}, {768}},
                            {8 * 128, 768}, 32, false, 1));
}

TEST(LinearAlgebraConformance, LinearWithoutBias) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    expectConformance(
        product("graph.linear", t, {{2, 3}, {3, 4}}, {2, 4}, 33));
    expectConformance(product("graph.linear", t, {{2, 5, 3}, {4, 3}},
                              {2, 5, 4}, 34, true));
    // A rank-1 input is one row.
    expectConformance(product("graph.linear", t, {{3}, {3, 4}}, {4}, 35));
  }
}

TEST(LinearAlgebraConformance, LinearOddSizesWithBias) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    expectConformance(product("graph.linear", t, {{3, 7, 13}, {13, 9}, {9}},
                              {3, 7, 9}, 36));
    expectConformance(product("graph.linear", t, {{3, 7, 13}, {9, 13}, {9}},
                              {3, 7, 9}, 37, true));
    expectConformance(
        product("graph.linear", t, {{1, 1}, {1, 1}, {1}}, {1, 1}, 38));
    expectConformance(
        product("graph.linear", t, {{5}, {5, 3}, {3}}, {3}, 39));
  }
}

TEST(LinearAlgebraConformance, LinearEmpty) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    // k == 0: the bias alone, or zeros.
    Case c = product("graph.linear", t, {{13, 0}, {0, 5}, {5}}, {13, 5}, 40);
    std::mt19937_64 rng(41);
    c.outputs[0] = randomTensor(t, {13, 5}, rng);
    expectConformance(c);
    c = product("graph.linear", t, {{13, 0}, {5, 0}}, {13, 5}, 42, true);
    c.outputs[0] = randomTensor(t, {13, 5}, rng);
    expectConformance(c);
    // No rows, no columns.
    expectConformance(
        product("graph.linear", t, {{0, 4}, {4, 5}, {5}}, {0, 5}, 43));
    expectConformance(
        product("graph.linear", t, {{3, 4}, {4, 0}, {0}}, {3, 0}, 44));
  }
}

TEST(LinearAlgebraConformance, LinearErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(45);
  Case c = product("graph.linear", DType::F32, {{2, 3}, {3, 4}, {4}}, {2, 4},
                   46);
  c.inputs[2] = randomTensor(DType::F64, {4}, rng);
  expectConformance(c); // element types
  expectConformance(
      product("graph.linear", DType::F32, {{2, 3}, {3, 4, 1}}, {2, 4}, 47));
  expectConformance(
      product("graph.linear", DType::F32, {{2, 3}, {4, 4}}, {2, 4}, 48));
  expectConformance(product("graph.linear", DType::F32, {{2, 3}, {3, 4}},
                            {2, 4}, 49, true)); // transposed mismatch
  expectConformance(
      product("graph.linear", DType::F32, {{2, 3}, {3, 4}, {5}}, {2, 4}, 50));
  expectConformance(
      product("graph.linear", DType::F32, {{2, 3}, {3, 4}}, {2, 5}, 51));
  expectConformance(product("graph.linear", DType::F32, {{2, 3}}, {2, 3}, 52));
  expectConformance(
      product("graph.linear", DType::I64, {{2, 3}, {3, 4}}, {2, 4}, 53));
}

//===----------------------------------------------------------------------===//
// graph.linear_grad_weight
//===----------------------------------------------------------------------===//

TEST(LinearAlgebraConformance, LinearGradWeight) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    // dW[k, n] = x^T dy; dW[n, k] = dy^T x.
    expectConformance(product("graph.linear_grad_weight", t,
                              {{2, 5, 4}, {2, 5, 3}}, {3, 4}, 60));
    expectConformance(product("graph.linear_grad_weight", t,
                              {{2, 5, 4}, {2, 5, 3}}, {4, 3}, 61, true));
    expectConformance(product("graph.linear_grad_weight", t,
                              {{37, 129}, {37, 65}}, {65, 129}, 62));
    expectConformance(
        product("graph.linear_grad_weight", t, {{4}, {3}}, {3, 4}, 63));
  }
  expectConformance(product("graph.linear_grad_weight", DType::F32,
                            {{8, 128, 768}, {8, 128, 256}}, {256, 768}, 64,
                            false, 0));
  expectConformance(product("graph.linear_grad_weight", DType::F32,
                            {{8, 128, 768}, {8, 128, 256}}, {768, 256}, 65,
                            true, 0));
}

TEST(LinearAlgebraConformance, LinearGradWeightEmpty) {
  STRATA_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64}) {
    // No rows to sum over: zeros (over a non-zero start).
    Case c = product("graph.linear_grad_weight", t, {{0, 4}, {0, 3}}, {4, 3},
                     66, true);
    std::mt19937_64 rng(67);
    c.outputs[0] = randomTensor(t, {4, 3}, rng);
    expectConformance(c);
    expectConformance(product("graph.linear_grad_weight", t,
                              {{2, 0}, {2, 3}}, {3, 0}, 68));
  }
}

TEST(LinearAlgebraConformance, LinearGradWeightErrors) {
  STRATA_REQUIRE_GPU();
  expectConformance(product("graph.linear_grad_weight", DType::F32,
                            {{2, 5, 4}, {2, 6, 3}}, {3, 4}, 70));
  expectConformance(product("graph.linear_grad_weight", DType::F32,
                            {{2, 5, 4}, {10, 3}}, {3, 4}, 71));
  expectConformance(product("graph.linear_grad_weight", DType::F32,
                            {{2, 5, 4}, {2, 5, 3}}, {4, 3}, 72));
  expectConformance(product("graph.linear_grad_weight", DType::F32,
                            {{2, 5, 4}}, {3, 4}, 73));
  expectConformance(product("graph.linear_grad_weight", DType::I32,
                            {{2, 5, 4}, {2, 5, 3}}, {3, 4}, 74));
}

} // namespace
} // namespace strata::runtime::conformance
