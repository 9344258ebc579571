//===- OptimizerConformanceTest.cpp - AdamW and SGD: CUDA vs CPU ----------===//
//
// graph.adamw_update and graph.sgd_update on both backends, in place (every
// result aliasing its operand, as codegen emits them) and out of place,
// over sizes of 1 to a million, f32 and f64, steps 1 to 1000, grad scales
// 1, 0.5, inf and NaN (a non-finite scale skips the update), every SGD
// variant, and the CPU's errors; multi-tensor updates (strata-group-updates)
// of 40 parameters, more than one launch's batch. The CUDA kernels do the CPU's arithmetic
// operation for operation (only the bias corrections' pow may differ in
// the last bit of a double), so the bound is tighter than the suite's
// elementwise one: f32 rtol 1e-6 atol 1e-7, f64 rtol 1e-12. step < 1 (an
// error on the CPU, NaN on CUDA) is checked on the device alone.
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

KernelAttrs adamwAttrs(double weightDecay = 0.1) {
  KernelAttrs a;
  a.set("beta1", 0.9);
  a.set("beta2", 0.999);
  a.set("eps", 1e-8);
  a.set("weight_decay", weightDecay);
  return a;
}

KernelAttrs sgdAttrs(double momentum, double dampening, double weightDecay,
                     bool nesterov) {
  KernelAttrs a;
  a.set("momentum", momentum);
  a.set("dampening", dampening);
  a.set("weight_decay", weightDecay);
  a.set("nesterov", int64_t(nesterov));
  return a;
}

std::vector<CaseTensor> scalars(double lr, int64_t step, double gradScale) {
  return {fromValues(DType::F64, {}, {lr}), fromValues(DType::I64, {}, {double(step)}),
          fromValues(DType::F32, {}, {gradScale})};
}

Case adamwCase(DType t, std::vector<int64_t> shape, double lr, int64_t step,
               double gradScale, bool inPlace, std::mt19937_64 &rng,
               double weightDecay = 0.1) {
  Case c;
  c.op = "graph.adamw_update";
  c.inputs = {randomTensor(t, shape, rng), randomTensor(t, shape, rng),
              randomTensor(t, shape, rng, -0.1, 0.1),
              randomTensor(t, shape, rng, 0, 0.01)};
  for (CaseTensor &s : scalars(lr, step, gradScale))
    c.inputs.push_back(std::move(s));
  c.outputs = {zeros(t, shape), zeros(t, shape), zeros(t, shape)};
  if (inPlace)
    c.aliases = {0, 2, 3};
  c.attrs = adamwAttrs(weightDecay);
  c.rtol = t == DType::F32 ? 1e-6 : 1e-12;
  c.atol = t == DType::F32 ? 1e-7 : 1e-15;
  return c;
}

Case sgdCase(DType t, std::vector<int64_t> shape, double lr, int64_t step,
             double gradScale, bool inPlace, KernelAttrs attrs,
             std::mt19937_64 &rng) {
  Case c;
  c.op = "graph.sgd_update";
  c.inputs = {randomTensor(t, shape, rng), randomTensor(t, shape, rng),
              randomTensor(t, shape, rng, -0.5, 0.5)};
  for (CaseTensor &s : scalars(lr, step, gradScale))
    c.inputs.push_back(std::move(s));
  c.outputs = {zeros(t, shape), zeros(t, shape)};
  if (inPlace)
    c.aliases = {0, 2};
  c.attrs = std::move(attrs);
  c.rtol = t == DType::F32 ? 1e-6 : 1e-12;
  c.atol = t == DType::F32 ? 1e-7 : 1e-15;
  return c;
}

/// One multi-tensor update of the parameters of `singles` (one-parameter
/// cases with `perParameter` tensors each and the same scalars), as
/// strata-group-updates merges them.
Case mergeCases(const std::vector<Case> &singles, size_t perParameter) {
  Case c;
  c.op = singles.front().op;
  c.attrs = singles.front().attrs;
  c.rtol = singles.front().rtol;
  c.atol = singles.front().atol;
  for (size_t k = 0; k < singles.size(); ++k) {
    const Case &one = singles[k];
    c.inputs.insert(c.inputs.end(), one.inputs.begin(),
                    one.inputs.begin() + perParameter);
    c.outputs.insert(c.outputs.end(), one.outputs.begin(), one.outputs.end());
    for (int alias : one.aliases)
      c.aliases.push_back(alias < 0 ? -1 : int(k * perParameter) + alias);
  }
  const Case &first = singles.front();
  c.inputs.insert(c.inputs.end(), first.inputs.begin() + perParameter,
                  first.inputs.end());
  return c;
}

/// Shapes of a multi-tensor update: more than a launch's kMaxBatchTensors
/// (32), an empty one, and one of several blocks' chunks.
std::vector<std::vector<int64_t>> multiShapes() {
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < 40; ++i)
    shapes.push_back({1 + (i * 37) % 300});
  shapes[5] = {0};
  shapes[20] = {200003};
  shapes[33] = {64, 65};
  return shapes;
}

TEST(OptimizerConformance, MultiTensorAdamW) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  for (DType t : {DType::F32, DType::F64})
    for (bool inPlace : {true, false})
      for (double scale : {1.0, 0.5, kInf}) {
        std::vector<Case> singles;
        for (const std::vector<int64_t> &shape : multiShapes())
          singles.push_back(adamwCase(t, shape, 1e-3, 4, scale, inPlace, rng));
        expectConformance(mergeCases(singles, 4));
      }
}

TEST(OptimizerConformance, MultiTensorSgd) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  for (DType t : {DType::F32, DType::F64})
    for (bool inPlace : {true, false})
      for (int64_t step : {1, 2}) {
        std::vector<Case> singles;
        for (const std::vector<int64_t> &shape : multiShapes())
          singles.push_back(sgdCase(t, shape, 0.1, step, 0.5, inPlace,
                                    sgdAttrs(0.9, 0.1, 1e-2, true), rng));
        expectConformance(mergeCases(singles, 3));
      }
}

TEST(OptimizerConformance, MultiTensorErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(8);
  std::vector<Case> singles = {
      adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng),
      adamwCase(DType::F64, {4}, 1e-3, 1, 1, false, rng)};
  expectConformance(mergeCases(singles, 4)); // two dtypes
  singles[1] = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  Case partial = mergeCases(singles, 4);
  partial.inputs.erase(partial.inputs.begin() + 7); // 7 tensors
  expectConformance(partial);
  Case results = mergeCases(singles, 4);
  results.outputs.pop_back();
  expectConformance(results);
}

TEST(OptimizerConformance, AdamW) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  for (DType t : {DType::F32, DType::F64})
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{1}, {7}, {768}, {4096}, {3, 5, 7}, {1000003}})
      for (bool inPlace : {true, false}) {
        expectConformance(adamwCase(t, shape, 1e-3, 1, 1.0, inPlace, rng));
        expectConformance(adamwCase(t, shape, 5e-3, 3, 0.5, inPlace, rng));
        expectConformance(
            adamwCase(t, shape, 2e-4, 1000, 0.25, inPlace, rng, 0.0));
      }
}

TEST(OptimizerConformance, AdamWSkipsOnNonFiniteGradScale) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::F32, DType::F64})
    for (double scale : {kInf, -kInf, nan})
      for (bool inPlace : {true, false})
        expectConformance(adamwCase(t, {4096}, 1e-3, 2, scale, inPlace, rng));
}

TEST(OptimizerConformance, Sgd) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::F32, DType::F64})
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{1}, {7}, {768}, {4096}, {1000003}})
      for (bool inPlace : {true, false})
        for (int64_t step : {1, 2})
          for (const KernelAttrs &attrs :
               {sgdAttrs(0, 0, 0, false), sgdAttrs(0.9, 0, 0, false),
                sgdAttrs(0.9, 0.1, 1e-2, false), sgdAttrs(0.9, 0, 1e-2, true),
                sgdAttrs(0, 0, 5e-4, false)})
            for (double scale : {1.0, 0.5, kInf, nan})
              expectConformance(
                  sgdCase(t, shape, 0.1, step, scale, inPlace, attrs, rng));
}

TEST(OptimizerConformance, Errors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(4);
  Case arity = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  arity.inputs.pop_back();
  expectConformance(arity);
  Case shapes = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  shapes.inputs[2] = zeros(DType::F32, {5});
  expectConformance(shapes);
  Case result = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  result.outputs[1] = zeros(DType::F64, {4});
  expectConformance(result);
  Case noEps = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  noEps.attrs = KernelAttrs();
  noEps.attrs.set("beta1", 0.9);
  noEps.attrs.set("beta2", 0.999);
  noEps.attrs.set("weight_decay", 0.0);
  expectConformance(noEps);
  Case lr32 = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  lr32.inputs[4] = fromValues(DType::F32, {}, {1e-3});
  expectConformance(lr32);
  Case stepVector = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  stepVector.inputs[5] = fromValues(DType::I64, {2}, {1, 1});
  expectConformance(stepVector);
  Case ints = adamwCase(DType::F32, {4}, 1e-3, 1, 1, false, rng);
  for (int i = 0; i < 4; ++i)
    ints.inputs[i] = zeros(DType::I32, {4});
  for (CaseTensor &o : ints.outputs)
    o = zeros(DType::I32, {4});
  expectConformance(ints);

  Case sgdNoMomentum = sgdCase(DType::F32, {4}, 0.1, 1, 1, false,
                               sgdAttrs(0, 0, 0, false), rng);
  sgdNoMomentum.attrs = KernelAttrs();
  sgdNoMomentum.attrs.set("dampening", 0.0);
  sgdNoMomentum.attrs.set("weight_decay", 0.0);
  expectConformance(sgdNoMomentum);
  Case sgdScale = sgdCase(DType::F32, {4}, 0.1, 1, 1, false,
                          sgdAttrs(0, 0, 0, false), rng);
  sgdScale.inputs[5] = fromValues(DType::F64, {}, {1});
  expectConformance(sgdScale);
  Case sgdArity = sgdCase(DType::F32, {4}, 0.1, 1, 1, false,
                          sgdAttrs(0, 0, 0, false), rng);
  sgdArity.outputs.pop_back();
  expectConformance(sgdArity);
}


TEST(OptimizerConformance, StepBelowOneIsNaNOnCuda) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  std::vector<Case> cases = {
      adamwCase(DType::F32, {5}, 1e-3, 0, 1.0, true, rng),
      sgdCase(DType::F32, {5}, 0.1, 0, 1.0, true, sgdAttrs(0.9, 0, 0, false),
              rng)};
  for (const Case &c : cases) {
    std::vector<std::vector<unsigned char>> results;
    Status s = runOnCuda(c, results);
    ASSERT_TRUE(s) << s.message();
    for (const auto &bytes : results) {
      std::vector<float> v(bytes.size() / sizeof(float));
      std::memcpy(v.data(), bytes.data(), bytes.size());
      for (float x : v)
        EXPECT_TRUE(std::isnan(x)) << c.op;
    }
  }
}

} // namespace
