//===- DropoutConformanceTest.cpp - Dropout: CUDA vs CPU ------------------===//
//
// graph.dropout on both backends: the masks must be bit-identical for the
// same seed (Philox4x32-10 with the CPU's counter and key layout), and so
// must the outputs (one rounded multiply). Every result is compared
// exactly: shapes from 1 element to a million, ratios from 0 to 0.9,
// seeds with and without a high word, f32 and f64, non-finite inputs, and
// the CPU's errors.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <cmath>
#include <limits>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

Case dropoutCase(CaseTensor x, double ratio, uint64_t seed) {
  Case c;
  c.op = "graph.dropout";
  c.outputs = {zeros(x.dtype, x.shape), zeros(DType::I1, x.shape)};
  c.inputs = {std::move(x)};
  c.attrs.set("ratio", ratio);
  c.seed = seed;
  c.rtol = 0; // bit-identical
  c.atol = 0;
  return c;
}

TEST(DropoutConformance, MasksAndOutputsAreBitIdentical) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  for (DType t : {DType::F32, DType::F64})
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{1}, {7}, {768}, {4096}, {3, 5, 7}, {16, 4096},
          {1000003}})
      for (double ratio : {0.0, 0.1, 0.399, 0.5, 0.9})
        for (uint64_t seed : {uint64_t(0), uint64_t(42),
                              uint64_t(0x9E3779B97F4A7C15ull)})
          expectConformance(
              dropoutCase(randomTensor(t, shape, rng, -3, 3), ratio, seed));
}

TEST(DropoutConformance, NonFiniteInputs) {
  STRATA_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // x * 0, not 0: a dropped inf or NaN is NaN on both.
  for (DType t : {DType::F32, DType::F64})
    expectConformance(dropoutCase(
        fromValues(t, {8}, {inf, -inf, nan, 1, inf, -inf, nan, -2}), 0.5, 7));
}

TEST(DropoutConformance, EmptyAndErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  expectConformance(dropoutCase(zeros(DType::F32, {0, 5}), 0.5, 1));
  expectConformance(
      dropoutCase(randomTensor(DType::F32, {4}, rng), 1.0, 1)); // ratio 1
  expectConformance(dropoutCase(randomTensor(DType::F32, {4}, rng), -0.1, 1));
  Case noRatio = dropoutCase(randomTensor(DType::F32, {4}, rng), 0.5, 1);
  noRatio.attrs = KernelAttrs();
  expectConformance(noRatio);
  Case badMask = dropoutCase(randomTensor(DType::F32, {4}, rng), 0.5, 1);
  badMask.outputs[1] = zeros(DType::I32, {4});
  expectConformance(badMask);
  Case badOut = dropoutCase(randomTensor(DType::F32, {4}, rng), 0.5, 1);
  badOut.outputs[0] = zeros(DType::F64, {4});
  expectConformance(badOut);
  Case oneResult = dropoutCase(randomTensor(DType::F32, {4}, rng), 0.5, 1);
  oneResult.outputs.resize(1);
  expectConformance(oneResult);
  expectConformance(dropoutCase(zeros(DType::I32, {4}), 0.5, 1));
}

} // namespace
