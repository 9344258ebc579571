//===- NeuralNetGradConformanceTest.cpp - Layer gradients: CUDA vs CPU ----===//
//
// The gradient ops of NeuralNetGradKernels on both backends:
// linear_grad_weight, layer_norm_grad, batch_norm_grad, attention_grad,
// embedding_grad, gather_grad and cross_entropy_grad, f32 and f64, over the
// shapes and attributes each takes, and the CPU's errors (same message).
// Reductions and products: f32 rtol 1e-4, f64 1e-10; the scatter-adds
// (embedding_grad, gather_grad) add in the CPU's order and must match
// exactly. An index or label out of range (an error on the CPU, NaN on
// CUDA) is checked on the device alone.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Row reductions: f32 rtol 1e-4 atol 1e-6 (the sums are in double on both
/// backends, rounded once), f64 1e-10.
Case gradCase(std::string op, DType t) {
  Case c;
  c.op = std::move(op);
  c.rtol = t == DType::F32 ? 1e-4 : 1e-10;
  c.atol = t == DType::F32 ? 1e-6 : 1e-12;
  return c;
}

/// GEMMs in f32 (BLAS on the CPU, cuBLASLt on CUDA) sum in f32 in other
/// orders: an element that cancels to near zero keeps an absolute error of
/// a few ulps of its terms, hence atol 1e-5. attention_grad chains four of
/// them through a softmax (the CPU's own f32-against-f64 check allows 1e-3
/// and 1e-4), so it gets that bound.
Case gemmCase(std::string op, DType t, bool chained = false) {
  Case c = gradCase(std::move(op), t);
  if (t == DType::F32) {
    c.rtol = chained ? 1e-3 : 1e-4;
    c.atol = chained ? 1e-4 : 1e-5;
  }
  return c;
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

Case linearCase(DType t, std::vector<int64_t> dyShape, int64_t k,
                bool transposed, std::mt19937_64 &rng) {
  Case c = gemmCase("graph.linear_grad_weight", t);
  std::vector<int64_t> xShape = dyShape;
  xShape.back() = k;
  int64_t n = dyShape.back();
  c.inputs = {randomTensor(t, dyShape, rng), randomTensor(t, xShape, rng)};
  c.outputs = {zeros(t, transposed ? std::vector<int64_t>{n, k}
                                   : std::vector<int64_t>{k, n})};
  c.attrs.set("transpose_weight", int64_t(transposed));
  return c;
}

TEST(NeuralNetGradConformance, LinearGradWeight) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  for (DType t : {DType::F32, DType::F64})
    for (bool transposed : {false, true}) {
      expectConformance(linearCase(t, {1, 1}, 1, transposed, rng));
      expectConformance(linearCase(t, {7, 5}, 3, transposed, rng));
      expectConformance(linearCase(t, {2, 9, 33}, 17, transposed, rng));
      expectConformance(linearCase(t, {64, 768}, 128, transposed, rng));
      expectConformance(linearCase(t, {3, 4096}, 7, transposed, rng));
      // No rows: the gradient is zero.
      Case empty = linearCase(t, {0, 5}, 3, transposed, rng);
      empty.outputs[0] = fromValues(t, empty.outputs[0].shape,
                                    std::vector<double>(15, 3.0));
      expectConformance(empty);
    }
}

TEST(NeuralNetGradConformance, LinearGradWeightErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  Case mismatch = linearCase(DType::F32, {4, 5}, 3, false, rng);
  mismatch.inputs[1] = randomTensor(DType::F32, {5, 3}, rng);
  expectConformance(mismatch);
  Case result = linearCase(DType::F32, {4, 5}, 3, true, rng);
  result.outputs[0] = zeros(DType::F32, {3, 5});
  expectConformance(result);
  Case types = linearCase(DType::F32, {4, 5}, 3, false, rng);
  types.inputs[1] = randomTensor(DType::F64, {4, 3}, rng);
  expectConformance(types);
  Case ints = linearCase(DType::F32, {4, 5}, 3, false, rng);
  ints.inputs = {zeros(DType::I32, {4, 5}), zeros(DType::I32, {4, 3})};
  ints.outputs = {zeros(DType::I32, {3, 5})};
  expectConformance(ints);
}

//===----------------------------------------------------------------------===//
// layer_norm, batch_norm
//===----------------------------------------------------------------------===//

Case layerNormGradCase(DType t, std::vector<int64_t> shape, int64_t axis,
                       std::mt19937_64 &rng) {
  Case c = gradCase("graph.layer_norm_grad", t);
  std::vector<int64_t> normalized(shape.begin() + axis, shape.end());
  c.inputs = {randomTensor(t, shape, rng), randomTensor(t, shape, rng, -2, 3),
              randomTensor(t, normalized, rng, 0.5, 1.5)};
  c.outputs = {zeros(t, shape), zeros(t, normalized), zeros(t, normalized)};
  c.attrs.set("axis", axis);
  c.attrs.set("epsilon", 1e-5);
  return c;
}

TEST(NeuralNetGradConformance, LayerNormGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  for (DType t : {DType::F32, DType::F64}) {
    for (int64_t width : {1, 7, 768, 4096})
      for (int64_t rows : {1, 5})
        expectConformance(layerNormGradCase(t, {rows, width}, 1, rng));
    // Many rows: the column sums run over several chunks.
    expectConformance(layerNormGradCase(t, {4100, 3}, 1, rng));
    expectConformance(layerNormGradCase(t, {300, 64}, 1, rng));
    for (int64_t axis : {0, 1, 2})
      expectConformance(layerNormGradCase(t, {3, 5, 6}, axis, rng));
    // No rows: zero parameter gradients.
    expectConformance(layerNormGradCase(t, {0, 4}, 1, rng));
  }
}

TEST(NeuralNetGradConformance, LayerNormGradErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(4);
  Case badAxis = layerNormGradCase(DType::F32, {2, 4}, 1, rng);
  badAxis.attrs.set("axis", int64_t(2));
  expectConformance(badAxis);
  Case badScale = layerNormGradCase(DType::F32, {2, 4}, 1, rng);
  badScale.inputs[2] = randomTensor(DType::F32, {3}, rng);
  expectConformance(badScale);
  Case badDx = layerNormGradCase(DType::F32, {2, 4}, 1, rng);
  badDx.outputs[0] = zeros(DType::F32, {4, 2});
  expectConformance(badDx);
  Case types = layerNormGradCase(DType::F32, {2, 4}, 1, rng);
  types.outputs[1] = zeros(DType::F64, {4});
  expectConformance(types);
  Case noEps = layerNormGradCase(DType::F32, {2, 4}, 1, rng);
  noEps.attrs = KernelAttrs();
  noEps.attrs.set("axis", int64_t(1));
  expectConformance(noEps);
}

Case batchNormGradCase(DType t, std::vector<int64_t> shape, bool training,
                       std::mt19937_64 &rng) {
  Case c = gradCase("graph.batch_norm_grad", t);
  int64_t channels = shape[1];
  c.inputs = {randomTensor(t, shape, rng), randomTensor(t, shape, rng, -1, 2),
              randomTensor(t, {channels}, rng, 0.5, 1.5),
              randomTensor(t, {channels}, rng),
              randomTensor(t, {channels}, rng, 0.5, 2)};
  c.outputs = {zeros(t, shape), zeros(t, {channels}), zeros(t, {channels})};
  c.attrs.set("epsilon", 1e-5);
  c.attrs.set("momentum", 0.1);
  c.attrs.set("training", int64_t(training));
  return c;
}

TEST(NeuralNetGradConformance, BatchNormGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  for (DType t : {DType::F32, DType::F64})
    for (bool training : {true, false})
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{8, 3}, {2, 3, 5}, {4, 6, 7, 9},
            {3, 2, 2, 3, 4}, {2, 5, 33, 40}})
        expectConformance(batchNormGradCase(t, shape, training, rng));
  Case one = batchNormGradCase(DType::F32, {1, 3}, true, rng);
  expectConformance(one); // training on one value per channel: refused
  Case badChannel = batchNormGradCase(DType::F32, {4, 3}, true, rng);
  badChannel.inputs[3] = randomTensor(DType::F32, {4}, rng);
  expectConformance(badChannel);
  Case badDy = batchNormGradCase(DType::F32, {4, 3}, true, rng);
  badDy.inputs[0] = randomTensor(DType::F32, {4, 4}, rng);
  expectConformance(badDy);
  Case noTraining = batchNormGradCase(DType::F32, {4, 3}, true, rng);
  noTraining.attrs = KernelAttrs();
  noTraining.attrs.set("epsilon", 1e-5);
  expectConformance(noTraining);
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

Case attentionCase(DType t, std::vector<int64_t> q, int64_t keys, int64_t dv,
                   const std::vector<int64_t> *mask, double scale, bool causal,
                   double dropout, uint64_t seed, std::mt19937_64 &rng) {
  Case c = gemmCase("graph.attention_grad", t, /*chained=*/true);
  std::vector<int64_t> k = q, v = q, y = q;
  k[k.size() - 2] = keys;
  v[v.size() - 2] = keys;
  v.back() = dv;
  y.back() = dv;
  c.inputs = {randomTensor(t, y, rng), randomTensor(t, q, rng, -1.5, 1.5),
              randomTensor(t, k, rng, -1.5, 1.5), randomTensor(t, v, rng)};
  if (mask)
    c.inputs.push_back(randomTensor(t, *mask, rng));
  c.outputs = {zeros(t, q), zeros(t, k), zeros(t, v)};
  c.attrs.set("scale", scale);
  c.attrs.set("causal", int64_t(causal));
  c.attrs.set("dropout_ratio", dropout);
  c.seed = seed;
  return c;
}

TEST(NeuralNetGradConformance, AttentionGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  std::vector<int64_t> mask2{4, 6}, mask3{2, 1, 5}, maskRow{1, 6};
  for (DType t : {DType::F32, DType::F64}) {
    expectConformance(
        attentionCase(t, {2, 3, 4}, 5, 2, nullptr, 0.5, false, 0, 0, rng));
    expectConformance(
        attentionCase(t, {1, 2, 3, 4}, 5, 3, &mask3, 0.35, true, 0, 0, rng));
    expectConformance(
        attentionCase(t, {2, 4, 3}, 6, 2, &mask2, 0.5, false, 0.3, 1234, rng));
    expectConformance(
        attentionCase(t, {2, 4, 3}, 6, 2, &maskRow, 0.5, true, 0.5, 99, rng));
    // A transformer's shape: [batch, heads, seq, head dim].
    expectConformance(attentionCase(t, {2, 3, 64, 32}, 64, 32, nullptr,
                                    1 / std::sqrt(32.0), true, 0.1, 7, rng));
    // One query, one key; rank 2 (no batch dims).
    expectConformance(
        attentionCase(t, {1, 1}, 1, 1, nullptr, 1.0, false, 0, 0, rng));
    expectConformance(
        attentionCase(t, {5, 8}, 9, 3, nullptr, 0.2, false, 0, 0, rng));
    // No keys: zero gradients.
    expectConformance(
        attentionCase(t, {2, 3, 4}, 0, 2, nullptr, 0.5, false, 0, 0, rng));
  }
}

TEST(NeuralNetGradConformance, AttentionGradOfAFullyMaskedRowIsNaN) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  for (DType t : {DType::F32, DType::F64}) {
    std::vector<int64_t> maskShape{3, 5};
    Case c = attentionCase(t, {1, 3, 4}, 5, 2, &maskShape, 0.5, false, 0, 0,
                           rng);
    std::vector<double> m(15, 0.0);
    for (int j = 0; j < 5; ++j)
      m[5 + j] = -kInf;
    c.inputs[4] = fromValues(t, {3, 5}, m);
    expectConformance(c);
  }
}

TEST(NeuralNetGradConformance, AttentionGradErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(8);
  Case badKey =
      attentionCase(DType::F32, {1, 3, 4}, 5, 2, nullptr, 0.5, false, 0, 0, rng);
  badKey.inputs[2] = randomTensor(DType::F32, {1, 5, 3}, rng);
  badKey.outputs[1] = zeros(DType::F32, {1, 5, 3});
  expectConformance(badKey);
  Case badDy =
      attentionCase(DType::F32, {1, 3, 4}, 5, 2, nullptr, 0.5, false, 0, 0, rng);
  badDy.inputs[0] = randomTensor(DType::F32, {1, 3, 3}, rng);
  expectConformance(badDy);
  Case noScale =
      attentionCase(DType::F32, {1, 3, 4}, 5, 2, nullptr, 0.5, false, 0, 0, rng);
  noScale.attrs = KernelAttrs();
  expectConformance(noScale);
  std::vector<int64_t> badMaskShape{2, 5};
  Case badMask = attentionCase(DType::F32, {1, 3, 4}, 5, 2, &badMaskShape, 0.5,
                               false, 0, 0, rng);
  expectConformance(badMask);
  Case badRatio =
      attentionCase(DType::F32, {1, 3, 4}, 5, 2, nullptr, 0.5, false, 1.0, 0, rng);
  expectConformance(badRatio);
}

//===----------------------------------------------------------------------===//
// embedding, gather
//===----------------------------------------------------------------------===//

Case embeddingCase(DType t, DType indexType, std::vector<int64_t> indices,
                   int64_t vocab, int64_t dim, std::mt19937_64 &rng) {
  Case c;
  c.op = "graph.embedding_grad";
  c.rtol = 0; // the CPU's additions in the CPU's order
  c.atol = 0;
  std::vector<int64_t> dyShape = indices;
  dyShape.push_back(dim);
  c.inputs = {randomTensor(t, dyShape, rng),
              randomTensor(indexType, indices, rng, -double(vocab),
                           double(vocab))};
  // A stale result: the kernel must overwrite it.
  c.outputs = {fromValues(t, {vocab, dim},
                          std::vector<double>(size_t(vocab * dim), 9.0))};
  return c;
}

TEST(NeuralNetGradConformance, EmbeddingGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(9);
  for (DType t : {DType::F32, DType::F64}) {
    for (DType index : {DType::I64, DType::I32, DType::I16, DType::I8}) {
      expectConformance(embeddingCase(t, index, {2, 3}, 5, 3, rng));
      expectConformance(embeddingCase(t, index, {64}, 100, 7, rng));
    }
    // Few rows hit many times (long runs), a wide table, many tokens.
    expectConformance(embeddingCase(t, DType::I64, {4, 512}, 3, 768, rng));
    expectConformance(embeddingCase(t, DType::I32, {8, 128}, 5000, 64, rng));
    expectConformance(embeddingCase(t, DType::I64, {1}, 1, 4096, rng));
    expectConformance(embeddingCase(t, DType::I64, {0}, 6, 4, rng));
  }
  // The CPU's own example: row 1 three times (once as -4), row 4 twice.
  Case c = embeddingCase(DType::F64, DType::I64, {2, 3}, 5, 3, rng);
  c.inputs[1] = fromValues(DType::I64, {2, 3}, {1, 4, 3, -4, 1, -1});
  expectConformance(c);
}

Case gatherCase(DType t, std::vector<int64_t> out, int64_t axis,
                std::vector<int64_t> indices, std::mt19937_64 &rng) {
  Case c;
  c.op = "graph.gather_grad";
  c.rtol = 0;
  c.atol = 0;
  std::vector<int64_t> dyShape(out.begin(), out.begin() + axis);
  dyShape.insert(dyShape.end(), indices.begin(), indices.end());
  dyShape.insert(dyShape.end(), out.begin() + axis + 1, out.end());
  int64_t rows = out[axis];
  c.inputs = {randomTensor(t, dyShape, rng),
              randomTensor(DType::I64, indices, rng, -double(rows),
                           double(rows))};
  c.outputs = {zeros(t, out)};
  c.attrs.set("axis", axis);
  return c;
}

TEST(NeuralNetGradConformance, GatherGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(10);
  for (DType t : {DType::F32, DType::F64})
    for (int64_t axis : {0, 1, 2}) {
      expectConformance(gatherCase(t, {4, 5, 6}, axis, {7}, rng));
      expectConformance(gatherCase(t, {3, 7, 2}, axis, {2, 4}, rng));
      expectConformance(gatherCase(t, {2, 9, 33}, axis, {40}, rng));
    }
}

TEST(NeuralNetGradConformance, ScatterErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  Case badTable = embeddingCase(DType::F32, DType::I64, {4}, 5, 3, rng);
  badTable.outputs[0] = zeros(DType::F32, {5, 3, 1});
  expectConformance(badTable);
  Case badDy = embeddingCase(DType::F32, DType::I64, {4}, 5, 3, rng);
  badDy.inputs[0] = randomTensor(DType::F32, {4, 2}, rng);
  expectConformance(badDy);
  Case floatIndices = embeddingCase(DType::F32, DType::I64, {4}, 5, 3, rng);
  floatIndices.inputs[1] = randomTensor(DType::F32, {4}, rng);
  expectConformance(floatIndices);
  Case badAxis = gatherCase(DType::F32, {4, 5}, 1, {3}, rng);
  badAxis.attrs.set("axis", int64_t(2));
  expectConformance(badAxis);
  Case badGather = gatherCase(DType::F32, {4, 5}, 1, {3}, rng);
  badGather.inputs[0] = randomTensor(DType::F32, {4, 4}, rng);
  expectConformance(badGather);
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

Case crossEntropyGradCase(DType t, std::vector<int64_t> logits,
                          const char *reduction, bool weighted,
                          const int64_t *ignore, std::mt19937_64 &rng) {
  Case c = gradCase("graph.cross_entropy_grad", t);
  int64_t classes = logits[1];
  std::vector<int64_t> labels{logits[0]};
  labels.insert(labels.end(), logits.begin() + 2, logits.end());
  bool none = std::string(reduction) == "none";
  CaseTensor y = randomTensor(DType::I64, labels, rng, 0, double(classes));
  if (ignore) {
    std::vector<double> v(size_t(y.numel()));
    std::uniform_int_distribution<int64_t> label(0, classes - 1);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = i % 3 == 2 ? double(*ignore) : double(label(rng));
    y = fromValues(DType::I64, labels, v);
  }
  c.inputs = {randomTensor(t, none ? labels : std::vector<int64_t>{}, rng,
                           0.5, 2),
              randomTensor(t, logits, rng, -4, 4), std::move(y)};
  if (weighted)
    c.inputs.push_back(randomTensor(t, {classes}, rng, 0.1, 2));
  c.outputs = {zeros(t, logits)};
  c.attrs.set("reduction", std::string(reduction));
  if (ignore)
    c.attrs.set("ignore_index", *ignore);
  return c;
}

TEST(NeuralNetGradConformance, CrossEntropyGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(12);
  const int64_t minus100 = -100;
  for (DType t : {DType::F32, DType::F64})
    for (const char *reduction : {"mean", "sum", "none"})
      for (bool weighted : {false, true}) {
        for (int64_t classes : {1, 7, 768, 4096})
          expectConformance(crossEntropyGradCase(t, {5, classes}, reduction,
                                                 weighted, nullptr, rng));
        expectConformance(crossEntropyGradCase(t, {2, 5, 3, 4}, reduction,
                                               weighted, &minus100, rng));
        expectConformance(crossEntropyGradCase(t, {64, 11, 64}, reduction,
                                               weighted, nullptr, rng));
      }
  // Every label ignored under "mean": 0 / 0 is never evaluated, all zero.
  Case allIgnored = crossEntropyGradCase(DType::F32, {3, 4}, "mean", false,
                                         &minus100, rng);
  allIgnored.inputs[2] = fromValues(DType::I64, {3}, {-100, -100, -100});
  expectConformance(allIgnored);
  // i32 labels.
  Case i32 = crossEntropyGradCase(DType::F32, {6, 9}, "mean", true, nullptr,
                                  rng);
  std::vector<double> labels(6);
  for (int i = 0; i < 6; ++i)
    labels[i] = (i * 5) % 9;
  i32.inputs[2] = fromValues(DType::I32, {6}, labels);
  expectConformance(i32);
}

TEST(NeuralNetGradConformance, CrossEntropyGradErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(13);
  auto base = [&] {
    return crossEntropyGradCase(DType::F32, {4, 5}, "mean", true, nullptr, rng);
  };
  Case badDx = base();
  badDx.outputs[0] = zeros(DType::F32, {5, 4});
  expectConformance(badDx);
  Case badReduction = base();
  badReduction.attrs.set("reduction", std::string("total"));
  expectConformance(badReduction);
  Case floatLabels = base();
  floatLabels.inputs[2] = randomTensor(DType::F32, {4}, rng);
  expectConformance(floatLabels);
  Case badLoss = base();
  badLoss.inputs[0] = randomTensor(DType::F32, {4}, rng);
  expectConformance(badLoss);
  Case badWeight = base();
  badWeight.inputs[3] = randomTensor(DType::F32, {4}, rng);
  expectConformance(badWeight);
  Case arity = base();
  arity.inputs.resize(2);
  expectConformance(arity);
}

//===----------------------------------------------------------------------===//
// The CUDA kernels' answer to values the CPU rejects
//===----------------------------------------------------------------------===//


std::vector<float> floatsOf(const std::vector<unsigned char> &bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

TEST(NeuralNetGradConformance, OutOfRangeIndexOrLabelIsNaNOnCuda) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(14);
  std::vector<std::vector<unsigned char>> results;
  // gather and embedding: NaN where an index is out of range (the CPU
  // refuses the instruction), the other rows read as usual.
  Case gather;
  gather.op = "graph.gather";
  gather.inputs = {fromValues(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                   fromValues(DType::I64, {3}, {1, 3, -1})};
  gather.outputs = {zeros(DType::F32, {2, 3})};
  gather.attrs.set("axis", int64_t(1));
  Status g = runOnCuda(gather, results);
  ASSERT_TRUE(g) << g.message();
  std::vector<float> gathered = floatsOf(results[0]);
  ASSERT_EQ(gathered.size(), 6u);
  EXPECT_EQ(gathered[0], 2.0f);
  EXPECT_TRUE(std::isnan(gathered[1]));
  EXPECT_EQ(gathered[2], 3.0f);
  EXPECT_EQ(gathered[3], 5.0f);
  EXPECT_TRUE(std::isnan(gathered[4]));
  EXPECT_EQ(gathered[5], 6.0f);
  Case lookup;
  lookup.op = "graph.embedding";
  lookup.inputs = {fromValues(DType::F32, {2, 2}, {1, 2, 3, 4}),
                   fromValues(DType::I64, {2}, {7, 1})};
  lookup.outputs = {zeros(DType::F32, {2, 2})};
  g = runOnCuda(lookup, results);
  ASSERT_TRUE(g) << g.message();
  std::vector<float> rows = floatsOf(results[0]);
  EXPECT_TRUE(std::isnan(rows[0]) && std::isnan(rows[1]));
  EXPECT_EQ(rows[2], 3.0f);
  EXPECT_EQ(rows[3], 4.0f);
  // The device still works after it (a trap would have ended the context).
  g = runOnCuda(gather, results);
  ASSERT_TRUE(g) << g.message();

  // An index out of range poisons the whole table gradient.
  Case embedding = embeddingCase(DType::F32, DType::I64, {3}, 5, 2, rng);
  embedding.inputs[1] = fromValues(DType::I64, {3}, {1, 5, 2});
  Status s = runOnCuda(embedding, results);
  ASSERT_TRUE(s) << s.message();
  for (float x : floatsOf(results[0]))
    EXPECT_TRUE(std::isnan(x));
  // A label out of range: its column under "sum", everything under "mean".
  for (const char *reduction : {"sum", "mean"}) {
    Case ce =
        crossEntropyGradCase(DType::F32, {3, 4}, reduction, false, nullptr, rng);
    ce.inputs[2] = fromValues(DType::I64, {3}, {0, 7, 1});
    s = runOnCuda(ce, results);
    ASSERT_TRUE(s) << s.message();
    std::vector<float> dx = floatsOf(results[0]);
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(std::isnan(dx[i]),
                std::string(reduction) == "mean" || (i >= 4 && i < 8))
          << reduction << " at " << i;
  }
}

} // namespace
