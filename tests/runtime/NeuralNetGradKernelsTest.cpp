//===- NeuralNetGradKernelsTest.cpp - Gradients of layers and losses ------===//
//
// linear_grad_weight, layer_norm_grad, batch_norm_grad, attention_grad,
// embedding_grad, gather_grad and cross_entropy_grad against central
// differences of the forward kernels (GradKernelTestUtils.h), an f32 smoke
// case each, and the conventions PyTorch fixes (torch 1.13):
//  - attention: a fully masked row is NaN in the forward, so its dq row and
//    all of dk and dv are NaN, as autograd through the explicit formula gives;
//  - cross_entropy "mean" with every label ignored: the loss is NaN and the
//    gradient zero.
//
//===----------------------------------------------------------------------===//

#include "GradKernelTestUtils.h"

#include <cmath>
#include <limits>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

TEST(NeuralNetGradKernels, LinearGradWeightMatchesFiniteDifferences) {
  std::mt19937_64 rng(10);
  for (bool transposed : {true, false}) {
    SCOPED_TRACE(transposed);
    KernelAttrs attrs;
    attrs.set("transpose_weight", int64_t(transposed));
    std::vector<int64_t> wShape =
        transposed ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{4, 5};
    OwnedTensor x = randomF64(rng, {2, 3, 4}), wt = randomF64(rng, wShape);
    OwnedTensor b = randomF64(rng, {5}), y(DType::F64, {2, 3, 5});
    OwnedTensor w = randomF64(rng, {2, 3, 5}), dw(DType::F64, wShape);
    Status s = runCpuKernel("graph.linear_grad_weight", {&w, &x}, {&dw}, attrs);
    ASSERT_TRUE(s) << s.message();
    Forward f{"graph.linear", {&x, &wt, &b}, {&y}, attrs};
    expectGradient(dw.values<double>(),
                   f.numericGradient(1, w.values<double>()));

    OwnedTensor x32 = toF32(x), w32 = toF32(w), dw32(DType::F32, wShape);
    ASSERT_TRUE(
        runCpuKernel("graph.linear_grad_weight", {&w32, &x32}, {&dw32}, attrs));
    expectF32Matches(dw32, dw);
  }
}

TEST(NeuralNetGradKernels, LinearGradWeightChecksShapes) {
  OwnedTensor dy(DType::F32, {2, 5}), x(DType::F32, {2, 4});
  OwnedTensor wrong(DType::F32, {4, 5}), otherRows(DType::F32, {3, 4});
  KernelAttrs attrs;
  attrs.set("transpose_weight", int64_t(1));
  expectErrorNaming(
      runCpuKernel("graph.linear_grad_weight", {&dy, &x}, {&wrong}, attrs),
      "graph.linear_grad_weight");
  OwnedTensor dw(DType::F32, {5, 4});
  expectErrorNaming(
      runCpuKernel("graph.linear_grad_weight", {&dy, &otherRows}, {&dw}, attrs),
      "graph.linear_grad_weight");
}

//===----------------------------------------------------------------------===//
// layer_norm, batch_norm
//===----------------------------------------------------------------------===//

TEST(NeuralNetGradKernels, LayerNormGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(11);
  for (int64_t axis : {1, 2}) {
    SCOPED_TRACE(axis);
    KernelAttrs attrs;
    attrs.set("axis", axis);
    attrs.set("epsilon", 1e-5);
    std::vector<int64_t> shape{2, 3, 4};
    std::vector<int64_t> normalized(shape.begin() + axis, shape.end());
    OwnedTensor x = randomF64(rng, shape, -2, 2);
    OwnedTensor scale = randomF64(rng, normalized, 0.5, 1.5);
    OwnedTensor bias = randomF64(rng, normalized), y(DType::F64, shape);
    OwnedTensor w = randomF64(rng, shape);
    OwnedTensor dx(DType::F64, shape), dscale(DType::F64, normalized),
        dbias(DType::F64, normalized);
    Status s = runCpuKernel("graph.layer_norm_grad", {&w, &x, &scale},
                            {&dx, &dscale, &dbias}, attrs);
    ASSERT_TRUE(s) << s.message();
    Forward f{"graph.layer_norm", {&x, &scale, &bias}, {&y}, attrs};
    std::vector<double> wv = w.values<double>();
    expectGradient(dx.values<double>(), f.numericGradient(0, wv));
    expectGradient(dscale.values<double>(), f.numericGradient(1, wv));
    expectGradient(dbias.values<double>(), f.numericGradient(2, wv));

    OwnedTensor x32 = toF32(x), s32 = toF32(scale), w32 = toF32(w);
    OwnedTensor dx32(DType::F32, shape), ds32(DType::F32, normalized),
        db32(DType::F32, normalized);
    ASSERT_TRUE(runCpuKernel("graph.layer_norm_grad", {&w32, &x32, &s32},
                             {&dx32, &ds32, &db32}, attrs));
    expectF32Matches(dx32, dx, 1e-4, 1e-5);
    expectF32Matches(ds32, dscale, 1e-4, 1e-5);
    expectF32Matches(db32, dbias, 1e-5, 1e-5);
  }
}

TEST(NeuralNetGradKernels, LayerNormGradChecksShapes) {
  KernelAttrs attrs;
  attrs.set("axis", int64_t(1));
  attrs.set("epsilon", 1e-5);
  OwnedTensor dy(DType::F32, {2, 3}), x(DType::F32, {2, 3});
  OwnedTensor scale(DType::F32, {3}), dx(DType::F32, {2, 3});
  OwnedTensor ds(DType::F32, {3}), db(DType::F32, {1, 3});
  expectErrorNaming(runCpuKernel("graph.layer_norm_grad", {&dy, &x, &scale},
                                 {&dx, &ds, &db}, attrs),
                    "graph.layer_norm_grad");
  OwnedTensor scale64(DType::F64, {3}), db2(DType::F32, {3});
  expectErrorNaming(runCpuKernel("graph.layer_norm_grad", {&dy, &x, &scale64},
                                 {&dx, &ds, &db2}, attrs),
                    "graph.layer_norm_grad");
}

TEST(NeuralNetGradKernels, BatchNormGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(12);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training);
    KernelAttrs attrs;
    attrs.set("epsilon", 1e-5);
    attrs.set("momentum", 0.1);
    attrs.set("training", int64_t(training));
    std::vector<int64_t> shape{3, 2, 2, 2};
    OwnedTensor x = randomF64(rng, shape, -2, 2);
    OwnedTensor scale = randomF64(rng, {2}, 0.5, 1.5),
                bias = randomF64(rng, {2});
    OwnedTensor mean = randomF64(rng, {2}), var = randomF64(rng, {2}, 0.5, 2);
    OwnedTensor y(DType::F64, shape), newMean(DType::F64, {2}),
        newVar(DType::F64, {2});
    OwnedTensor w = randomF64(rng, shape);
    OwnedTensor dx(DType::F64, shape), dscale(DType::F64, {2}),
        dbias(DType::F64, {2});
    Status s =
        runCpuKernel("graph.batch_norm_grad", {&w, &x, &scale, &mean, &var},
                     {&dx, &dscale, &dbias}, attrs);
    ASSERT_TRUE(s) << s.message();
    Forward f{"graph.batch_norm",
              {&x, &scale, &bias, &mean, &var},
              {&y, &newMean, &newVar},
              attrs};
    std::vector<double> wv = w.values<double>();
    expectGradient(dx.values<double>(), f.numericGradient(0, wv));
    expectGradient(dscale.values<double>(), f.numericGradient(1, wv));
    expectGradient(dbias.values<double>(), f.numericGradient(2, wv));

    OwnedTensor x32 = toF32(x), s32 = toF32(scale), m32 = toF32(mean),
                v32 = toF32(var), w32 = toF32(w);
    OwnedTensor dx32(DType::F32, shape), ds32(DType::F32, {2}),
        db32(DType::F32, {2});
    ASSERT_TRUE(runCpuKernel("graph.batch_norm_grad",
                             {&w32, &x32, &s32, &m32, &v32},
                             {&dx32, &ds32, &db32}, attrs));
    expectF32Matches(dx32, dx, 1e-4, 1e-5);
    expectF32Matches(ds32, dscale, 1e-4, 1e-5);
    expectF32Matches(db32, dbias, 1e-5, 1e-5);
  }
}

TEST(NeuralNetGradKernels, BatchNormGradChecksShapes) {
  KernelAttrs attrs;
  attrs.set("epsilon", 1e-5);
  attrs.set("training", int64_t(1));
  OwnedTensor dy(DType::F32, {2, 3, 4}), x(DType::F32, {2, 3, 4});
  OwnedTensor c3(DType::F32, {3}), c2(DType::F32, {2});
  OwnedTensor dx(DType::F32, {2, 3, 4}), ds(DType::F32, {3}),
      db(DType::F32, {3});
  expectErrorNaming(runCpuKernel("graph.batch_norm_grad",
                                 {&dy, &x, &c3, &c2, &c3}, {&dx, &ds, &db},
                                 attrs),
                    "graph.batch_norm_grad");
  OwnedTensor one(DType::F32, {1, 3}), dOne(DType::F32, {1, 3});
  expectErrorNaming(runCpuKernel("graph.batch_norm_grad",
                                 {&one, &one, &c3, &c3, &c3}, {&dOne, &ds, &db},
                                 attrs),
                    "graph.batch_norm_grad");
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

KernelAttrs attentionAttrs(double scale, bool causal, double dropout) {
  KernelAttrs a;
  a.set("scale", scale);
  a.set("causal", int64_t(causal));
  a.set("dropout_ratio", dropout);
  return a;
}

/// attention_grad against differences of graph.attention for q, k and v.
void checkAttention(std::mt19937_64 &rng, std::vector<int64_t> qShape,
                    std::vector<int64_t> kShape, std::vector<int64_t> vShape,
                    const std::vector<int64_t> *maskShape,
                    const KernelAttrs &attrs, uint64_t seed) {
  OwnedTensor q = randomF64(rng, qShape, -1.5, 1.5);
  OwnedTensor k = randomF64(rng, kShape, -1.5, 1.5);
  OwnedTensor v = randomF64(rng, vShape);
  OwnedTensor mask = maskShape ? randomF64(rng, *maskShape) : f64({}, {0.0});
  std::vector<int64_t> yShape = qShape;
  yShape.back() = vShape.back();
  OwnedTensor y(DType::F64, yShape), w = randomF64(rng, yShape);
  OwnedTensor dq(DType::F64, qShape), dk(DType::F64, kShape),
      dv(DType::F64, vShape);
  std::vector<const OwnedTensor *> gradIn{&w, &q, &k, &v};
  std::vector<OwnedTensor *> fwdIn{&q, &k, &v};
  if (maskShape) {
    gradIn.push_back(&mask);
    fwdIn.push_back(&mask);
  }
  Status s = runCpuKernel("graph.attention_grad", gradIn, {&dq, &dk, &dv},
                          attrs, seed);
  ASSERT_TRUE(s) << s.message();
  Forward f{"graph.attention", fwdIn, {&y}, attrs, seed};
  std::vector<double> wv = w.values<double>();
  expectGradient(dq.values<double>(), f.numericGradient(0, wv), 1e-6, 1e-7);
  expectGradient(dk.values<double>(), f.numericGradient(1, wv), 1e-6, 1e-7);
  expectGradient(dv.values<double>(), f.numericGradient(2, wv), 1e-6, 1e-7);

  // f32 smoke: the same operands rounded.
  OwnedTensor q32 = toF32(q), k32 = toF32(k), v32 = toF32(v), w32 = toF32(w),
              m32 = toF32(mask);
  OwnedTensor dq32(DType::F32, qShape), dk32(DType::F32, kShape),
      dv32(DType::F32, vShape);
  std::vector<const OwnedTensor *> in32{&w32, &q32, &k32, &v32};
  if (maskShape)
    in32.push_back(&m32);
  ASSERT_TRUE(runCpuKernel("graph.attention_grad", in32, {&dq32, &dk32, &dv32},
                           attrs, seed));
  expectF32Matches(dq32, dq, 1e-3, 1e-4);
  expectF32Matches(dk32, dk, 1e-3, 1e-4);
  expectF32Matches(dv32, dv, 1e-3, 1e-4);
}

TEST(NeuralNetGradKernels, AttentionGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(13);
  checkAttention(rng, {2, 3, 4}, {2, 5, 4}, {2, 5, 2}, nullptr,
                 attentionAttrs(0.5, false, 0), 0);
}

TEST(NeuralNetGradKernels, AttentionGradCausalWithBroadcastMask) {
  // q [1, 2, 3, 4], mask [2, 1, 5] over the scores [1, 2, 3, 5]; causal hides
  // j > i on top of it.
  std::mt19937_64 rng(14);
  std::vector<int64_t> mask{2, 1, 5};
  checkAttention(rng, {1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}, &mask,
                 attentionAttrs(0.35, true, 0), 0);
}

TEST(NeuralNetGradKernels, AttentionGradRedrawsTheForwardsDropoutMask) {
  // The differences run the forward with the same seed: the gradient only
  // matches if the kernel drops exactly the forward's probabilities.
  std::mt19937_64 rng(15);
  std::vector<int64_t> mask{4, 6};
  checkAttention(rng, {2, 4, 3}, {2, 6, 3}, {2, 6, 2}, &mask,
                 attentionAttrs(0.5, false, 0.3), 1234);
  checkAttention(rng, {2, 4, 3}, {2, 6, 3}, {2, 6, 2}, nullptr,
                 attentionAttrs(0.5, true, 0.5), 99);

  // Another seed is another mask: a different gradient.
  OwnedTensor q = randomF64(rng, {1, 4, 3}), k = randomF64(rng, {1, 6, 3}),
              v = randomF64(rng, {1, 6, 2}), w = randomF64(rng, {1, 4, 2});
  OwnedTensor dq1(DType::F64, {1, 4, 3}), dk1(DType::F64, {1, 6, 3}),
      dv1(DType::F64, {1, 6, 2});
  OwnedTensor dq2(DType::F64, {1, 4, 3}), dk2(DType::F64, {1, 6, 3}),
      dv2(DType::F64, {1, 6, 2});
  KernelAttrs attrs = attentionAttrs(0.5, false, 0.3);
  ASSERT_TRUE(runCpuKernel("graph.attention_grad", {&w, &q, &k, &v},
                           {&dq1, &dk1, &dv1}, attrs, 1));
  ASSERT_TRUE(runCpuKernel("graph.attention_grad", {&w, &q, &k, &v},
                           {&dq2, &dk2, &dv2}, attrs, 2));
  EXPECT_NE(dv1.values<double>(), dv2.values<double>());
}

TEST(NeuralNetGradKernels, AttentionGradOfAFullyMaskedRowIsNaN) {
  // The forward's row is NaN (softmax of all -inf); autograd through the
  // explicit formula gives NaN in that row of dq and everywhere in dk and
  // dv (torch 1.13), and so does the kernel. The other rows of dq are finite.
  std::mt19937_64 rng(16);
  const double inf = std::numeric_limits<double>::infinity();
  OwnedTensor q = randomF64(rng, {1, 3, 4}), k = randomF64(rng, {1, 5, 4}),
              v = randomF64(rng, {1, 5, 2}), w = randomF64(rng, {1, 3, 2});
  std::vector<double> m(15, 0.0);
  for (int j = 0; j < 5; ++j)
    m[5 + j] = -inf;
  OwnedTensor mask = f64({3, 5}, m);
  OwnedTensor y(DType::F64, {1, 3, 2});
  KernelAttrs attrs = attentionAttrs(0.5, false, 0);
  ASSERT_TRUE(
      runCpuKernel("graph.attention", {&q, &k, &v, &mask}, {&y}, attrs));
  EXPECT_TRUE(std::isnan(y.values<double>()[2]));
  OwnedTensor dq(DType::F64, {1, 3, 4}), dk(DType::F64, {1, 5, 4}),
      dv(DType::F64, {1, 5, 2});
  ASSERT_TRUE(runCpuKernel("graph.attention_grad", {&w, &q, &k, &v, &mask},
                           {&dq, &dk, &dv}, attrs));
  std::vector<double> g = dq.values<double>();
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(std::isnan(g[i]), i >= 4 && i < 8) << "dq at " << i;
  for (double x : dk.values<double>())
    EXPECT_TRUE(std::isnan(x));
  for (double x : dv.values<double>())
    EXPECT_TRUE(std::isnan(x));
}

TEST(NeuralNetGradKernels, AttentionGradChecksShapes) {
  KernelAttrs attrs = attentionAttrs(0.5, false, 0);
  OwnedTensor dy(DType::F32, {1, 3, 2}), q(DType::F32, {1, 3, 4}),
      k(DType::F32, {1, 5, 4}), v(DType::F32, {1, 5, 2}),
      kBad(DType::F32, {1, 5, 3});
  OwnedTensor dq(DType::F32, {1, 3, 4}), dk(DType::F32, {1, 5, 4}),
      dv(DType::F32, {1, 5, 2}), dkBad(DType::F32, {1, 5, 3});
  expectErrorNaming(runCpuKernel("graph.attention_grad", {&dy, &q, &kBad, &v},
                                 {&dq, &dkBad, &dv}, attrs),
                    "graph.attention_grad");
  OwnedTensor dyBad(DType::F32, {1, 3, 3});
  expectErrorNaming(runCpuKernel("graph.attention_grad", {&dyBad, &q, &k, &v},
                                 {&dq, &dk, &dv}, attrs),
                    "graph.attention_grad");
  KernelAttrs noScale;
  expectErrorNaming(runCpuKernel("graph.attention_grad", {&dy, &q, &k, &v},
                                 {&dq, &dk, &dv}, noScale),
                    "graph.attention_grad");
}

//===----------------------------------------------------------------------===//
// embedding, gather
//===----------------------------------------------------------------------===//

TEST(NeuralNetGradKernels, EmbeddingGradAccumulatesRows) {
  std::mt19937_64 rng(17);
  // Row 1 three times (once as -4), row 4 twice, rows 0 and 2 never.
  OwnedTensor indices = i64({2, 3}, {1, 4, 3, -4, 1, -1});
  OwnedTensor table = randomF64(rng, {5, 3}), y(DType::F64, {2, 3, 3});
  OwnedTensor w = randomF64(rng, {2, 3, 3}), dt(DType::F64, {5, 3});
  // A stale result: the kernel must zero it first.
  std::fill_n(dt.view().as<double>(), 15, 7.0);
  Status s = runCpuKernel("graph.embedding_grad", {&w, &indices}, {&dt});
  ASSERT_TRUE(s) << s.message();
  Forward f{"graph.embedding", {&table, &indices}, {&y}};
  expectGradient(dt.values<double>(), f.numericGradient(0, w.values<double>()));
  std::vector<double> g = dt.values<double>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(g[0 * 3 + c], 0.0);
    EXPECT_EQ(g[2 * 3 + c], 0.0);
  }

  // i32 indices, f32.
  OwnedTensor idx32 =
      OwnedTensor::of<int32_t>(DType::I32, {2, 3}, {1, 4, 3, -4, 1, -1});
  OwnedTensor w32 = toF32(w), dt32(DType::F32, {5, 3});
  ASSERT_TRUE(runCpuKernel("graph.embedding_grad", {&w32, &idx32}, {&dt32}));
  expectF32Matches(dt32, dt, 1e-6, 1e-6);
}

TEST(NeuralNetGradKernels, EmbeddingGradRejectsBadIndices) {
  OwnedTensor w(DType::F32, {2, 3}), dt(DType::F32, {5, 3});
  for (int64_t bad : {5, -6}) {
    OwnedTensor indices = i64({2}, {0, bad});
    Status s = runCpuKernel("graph.embedding_grad", {&w, &indices}, {&dt});
    expectErrorNaming(s, "graph.embedding_grad");
    EXPECT_NE(s.message().find(std::to_string(bad)), std::string::npos);
  }
  OwnedTensor indices = i64({3}, {0, 1, 2});
  expectErrorNaming(runCpuKernel("graph.embedding_grad", {&w, &indices}, {&dt}),
                    "graph.embedding_grad");
}

TEST(NeuralNetGradKernels, GatherGradScatterAddsAlongTheAxis) {
  std::mt19937_64 rng(18);
  OwnedTensor indices = i64({2, 2}, {3, -1, 0, 1}); // 3 and -1 are one row
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE(axis);
    std::vector<int64_t> xShape{4, 4, 4};
    std::vector<int64_t> yShape(xShape.begin(), xShape.begin() + axis);
    yShape.insert(yShape.end(), {2, 2});
    yShape.insert(yShape.end(), xShape.begin() + axis + 1, xShape.end());
    KernelAttrs attrs;
    attrs.set("axis", axis);
    OwnedTensor x = randomF64(rng, xShape), y(DType::F64, yShape);
    OwnedTensor w = randomF64(rng, yShape), dx(DType::F64, xShape);
    Status s = runCpuKernel("graph.gather_grad", {&w, &indices}, {&dx}, attrs);
    ASSERT_TRUE(s) << s.message();
    Forward f{"graph.gather", {&x, &indices}, {&y}, attrs};
    expectGradient(dx.values<double>(),
                   f.numericGradient(0, w.values<double>()));

    OwnedTensor w32 = toF32(w), dx32(DType::F32, xShape);
    ASSERT_TRUE(
        runCpuKernel("graph.gather_grad", {&w32, &indices}, {&dx32}, attrs));
    expectF32Matches(dx32, dx, 1e-6, 1e-6);
  }
  KernelAttrs attrs;
  attrs.set("axis", int64_t(1));
  OwnedTensor w(DType::F32, {4, 2, 2, 4}), dx(DType::F32, {4, 3, 4});
  expectErrorNaming(
      runCpuKernel("graph.gather_grad", {&w, &indices}, {&dx}, attrs),
      "graph.gather_grad"); // index 3 is out of range for 3
  OwnedTensor wrong(DType::F32, {4, 4, 4});
  OwnedTensor dx4(DType::F32, {4, 4, 4});
  expectErrorNaming(
      runCpuKernel("graph.gather_grad", {&wrong, &indices}, {&dx4}, attrs),
      "graph.gather_grad");
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

struct CrossEntropyCase {
  std::string reduction;
  bool weighted;
  bool ignore;
};

TEST(NeuralNetGradKernels, CrossEntropyGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(19);
  // logits [3, 4, 2]: classes in dim 1, labels [3, 2]; label 2 is ignored
  // where ignore_index is set.
  OwnedTensor labels = i64({3, 2}, {0, 2, 3, 1, 2, 2});
  for (CrossEntropyCase c :
       std::vector<CrossEntropyCase>{{"mean", false, false},
                                     {"mean", true, true},
                                     {"sum", true, false},
                                     {"sum", false, true},
                                     {"none", true, true},
                                     {"none", false, false}}) {
    SCOPED_TRACE(c.reduction + (c.weighted ? " weighted" : "") +
                 (c.ignore ? " ignore" : ""));
    KernelAttrs attrs;
    attrs.set("reduction", c.reduction);
    if (c.ignore)
      attrs.set("ignore_index", int64_t(2));
    bool none = c.reduction == "none";
    std::vector<int64_t> lossShape =
        none ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{};
    OwnedTensor logits = randomF64(rng, {3, 4, 2}, -2, 2);
    OwnedTensor weight = randomF64(rng, {4}, 0.5, 2);
    OwnedTensor loss(DType::F64, lossShape), w = randomF64(rng, lossShape);
    OwnedTensor dx(DType::F64, {3, 4, 2});
    std::vector<const OwnedTensor *> gradIn{&w, &logits, &labels};
    std::vector<OwnedTensor *> fwdIn{&logits, &labels};
    if (c.weighted) {
      gradIn.push_back(&weight);
      fwdIn.push_back(&weight);
    }
    Status s = runCpuKernel("graph.cross_entropy_grad", gradIn, {&dx}, attrs);
    ASSERT_TRUE(s) << s.message();
    Forward f{"graph.cross_entropy", fwdIn, {&loss}, attrs};
    expectGradient(dx.values<double>(),
                   f.numericGradient(0, w.values<double>()));

    OwnedTensor l32 = toF32(logits), w32 = toF32(w), wt32 = toF32(weight);
    OwnedTensor dx32(DType::F32, {3, 4, 2});
    std::vector<const OwnedTensor *> in32{&w32, &l32, &labels};
    if (c.weighted)
      in32.push_back(&wt32);
    ASSERT_TRUE(runCpuKernel("graph.cross_entropy_grad", in32, {&dx32}, attrs));
    expectF32Matches(dx32, dx, 1e-5, 1e-6);
  }
}

TEST(NeuralNetGradKernels, CrossEntropyGradWithEveryLabelIgnored) {
  // torch: F.cross_entropy(x, [-100, -100]) is nan, its gradient zeros.
  KernelAttrs attrs;
  attrs.set("reduction", std::string("mean"));
  attrs.set("ignore_index", int64_t(-100));
  OwnedTensor logits = f32({2, 3}, {0.5f, -1, 2, 0, 0.25f, 1});
  OwnedTensor labels = i64({2}, {-100, -100});
  OwnedTensor loss(DType::F32, {});
  ASSERT_TRUE(
      runCpuKernel("graph.cross_entropy", {&logits, &labels}, {&loss}, attrs));
  EXPECT_TRUE(std::isnan(loss.values<float>()[0]));
  OwnedTensor one = f32({}, {1.0f}), dx(DType::F32, {2, 3});
  std::fill_n(dx.view().as<float>(), 6, 5.0f);
  ASSERT_TRUE(runCpuKernel("graph.cross_entropy_grad", {&one, &logits, &labels},
                           {&dx}, attrs));
  EXPECT_EQ(dx.values<float>(), std::vector<float>(6, 0.0f));
}

TEST(NeuralNetGradKernels, CrossEntropyGradChecksOperands) {
  KernelAttrs attrs;
  OwnedTensor one = f32({}, {1.0f}), logits(DType::F32, {2, 3});
  OwnedTensor dx(DType::F32, {2, 3});
  OwnedTensor outOfRange = i64({2}, {0, 3});
  expectErrorNaming(runCpuKernel("graph.cross_entropy_grad",
                                 {&one, &logits, &outOfRange}, {&dx}, attrs),
                    "graph.cross_entropy_grad");
  OwnedTensor labels = i64({2}, {0, 2}), weight(DType::F32, {2});
  expectErrorNaming(runCpuKernel("graph.cross_entropy_grad",
                                 {&one, &logits, &labels, &weight}, {&dx},
                                 attrs),
                    "graph.cross_entropy_grad");
  KernelAttrs none;
  none.set("reduction", std::string("none"));
  expectErrorNaming(runCpuKernel("graph.cross_entropy_grad",
                                 {&one, &logits, &labels}, {&dx}, none),
                    "graph.cross_entropy_grad");
  KernelAttrs bogus;
  bogus.set("reduction", std::string("avg"));
  expectErrorNaming(runCpuKernel("graph.cross_entropy_grad",
                                 {&one, &logits, &labels}, {&dx}, bogus),
                    "graph.cross_entropy_grad");
}

} // namespace
