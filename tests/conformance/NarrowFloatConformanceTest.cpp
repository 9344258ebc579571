//===- NarrowFloatConformanceTest.cpp - bf16 / fp16 storage vs the CPU ----===//
//
// Mixed precision's narrow storage on the CUDA backend against the CPU's:
// graph.cast to and from bf16 / fp16 (exactly, NaN and overflow included);
// the products on cuBLASLt in bf16 / fp16 (f32 accumulation, the bias
// epilogue); and the ops that widen into stream-ordered f32 buffers
// (attention and its gradient, conv and its gradients, reduce_sum).
//
// Tolerances: casts exactly; bf16 results rtol 8e-3, fp16 rtol 1e-3 (one
// unit in the last place), atol 1e-3 for sums near zero.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <cmath>
#include <limits>
#include <random>

namespace strata::runtime::conformance {
namespace {

constexpr DType kNarrow[] = {DType::BF16, DType::F16};

void setNarrowTolerance(Case &c, DType t) {
  c.rtol = t == DType::BF16 ? 8e-3 : 1e-3;
  c.atol = 1e-3;
}

TEST(NarrowFloatConformance, Casts) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> edge = {0.0,    -0.0,  1.0 + 1.0 / 256, 65504.0,
                              65520.0, -7e4, 3e38,            inf,
                              -inf,    nan,  1e-8,            6e-8};
  for (DType t : kNarrow) {
    Case to;
    to.op = "graph.cast";
    to.inputs = {randomTensor(DType::F32, {1000, 33}, rng, -100, 100)};
    to.outputs = {zeros(t, {1000, 33})};
    to.rtol = to.atol = 0;
    expectConformance(to);
    to.inputs = {fromValues(DType::F32, {int64_t(edge.size())}, edge)};
    to.outputs = {zeros(t, {int64_t(edge.size())})};
    expectConformance(to);

    Case back;
    back.op = "graph.cast";
    back.inputs = {randomTensor(t, {777}, rng, -10, 10)};
    back.outputs = {zeros(DType::F32, {777})};
    back.rtol = back.atol = 0;
    expectConformance(back);
    back.outputs = {zeros(DType::I32, {777})};
    expectConformance(back);
  }
  Case across;
  across.op = "graph.cast";
  across.inputs = {randomTensor(DType::BF16, {513}, rng, -1e5, 1e5)};
  across.outputs = {zeros(DType::F16, {513})};
  across.rtol = across.atol = 0;
  expectConformance(across);
  // To a narrow type from f64: refused with the CPU's message.
  Case wide;
  wide.op = "graph.cast";
  wide.inputs = {randomTensor(DType::F64, {4}, rng)};
  wide.outputs = {zeros(DType::BF16, {4})};
  expectConformance(wide);
}

Case product(const std::string &op, DType t,
             const std::vector<std::vector<int64_t>> &inputs,
             const std::vector<int64_t> &result, std::mt19937_64 &rng) {
  Case c;
  c.op = op;
  for (const auto &shape : inputs)
    c.inputs.push_back(randomTensor(t, shape, rng, -0.25, 0.25));
  c.outputs.push_back(zeros(t, result));
  setNarrowTolerance(c, t);
  return c;
}

TEST(NarrowFloatConformance, Products) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  for (DType t : kNarrow) {
    // GPT-2's shapes, scaled down: a transposed weight with a bias (the
    // epilogue), an odd one (the bias kernel where the epilogue is not
    // aligned), batched matmuls as attention's q k^T.
    Case fc = product("graph.linear", t, {{4, 64, 256}, {768, 256}, {768}},
                      {4, 64, 768}, rng);
    fc.attrs.set("transpose_weight", int64_t(1));
    expectConformance(fc);
    Case odd = product("graph.linear", t, {{7, 33}, {33, 5}, {5}}, {7, 5}, rng);
    expectConformance(odd);
    expectConformance(product("graph.matmul", t,
                              {{2, 4, 64, 32}, {2, 4, 32, 64}}, {2, 4, 64, 64},
                              rng));
    expectConformance(product("graph.matmul", t, {{3, 17, 9}, {9, 33}},
                              {3, 17, 33}, rng));
    Case gw = product("graph.linear_grad_weight", t, {{4, 64, 768}, {4, 64, 256}},
                      {768, 256}, rng);
    gw.attrs.set("transpose_weight", int64_t(1));
    expectConformance(gw);
  }
}

TEST(NarrowFloatConformance, ProductsWithAMisalignedLeadingDimension) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  // A language model's head over an odd vocabulary (GPT-2's 50,257,
  // scaled down): the logits' rows, and the gradient's, are not 16-byte
  // aligned, and at 2^20 elements they are staged through aligned copies
  // (LinearAlgebraKernels.cu): the forward product writes one, the input's
  // and the weight's gradients read one.
  const int64_t m = 64, vocab = 16385, k = 32;
  for (DType t : kNarrow) {
    Case head = product("graph.linear", t, {{m, k}, {vocab, k}}, {m, vocab},
                        rng);
    head.attrs.set("transpose_weight", int64_t(1));
    expectConformance(head);
    expectConformance(
        product("graph.linear", t, {{m, vocab}, {vocab, k}}, {m, k}, rng));
    Case gw = product("graph.linear_grad_weight", t, {{m, vocab}, {m, k}},
                      {vocab, k}, rng);
    gw.attrs.set("transpose_weight", int64_t(1));
    expectConformance(gw);
  }
}

TEST(NarrowFloatConformance, TensorCoreAttention) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  // Head dim 16 / 32 / 64 / 128: the tensor-core kernels (AttentionMma.cu).
  // Their products take P and dS rounded to the element type, so the bars
  // are wider than the widened kernels' (the same bars hold the emulated
  // kernels in tests/runtime/AttentionMmaTest.cpp, whose worst errors are
  // 0.59 of them for the output and 0.58 for the gradients).
  struct Geometry {
    std::vector<int64_t> q, k;
    bool causal;
  };
  const Geometry shapes[] = {{{2, 3, 70, 64}, {2, 3, 70, 64}, true},
                             {{2, 3, 70, 64}, {2, 3, 70, 64}, false},
                             {{1, 2, 40, 32}, {1, 2, 130, 32}, false},
                             {{1, 2, 130, 128}, {1, 2, 40, 128}, true},
                             {{8, 4, 64, 16}, {8, 4, 64, 16}, true},
                             {{4, 12, 256, 64}, {4, 12, 256, 64}, true}};
  for (DType t : kNarrow)
    for (const Geometry &g : shapes) {
      Case fwd;
      fwd.op = "graph.attention";
      fwd.inputs = {randomTensor(t, g.q, rng), randomTensor(t, g.k, rng),
                    randomTensor(t, g.k, rng)};
      fwd.outputs = {zeros(t, g.q)};
      fwd.attrs.set("scale", 1.0 / std::sqrt(double(g.q.back())));
      fwd.attrs.set("causal", int64_t(g.causal));
      fwd.rtol = t == DType::BF16 ? 1.2e-2 : 2e-3;
      fwd.atol = 2e-3;
      expectConformance(fwd);

      Case bwd = fwd;
      bwd.op = "graph.attention_grad";
      bwd.inputs = {randomTensor(t, g.q, rng), fwd.inputs[0], fwd.inputs[1],
                    fwd.inputs[2]};
      bwd.outputs = {zeros(t, g.q), zeros(t, g.k), zeros(t, g.k)};
      bwd.rtol = t == DType::BF16 ? 3e-2 : 6e-3;
      bwd.atol = 6e-3;
      expectConformance(bwd);
    }
  // BERT's padding mask (f32, as mixed precision keeps it) and attention
  // dropout (the CPU's Philox mask, same seed).
  for (DType t : kNarrow)
    for (bool dropout : {false, true}) {
      std::vector<int64_t> qkv = {2, 4, 96, 64};
      CaseTensor mask = zeros(DType::F32, {2, 1, 1, 96});
      for (int64_t j = 80; j < 96; ++j)
        reinterpret_cast<float *>(mask.bytes.data())[96 + j] = -10000.0f;
      Case fwd;
      fwd.op = "graph.attention";
      fwd.inputs = {randomTensor(t, qkv, rng), randomTensor(t, qkv, rng),
                    randomTensor(t, qkv, rng), mask};
      fwd.outputs = {zeros(t, qkv)};
      fwd.attrs.set("scale", 0.125);
      fwd.attrs.set("dropout_ratio", dropout ? 0.1 : 0.0);
      fwd.seed = 77;
      fwd.rtol = t == DType::BF16 ? 1.2e-2 : 2e-3;
      fwd.atol = 2e-3;
      expectConformance(fwd);
      Case bwd = fwd;
      bwd.op = "graph.attention_grad";
      bwd.inputs = {randomTensor(t, qkv, rng), fwd.inputs[0], fwd.inputs[1],
                    fwd.inputs[2], mask};
      bwd.outputs = {zeros(t, qkv), zeros(t, qkv), zeros(t, qkv)};
      bwd.rtol = t == DType::BF16 ? 3e-2 : 6e-3;
      bwd.atol = 6e-3;
      expectConformance(bwd);
    }
}

TEST(NarrowFloatConformance, WidenedOps) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  for (DType t : kNarrow) {
    // Causal attention with an f32 padding mask, forward and backward, of a
    // head dim the tensor-core kernels do not take (24): widened.
    std::vector<int64_t> qkv = {2, 3, 40, 24};
    CaseTensor mask = zeros(DType::F32, {2, 1, 1, 40});
    Case fwd;
    fwd.op = "graph.attention";
    for (int i = 0; i < 3; ++i)
      fwd.inputs.push_back(randomTensor(t, qkv, rng));
    fwd.inputs.push_back(mask);
    fwd.outputs = {zeros(t, qkv)};
    fwd.attrs.set("scale", 0.25);
    fwd.attrs.set("causal", int64_t(1));
    setNarrowTolerance(fwd, t);
    expectConformance(fwd);

    Case bwd = fwd;
    bwd.op = "graph.attention_grad";
    bwd.inputs = {randomTensor(t, qkv, rng), fwd.inputs[0], fwd.inputs[1],
                  fwd.inputs[2], mask};
    bwd.outputs = {zeros(t, qkv), zeros(t, qkv), zeros(t, qkv)};
    expectConformance(bwd);

    // A bias gradient: the sum over every dim but the last.
    Case sum;
    sum.op = "graph.reduce_sum";
    sum.inputs = {randomTensor(t, {4, 64, 96}, rng, -0.25, 0.25)};
    sum.outputs = {zeros(t, {96})};
    sum.attrs.set("axes", std::vector<int64_t>{0, 1});
    sum.attrs.set("keepdims", int64_t(0));
    setNarrowTolerance(sum, t);
    expectConformance(sum);
    // Read narrow (runNarrowReduceSum) on every path of the reduction:
    // wide columns (32 a block), rows, one long row.
    sum.inputs = {randomTensor(t, {16, 4100}, rng, -0.25, 0.25)};
    sum.outputs = {zeros(t, {4100})};
    sum.attrs.set("axes", std::vector<int64_t>{0});
    expectConformance(sum);
    sum.outputs = {zeros(t, {16})};
    sum.attrs.set("axes", std::vector<int64_t>{1});
    expectConformance(sum);
    sum.outputs = {zeros(t, {})};
    sum.attrs.set("axes", std::vector<int64_t>{0, 1});
    expectConformance(sum);

    // A 3x3 conv and its gradients.
    Case conv;
    conv.op = "graph.conv";
    conv.inputs = {randomTensor(t, {2, 4, 9, 9}, rng),
                   randomTensor(t, {8, 4, 3, 3}, rng, -0.25, 0.25),
                   randomTensor(t, {8}, rng)};
    conv.outputs = {zeros(t, {2, 8, 9, 9})};
    conv.attrs.set("strides", std::vector<int64_t>{1, 1});
    conv.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    conv.attrs.set("dilations", std::vector<int64_t>{1, 1});
    conv.attrs.set("groups", int64_t(1));
    setNarrowTolerance(conv, t);
    expectConformance(conv);
    Case gi = conv;
    gi.op = "graph.conv_grad_input";
    gi.inputs = {randomTensor(t, {2, 8, 9, 9}, rng, -0.25, 0.25),
                 conv.inputs[1]};
    gi.outputs = {zeros(t, {2, 4, 9, 9})};
    expectConformance(gi);
    Case gw = conv;
    gw.op = "graph.conv_grad_weight";
    gw.inputs = {gi.inputs[0], conv.inputs[0]};
    gw.outputs = {zeros(t, {8, 4, 3, 3})};
    expectConformance(gw);
  }
}

} // namespace
} // namespace strata::runtime::conformance
