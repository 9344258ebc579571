//===- LossConformanceTest.cpp - Cross entropy: CUDA vs CPU ---------------===//
//
// graph.cross_entropy on both backends: [N, C] with C of 1, 7, 768 and
// 4096 classes, [N, C, d...] with spatial positions, every label dtype,
// weights, ignore_index, the three reductions, every label ignored, and the
// CPU's errors (same message). The one deviation, a label out of range
// (an error on the CPU; NaN on CUDA, which cannot report it from the
// device), is checked on the CUDA device alone.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

KernelAttrs lossAttrs(const char *reduction, const int64_t *ignoreIndex) {
  KernelAttrs a;
  if (reduction)
    a.set("reduction", std::string(reduction));
  if (ignoreIndex)
    a.set("ignore_index", *ignoreIndex);
  return a;
}

/// Labels in [0, classes), a few of them `ignore` when given.
CaseTensor labelTensor(DType t, std::vector<int64_t> shape, int64_t classes,
                       std::mt19937_64 &rng, const int64_t *ignore) {
  CaseTensor y = randomTensor(t, shape, rng, 0, double(classes));
  if (!ignore)
    return y;
  std::vector<double> v(size_t(y.numel()));
  std::uniform_int_distribution<int64_t> label(0, classes - 1);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i % 3 == 1 ? double(*ignore) : double(label(rng));
  return fromValues(t, y.shape, v);
}

Case lossCase(DType t, std::vector<int64_t> logits, DType labelType,
              bool weighted, const char *reduction, const int64_t *ignore,
              std::mt19937_64 &rng) {
  Case c;
  c.op = "graph.cross_entropy";
  c.rtol = t == DType::F32 ? 1e-4 : 1e-10;
  c.atol = 1e-6;
  int64_t classes = logits[1];
  std::vector<int64_t> labels{logits[0]};
  labels.insert(labels.end(), logits.begin() + 2, logits.end());
  c.inputs = {randomTensor(t, logits, rng, -4, 4),
              labelTensor(labelType, labels, classes, rng, ignore)};
  if (weighted)
    c.inputs.push_back(randomTensor(t, {classes}, rng, 0.1, 2));
  bool none = reduction && std::string(reduction) == "none";
  c.outputs = {zeros(t, none ? labels : std::vector<int64_t>{})};
  c.attrs = lossAttrs(reduction, ignore);
  return c;
}

TEST(LossConformance, CrossEntropyClassCounts) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  for (DType t : {DType::F32, DType::F64})
    for (int64_t classes : {1, 7, 768, 4096})
      for (const char *reduction : {"mean", "sum", "none"})
        for (bool weighted : {false, true})
          expectConformance(lossCase(t, {6, classes}, DType::I64, weighted,
                                     reduction, nullptr, rng));
}

TEST(LossConformance, CrossEntropySpatialAndLabelTypes) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  for (DType t : {DType::F32, DType::F64})
    for (DType labels : {DType::I64, DType::I32, DType::I16, DType::I8})
      for (const char *reduction : {"mean", "sum", "none"}) {
        expectConformance(lossCase(t, {2, 5, 3, 4}, labels, true, reduction,
                                   nullptr, rng));
        expectConformance(lossCase(t, {3, 100, 7}, labels, false, reduction,
                                   nullptr, rng));
      }
  // i1 labels (two classes); no reduction attribute: "mean".
  expectConformance(
      lossCase(DType::F32, {9, 2}, DType::I1, false, nullptr, nullptr, rng));
  // Many positions: the sums of "mean" and "sum" run over 4096 of them.
  for (const char *reduction : {"mean", "sum"})
    expectConformance(lossCase(DType::F32, {64, 11, 64}, DType::I32, true,
                               reduction, nullptr, rng));
}

TEST(LossConformance, CrossEntropyIgnoreIndex) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  const int64_t minus100 = -100, two = 2;
  for (DType t : {DType::F32, DType::F64})
    for (const char *reduction : {"mean", "sum", "none"})
      for (bool weighted : {false, true}) {
        expectConformance(lossCase(t, {7, 9}, DType::I64, weighted, reduction,
                                   &minus100, rng));
        // An ignore_index inside [0, C) ignores that class's labels.
        expectConformance(lossCase(t, {4, 5, 6}, DType::I32, weighted,
                                   reduction, &two, rng));
      }
  // Every label ignored: 0 / 0 = NaN under "mean", 0 under "sum".
  for (const char *reduction : {"mean", "sum", "none"}) {
    Case c = lossCase(DType::F32, {3, 4}, DType::I64, false, reduction,
                      &minus100, rng);
    c.inputs[1] = fromValues(DType::I64, {3}, {-100, -100, -100});
    expectConformance(c);
  }
  // No positions at all.
  for (const char *reduction : {"mean", "sum", "none"})
    expectConformance(lossCase(DType::F64, {0, 4}, DType::I64, false,
                               reduction, nullptr, rng));
}

TEST(LossConformance, CrossEntropyErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(4);
  auto base = [&] {
    return lossCase(DType::F32, {4, 5}, DType::I64, true, "mean", nullptr, rng);
  };
  Case arity = base();
  arity.inputs.resize(1);
  expectConformance(arity);
  Case mixed = base();
  mixed.inputs[2] = randomTensor(DType::F64, {5}, rng);
  expectConformance(mixed);
  Case floatLabels = base();
  floatLabels.inputs[1] = randomTensor(DType::F32, {4}, rng);
  expectConformance(floatLabels);
  Case rank1 = base();
  rank1.inputs[0] = randomTensor(DType::F32, {4}, rng);
  expectConformance(rank1);
  Case badLabels = base();
  badLabels.inputs[1] = zeros(DType::I64, {5});
  expectConformance(badLabels);
  Case badWeight = base();
  badWeight.inputs[2] = randomTensor(DType::F32, {4}, rng);
  expectConformance(badWeight);
  Case badReduction = base();
  badReduction.attrs = lossAttrs("avg", nullptr);
  expectConformance(badReduction);
  Case badLoss = base();
  badLoss.outputs = {zeros(DType::F32, {4})};
  expectConformance(badLoss);
  Case intLogits = base();
  intLogits.inputs = {zeros(DType::I32, {4, 5}), zeros(DType::I64, {4})};
  intLogits.outputs = {zeros(DType::I32, {})};
  expectConformance(intLogits);
}


TEST(LossConformance, CrossEntropyLabelOutOfRangeIsNaNOnCuda) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  for (const char *reduction : {"mean", "sum", "none"}) {
    Case c =
        lossCase(DType::F32, {3, 4}, DType::I64, false, reduction, nullptr, rng);
    c.inputs[1] = fromValues(DType::I64, {3}, {1, 4, 0});
    std::vector<std::vector<unsigned char>> results;
    Status s = runOnCuda(c, results);
    ASSERT_TRUE(s) << s.message();
    std::vector<float> loss(results[0].size() / sizeof(float));
    std::memcpy(loss.data(), results[0].data(), results[0].size());
    if (std::string(reduction) == "none") {
      ASSERT_EQ(loss.size(), 3u);
      EXPECT_FALSE(std::isnan(loss[0]));
      EXPECT_TRUE(std::isnan(loss[1]));
      EXPECT_FALSE(std::isnan(loss[2]));
    } else {
      ASSERT_EQ(loss.size(), 1u);
      EXPECT_TRUE(std::isnan(loss[0])) << reduction;
    }
  }
}

} // namespace
