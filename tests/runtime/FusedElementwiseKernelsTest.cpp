//===- FusedElementwiseKernelsTest.cpp - graph.fused_elementwise on the CPU ===//
//
// The fused kernel against the unfused kernels it replaces, bit for bit:
// broadcast inputs (a row, a scalar), narrow inputs and results, several
// results, a gradient instruction, f64; and its one-line errors.
//
//===----------------------------------------------------------------------===//

#include "FusedProgramText.h"
#include "KernelTestUtils.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

OwnedTensor randomF32(std::vector<int64_t> shape, std::mt19937 &rng) {
  OwnedTensor t(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> d(-3, 3);
  for (int64_t i = 0, n = t.view().numel(); i < n; ++i)
    t.view().as<float>()[i] = d(rng);
  return t;
}

KernelAttrs program(const std::string &text, std::vector<int64_t> results) {
  KernelAttrs a;
  a.set("program", assembleFusedProgram(text));
  a.set("result_values", std::move(results));
  return a;
}

template <typename T>
void expectBitEqual(const OwnedTensor &a, const OwnedTensor &b) {
  ASSERT_EQ(a.view().bytes(), b.view().bytes());
  EXPECT_EQ(std::memcmp(a.view().data, b.view().data, a.view().bytes()), 0);
}

TEST(FusedElementwiseKernels, EqualsTheUnfusedChain) {
  std::mt19937 rng(5);
  const std::vector<int64_t> shape = {3, 70, 9};
  OwnedTensor y = randomF32(shape, rng), row = randomF32({9}, rng),
              scale = randomF32({}, rng);
  // y -> bf16 (a product's narrow result), then: widen, + row, gelu_tanh,
  // * scale, -> bf16; the sum and the bf16 are returned.
  OwnedTensor narrow(DType::BF16, shape);
  ASSERT_TRUE(runCpuKernel("graph.cast", {&y}, {&narrow}));
  OwnedTensor wide(DType::F32, shape), sum(DType::F32, shape),
      act(DType::F32, shape), scaled(DType::F32, shape),
      out(DType::BF16, shape);
  KernelAttrs tanh;
  tanh.set("approximate", std::string("tanh"));
  ASSERT_TRUE(runCpuKernel("graph.cast", {&narrow}, {&wide}));
  ASSERT_TRUE(runCpuKernel("graph.add", {&wide, &row}, {&sum}));
  ASSERT_TRUE(runCpuKernel("graph.gelu", {&sum}, {&act}, tanh));
  ASSERT_TRUE(runCpuKernel("graph.mul", {&act, &scale}, {&scaled}));
  ASSERT_TRUE(runCpuKernel("graph.cast", {&scaled}, {&out}));

  OwnedTensor fusedSum(DType::F32, shape), fusedOut(DType::BF16, shape);
  Status s = runCpuKernel(
      "graph.fused_elementwise", {&narrow, &row, &scale},
      {&fusedSum, &fusedOut},
      program("cast_wide 0; add 3 1; gelu_tanh 4; mul 5 2; cast_bf16 6",
              {4, 7}));
  ASSERT_TRUE(s) << s.message();
  expectBitEqual<float>(fusedSum, sum);
  expectBitEqual<uint16_t>(fusedOut, out);
}

TEST(FusedElementwiseKernels, GradientAndDoubles) {
  std::mt19937 rng(6);
  OwnedTensor dy = randomF32({1000}, rng), x = randomF32({1000}, rng),
              y(DType::F32, {1000}), dx(DType::F32, {1000}),
              neg(DType::F32, {1000});
  ASSERT_TRUE(runCpuKernel("graph.gelu", {&x}, {&y}));
  KernelAttrs gelu;
  gelu.set("kind", std::string("gelu"));
  ASSERT_TRUE(runCpuKernel("graph.unary_grad", {&dy, &x, &y}, {&dx}, gelu));
  ASSERT_TRUE(runCpuKernel("graph.neg", {&dx}, {&neg}));
  OwnedTensor fused(DType::F32, {1000});
  ASSERT_TRUE(runCpuKernel("graph.fused_elementwise", {&dy, &x, &y}, {&fused},
                           program("grad_gelu 0 1 2; neg 3", {4})));
  expectBitEqual<float>(fused, neg);

  OwnedTensor a = f64({2, 2}, {1, 2, 3, 4}), b = f64({2, 1}, {10, 20});
  OwnedTensor e(DType::F64, {2, 2});
  ASSERT_TRUE(runCpuKernel("graph.fused_elementwise", {&a, &b}, {&e},
                           program("sub 0 1; exp 2; log 3", {4})));
  EXPECT_EQ(e.values<double>(),
            (std::vector<double>{std::log(std::exp(1.0 - 10)),
                                 std::log(std::exp(2.0 - 10)),
                                 std::log(std::exp(3.0 - 20)),
                                 std::log(std::exp(4.0 - 20))}));
}

TEST(FusedElementwiseKernels, WhereReadsAnI1Condition) {
  // A causal mask [1, 3, 3] over scores [2, 3, 3]: the scores scaled, then
  // -inf above the diagonal.
  std::mt19937 rng(7);
  OwnedTensor scores = randomF32({2, 3, 3}, rng), scale = f32({}, {0.25f}),
              fill = f32({}, {-INFINITY});
  OwnedTensor mask = i1({1, 3, 3}, {0, 1, 1, 0, 0, 1, 0, 0, 0});
  OwnedTensor scaled(DType::F32, {2, 3, 3}), want(DType::F32, {2, 3, 3});
  ASSERT_TRUE(runCpuKernel("graph.mul", {&scores, &scale}, {&scaled}));
  ASSERT_TRUE(runCpuKernel("graph.where", {&mask, &fill, &scaled}, {&want}));
  OwnedTensor got(DType::F32, {2, 3, 3});
  Status s = runCpuKernel("graph.fused_elementwise",
                          {&scores, &scale, &mask, &fill}, {&got},
                          program("mul 0 1; where 2 3 4", {5}));
  ASSERT_TRUE(s) << s.message();
  expectBitEqual<float>(got, want);
}

TEST(FusedElementwiseKernels, BadProgramsSayWhatIsWrong) {
  OwnedTensor x = f32({4}, {1, 2, 3, 4}), y(DType::F32, {4});
  OwnedTensor z(DType::F32, {3}), i = i64({4}, {1, 2, 3, 4});
  auto message = [&](std::vector<const OwnedTensor *> in,
                     std::vector<OwnedTensor *> out, const std::string &text,
                     std::vector<int64_t> results) {
    Status s = runCpuKernel("graph.fused_elementwise", in, out,
                            program(text, std::move(results)));
    EXPECT_FALSE(s.isOk());
    return s.message();
  };
  EXPECT_EQ(message({&x}, {&y}, "exp 0; frob 1", {2}),
            "graph.fused_elementwise: instruction 1 has unknown opcode 255");
  EXPECT_EQ(message({&x}, {&y}, "add 0", {1}),
            "graph.fused_elementwise: instruction 0: operand -1 is not a "
            "value defined before it");
  EXPECT_EQ(message({&x}, {&y}, "exp 0 0", {1}),
            "graph.fused_elementwise: instruction 0 takes 1 operands");
  EXPECT_EQ(message({&x}, {&y}, "exp 1", {1}),
            "graph.fused_elementwise: instruction 0: operand 1 is not a value "
            "defined before it");
  EXPECT_EQ(message({&x}, {&y}, "exp 0", {5}),
            "graph.fused_elementwise: result value 5 is not defined");
  EXPECT_EQ(message({&z}, {&y}, "exp 0", {1}),
            "graph.fused_elementwise: input f32[3] does not broadcast to [4]");
  EXPECT_EQ(message({&i}, {&y}, "exp 0", {1}),
            "graph.fused_elementwise: input i64[4] is not a float or i1 "
            "tensor");
}

} // namespace

/// Codegen writes the opcode and gradient-kind numbers into artifacts: a
/// number, once given, must never change (rows of ElementwiseOps.def are
/// only appended), or a runtime would misread an older artifact.
TEST(FusedProgram, NumbersNeverChange) {
  const std::pair<const char *, std::pair<int64_t, int64_t>> want[] = {
      {"gelu", {0, 0}}, {"gelu_tanh", {1, 0}}, {"cast_wide", {2, 0}},
      {"cast_bf16", {3, 0}}, {"cast_f16", {4, 0}}, {"where", {6, 0}},
      {"add", {32, 0}}, {"sub", {33, 0}}, {"mul", {34, 0}}, {"div", {35, 0}},
      {"max", {37, 0}}, {"min", {38, 0}},
      {"abs", {64, 0}}, {"exp", {65, 0}}, {"log", {66, 0}}, {"sqrt", {67, 0}},
      {"reciprocal", {68, 0}}, {"tanh", {69, 0}}, {"erf", {70, 0}},
      {"sin", {71, 0}}, {"cos", {72, 0}}, {"relu", {73, 0}},
      {"sigmoid", {74, 0}}, {"softplus", {75, 0}}, {"hard_swish", {80, 0}},
      {"neg", {82, 0}}, {"softsign", {83, 0}},
      {"grad_abs", {5, 0}}, {"grad_exp", {5, 1}}, {"grad_log", {5, 2}},
      {"grad_sqrt", {5, 3}}, {"grad_reciprocal", {5, 4}},
      {"grad_tanh", {5, 5}}, {"grad_erf", {5, 6}}, {"grad_sin", {5, 7}},
      {"grad_cos", {5, 8}}, {"grad_relu", {5, 9}}, {"grad_sigmoid", {5, 10}},
      {"grad_softplus", {5, 11}}, {"grad_gelu", {5, 12}},
      {"grad_hard_swish", {5, 16}}, {"grad_neg", {5, 18}},
      {"grad_softsign", {5, 19}},
      {"grad_gelu_tanh", {5, 128}}};
  for (const auto &[name, numbers] : want) {
    std::vector<int64_t> code = assembleFusedProgram(name);
    ASSERT_EQ(code.size(), size_t(kFusedCodeWidth)) << name;
    EXPECT_EQ(std::make_pair(code[0], code[1]), numbers) << name;
  }
  // The ops with attributes have numbers no fused program may use.
  EXPECT_FALSE(isFusedOpcode(kFusedUnaryBase + int(Unary::Clip)));
  EXPECT_FALSE(isFusedOpcode(kFusedBinaryBase + int(Binary::Pow)));
  EXPECT_FALSE(isUnaryGradKind(127));
}
