//===- NormalizationConformanceTest.cpp - Normalization: CUDA vs CPU ------===//
//
// graph.layer_norm, graph.batch_norm, graph.softmax and graph.log_softmax
// on both backends: rows of 1, 7, 768 and 4096 elements, batches of rows,
// every axis, f32 and f64, the edge values (-inf rows, NaN) and the CPU's
// errors (same message). Row reductions: f32 rtol 1e-4, f64 1e-10.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <cmath>
#include <limits>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double rtolFor(DType t) { return t == DType::F32 ? 1e-4 : 1e-10; }

Case reductionCase(std::string op, DType t) {
  Case c;
  c.op = std::move(op);
  c.rtol = rtolFor(t);
  c.atol = 1e-6;
  return c;
}

KernelAttrs layerNormAttrs(int64_t axis, double epsilon = 1e-5) {
  KernelAttrs a;
  a.set("axis", axis);
  a.set("epsilon", epsilon);
  return a;
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

TEST(NormalizationConformance, LayerNormRowWidths) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  for (DType t : {DType::F32, DType::F64})
    for (int64_t width : {1, 7, 768, 4096})
      for (int64_t rows : {1, 5}) {
        for (bool withBias : {true, false}) {
          Case c = reductionCase("graph.layer_norm", t);
          c.inputs = {randomTensor(t, {rows, width}, rng, -2, 3),
                      randomTensor(t, {width}, rng, 0.5, 1.5)};
          if (withBias)
            c.inputs.push_back(randomTensor(t, {width}, rng));
          c.outputs = {zeros(t, {rows, width})};
          c.attrs = layerNormAttrs(1);
          expectConformance(c);
        }
      }
}

TEST(NormalizationConformance, LayerNormOverSeveralDims) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  for (DType t : {DType::F32, DType::F64}) {
    // [3, 5, 6] normalized over dims 1.. (30 per row) and over all (axis 0).
    for (int64_t axis : {0, 1, 2}) {
      std::vector<int64_t> shape{3, 5, 6};
      std::vector<int64_t> normalized(shape.begin() + axis, shape.end());
      Case c = reductionCase("graph.layer_norm", t);
      c.inputs = {randomTensor(t, shape, rng), randomTensor(t, normalized, rng),
                  randomTensor(t, normalized, rng)};
      c.outputs = {zeros(t, shape)};
      c.attrs = layerNormAttrs(axis, 1e-3);
      expectConformance(c);
    }
    // Many short odd rows; a constant row (variance 0: epsilon decides).
    Case c = reductionCase("graph.layer_norm", t);
    c.inputs = {randomTensor(t, {257, 3}, rng), randomTensor(t, {3}, rng)};
    c.outputs = {zeros(t, {257, 3})};
    c.attrs = layerNormAttrs(1);
    expectConformance(c);
    Case flat = reductionCase("graph.layer_norm", t);
    flat.inputs = {fromValues(t, {2, 4}, {1, 1, 1, 1, 2, -2, 2, -2}),
                   fromValues(t, {4}, {1, 2, 3, 4})};
    flat.outputs = {zeros(t, {2, 4})};
    flat.attrs = layerNormAttrs(1);
    expectConformance(flat);
  }
}

TEST(NormalizationConformance, LayerNormEmptyAndErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  // No rows: nothing to do.
  Case empty = reductionCase("graph.layer_norm", DType::F32);
  empty.inputs = {zeros(DType::F32, {0, 4}), randomTensor(DType::F32, {4}, rng)};
  empty.outputs = {zeros(DType::F32, {0, 4})};
  empty.attrs = layerNormAttrs(1);
  expectConformance(empty);

  auto base = [&] {
    Case c = reductionCase("graph.layer_norm", DType::F32);
    c.inputs = {randomTensor(DType::F32, {2, 4}, rng),
                randomTensor(DType::F32, {4}, rng)};
    c.outputs = {zeros(DType::F32, {2, 4})};
    c.attrs = layerNormAttrs(1);
    return c;
  };
  Case badAxis = base();
  badAxis.attrs = layerNormAttrs(2);
  expectConformance(badAxis);
  Case noEps = base();
  noEps.attrs = KernelAttrs();
  noEps.attrs.set("axis", int64_t(1));
  expectConformance(noEps);
  Case badScale = base();
  badScale.inputs[1] = randomTensor(DType::F32, {3}, rng);
  expectConformance(badScale);
  Case mixed = base();
  mixed.inputs[1] = randomTensor(DType::F64, {4}, rng);
  expectConformance(mixed);
  Case ints = base();
  ints.inputs = {zeros(DType::I32, {2, 4}), zeros(DType::I32, {4})};
  ints.outputs = {zeros(DType::I32, {2, 4})};
  expectConformance(ints);
  Case arity = base();
  arity.inputs.resize(1);
  expectConformance(arity);
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

KernelAttrs batchNormAttrs(bool training, double momentum = 0.1) {
  KernelAttrs a;
  a.set("epsilon", 1e-5);
  a.set("momentum", momentum);
  a.set("training", int64_t(training));
  return a;
}

Case batchNormCase(DType t, std::vector<int64_t> shape, bool training,
                   std::mt19937_64 &rng) {
  int64_t channels = shape[1];
  Case c = reductionCase("graph.batch_norm", t);
  c.inputs = {randomTensor(t, shape, rng, -1, 2),
              randomTensor(t, {channels}, rng, 0.5, 1.5),
              randomTensor(t, {channels}, rng),
              randomTensor(t, {channels}, rng),
              randomTensor(t, {channels}, rng, 0.5, 2)};
  c.outputs = {zeros(t, shape), zeros(t, {channels}), zeros(t, {channels})};
  c.attrs = batchNormAttrs(training);
  return c;
}

TEST(NormalizationConformance, BatchNormTrainingAndEval) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(4);
  for (DType t : {DType::F32, DType::F64})
    for (bool training : {true, false})
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{8, 3}, {2, 3, 5}, {4, 6, 7, 9}, {3, 2, 2, 3, 4},
            {1, 5, 33, 40}, {16, 64, 1}})
        expectConformance(batchNormCase(t, shape, training, rng));
}

TEST(NormalizationConformance, BatchNormErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  // One value per channel cannot train (PyTorch raises too).
  expectConformance(batchNormCase(DType::F32, {1, 3}, true, rng));
  expectConformance(batchNormCase(DType::F32, {1, 3}, false, rng));
  Case rank1 = batchNormCase(DType::F32, {4, 3}, true, rng);
  rank1.inputs[0] = randomTensor(DType::F32, {4}, rng);
  expectConformance(rank1);
  Case badChannel = batchNormCase(DType::F32, {4, 3}, true, rng);
  badChannel.inputs[2] = randomTensor(DType::F32, {4}, rng);
  expectConformance(badChannel);
  Case badOut = batchNormCase(DType::F32, {4, 3}, true, rng);
  badOut.outputs[0] = zeros(DType::F32, {4, 4});
  expectConformance(badOut);
  Case noMomentum = batchNormCase(DType::F32, {4, 3}, true, rng);
  noMomentum.attrs = KernelAttrs();
  noMomentum.attrs.set("epsilon", 1e-5);
  noMomentum.attrs.set("training", int64_t(1));
  expectConformance(noMomentum);
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

Case softmaxCase(const char *op, CaseTensor x, int64_t axis) {
  Case c = reductionCase(op, x.dtype);
  c.outputs = {zeros(x.dtype, x.shape)};
  c.inputs = {std::move(x)};
  c.attrs.set("axis", axis);
  return c;
}

TEST(NormalizationConformance, SoftmaxRowWidths) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  for (const char *op : {"graph.softmax", "graph.log_softmax"})
    for (DType t : {DType::F32, DType::F64})
      for (int64_t width : {1, 7, 768, 4096})
        for (int64_t rows : {1, 3})
          expectConformance(
              softmaxCase(op, randomTensor(t, {rows, width}, rng, -8, 8), 1));
}

TEST(NormalizationConformance, SoftmaxAlongEveryAxis) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  for (const char *op : {"graph.softmax", "graph.log_softmax"})
    for (DType t : {DType::F32, DType::F64})
      for (int64_t axis : {0, 1, 2, 3})
        expectConformance(
            softmaxCase(op, randomTensor(t, {3, 5, 7, 2}, rng, -4, 4), axis));
}

TEST(NormalizationConformance, SoftmaxEdgeValues) {
  STRATA_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char *op : {"graph.softmax", "graph.log_softmax"})
    for (DType t : {DType::F32, DType::F64}) {
      // A row of -inf (NaN), a row with one -inf, one with +inf (NaN), one
      // with NaN, and huge values (the max is subtracted first).
      CaseTensor x = fromValues(t, {5, 4},
                                {-kInf, -kInf, -kInf, -kInf, 1, -kInf, 2, 3,
                                 1, kInf, 0, 2, 0, nan, 1, 1, 80, 81, 79, -80});
      expectConformance(softmaxCase(op, x, 1));
    }
}

TEST(NormalizationConformance, SoftmaxErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(8);
  for (const char *op : {"graph.softmax", "graph.log_softmax"}) {
    expectConformance(
        softmaxCase(op, randomTensor(DType::F32, {2, 3}, rng), 2));
    Case wrong = softmaxCase(op, randomTensor(DType::F32, {2, 3}, rng), 1);
    wrong.outputs = {zeros(DType::F32, {3, 2})};
    expectConformance(wrong);
    Case noAxis = softmaxCase(op, randomTensor(DType::F32, {2, 3}, rng), 1);
    noAxis.attrs = KernelAttrs();
    expectConformance(noAxis);
    expectConformance(softmaxCase(op, zeros(DType::I64, {2, 3}), 1));
    expectConformance(softmaxCase(op, zeros(DType::F32, {0, 3}), 1));
  }
}

} // namespace
