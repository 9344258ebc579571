//===- ElementwiseGradKernelsTest.cpp - unary_grad, sum_squares, copy -----===//
//
// graph.unary_grad against finite differences of every forward unary kernel
// (away from kinks), PyTorch's values at the kinks (torch 1.13, f32:
//   x = torch.tensor([...], requires_grad=True); f(x).sum().backward()),
// graph.sum_squares, runtime.copy, and graph.add/sub/mul writing into one of
// their operands (gradient accumulation).
//
//===----------------------------------------------------------------------===//

#include "GradKernelTestUtils.h"

#include <cmath>
#include <limits>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

struct UnaryCase {
  std::string kind;
  KernelAttrs attrs;
  double lo, hi;
  std::vector<double> kinks; // x values where f' jumps
};

KernelAttrs floats(std::initializer_list<std::pair<const char *, double>> kv) {
  KernelAttrs a;
  for (auto &[k, v] : kv)
    a.set(k, v);
  return a;
}

std::vector<UnaryCase> unaryCases() {
  KernelAttrs none, gelu, geluTanh;
  gelu.set("approximate", std::string("none"));
  geluTanh.set("approximate", std::string("tanh"));
  return {
      {"neg", none, -2, 2, {}},
      {"abs", none, -2, 2, {0}},
      {"exp", none, -2, 2, {}},
      {"log", none, 0.3, 3, {}},
      {"sqrt", none, 0.3, 3, {}},
      {"reciprocal", none, 0.3, 3, {}},
      {"tanh", none, -2, 2, {}},
      {"erf", none, -2, 2, {}},
      {"sin", none, -3, 3, {}},
      {"cos", none, -3, 3, {}},
      {"relu", none, -2, 2, {0}},
      {"sigmoid", none, -4, 4, {}},
      {"softplus", none, -5, 5, {}},
      {"gelu", gelu, -3, 3, {}},
      {"gelu", geluTanh, -3, 3, {}},
      {"leaky_relu", floats({{"alpha", 0.1}}), -2, 2, {0}},
      {"elu", floats({{"alpha", 1.3}}), -3, 2, {0}},
      {"hard_sigmoid",
       floats({{"alpha", 0.25}, {"beta", 0.4}}),
       -3,
       4,
       {-1.6, 2.4}},
      {"hard_swish", none, -4.5, 4.5, {-3, 3}},
      {"softsign", none, -3, 3, {}},
      {"clip", floats({{"min", -0.5}, {"max", 0.7}}), -1.5, 1.5, {-0.5, 0.7}},
      {"clip", floats({{"max", 0.2}}), -1.5, 1.5, {0.2}},
      {"clip", none, -1.5, 1.5, {}},
  };
}

/// x in [lo, hi) at least 0.02 from every kink.
OwnedTensor unaryInput(std::mt19937_64 &rng, const UnaryCase &c,
                       std::vector<int64_t> shape) {
  std::uniform_real_distribution<double> dist(c.lo, c.hi);
  std::vector<double> v;
  while (static_cast<int64_t>(v.size()) < numelOf(shape)) {
    double x = dist(rng);
    bool nearKink = false;
    for (double k : c.kinks)
      nearKink = nearKink || std::fabs(x - k) < 0.02;
    if (!nearKink)
      v.push_back(x);
  }
  return f64(std::move(shape), v);
}

KernelAttrs gradAttrs(const UnaryCase &c) {
  KernelAttrs a = c.attrs;
  a.set("kind", c.kind);
  return a;
}

TEST(ElementwiseGradKernels, UnaryGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(1);
  for (const UnaryCase &c : unaryCases()) {
    SCOPED_TRACE(c.kind + " " + c.attrs.getString("approximate"));
    std::string forward = "graph." + c.kind;
    OwnedTensor x = unaryInput(rng, c, {3, 4});
    OwnedTensor y(DType::F64, {3, 4});
    ASSERT_TRUE(runCpuKernel(forward, {&x}, {&y}, c.attrs));
    OwnedTensor w = randomF64(rng, {3, 4});
    OwnedTensor dx(DType::F64, {3, 4});
    Status s =
        runCpuKernel("graph.unary_grad", {&w, &x, &y}, {&dx}, gradAttrs(c));
    ASSERT_TRUE(s) << s.message();
    Forward f{forward, {&x}, {&y}, c.attrs};
    expectGradient(dx.values<double>(),
                   f.numericGradient(0, w.values<double>()));
  }
}

TEST(ElementwiseGradKernels, UnaryGradF32MatchesF64) {
  std::mt19937_64 rng(2);
  for (const UnaryCase &c : unaryCases()) {
    SCOPED_TRACE(c.kind);
    OwnedTensor x32 = toF32(unaryInput(rng, c, {7}));
    OwnedTensor w32 = toF32(randomF64(rng, {7}));
    OwnedTensor y32(DType::F32, {7}), dx32(DType::F32, {7});
    ASSERT_TRUE(runCpuKernel("graph." + c.kind, {&x32}, {&y32}, c.attrs));
    ASSERT_TRUE(runCpuKernel("graph.unary_grad", {&w32, &x32, &y32}, {&dx32},
                             gradAttrs(c)));
    // The same rounded operands in f64.
    auto widen = [](const OwnedTensor &t) {
      std::vector<float> v = t.values<float>();
      return f64(t.view().shape, std::vector<double>(v.begin(), v.end()));
    };
    OwnedTensor x = widen(x32), y = widen(y32), w = widen(w32);
    OwnedTensor dx(DType::F64, {7});
    ASSERT_TRUE(
        runCpuKernel("graph.unary_grad", {&w, &x, &y}, {&dx}, gradAttrs(c)));
    expectF32Matches(dx32, dx, 1e-6, 1e-7);
  }
}

/// unary_grad of `kind` at x (y from the f32 forward), dy = 1.
std::vector<float> gradAtOnes(const std::string &kind, std::vector<float> x,
                              KernelAttrs attrs = {}) {
  int64_t n = static_cast<int64_t>(x.size());
  OwnedTensor in = f32({n}, x), y(DType::F32, {n}), dx(DType::F32, {n});
  OwnedTensor dy = f32({n}, std::vector<float>(x.size(), 1.0f));
  EXPECT_TRUE(runCpuKernel("graph." + kind, {&in}, {&y}, attrs));
  attrs.set("kind", kind);
  Status s = runCpuKernel("graph.unary_grad", {&dy, &in, &y}, {&dx}, attrs);
  EXPECT_TRUE(s) << s.message();
  return dx.values<float>();
}

TEST(ElementwiseGradKernels, UnaryGradFollowsPyTorchAtKinks) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {-3, -1, 0, 1, 3, 20, nan};
  auto expectSame = [](std::vector<float> got, std::vector<float> want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i]))
        EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      else
        EXPECT_NEAR(got[i], want[i], 1e-12 + 1e-6 * std::fabs(want[i]))
            << "at " << i;
    }
  };
  // torch.relu: threshold_backward passes dy where y is NaN.
  expectSame(gradAtOnes("relu", x), {0, 0, 0, 1, 1, 1, 1});
  expectSame(gradAtOnes("abs", x), {-1, -1, 0, 1, 1, 1, 0});
  expectSame(gradAtOnes("leaky_relu", x, floats({{"alpha", 0.1}})),
             {0.1f, 0.1f, 0.1f, 1, 1, 1, 0.1f});
  expectSame(gradAtOnes("hard_swish", x), {-0.5f, 0.1666666567325592f, 0.5f,
                                           0.8333333730697632f, 1.5f, 1, 1});
  expectSame(gradAtOnes("hard_sigmoid", x,
                        floats({{"alpha", 1.0 / 6}, {"beta", 0.5}})),
             {0, 0.1666666716337204f, 0.1666666716337204f, 0.1666666716337204f,
              0, 0, 0});
  // clamp(-1, 1): both bounds inclusive.
  expectSame(gradAtOnes("clip", x, floats({{"min", -1.0}, {"max", 1.0}})),
             {0, 1, 1, 1, 0, 0, 0});
  // softplus: beta 1, threshold 20 (x = 20 is still sigmoid(20)).
  expectSame(gradAtOnes("softplus", {-3, -1, 0, 1, 3, 20, 25, nan}),
             {0.04742587357759476f, 0.2689414322376251f, 0.5f,
              0.7310585975646973f, 0.9525741338729858f, 1, 1, nan});
  // F.elu(x, 1.3): alpha * exp(x) below 0 keeps precision where y rounds to
  // -alpha; x = 0 takes the negative side.
  expectSame(
      gradAtOnes("elu", {-20, -1, 0, 1}, floats({{"alpha", 1.3}})),
      {2.6794997332046933e-09f, 0.47824326157569885f, 1.2999999523162842f, 1});
}

TEST(ElementwiseGradKernels, UnaryGradRejectsBadOperands) {
  OwnedTensor a = f32({3}, {1, 2, 3}), b = f32({2}, {1, 2});
  OwnedTensor dx(DType::F32, {3});
  KernelAttrs tanh;
  tanh.set("kind", std::string("tanh"));
  expectErrorNaming(runCpuKernel("graph.unary_grad", {&a, &b, &a}, {&dx}, tanh),
                    "graph.unary_grad");
  expectErrorNaming(runCpuKernel("graph.unary_grad", {&a, &a}, {&dx}, tanh),
                    "graph.unary_grad");
  KernelAttrs unknown;
  unknown.set("kind", std::string("cosh"));
  expectErrorNaming(
      runCpuKernel("graph.unary_grad", {&a, &a, &a}, {&dx}, unknown),
      "graph.unary_grad");
}

TEST(ElementwiseGradKernels, SumSquaresAccumulatesInDouble) {
  // 4096 values of 0.1f: a float accumulator drifts, the double one does not.
  std::vector<float> v(4096, 0.1f);
  v[7] = -3.0f;
  double want = 4095.0 * double(0.1f) * double(0.1f) + 9.0;
  OwnedTensor x = f32({64, 64}, v);
  OwnedTensor out32(DType::F32, {}), out64(DType::F64, {});
  ASSERT_TRUE(runCpuKernel("graph.sum_squares", {&x}, {&out32}));
  ASSERT_TRUE(runCpuKernel("graph.sum_squares", {&x}, {&out64}));
  EXPECT_EQ(out32.values<float>()[0], static_cast<float>(want));
  EXPECT_NEAR(out64.values<double>()[0], want, 1e-12 * want);

  OwnedTensor x64 = f64({3}, {1.5, -2, 0.25});
  ASSERT_TRUE(runCpuKernel("graph.sum_squares", {&x64}, {&out64}));
  EXPECT_EQ(out64.values<double>()[0], 6.3125);

  OwnedTensor notScalar(DType::F32, {2});
  expectErrorNaming(runCpuKernel("graph.sum_squares", {&x}, {&notScalar}),
                    "graph.sum_squares");
}

TEST(ElementwiseGradKernels, SumSquaresIsTheGradientOfItsInput) {
  // d sum(x^2) / dx = 2x, checked through the kernel itself.
  std::mt19937_64 rng(3);
  OwnedTensor x = randomF64(rng, {5}), out(DType::F64, {});
  Forward f{"graph.sum_squares", {&x}, {&out}};
  std::vector<double> numeric = f.numericGradient(0, {1.0});
  std::vector<double> xs = x.values<double>();
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(numeric[i], 2 * xs[i], 1e-7);
}

TEST(ElementwiseGradKernels, CopyCopiesBytesOfAnyType) {
  OwnedTensor a = i64({2, 2}, {1, -2, 3, int64_t(1) << 40});
  OwnedTensor b(DType::I64, {2, 2});
  ASSERT_TRUE(runCpuKernel("runtime.copy", {&a}, {&b}));
  EXPECT_EQ(b.values<int64_t>(), a.values<int64_t>());

  OwnedTensor m = i1({3}, {1, 0, 1}), m2(DType::I1, {3});
  ASSERT_TRUE(runCpuKernel("runtime.copy", {&m}, {&m2}));
  EXPECT_EQ(m2.values<uint8_t>(), m.values<uint8_t>());

  // NaN payloads survive (a byte copy, not a float one).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OwnedTensor f = f32({2}, {nan, -0.0f}), g(DType::F32, {2});
  ASSERT_TRUE(runCpuKernel("runtime.copy", {&f}, {&g}));
  EXPECT_EQ(std::memcmp(f.view().data, g.view().data, 8), 0);

  // Onto itself: a no-op.
  std::vector<TensorView> in{a.view()}, out{a.view()};
  KernelAttrs none;
  KernelContext ctx{in, out, none};
  ASSERT_TRUE((*getCpuKernels().lookup("runtime.copy"))(ctx));
  EXPECT_EQ(a.values<int64_t>(),
            (std::vector<int64_t>{1, -2, 3, int64_t(1) << 40}));

  OwnedTensor wrongShape(DType::I64, {4}), wrongType(DType::I32, {2, 2});
  expectErrorNaming(runCpuKernel("runtime.copy", {&a}, {&wrongShape}),
                    "runtime.copy");
  expectErrorNaming(runCpuKernel("runtime.copy", {&a}, {&wrongType}),
                    "runtime.copy");
}

TEST(ElementwiseGradKernels, BinaryOpsRunInPlaceOnEitherOperand) {
  // acc = add(acc, g) with acc's storage as the result (gradient
  // accumulation); codegen treats add, sub and mul of one shape as in-place
  // safe for either operand: every element reads its operands before it is
  // written.
  std::mt19937_64 rng(4);
  for (std::string op : {"graph.add", "graph.sub", "graph.mul"})
    for (DType t : {DType::F32, DType::F64})
      for (size_t alias : {0, 1}) {
        SCOPED_TRACE(op + " into operand " + std::to_string(alias));
        OwnedTensor acc = randomF64(rng, {3, 5}), g = randomF64(rng, {3, 5});
        if (t == DType::F32) {
          acc = toF32(acc);
          g = toF32(g);
        }
        const OwnedTensor *lhs = alias == 0 ? &acc : &g;
        const OwnedTensor *rhs = alias == 0 ? &g : &acc;
        OwnedTensor once(t, {3, 5}), twice(t, {3, 5});
        ASSERT_TRUE(runCpuKernel(op, {lhs, rhs}, {&once}));
        const OwnedTensor *lhs2 = alias == 0 ? &once : &g;
        const OwnedTensor *rhs2 = alias == 0 ? &g : &once;
        ASSERT_TRUE(runCpuKernel(op, {lhs2, rhs2}, {&twice}));

        std::vector<TensorView> in{lhs->view(), rhs->view()}, out{acc.view()};
        KernelAttrs none;
        KernelContext ctx{in, out, none};
        const KernelFn &fn = *getCpuKernels().lookup(op);
        ASSERT_TRUE(fn(ctx));
        EXPECT_EQ(
            std::memcmp(acc.view().data, once.view().data, once.view().bytes()),
            0);
        ASSERT_TRUE(fn(ctx));
        EXPECT_EQ(std::memcmp(acc.view().data, twice.view().data,
                              twice.view().bytes()),
                  0);
      }
}

} // namespace
