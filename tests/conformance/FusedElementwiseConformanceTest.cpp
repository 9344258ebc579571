//===- FusedElementwiseConformanceTest.cpp - Fused chains vs the CPU ------===//
//
// graph.fused_elementwise on the CUDA backend against the CPU's fused
// kernel: GPT's chains (a product's bf16 result widened and added to the
// residual; gelu between casts; gelu's gradient between casts), a row and a
// scalar broadcast, several results, f64, every unary instruction, and the
// CPU's errors.
//
// Tolerances: f32 results rtol 2e-5 (CUDA's expf / erff / tanhf), bf16
// results 8e-3 (one ulp: the f32 values before the rounding differ in the
// last bits), f64 1e-12.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "FusedProgramText.h"

#include <cmath>
#include <random>

namespace strata::runtime::conformance {
namespace {

Case fused(const std::string &program, std::vector<int64_t> results,
           std::vector<CaseTensor> inputs, std::vector<CaseTensor> outputs) {
  Case c;
  c.op = "graph.fused_elementwise";
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  c.attrs.set("program", testing::assembleFusedProgram(program));
  c.attrs.set("result_values", std::move(results));
  c.rtol = 2e-5;
  c.atol = 1e-6;
  return c;
}

TEST(FusedElementwiseConformance, GptChains) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  std::vector<int64_t> shape = {4, 128, 96};
  // Residual: widen the product's bf16 result and add.
  expectConformance(fused("cast_wide 0; add 1 2", {3},
                          {randomTensor(DType::BF16, shape, rng, -2, 2),
                           randomTensor(DType::F32, shape, rng, -2, 2)},
                          {zeros(DType::F32, shape)}));
  // MLP: widen, gelu, narrow; the widened input and gelu's output kept
  // for the backward pass.
  Case mlp = fused("cast_wide 0; gelu_tanh 1; cast_bf16 2", {1, 2, 3},
                   {randomTensor(DType::BF16, shape, rng, -3, 3)},
                   {zeros(DType::F32, shape), zeros(DType::F32, shape),
                    zeros(DType::BF16, shape)});
  mlp.rtol = 8e-3;
  mlp.atol = 1e-3;
  expectConformance(mlp);
  // Its gradient.
  Case grad = fused("cast_wide 0; grad_gelu 3 1 2; cast_bf16 4", {5},
                    {randomTensor(DType::BF16, shape, rng),
                     randomTensor(DType::F32, shape, rng, -3, 3),
                     randomTensor(DType::F32, shape, rng, -3, 3)},
                    {zeros(DType::BF16, shape)});
  grad.rtol = 8e-3;
  grad.atol = 1e-3;
  expectConformance(grad);
}

TEST(FusedElementwiseConformance, BroadcastAndDoubles) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(12);
  expectConformance(fused("sub 0 1; mul 3 2; exp 4; max 5 0", {6},
                          {randomTensor(DType::F32, {7, 33, 5}, rng),
                           randomTensor(DType::F32, {33, 1}, rng),
                           randomTensor(DType::F32, {}, rng)},
                          {zeros(DType::F32, {7, 33, 5})}));
  Case f64 = fused("div 0 1; log 2; sqrt 0", {3, 4},
                   {randomTensor(DType::F64, {100}, rng, 0.5, 2),
                    randomTensor(DType::F64, {1}, rng, 0.5, 2)},
                   {zeros(DType::F64, {100}), zeros(DType::F64, {100})});
  f64.rtol = 1e-12;
  f64.atol = 1e-12;
  expectConformance(f64);
}

TEST(FusedElementwiseConformance, CausalScores) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(15);
  // Attention as matmul / softmax: widen the bf16 scores, scale, mask.
  std::vector<int64_t> scores = {2, 4, 64, 64};
  expectConformance(fused("cast_wide 0; mul 4 1; where 2 3 5", {6},
                          {randomTensor(DType::BF16, scores, rng),
                           randomTensor(DType::F32, {}, rng),
                           randomTensor(DType::I1, {1, 1, 64, 64}, rng),
                           fromValues(DType::F32, {}, {-INFINITY})},
                          {zeros(DType::F32, scores)}));
}

TEST(FusedElementwiseConformance, EveryInstruction) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(13);
  for (const char *unary :
       {"neg", "abs", "exp", "tanh", "erf", "sin", "cos", "relu", "sigmoid",
        "softplus", "hard_swish", "gelu", "gelu_tanh", "reciprocal",
        "softsign"})
    expectConformance(fused(std::string(unary) + " 0", {1},
                            {randomTensor(DType::F32, {999}, rng, -4, 4)},
                            {zeros(DType::F32, {999})}));
  for (const char *positive : {"log", "sqrt"})
    expectConformance(fused(std::string(positive) + " 0", {1},
                            {randomTensor(DType::F32, {999}, rng, 0.1, 4)},
                            {zeros(DType::F32, {999})}));
  for (const char *grad : {"grad_tanh", "grad_sigmoid", "grad_relu",
                           "grad_gelu_tanh", "grad_softplus", "grad_exp",
                           "grad_softsign"})
    expectConformance(fused(std::string(grad) + " 0 1 2", {3},
                            {randomTensor(DType::F32, {999}, rng),
                             randomTensor(DType::F32, {999}, rng, -3, 3),
                             randomTensor(DType::F32, {999}, rng, -1, 1)},
                            {zeros(DType::F32, {999})}));
  for (const char *binary : {"add", "sub", "mul", "div", "max", "min"})
    expectConformance(fused(std::string(binary) + " 0 1", {2},
                            {randomTensor(DType::F32, {999}, rng),
                             randomTensor(DType::F32, {999}, rng, 0.5, 2)},
                            {zeros(DType::F32, {999})}));
  Case f16 = fused("cast_f16 0; cast_wide 1", {2},
                   {randomTensor(DType::F32, {999}, rng, -7e4, 7e4)},
                   {zeros(DType::F32, {999})});
  f16.rtol = f16.atol = 0;
  expectConformance(f16);
}

TEST(FusedElementwiseConformance, Errors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(14);
  expectConformance(fused("frob 0", {1}, {randomTensor(DType::F32, {4}, rng)},
                          {zeros(DType::F32, {4})}));
  expectConformance(fused("exp 0", {1}, {randomTensor(DType::F32, {3}, rng)},
                          {zeros(DType::F32, {4})}));
}

} // namespace
} // namespace strata::runtime::conformance
