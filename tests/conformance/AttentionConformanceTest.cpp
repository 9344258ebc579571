//===- AttentionConformanceTest.cpp - Fused attention vs the CPU ----------===//
//
// graph.attention and graph.attention_grad on the CUDA backend (tiled,
// online softmax) against the CPU's explicit formula: sequence lengths 1,
// 17, 128 (one partial tile, several), head dims 16 and 64 (and wide heads
// that shrink the tiles), causal or not, additive and padding masks that
// broadcast, cross attention (S != T, d != dv), dropout (the same Philox
// masks), fully masked rows (NaN), no keys, and the CPU's errors. Then
// heads_inner (q [..., S, H, D], k and v [..., T, H, *]): the tiled kernels
// and the tensor-core ones against the CPU, and bit for bit against the
// plain layout's results on transposed operands. Then keep_probabilities:
// the forward's second result (the probabilities before dropout, [..., H,
// S, T] in either layout) against the CPU's, and the gradient given them.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

namespace strata::runtime::conformance {
namespace {

struct Shape {
  /// The scores' batch dims [..., H] (heads_inner or not).
  std::vector<int64_t> batch;
  int64_t s = 1, t = 1, d = 1, dv = 1;
  /// [..., H, rows, cols]; heads_inner: [..., rows, H, cols] (and
  /// [rows, cols] without batch dims, which heads_inner refuses).
  std::vector<int64_t> dims(int64_t rows, int64_t cols,
                            bool headsInner = false) const {
    std::vector<int64_t> shape = batch;
    if (headsInner && !shape.empty())
      shape.insert(shape.end() - 1, rows);
    else
      shape.push_back(rows);
    shape.push_back(cols);
    return shape;
  }
};

struct Options {
  bool causal = false;
  double ratio = 0;
  /// A mask operand (appended after q, k, v; after dy, q, k, v for the
  /// gradient), or none when its shape is empty.
  CaseTensor mask;
  bool hasMask = false;
  /// q [..., S, H, D] and so on (the attribute heads_inner).
  bool headsInner = false;
  /// keep_probabilities: the forward's second result, the gradient's last
  /// operand (the CPU forward's probabilities of its q, k, v and mask).
  bool keep = false;
};

void setTolerance(Case &c, DType dtype) {
  bool f32 = dtype == DType::F32;
  c.rtol = f32 ? 1e-4 : 1e-12;
  c.atol = f32 ? 1e-5 : 1e-12;
}

void setAttrs(Case &c, const Shape &shape, const Options &o) {
  c.attrs.set("scale", 1.0 / std::sqrt(double(std::max<int64_t>(shape.d, 1))));
  if (o.causal)
    c.attrs.set("causal", int64_t(1));
  if (o.ratio > 0)
    c.attrs.set("dropout_ratio", o.ratio);
  if (o.headsInner)
    c.attrs.set("heads_inner", int64_t(1));
  if (o.keep)
    c.attrs.set("keep_probabilities", int64_t(1));
  c.seed = 0x5eed0123456789abull;
}

Case forward(DType dtype, const Shape &shape, const Options &o,
             uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c;
  c.op = "graph.attention";
  const bool hi = o.headsInner;
  c.inputs.push_back(
      randomTensor(dtype, shape.dims(shape.s, shape.d, hi), rng));
  c.inputs.push_back(
      randomTensor(dtype, shape.dims(shape.t, shape.d, hi), rng));
  c.inputs.push_back(
      randomTensor(dtype, shape.dims(shape.t, shape.dv, hi), rng));
  if (o.hasMask)
    c.inputs.push_back(o.mask);
  c.outputs.push_back(zeros(dtype, shape.dims(shape.s, shape.dv, hi)));
  // keep_probabilities: [..., H, S, T] (the scores' order in both layouts),
  // over garbage the kernel must overwrite, hidden keys included.
  if (o.keep)
    c.outputs.push_back(
        randomTensor(dtype, shape.dims(shape.s, shape.t), rng, 5.0, 6.0));
  setAttrs(c, shape, o);
  setTolerance(c, dtype);
  return c;
}

Case gradient(DType dtype, const Shape &shape, const Options &o,
              uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c;
  c.op = "graph.attention_grad";
  const bool hi = o.headsInner;
  c.inputs.push_back(
      randomTensor(dtype, shape.dims(shape.s, shape.dv, hi), rng));
  c.inputs.push_back(
      randomTensor(dtype, shape.dims(shape.s, shape.d, hi), rng));
  c.inputs.push_back(
      randomTensor(dtype, shape.dims(shape.t, shape.d, hi), rng));
  c.inputs.push_back(
      randomTensor(dtype, shape.dims(shape.t, shape.dv, hi), rng));
  if (o.hasMask)
    c.inputs.push_back(o.mask);
  c.outputs.push_back(zeros(dtype, shape.dims(shape.s, shape.d, hi)));
  c.outputs.push_back(zeros(dtype, shape.dims(shape.t, shape.d, hi)));
  c.outputs.push_back(zeros(dtype, shape.dims(shape.t, shape.dv, hi)));
  setAttrs(c, shape, o);
  setTolerance(c, dtype);
  if (o.keep) {
    // The probabilities the CPU's forward keeps for these q, k, v and mask
    // (zeros where it refuses them: an error case).
    Case f;
    f.op = "graph.attention";
    f.inputs.assign(c.inputs.begin() + 1, c.inputs.end());
    f.outputs.push_back(zeros(dtype, shape.dims(shape.s, shape.dv, hi)));
    f.outputs.push_back(zeros(dtype, shape.dims(shape.s, shape.t)));
    f.attrs = c.attrs;
    f.seed = c.seed;
    std::vector<std::vector<unsigned char>> results;
    CaseTensor probs = f.outputs[1];
    if (runOnCpu(f, results))
      probs.bytes = results[1];
    c.inputs.push_back(probs);
  }
  return c;
}

/// The forward and the gradient of one configuration.
void expectBoth(DType dtype, const Shape &shape, const Options &o,
                uint64_t seed) {
  expectConformance(forward(dtype, shape, o, seed));
  expectConformance(gradient(dtype, shape, o, seed + 1000));
}

/// A padding mask [batch, 1, 1, T]: 0 for the first `valid[b]` keys of
/// batch b, -inf after.
CaseTensor paddingMask(DType dtype, const std::vector<int64_t> &valid,
                       int64_t t) {
  std::vector<double> values;
  for (int64_t v : valid)
    for (int64_t j = 0; j < t; ++j)
      values.push_back(j < v ? 0.0 : -std::numeric_limits<double>::infinity());
  return fromValues(dtype, {int64_t(valid.size()), 1, 1, t}, values);
}

/// A [6, 6] mask whose row 3 is all -inf (the rest 0): that row's
/// softmax, and so its output row, is NaN.
CaseTensor fullyMaskedRow(DType dtype) {
  std::vector<double> values(36, 0.0);
  for (int j = 0; j < 6; ++j)
    values[3 * 6 + j] = -std::numeric_limits<double>::infinity();
  return fromValues(dtype, {6, 6}, values);
}

/// `o` (its layout and keep_probabilities) with a padding mask, causal; a
/// full [B, H, S, T] mask across S != T; a [B, 1, S, 1] mask with dropout;
/// then dropout alone on `dropoutShape`. The masks broadcast to the
/// logical scores [B, H, S, T] and come from `rng`; leaves `o` with
/// dropout 0.5 and no mask.
void expectMasksAndDropout(DType dtype, Options &o, std::mt19937_64 &rng,
                           uint64_t &seed, const Shape &dropoutShape) {
  o.hasMask = true;
  o.mask = paddingMask(dtype, {14, 17}, 17);
  o.causal = true;
  expectBoth(dtype, {{2, 3}, 17, 17, 16, 16}, o, seed++);
  o.mask = randomTensor(dtype, {2, 3, 17, 33}, rng, -2.0, 0.5);
  o.causal = false;
  expectBoth(dtype, {{2, 3}, 17, 33, 16, 24}, o, seed++);
  o.mask = randomTensor(dtype, {2, 1, 40, 1}, rng, -2.0, 0.5);
  o.causal = true;
  o.ratio = 0.1;
  expectBoth(dtype, {{2, 3}, 40, 40, 16, 16}, o, seed++);
  o.hasMask = false;
  o.causal = false;
  o.ratio = 0.5;
  expectBoth(dtype, dropoutShape, o, seed++);
}

TEST(AttentionConformance, SequenceLengthsHeadDimsCausal) {
  STRATA_REQUIRE_GPU();
  uint64_t seed = 1;
  for (DType dtype : {DType::F32, DType::F64})
    for (int64_t seq : {1, 17, 128})
      for (int64_t head : {16, 64})
        for (bool causal : {false, true}) {
          Options o;
          o.causal = causal;
          expectBoth(dtype, {{2, 2}, seq, seq, head, head}, o, seed++);
        }
}

TEST(AttentionConformance, PaddingMask) {
  STRATA_REQUIRE_GPU();
  uint64_t seed = 100;
  for (DType dtype : {DType::F32, DType::F64})
    for (bool causal : {false, true}) {
      Options o;
      o.causal = causal;
      o.hasMask = true;
      o.mask = paddingMask(dtype, {14, 17}, 17);
      expectBoth(dtype, {{2, 3}, 17, 17, 16, 16}, o, seed++);
      o.mask = paddingMask(dtype, {100, 128}, 128);
      expectBoth(dtype, {{2, 2}, 128, 128, 64, 64}, o, seed++);
    }
}

TEST(AttentionConformance, AdditiveMasks) {
  STRATA_REQUIRE_GPU();
  uint64_t seed = 200;
  for (DType dtype : {DType::F32, DType::F64}) {
    std::mt19937_64 rng(seed);
    Options o;
    o.hasMask = true;
    // [S, T], shared by every batch matrix.
    o.mask = randomTensor(dtype, {17, 33}, rng, -2.0, 0.5);
    expectBoth(dtype, {{2, 2}, 17, 33, 16, 24}, o, seed++);
    // A full [B, H, S, T] one, causal.
    o.mask = randomTensor(dtype, {2, 2, 17, 17}, rng, -2.0, 0.5);
    o.causal = true;
    expectBoth(dtype, {{2, 2}, 17, 17, 16, 16}, o, seed++);
    // Broadcast over the heads and the keys: [B, 1, S, 1].
    o.mask = randomTensor(dtype, {2, 1, 40, 1}, rng, -2.0, 0.5);
    o.causal = false;
    expectBoth(dtype, {{2, 3}, 40, 40, 16, 16}, o, seed++);
  }
}

TEST(AttentionConformance, CrossAttention) {
  STRATA_REQUIRE_GPU();
  uint64_t seed = 300;
  for (DType dtype : {DType::F32, DType::F64})
    for (bool causal : {false, true}) {
      Options o;
      o.causal = causal;
      expectBoth(dtype, {{3}, 17, 45, 24, 40}, o, seed++);
      expectBoth(dtype, {{3}, 45, 17, 7, 5}, o, seed++);
      expectBoth(dtype, {{}, 33, 33, 16, 16}, o, seed++); // rank 2
    }
}

TEST(AttentionConformance, Dropout) {
  STRATA_REQUIRE_GPU();
  uint64_t seed = 400;
  for (DType dtype : {DType::F32, DType::F64})
    for (bool causal : {false, true}) {
      Options o;
      o.causal = causal;
      o.ratio = 0.1;
      expectBoth(dtype, {{2, 2}, 17, 17, 16, 16}, o, seed++);
      o.ratio = 0.5;
      expectBoth(dtype, {{2}, 128, 128, 64, 64}, o, seed++);
    }
}

TEST(AttentionConformance, WideHeadsShrinkTheTiles) {
  STRATA_REQUIRE_GPU();
  Options o;
  o.causal = true;
  expectBoth(DType::F32, {{2}, 40, 40, 128, 128}, o, 500);
  expectBoth(DType::F64, {{2}, 40, 40, 128, 128}, o, 501);
  expectBoth(DType::F64, {{2}, 20, 20, 256, 256}, o, 502);
  expectBoth(DType::F32, {{1}, 9, 9, 1000, 8}, o, 503);
}

TEST(AttentionConformance, FullyMaskedRowIsNaN) {
  STRATA_REQUIRE_GPU();
  for (DType dtype : {DType::F32, DType::F64})
    for (bool causal : {false, true}) {
      // Row 3 of the mask is all -inf: its output row is NaN, and in the
      // gradient its dQ row and all of dK and dV.
      Options o;
      o.causal = causal;
      o.hasMask = true;
      o.mask = fullyMaskedRow(dtype);
      expectBoth(dtype, {{2}, 6, 6, 4, 4}, o, 600 + causal);
    }
}

TEST(AttentionConformance, EmptyDims) {
  STRATA_REQUIRE_GPU();
  for (DType dtype : {DType::F32, DType::F64}) {
    Options o;
    // No keys: zeros (over a non-zero start).
    Case c = forward(dtype, {{2}, 9, 0, 4, 4}, o, 700);
    std::mt19937_64 rng(701);
    c.outputs[0] = randomTensor(dtype, {2, 9, 4}, rng);
    expectConformance(c);
    c = gradient(dtype, {{2}, 9, 0, 4, 4}, o, 702);
    c.outputs[0] = randomTensor(dtype, {2, 9, 4}, rng);
    expectConformance(c);
    // No queries: dK and dV are zero.
    c = gradient(dtype, {{2}, 0, 5, 4, 4}, o, 703);
    c.outputs[1] = randomTensor(dtype, {2, 5, 4}, rng);
    c.outputs[2] = randomTensor(dtype, {2, 5, 4}, rng);
    expectConformance(c);
    expectConformance(forward(dtype, {{2}, 0, 5, 4, 4}, o, 704));
    // Empty head dims, an empty batch.
    expectBoth(dtype, {{2}, 5, 5, 0, 4}, o, 705);
    expectBoth(dtype, {{2}, 5, 5, 3, 0}, o, 706);
    expectBoth(dtype, {{0, 2}, 5, 5, 3, 3}, o, 707);
  }
}

TEST(AttentionConformance, ForwardErrors) {
  STRATA_REQUIRE_GPU();
  Shape shape{{2}, 5, 5, 4, 4};
  Options o;
  std::mt19937_64 rng(800);
  // Missing scale.
  Case c = forward(DType::F32, shape, o, 801);
  c.attrs = KernelAttrs();
  expectConformance(c);
  // Arity.
  c = forward(DType::F32, shape, o, 802);
  c.inputs.pop_back();
  expectConformance(c);
  // Element types.
  c = forward(DType::F32, shape, o, 803);
  c.inputs[2] = randomTensor(DType::F64, {2, 5, 4}, rng);
  expectConformance(c);
  // Ranks.
  c = forward(DType::F32, shape, o, 804);
  c.inputs[1] = randomTensor(DType::F32, {5, 4}, rng);
  expectConformance(c);
  // Shapes that do not fit: key width, value length, batch.
  c = forward(DType::F32, shape, o, 805);
  c.inputs[1] = randomTensor(DType::F32, {2, 5, 3}, rng);
  expectConformance(c);
  c = forward(DType::F32, shape, o, 806);
  c.inputs[2] = randomTensor(DType::F32, {2, 6, 4}, rng);
  expectConformance(c);
  c = forward(DType::F32, shape, o, 807);
  c.inputs[1] = randomTensor(DType::F32, {3, 5, 4}, rng);
  expectConformance(c);
  // Result shape.
  c = forward(DType::F32, shape, o, 808);
  c.outputs[0] = zeros(DType::F32, {2, 5, 5});
  expectConformance(c);
  // Masks that do not broadcast.
  o.hasMask = true;
  o.mask = randomTensor(DType::F32, {3, 5}, rng);
  expectConformance(forward(DType::F32, shape, o, 809));
  o.mask = randomTensor(DType::F32, {1, 2, 5, 5}, rng);
  expectConformance(forward(DType::F32, shape, o, 810));
  o.hasMask = false;
  // Dropout ratio out of [0, 1).
  c = forward(DType::F32, shape, o, 811);
  c.attrs.set("dropout_ratio", 1.0);
  expectConformance(c);
  // Integers.
  expectConformance(forward(DType::I32, shape, o, 812));
}

TEST(AttentionConformance, GradientErrors) {
  STRATA_REQUIRE_GPU();
  Shape shape{{2}, 5, 5, 4, 4};
  Options o;
  std::mt19937_64 rng(900);
  Case c = gradient(DType::F32, shape, o, 901);
  c.inputs.pop_back();
  expectConformance(c); // arity
  c = gradient(DType::F32, shape, o, 902);
  c.outputs[1] = zeros(DType::F64, {2, 5, 4});
  expectConformance(c); // result element type
  c = gradient(DType::F32, shape, o, 903);
  c.inputs[3] = randomTensor(DType::F64, {2, 5, 4}, rng);
  expectConformance(c); // operand element type
  c = gradient(DType::F32, shape, o, 904);
  c.attrs = KernelAttrs();
  expectConformance(c); // missing scale
  c = gradient(DType::F32, shape, o, 905);
  c.inputs[2] = randomTensor(DType::F32, {5, 4}, rng);
  expectConformance(c); // ranks
  c = gradient(DType::F32, shape, o, 906);
  c.inputs[0] = randomTensor(DType::F32, {2, 5, 3}, rng);
  expectConformance(c); // gradient shape
  c = gradient(DType::F32, shape, o, 907);
  c.outputs[0] = zeros(DType::F32, {2, 5, 3});
  expectConformance(c); // result shape
  o.hasMask = true;
  o.mask = randomTensor(DType::F32, {4, 5}, rng);
  expectConformance(gradient(DType::F32, shape, o, 908));
  o.mask = randomTensor(DType::F32, {1, 1, 5, 5}, rng);
  expectConformance(gradient(DType::F32, shape, o, 909));
  o.hasMask = false;
  c = gradient(DType::F32, shape, o, 910);
  c.attrs.set("dropout_ratio", -0.5);
  expectConformance(c); // dropout ratio
  // An integer query passes the float-only type check, then is refused.
  c = gradient(DType::F32, shape, o, 911);
  c.inputs[1] = zeros(DType::I32, {2, 5, 4});
  expectConformance(c);
}

//===----------------------------------------------------------------------===//
// heads_inner
//===----------------------------------------------------------------------===//

/// `t` with its axes rank-3 and rank-2 swapped: [..., A, B, C] to
/// [..., B, A, C] (heads_inner's layout to the plain one and back).
CaseTensor swapAxes(const CaseTensor &t) {
  size_t rank = t.shape.size();
  CaseTensor out = t;
  std::swap(out.shape[rank - 3], out.shape[rank - 2]);
  if (t.numel() == 0)
    return out;
  const int64_t a = t.shape[rank - 3], b = t.shape[rank - 2],
                c = t.shape[rank - 1];
  const size_t width = t.bytes.size() / size_t(t.numel());
  const size_t row = size_t(c) * width;
  const int64_t outer = t.numel() / (a * b * c);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        std::memcpy(out.bytes.data() + size_t((o * b + j) * a + i) * row,
                    t.bytes.data() + size_t((o * a + i) * b + j) * row, row);
  return out;
}

/// The narrow kernels' bars (NarrowFloatConformance.TensorCoreAttention).
void setNarrowTolerance(Case &c, DType dtype, bool gradient) {
  bool bf16 = dtype == DType::BF16;
  c.rtol = gradient ? (bf16 ? 3e-2 : 6e-3) : (bf16 ? 1.2e-2 : 2e-3);
  c.atol = gradient ? 6e-3 : 2e-3;
}

/// `c` (heads_inner) on the CUDA device, and again in the plain layout
/// (every q, k, v, dy and result transposed, the mask as it is): the
/// results transposed back must be the same bytes.
void expectSameAsPlainLayout(const Case &c) {
  std::string what = c.op + " " + std::to_string(c.inputs[0].shape[0]) +
                     " x ... x " + std::to_string(c.inputs[0].shape.back());
  SCOPED_TRACE(what);
  ASSERT_TRUE(c.attrs.getBool("heads_inner"));
  Case plain = c;
  plain.attrs.set("heads_inner", int64_t(0));
  // q, k, v (dy, q, k, v for the gradient); the mask stays.
  size_t operands = c.op == "graph.attention" ? 3 : 4;
  for (size_t i = 0; i < operands; ++i)
    plain.inputs[i] = swapAxes(c.inputs[i]);
  for (CaseTensor &out : plain.outputs)
    out = swapAxes(out);
  std::vector<std::vector<unsigned char>> got, want;
  Status s = runOnCuda(c, got);
  ASSERT_TRUE(s.isOk()) << s.message();
  s = runOnCuda(plain, want);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    CaseTensor back = plain.outputs[r];
    back.bytes = want[r];
    back = swapAxes(back);
    EXPECT_EQ(back.shape, c.outputs[r].shape);
    EXPECT_TRUE(got[r] == back.bytes) << "result " << r << " differs";
  }
}

TEST(AttentionConformance, HeadsInner) {
  STRATA_REQUIRE_GPU();
  uint64_t seed = 1000;
  // q [2, S, 3, D]: batch matrix (b, h) reads rows 3 * D apart.
  for (DType dtype : {DType::F32, DType::F64})
    for (int64_t seq : {17, 128})
      for (int64_t head : {16, 64})
        for (bool causal : {false, true}) {
          Options o;
          o.causal = causal;
          o.headsInner = true;
          expectBoth(dtype, {{2, 3}, seq, seq, head, head}, o, seed++);
        }
}

TEST(AttentionConformance, HeadsInnerMasksDropoutCrossAttention) {
  STRATA_REQUIRE_GPU();
  uint64_t seed = 1100;
  for (DType dtype : {DType::F32, DType::F64}) {
    std::mt19937_64 rng(seed);
    Options o;
    o.headsInner = true;
    // Dropout alone on a long sequence (its index is the logical one).
    expectMasksAndDropout(dtype, o, rng, seed, {{2, 3}, 128, 128, 64, 64});
    o.ratio = 0;
    // Cross attention, S != T and D != Dv; [S, H, D] (no outer dims);
    // two outer dims.
    for (bool causal : {false, true}) {
      o.causal = causal;
      expectBoth(dtype, {{2, 3}, 17, 45, 24, 40}, o, seed++);
      expectBoth(dtype, {{3}, 45, 17, 7, 5}, o, seed++);
      expectBoth(dtype, {{2, 2, 3}, 9, 9, 8, 8}, o, seed++);
    }
  }
}

TEST(AttentionConformance, HeadsInnerFullyMaskedRowIsNaN) {
  STRATA_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    Options o;
    o.causal = causal;
    o.headsInner = true;
    o.hasMask = true;
    o.mask = fullyMaskedRow(DType::F32);
    expectBoth(DType::F32, {{2, 3}, 6, 6, 4, 4}, o, 1200 + causal);
  }
}

TEST(AttentionConformance, HeadsInnerTensorCores) {
  STRATA_REQUIRE_GPU();
  // bf16 / fp16 with D = Dv in {16, 32, 64, 128}, an f32 mask: the
  // tensor-core kernels (AttentionMma.cu), rows H * D apart.
  uint64_t seed = 1300;
  for (DType dtype : {DType::BF16, DType::F16})
    for (int64_t head : {16, 64})
      for (bool causal : {false, true}) {
        Options o;
        o.causal = causal;
        o.headsInner = true;
        Shape shape{{2, 3}, 70, 70, head, head};
        Case fwd = forward(dtype, shape, o, seed);
        setNarrowTolerance(fwd, dtype, false);
        expectConformance(fwd);
        Case bwd = gradient(dtype, shape, o, seed + 1);
        setNarrowTolerance(bwd, dtype, true);
        expectConformance(bwd);
        seed += 2;
      }
  // A padding mask (f32, as mixed precision keeps it) and dropout; more
  // keys than queries.
  for (DType dtype : {DType::BF16, DType::F16}) {
    Options o;
    o.headsInner = true;
    o.hasMask = true;
    o.mask = paddingMask(DType::F32, {100, 128}, 128);
    o.ratio = 0.1;
    Shape shape{{2, 3}, 128, 128, 64, 64};
    Case fwd = forward(dtype, shape, o, seed);
    setNarrowTolerance(fwd, dtype, false);
    expectConformance(fwd);
    Case bwd = gradient(dtype, shape, o, seed + 1);
    setNarrowTolerance(bwd, dtype, true);
    expectConformance(bwd);
    o.hasMask = false;
    o.ratio = 0;
    shape = {{1, 2}, 40, 130, 32, 32};
    fwd = forward(dtype, shape, o, seed + 2);
    setNarrowTolerance(fwd, dtype, false);
    expectConformance(fwd);
    bwd = gradient(dtype, shape, o, seed + 3);
    setNarrowTolerance(bwd, dtype, true);
    expectConformance(bwd);
    seed += 4;
  }
}

TEST(AttentionConformance, HeadsInnerIsThePlainLayoutTransposed) {
  STRATA_REQUIRE_GPU();
  // The same kernels, the same sums: bit for bit, on the tiled kernels
  // (f32, f64) and the tensor-core ones (bf16).
  uint64_t seed = 1400;
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    std::mt19937_64 rng(seed);
    Options o;
    o.headsInner = true;
    o.causal = true;
    o.ratio = 0.2;
    o.hasMask = true;
    o.mask = randomTensor(dtype == DType::BF16 ? DType::F32 : dtype,
                          {2, 1, 1, 70}, rng, -2.0, 0.5);
    Shape shape{{2, 3}, 70, 70, 64, 64};
    expectSameAsPlainLayout(forward(dtype, shape, o, seed + 1));
    expectSameAsPlainLayout(gradient(dtype, shape, o, seed + 2));
    o.hasMask = false;
    o.causal = false;
    o.ratio = 0;
    shape = {{2, 3}, 17, 33, 16, dtype == DType::BF16 ? 16 : 24};
    expectSameAsPlainLayout(forward(dtype, shape, o, seed + 3));
    expectSameAsPlainLayout(gradient(dtype, shape, o, seed + 4));
    seed += 10;
  }
}

TEST(AttentionConformance, HeadsInnerErrors) {
  STRATA_REQUIRE_GPU();
  Options o;
  o.headsInner = true;
  std::mt19937_64 rng(1500);
  // Rank 2 operands have no head axis.
  Case c = forward(DType::F32, {{}, 5, 5, 4, 4}, o, 1501);
  expectConformance(c);
  c = gradient(DType::F32, {{}, 5, 5, 4, 4}, o, 1502);
  expectConformance(c);
  // Heads that differ between the query and the key.
  c = forward(DType::F32, {{2, 3}, 5, 5, 4, 4}, o, 1503);
  c.inputs[1] = randomTensor(DType::F32, {2, 5, 2, 4}, rng);
  expectConformance(c);
  // A result in the plain layout.
  c = forward(DType::F32, {{2, 3}, 5, 7, 4, 4}, o, 1504);
  c.outputs[0] = zeros(DType::F32, {2, 3, 5, 4});
  expectConformance(c);
  c = gradient(DType::F32, {{2, 3}, 5, 7, 4, 4}, o, 1505);
  c.inputs[0] = randomTensor(DType::F32, {2, 3, 5, 4}, rng);
  expectConformance(c);
}

//===----------------------------------------------------------------------===//
// keep_probabilities
//===----------------------------------------------------------------------===//

/// f32 or f64 bytes as doubles.
std::vector<double> valuesOf(DType dtype,
                             const std::vector<unsigned char> &bytes) {
  std::vector<double> out;
  if (dtype == DType::F32) {
    out.resize(bytes.size() / 4);
    for (size_t i = 0; i < out.size(); ++i) {
      float x;
      std::memcpy(&x, bytes.data() + i * 4, 4);
      out[i] = x;
    }
  } else {
    out.resize(bytes.size() / 8);
    std::memcpy(out.data(), bytes.data(), out.size() * 8);
  }
  return out;
}

/// `c` (keep_probabilities) without it: one result, or no probabilities
/// operand.
Case withoutKeep(const Case &c) {
  Case plain = c;
  plain.attrs.set("keep_probabilities", int64_t(0));
  if (c.op == "graph.attention")
    plain.outputs.pop_back();
  else
    plain.inputs.pop_back();
  return plain;
}

TEST(AttentionConformance, KeepProbabilities) {
  STRATA_REQUIRE_GPU();
  // Both results against the CPU's (the probabilities over garbage: every
  // column must be written), and the gradient given the CPU's
  // probabilities, in both layouts.
  uint64_t seed = 1600;
  for (DType dtype : {DType::F32, DType::F64})
    for (bool inner : {false, true})
      for (bool causal : {false, true}) {
        Options o;
        o.keep = true;
        o.headsInner = inner;
        o.causal = causal;
        // One partial tile; several, more queries than keys, D != Dv; fewer
        // queries than keys (causal: whole key tiles hidden past the rows).
        expectBoth(dtype, {{2, 3}, 17, 17, 16, 16}, o, seed++);
        expectBoth(dtype, {{2, 3}, 70, 45, 24, 40}, o, seed++);
        expectBoth(dtype, {{1, 2}, 33, 100, 8, 8}, o, seed++);
      }
  // Wide heads: small tiles, many key tiles per row.
  Options o;
  o.keep = true;
  o.causal = true;
  expectBoth(DType::F64, {{2}, 20, 37, 256, 256}, o, seed++);
  expectBoth(DType::F32, {{1}, 9, 9, 1000, 8}, o, seed++);
}

TEST(AttentionConformance, KeepProbabilitiesMasksDropout) {
  STRATA_REQUIRE_GPU();
  // The probabilities are the ones before dropout, as the CPU's; the masks
  // (logical [B, H, S, T] order in both layouts) and their -inf keys.
  uint64_t seed = 1700;
  for (DType dtype : {DType::F32, DType::F64})
    for (bool inner : {false, true}) {
      std::mt19937_64 rng(seed);
      Options o;
      o.keep = true;
      o.headsInner = inner;
      expectMasksAndDropout(dtype, o, rng, seed, {{2, 3}, 70, 70, 32, 32});
    }
}

TEST(AttentionConformance, KeepProbabilitiesFullyMaskedRowIsNaN) {
  STRATA_REQUIRE_GPU();
  // Row 3 of the [6, 6] mask is all -inf: its probabilities are NaN (the
  // CPU's softmax of an all -inf row), as its output row is.
  for (DType dtype : {DType::F32, DType::F64})
    for (bool inner : {false, true})
      for (bool causal : {false, true}) {
        Options o;
        o.keep = true;
        o.causal = causal;
        o.headsInner = inner;
        o.hasMask = true;
        o.mask = fullyMaskedRow(dtype);
        expectBoth(dtype, {{2, 3}, 6, 6, 4, 4}, o, 1800 + 2 * inner + causal);
      }
}

TEST(AttentionConformance, KeepProbabilitiesChangeNothingElse) {
  STRATA_REQUIRE_GPU();
  // On the device itself: the output with keep_probabilities is the one
  // without, bit for bit; the probabilities are dropout's operand (each
  // row sums to 1, none of its visible keys dropped to 0, hidden keys 0);
  // the gradient given them is the one without them, bit for bit (the
  // kernels make them again: the tiled ones for f32 / f64, the tensor-core
  // ones for bf16, which must still take the gradient with the
  // probabilities operand after the mask).
  const bool queued = std::getenv("STRATA_CONFORMANCE_QUEUED") != nullptr;
  uint64_t seed = 1900;
  for (DType dtype : {DType::F32, DType::F64, DType::BF16})
    for (bool inner : {false, true})
      for (bool masked : {false, true}) {
        SCOPED_TRACE(std::string(name(dtype)) + (inner ? " heads_inner" : "") +
                     (masked ? " masked" : ""));
        std::mt19937_64 rng(seed);
        Options o;
        o.keep = true;
        o.headsInner = inner;
        o.causal = true;
        o.ratio = 0.5;
        o.hasMask = masked;
        if (masked)
          o.mask = randomTensor(dtype == DType::BF16 ? DType::F32 : dtype,
                                {2, 1, 1, 70}, rng, -2.0, 0.5);
        Shape shape{{2, 3}, 70, 70, 64, 64};
        std::vector<std::vector<unsigned char>> kept, plain;
        if (dtype != DType::BF16) {
          Case fwd = forward(dtype, shape, o, seed + 1);
          Status st = runOnCuda(fwd, kept);
          ASSERT_TRUE(st.isOk()) << st.message();
          st = runOnCuda(withoutKeep(fwd), plain);
          ASSERT_TRUE(st.isOk()) << st.message();
          EXPECT_TRUE(kept[0] == plain[0]) << "the output differs";
          std::vector<double> p = valuesOf(dtype, kept[1]);
          ASSERT_EQ(p.size(), size_t(6 * 70 * 70));
          int64_t zeros = 0, wrongSums = 0, visibleHidden = 0;
          for (int64_t row = 0; row < 6 * 70; ++row) {
            double sum = 0;
            for (int64_t j = 0; j < 70; ++j) {
              double x = p[row * 70 + j];
              sum += x;
              if (j > row % 70)
                visibleHidden += x != 0;
              else
                zeros += !(x > 0);
            }
            wrongSums += !(std::fabs(sum - 1) < 1e-5);
          }
          EXPECT_EQ(zeros, 0) << "visible keys with a probability <= 0";
          EXPECT_EQ(wrongSums, 0) << "rows that do not sum to 1";
          EXPECT_EQ(visibleHidden, 0) << "hidden keys with a probability";
        }
        if (dtype == DType::BF16 && queued)
          continue; // the CPU's gradient reads the rounded probabilities
        Case bwd = gradient(dtype, shape, o, seed + 2);
        Status st = runOnCuda(bwd, kept);
        ASSERT_TRUE(st.isOk()) << st.message();
        st = runOnCuda(withoutKeep(bwd), plain);
        ASSERT_TRUE(st.isOk()) << st.message();
        ASSERT_EQ(kept.size(), plain.size());
        for (size_t r = 0; r < kept.size(); ++r)
          EXPECT_TRUE(kept[r] == plain[r]) << "gradient " << r << " differs";
        seed += 3;
      }
}

TEST(AttentionConformance, KeepProbabilitiesNarrow) {
  STRATA_REQUIRE_GPU();
  // bf16 / fp16 with a tensor-core head dim: the forward with
  // keep_probabilities takes the widened f32 kernels (they write the
  // probabilities), the gradient the tensor-core ones, which make the
  // probabilities again (the CPU reads its kept ones, rounded to the
  // element type).
  uint64_t seed = 2000;
  for (DType dtype : {DType::BF16, DType::F16})
    for (bool inner : {false, true})
      for (bool causal : {false, true}) {
        Options o;
        o.keep = true;
        o.causal = causal;
        o.headsInner = inner;
        if (causal) {
          o.hasMask = true;
          o.mask = paddingMask(DType::F32, {50, 70}, 70);
          o.ratio = 0.1;
        }
        Shape shape{{2, 3}, 70, 70, 64, 64};
        Case fwd = forward(dtype, shape, o, seed);
        setNarrowTolerance(fwd, dtype, false);
        expectConformance(fwd);
        Case bwd = gradient(dtype, shape, o, seed + 1);
        setNarrowTolerance(bwd, dtype, true);
        expectConformance(bwd);
        seed += 2;
      }
}

TEST(AttentionConformance, KeepProbabilitiesEmptyDimsAndErrors) {
  STRATA_REQUIRE_GPU();
  Options o;
  o.keep = true;
  for (DType dtype : {DType::F32, DType::F64}) {
    // Dv = 0: an empty output, probabilities all the same; D = 0; no keys,
    // no queries, an empty batch.
    expectBoth(dtype, {{2}, 5, 7, 3, 0}, o, 2101);
    expectBoth(dtype, {{2}, 5, 7, 0, 4}, o, 2102);
    expectConformance(forward(dtype, {{2}, 9, 0, 4, 4}, o, 2103));
    expectConformance(gradient(dtype, {{2}, 9, 0, 4, 4}, o, 2104));
    expectBoth(dtype, {{2}, 0, 5, 4, 4}, o, 2105);
    expectBoth(dtype, {{0, 2}, 5, 5, 3, 3}, o, 2106);
  }
  Shape shape{{2}, 5, 7, 4, 4};
  // The forward without its second result, or with one of another shape or
  // element type.
  Case c = forward(DType::F32, shape, o, 2110);
  c.outputs.pop_back();
  expectConformance(c);
  c = forward(DType::F32, shape, o, 2111);
  c.outputs[1] = zeros(DType::F32, {2, 5, 6});
  expectConformance(c);
  c = forward(DType::F32, shape, o, 2112);
  c.outputs[1] = zeros(DType::F64, {2, 5, 7});
  expectConformance(c);
  // heads_inner: the probabilities stay [B, H, S, T].
  Options inner = o;
  inner.headsInner = true;
  c = forward(DType::F32, {{2, 3}, 5, 7, 4, 4}, inner, 2113);
  c.outputs[1] = zeros(DType::F32, {2, 5, 3, 7});
  expectConformance(c);
  // The gradient without its probabilities, or with ones of another shape.
  c = gradient(DType::F32, shape, o, 2114);
  c.inputs.pop_back();
  expectConformance(c);
  c = gradient(DType::F32, shape, o, 2115);
  c.inputs.back() = zeros(DType::F32, {2, 7, 5});
  expectConformance(c);
  c = gradient(DType::F32, {{2, 3}, 5, 7, 4, 4}, inner, 2116);
  c.inputs.back() = zeros(DType::F32, {2, 5, 3, 7});
  expectConformance(c);
}

} // namespace
} // namespace strata::runtime::conformance
