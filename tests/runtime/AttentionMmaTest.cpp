//===- AttentionMmaTest.cpp - Tensor-core attention, emulated on the CPU --===//
//
// The CUDA backend's bf16 / fp16 flash attention
// (runtime/cuda/kernels/AttentionMma.cuh) compiled as host C++ over
// MmaPortable.cuh's emulation (threads, barriers, whole-tile fragments) and
// run against the CPU's graph.attention and graph.attention_grad on the
// same narrow operands: the tiling, the causal and padding masks, the
// additive mask, dropout, the online softmax and the backward's two
// kernels, without a GPU. The bars are the conformance suite's for these
// kernels (bf16 output rtol 1.2e-2, fp16 2e-3, atol 2e-3; the gradients
// 2e-2 / 4e-3, 4e-3): P and dS enter the products rounded to the element
// type. What this cannot check (the WMMA calls themselves, shared-memory
// limits, speed) the conformance suite does on a GPU
// (NarrowFloatConformance.TensorCoreAttention).
//
//===----------------------------------------------------------------------===//

#include "kernels/AttentionMma.cuh"

#include "KernelTestUtils.h"
#include "strata/Runtime/AttentionPlan.h"
#include "strata/Runtime/NarrowFloat.h"

#include <limits>
#include <random>
#include <string>

using namespace strata::runtime;
using namespace strata::runtime::testing;
namespace am = strata::runtime::cuda::attention_mma;
namespace mma = strata::runtime::cuda::mma;

namespace {

struct Shape {
  int64_t batches, s, t;
  bool causal;
  /// A padding mask [batches, 1, t] (0 or -10000, and -inf on one key) and
  /// attention dropout.
  bool mask = false;
  double dropout = 0;
  /// The mask hides every key of the last batch: its rows are NaN (0 / 0),
  /// and so are its gradients, dK and dV included.
  bool hideLastBatch = false;
  /// heads_inner with this many heads (batches = outer * heads): q
  /// [outer, s, heads, D], k and v [outer, t, heads, D]; 0: the plain
  /// layout.
  int64_t heads = 0;
};

/// A narrow tensor of random values in [-1, 1).
OwnedTensor randomNarrow(DType dtype, std::vector<int64_t> shape,
                         std::mt19937 &rng) {
  OwnedTensor t(dtype, std::move(shape));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto *bits = t.view().as<uint16_t>();
  for (int64_t i = 0; i < t.view().numel(); ++i)
    bits[i] = dtype == DType::BF16 ? bf16Bits(u(rng)) : fp16Bits(u(rng));
  return t;
}

std::vector<float> widened(const OwnedTensor &t) {
  std::vector<float> out;
  const auto *bits = t.view().as<uint16_t>();
  for (int64_t i = 0; i < t.view().numel(); ++i)
    out.push_back(t.view().dtype == DType::BF16 ? fromBf16Bits(bits[i])
                                                : fromFp16Bits(bits[i]));
  return out;
}

/// |got - want| <= atol + rtol |want| everywhere; reports the worst.
void expectNear(const OwnedTensor &got, const OwnedTensor &want, double rtol,
                double atol, const std::string &what) {
  std::vector<float> g = widened(got), w = widened(want);
  ASSERT_EQ(g.size(), w.size());
  double worst = 0;
  size_t at = 0, bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i]))
      continue; // NaN where the CPU has NaN
    double excess = std::abs(double(g[i]) - w[i]) - (atol + rtol * std::abs(w[i]));
    if (!(excess <= 0))
      ++bad;
    if (!(excess <= worst)) {
      worst = excess;
      at = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << g.size()
                     << " outside the bar; worst at " << at << ": " << g[at]
                     << " vs " << w[at];
}

template <typename E, int D>
void checkAttention(DType dtype, const Shape &shape, std::mt19937 &rng) {
  std::string what = std::string(name(dtype)) + " D=" + std::to_string(D) +
                     " S=" + std::to_string(shape.s) +
                     " T=" + std::to_string(shape.t) +
                     (shape.causal ? " causal" : "") +
                     (shape.mask ? " mask" : "") +
                     (shape.dropout > 0 ? " dropout" : "") +
                     (shape.heads ? " heads_inner" : "");
  SCOPED_TRACE(what);
  const int64_t heads = shape.heads, outer = heads ? shape.batches / heads : 0;
  std::vector<int64_t> qShape = {shape.batches, shape.s, D},
                       kShape = {shape.batches, shape.t, D};
  if (heads) {
    ASSERT_EQ(outer * heads, shape.batches);
    qShape = {outer, shape.s, heads, D};
    kShape = {outer, shape.t, heads, D};
  }
  OwnedTensor q = randomNarrow(dtype, qShape, rng);
  OwnedTensor k = randomNarrow(dtype, kShape, rng);
  OwnedTensor v = randomNarrow(dtype, kShape, rng);
  OwnedTensor dy = randomNarrow(dtype, qShape, rng);
  const double scale = 1.0 / std::sqrt(double(D));
  KernelAttrs attrs;
  attrs.set("scale", scale);
  attrs.set("causal", int64_t(shape.causal));
  attrs.set("dropout_ratio", shape.dropout);
  if (heads)
    attrs.set("heads_inner", int64_t(1));
  const uint64_t seed = 0x5eed1234abcdull;
  // Padding: the last third of each batch's keys hidden by -10000, one by
  // -inf (mixed precision keeps masks f32).
  OwnedTensor mask(DType::F32,
                   heads ? std::vector<int64_t>{outer, heads, 1, shape.t}
                         : std::vector<int64_t>{shape.batches, 1, shape.t});
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < shape.batches; ++b)
    for (int64_t j = 0; j < shape.t; ++j)
      mask.view().as<float>()[b * shape.t + j] =
          shape.hideLastBatch && b == shape.batches - 1 ? -inf
          : j == 1 && shape.t > 2                       ? -inf
          : j >= shape.t - shape.t / 3 - b              ? -10000.0f
                                                        : 0.0f;
  std::vector<const OwnedTensor *> fwdIn = {&q, &k, &v},
                                   bwdIn = {&dy, &q, &k, &v};
  if (shape.mask) {
    fwdIn.push_back(&mask);
    bwdIn.push_back(&mask);
  }

  // The CPU's results (its narrow adapter: f32 attention, rounded once).
  OwnedTensor want(dtype, qShape), wantDq(dtype, qShape),
      wantDk(dtype, kShape), wantDv(dtype, kShape);
  ASSERT_TRUE(runCpuKernel("graph.attention", fwdIn, {&want}, attrs, seed));
  ASSERT_TRUE(runCpuKernel("graph.attention_grad", bwdIn,
                           {&wantDq, &wantDk, &wantDv}, attrs, seed));

  // The tensor-core kernels, emulated.
  OwnedTensor out(dtype, qShape), dq(dtype, qShape), dk(dtype, kShape),
      dv(dtype, kShape);
  std::vector<float> stats(size_t(shape.batches * shape.s * 2), -7.0f);
  am::MmaParams<E> p;
  p.q = q.view().as<E>();
  p.k = k.view().as<E>();
  p.v = v.view().as<E>();
  p.dy = dy.view().as<E>();
  p.out = out.view().as<E>();
  p.dq = dq.view().as<E>();
  p.dk = dk.view().as<E>();
  p.dv = dv.view().as<E>();
  p.stats = stats.data();
  p.batches = shape.batches;
  p.s = shape.s;
  p.t = shape.t;
  p.scale = float(scale);
  p.causal = shape.causal;
  p.headsInner = heads != 0;
  p.heads = heads ? heads : 1;
  p.ratio = shape.dropout;
  p.dropScale = 1.0f / float(1.0 - shape.dropout);
  p.seed = seed;
  if (shape.mask) {
    // The mask's layout as the CUDA launcher takes it (AttentionPlan.h).
    AttentionPlan plan;
    plan.batchShape = {shape.batches};
    plan.maskStrides = {shape.t, 0, 1};
    if (heads) { // [outer, heads] over the logical scores
      plan.batchShape = {outer, heads};
      plan.maskStrides = {heads * shape.t, shape.t, 0, 1};
    }
    MaskLayout layout = maskLayout(plan);
    ASSERT_EQ(layout.sizes.size(), shape.batches > 1 ? 1u : 0u);
    p.mask = mask.view().as<float>();
    p.maskDims = int(layout.sizes.size());
    for (size_t i = 0; i < layout.sizes.size(); ++i) {
      p.maskSize[i] = layout.sizes[i];
      p.maskStride[i] = layout.strides[i];
    }
    p.maskRow = layout.row;
    p.maskCol = layout.col;
  }
  mma::emulateLaunch(am::forwardBlocks(p), am::kThreads,
                     am::ForwardLayout<D>::bytes,
                     [&](int64_t b, int t, unsigned char *shared) {
                       am::forwardBlock<E, D>(p, b, t, shared);
                     });
  mma::emulateLaunch(am::forwardBlocks(p), am::kThreads,
                     am::GradQueryLayout<D>::bytes,
                     [&](int64_t b, int t, unsigned char *shared) {
                       am::gradQueryBlock<E, D>(p, b, t, shared);
                     });
  mma::emulateLaunch(am::gradKeyBlocks(p), am::kThreads,
                     am::GradKeyLayout<D>::bytes,
                     [&](int64_t b, int t, unsigned char *shared) {
                       am::gradKeyBlock<E, D>(p, b, t, shared);
                     });
  bool bf16 = dtype == DType::BF16;
  // The bars of NarrowFloatConformance.TensorCoreAttention: P enters the
  // product rounded to the element type (as in FlashAttention).
  expectNear(out, want, bf16 ? 1.2e-2 : 2e-3, 2e-3, "output");
  expectNear(dq, wantDq, bf16 ? 2e-2 : 4e-3, 4e-3, "dq");
  expectNear(dk, wantDk, bf16 ? 2e-2 : 4e-3, 4e-3, "dk");
  expectNear(dv, wantDv, bf16 ? 2e-2 : 4e-3, 4e-3, "dv");
}

// Shapes that cross the 64-row tiles, leave partial tiles on both sides,
// and have fewer or more keys than queries.
const Shape kShapes[] = {{2, 70, 70, false}, {2, 70, 70, true},
                         {1, 40, 100, false}, {1, 100, 40, true},
                         {1, 64, 64, true},  {1, 1, 3, false}};

TEST(AttentionMma, Bf16HeadDim64MatchesCpu) {
  std::mt19937 rng(1);
  for (const Shape &s : kShapes)
    checkAttention<mma::Bf16, 64>(DType::BF16, s, rng);
}

TEST(AttentionMma, Fp16HeadDim32MatchesCpu) {
  std::mt19937 rng(2);
  for (const Shape &s : kShapes)
    checkAttention<mma::Fp16, 32>(DType::F16, s, rng);
}

TEST(AttentionMma, MaskAndDropoutMatchCpu) {
  // BERT's padding mask; GPT fine-tuning's attention dropout (the CPU's
  // Philox mask, drawn by both); both with causal.
  std::mt19937 rng(5);
  checkAttention<mma::Bf16, 64>(DType::BF16, {2, 70, 70, false, true, 0.0},
                                rng);
  checkAttention<mma::Fp16, 32>(DType::F16, {2, 70, 90, true, false, 0.1},
                                rng);
  checkAttention<mma::Bf16, 16>(DType::BF16, {2, 64, 64, true, true, 0.2},
                                rng);
}

TEST(AttentionMma, FullyMaskedRowsAreNaNAsOnCpu) {
  // Every key of the second batch hidden: NaN output rows, and NaN in dQ,
  // dK and dV of that batch, as the CPU's softmax gives (the first batch
  // stays finite).
  std::mt19937 rng(6);
  Shape s{2, 70, 70, false, true, 0.0};
  s.hideLastBatch = true;
  checkAttention<mma::Bf16, 64>(DType::BF16, s, rng);
  s.causal = true;
  checkAttention<mma::Fp16, 32>(DType::F16, s, rng);
}

TEST(AttentionMma, HeadDim16MatchesCpu) {
  // models/gpt_tiny.onnx's heads.
  std::mt19937 rng(4);
  checkAttention<mma::Bf16, 16>(DType::BF16, {2, 64, 64, true}, rng);
  checkAttention<mma::Fp16, 16>(DType::F16, {1, 70, 70, true}, rng);
}

TEST(AttentionMma, Bf16HeadDim128MatchesCpu) {
  std::mt19937 rng(3);
  checkAttention<mma::Bf16, 128>(DType::BF16, {1, 65, 65, true}, rng);
}

TEST(AttentionMma, HeadsInnerMatchesCpu) {
  // q [outer, S, H, D]: a batch matrix's rows H * D apart, read and
  // written in place; the mask and dropout by the logical batch matrix.
  std::mt19937 rng(7);
  Shape s{6, 70, 70, false};
  s.heads = 3;
  checkAttention<mma::Bf16, 64>(DType::BF16, s, rng);
  s = {4, 70, 90, true, true, 0.1};
  s.heads = 2;
  checkAttention<mma::Fp16, 32>(DType::F16, s, rng);
  s = {3, 64, 40, true, false, 0.0};
  s.heads = 3;
  checkAttention<mma::Bf16, 16>(DType::BF16, s, rng);
}

TEST(AttentionMma, SharedMemoryFitsAnH100) {
  // 227 KB of opt-in shared memory per block on sm_90.
  EXPECT_LE(am::ForwardLayout<128>::bytes, 227u * 1024);
  EXPECT_LE(am::GradQueryLayout<128>::bytes, 227u * 1024);
  EXPECT_LE(am::GradKeyLayout<128>::bytes, 227u * 1024);
  EXPECT_EQ(am::ForwardLayout<64>::o % 32, 0u);
  EXPECT_EQ(am::GradKeyLayout<64>::dv % 32, 0u);
}

} // namespace
