//===- ElementwiseConformanceTest.cpp - Elementwise kernels, CUDA vs CPU --===//
//
// Every op of ElementwiseKernels.cu and ElementwiseGradKernels.cu against
// its CPU kernel: several shapes (scalars, size-1 dims, empty tensors, odd
// sizes, one larger than a grid of the GPU so the grid-stride loops wrap),
// broadcasting, f32 and f64, integers where the op takes them, special
// values (NaN, infinities, signed zeros) and the CPU's error cases.
//
// Tolerances: f32 rtol 1e-5 (2e-5 for transcendentals: the device's expf,
// logf, erff, tanhf, sinf, powf ... differ from glibc's by a few ulp), f64
// rtol 1e-12, integers and bit moves exactly.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include "strata/Runtime/ElementwiseOps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

using Shape = std::vector<int64_t>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Shapes every elementwise op runs on: a scalar, empty, one element, odd
/// sizes, size-1 dims, and one larger than a grid (132 SMs x 8 x 256).
const std::vector<Shape> &unaryShapes() {
  static const std::vector<Shape> shapes = {
      {}, {0}, {1}, {7}, {257}, {3, 5}, {2, 1, 3, 4}, {4, 0, 3}, {600011}};
  return shapes;
}

bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64; }

Case makeCase(std::string op, std::vector<CaseTensor> inputs,
              std::vector<CaseTensor> outputs, KernelAttrs attrs = {},
              bool transcendental = false) {
  Case c;
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  c.attrs = std::move(attrs);
  DType t = c.outputs.empty() ? DType::F32 : c.outputs[0].dtype;
  if (t == DType::F64) {
    c.rtol = 1e-12;
    c.atol = 1e-12;
  } else {
    c.rtol = transcendental ? 2e-5 : 1e-5;
    c.atol = 1e-6;
  }
  return c;
}

KernelAttrs attrs(std::initializer_list<std::pair<const char *, AttrValue>> list) {
  KernelAttrs a;
  for (const auto &[n, v] : list)
    a.set(n, v);
  return a;
}

/// NaN, infinities, signed zeros, tiny and large values, both sides of
/// the thresholds (softplus 20, hard_swish +-3).
std::vector<double> specialValues() {
  return {kNaN, kInf, -kInf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5,
          3.0,  -3.0, 5.0,   -5.0, 20.0, 25.0,  -25.0, 100.0, -100.0};
}

struct UnaryOp {
  const char *op;
  double lo, hi;
  bool transcendental;
  KernelAttrs attrs;
};

std::vector<UnaryOp> floatUnaryOps() {
  return {
      {"graph.exp", -3, 3, true, {}},
      {"graph.log", 0.01, 4, true, {}},
      {"graph.log", -1, 1, true, {}}, // NaN below zero
      {"graph.sqrt", 0, 4, false, {}},
      {"graph.sqrt", -1, 1, false, {}},
      {"graph.reciprocal", -2, 2, false, {}},
      {"graph.tanh", -3, 3, true, {}},
      {"graph.erf", -3, 3, true, {}},
      {"graph.sin", -7, 7, true, {}},
      {"graph.cos", -7, 7, true, {}},
      {"graph.relu", -1, 1, false, {}},
      {"graph.sigmoid", -8, 8, true, {}},
      {"graph.softplus", -30, 30, true, {}},
      {"graph.gelu", -4, 4, true, {}},
      {"graph.gelu", -4, 4, true, attrs({{"approximate", std::string("tanh")}})},
      {"graph.gelu", -4, 4, true, attrs({{"approximate", std::string("none")}})},
      {"graph.leaky_relu", -2, 2, false, {}},
      {"graph.leaky_relu", -2, 2, false, attrs({{"alpha", 0.3}})},
      {"graph.elu", -4, 2, true, {}},
      {"graph.elu", -4, 2, true, attrs({{"alpha", 0.7}})},
      {"graph.hard_sigmoid", -4, 4, false, {}},
      {"graph.hard_sigmoid", -4, 4, false,
       attrs({{"alpha", 1.0 / 6}, {"beta", 0.25}})},
      {"graph.hard_swish", -5, 5, false, {}},
      {"graph.softsign", -5, 5, false, {}},
      {"graph.clip", -3, 3, false, attrs({{"min", -1.0}, {"max", 1.5}})},
      {"graph.clip", -3, 3, false, attrs({{"min", int64_t(0)}})},
      {"graph.clip", -3, 3, false, attrs({{"max", 0.25}})},
      {"graph.clip", -3, 3, false, {}},
  };
}

const std::vector<DType> kAllTypes = {DType::F32, DType::F64, DType::I64,
                                      DType::I32, DType::I16, DType::I8,
                                      DType::I1};

} // namespace

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

TEST(ElementwiseConformance, FloatUnary) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(1);
  for (const UnaryOp &u : floatUnaryOps())
    for (DType t : {DType::F32, DType::F64})
      for (const Shape &shape : unaryShapes()) {
        SCOPED_TRACE(std::string(u.op) + " " + shapeString(shape));
        expectConformance(makeCase(u.op, {randomTensor(t, shape, rng, u.lo, u.hi)},
                                   {zeros(t, shape)}, u.attrs, u.transcendental));
      }
}

TEST(ElementwiseConformance, FloatUnarySpecialValues) {
  STRATA_REQUIRE_GPU();
  std::vector<double> values = specialValues();
  Shape shape = {int64_t(values.size())};
  for (const UnaryOp &u : floatUnaryOps())
    for (DType t : {DType::F32, DType::F64}) {
      SCOPED_TRACE(u.op);
      expectConformance(makeCase(u.op, {fromValues(t, shape, values)},
                                 {zeros(t, shape)}, u.attrs, u.transcendental));
    }
}

TEST(ElementwiseConformance, NegAbsNot) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(2);
  for (const char *op : {"graph.neg", "graph.abs"})
    for (DType t : kAllTypes)
      for (const Shape &shape : unaryShapes()) {
        SCOPED_TRACE(std::string(op) + " " + std::string(name(t)) + " " +
                     shapeString(shape));
        expectConformance(makeCase(op, {randomTensor(t, shape, rng, -100, 100)},
                                   {zeros(t, shape)}));
      }
  // Extremes and signed zeros.
  std::vector<double> ints = {-128, 127, 0, -1, 1, -127};
  for (const char *op : {"graph.neg", "graph.abs"}) {
    expectConformance(makeCase(op, {fromValues(DType::I8, {6}, ints)},
                               {zeros(DType::I8, {6})}));
    for (DType t : {DType::F32, DType::F64})
      expectConformance(makeCase(op, {fromValues(t, {18}, specialValues())},
                                 {zeros(t, {18})}));
  }
  for (const Shape &shape : unaryShapes())
    expectConformance(makeCase("graph.not",
                               {randomTensor(DType::I1, shape, rng)},
                               {zeros(DType::I1, shape)}));
}

TEST(ElementwiseConformance, UnaryErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  // Float-only ops refuse integers and f16.
  expectConformance(makeCase("graph.exp", {randomTensor(DType::I32, {4}, rng)},
                             {zeros(DType::I32, {4})}));
  expectConformance(makeCase("graph.gelu", {zeros(DType::F16, {4})},
                             {zeros(DType::F16, {4})}));
  expectConformance(makeCase("graph.neg", {zeros(DType::BF16, {4})},
                             {zeros(DType::BF16, {4})}));
  // Arity.
  expectConformance(makeCase("graph.tanh",
                             {randomTensor(DType::F32, {4}, rng),
                              randomTensor(DType::F32, {4}, rng)},
                             {zeros(DType::F32, {4})}));
  expectConformance(makeCase("graph.abs", {}, {zeros(DType::F32, {4})}));
  expectConformance(makeCase("graph.not", {randomTensor(DType::I1, {4}, rng)},
                             {}));
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

TEST(ElementwiseConformance, Cast) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(4);
  for (DType from : kAllTypes)
    for (DType to : kAllTypes)
      for (const Shape &shape : {Shape{}, Shape{0}, Shape{37}, Shape{3, 1, 5},
                                 Shape{300007}}) {
        SCOPED_TRACE(std::string(name(from)) + " -> " + std::string(name(to)) +
                     " " + shapeString(shape));
        // Values every target holds after truncation (a float beyond the
        // target's range is undefined in C++: the GPU saturates, x86 does
        // not); integers beyond i8/i16 narrow modularly on both.
        double lo = isFloatType(from) ? -127.9 : -1000, hi = -lo;
        if (isFloatType(from) && (to == DType::I8))
          lo = -128.9, hi = 127.9;
        expectConformance(makeCase("graph.cast",
                                   {randomTensor(from, shape, rng, lo, hi)},
                                   {zeros(to, shape)}));
      }
  // NaN, infinities and zeros to floats and i1; fractions truncate.
  std::vector<double> values = {kNaN, kInf, -kInf, 0.0, -0.0, 1e-30, 2.5,
                                -2.5, 1e300, -1e-300, 0.1, 16777217.0};
  for (DType from : {DType::F32, DType::F64})
    for (DType to : {DType::F32, DType::F64, DType::I1})
      expectConformance(makeCase("graph.cast", {fromValues(from, {12}, values)},
                                 {zeros(to, {12})}));
  std::vector<double> fractions = {0.9, -0.9, 1.5, -1.5, 99.99, -99.99, 0.0};
  for (DType from : {DType::F32, DType::F64})
    for (DType to : {DType::I64, DType::I32, DType::I16, DType::I8})
      expectConformance(makeCase("graph.cast",
                                 {fromValues(from, {7}, fractions)},
                                 {zeros(to, {7})}));
  // Large integers round to the nearest float.
  std::vector<double> big = {9007199254740993.0, -9007199254740993.0,
                             16777217.0, 4611686018427387904.0};
  expectConformance(makeCase("graph.cast", {fromValues(DType::I64, {4}, big)},
                             {zeros(DType::F32, {4})}));
  expectConformance(makeCase("graph.cast", {fromValues(DType::I64, {4}, big)},
                             {zeros(DType::F64, {4})}));
  // Errors: f16 either side, arity.
  expectConformance(makeCase("graph.cast", {zeros(DType::F16, {3})},
                             {zeros(DType::F32, {3})}));
  expectConformance(makeCase("graph.cast", {zeros(DType::F32, {3})},
                             {zeros(DType::BF16, {3})}));
  expectConformance(makeCase("graph.cast", {zeros(DType::F32, {3})}, {}));
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

namespace {

struct ShapePair {
  Shape a, b, out;
};

/// Same shapes, trailing and leading broadcasts, both sides broadcasting,
/// scalars either side, a one-element operand of higher rank, empty
/// results, and large ones.
std::vector<ShapePair> binaryShapes() {
  return {
      {{3, 5}, {3, 5}, {3, 5}},
      {{}, {}, {}},
      {{3, 5}, {5}, {3, 5}},
      {{5}, {3, 5}, {3, 5}},
      {{3, 1}, {1, 5}, {3, 5}},
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},
      {{2, 1, 3, 1, 5}, {4, 3, 1, 1}, {2, 4, 3, 1, 5}},
      {{4, 3}, {}, {4, 3}},
      {{}, {4, 3}, {4, 3}},
      {{6}, {1, 1}, {6}},
      {{7, 1}, {7, 1}, {7, 1}},
      {{0, 3}, {3}, {0, 3}},
      {{0}, {}, {0}},
      {{600011}, {600011}, {600011}},
      {{1000, 601}, {601}, {1000, 601}},
      {{1000, 1}, {1, 601}, {1000, 601}},
  };
}

} // namespace

TEST(ElementwiseConformance, Arithmetic) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  for (const char *op : {"graph.add", "graph.sub", "graph.mul", "graph.div",
                         "graph.max", "graph.min", "graph.and", "graph.or"})
    for (DType t : kAllTypes)
      for (const ShapePair &s : binaryShapes()) {
        SCOPED_TRACE(std::string(op) + " " + std::string(name(t)) + " " +
                     shapeString(s.a) + " " + shapeString(s.b));
        // Integers small enough that i64 and i32 products stay in range;
        // i8 and i16 wrap (modular narrowing on both backends); zeros in
        // the divisor exercise the integer division's guard.
        double lo = isFloatType(t) ? -2 : -12, hi = -lo;
        CaseTensor a = randomTensor(t, s.a, rng, lo, hi);
        CaseTensor b = randomTensor(t, s.b, rng, lo, hi);
        expectConformance(makeCase(op, {a, b}, {zeros(t, s.out)}));
      }
}

TEST(ElementwiseConformance, Pow) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  for (DType t : {DType::F32, DType::F64})
    for (const ShapePair &s : binaryShapes()) {
      SCOPED_TRACE(shapeString(s.a) + " " + shapeString(s.b));
      expectConformance(makeCase(
          "graph.pow",
          {randomTensor(t, s.a, rng, 0.1, 3), randomTensor(t, s.b, rng, -3, 3)},
          {zeros(t, s.out)}, {}, true));
    }
  // Negative bases with integral exponents, zeros, infinities, NaN.
  std::vector<double> a = {-2, -2, -0.5, 0, 0, -0.0, kInf, -kInf, kNaN, 1, 2, -1};
  std::vector<double> b = {3, 2, -3, 0, -1, -1, 2, 3, 0, kNaN, 0.5, kInf};
  for (DType t : {DType::F32, DType::F64})
    expectConformance(makeCase("graph.pow",
                               {fromValues(t, {12}, a), fromValues(t, {12}, b)},
                               {zeros(t, {12})}, {}, true));
}

TEST(ElementwiseConformance, ArithmeticSpecialValues) {
  STRATA_REQUIRE_GPU();
  // Every pair of special values: NaN propagation of max/min, division by
  // zero, inf - inf, signed zeros.
  std::vector<double> v = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -2.5};
  std::vector<double> a, b;
  for (double x : v)
    for (double y : v) {
      a.push_back(x);
      b.push_back(y);
    }
  Shape shape = {int64_t(a.size())};
  for (const char *op : {"graph.add", "graph.sub", "graph.mul", "graph.div",
                         "graph.max", "graph.min", "graph.and", "graph.or"})
    for (DType t : {DType::F32, DType::F64})
      expectConformance(makeCase(op, {fromValues(t, shape, a),
                                      fromValues(t, shape, b)},
                                 {zeros(t, shape)}));
  for (const char *op : {"graph.equal", "graph.less", "graph.greater"})
    for (DType t : {DType::F32, DType::F64})
      expectConformance(makeCase(op, {fromValues(t, shape, a),
                                      fromValues(t, shape, b)},
                                 {zeros(DType::I1, shape)}));
  // Integer division by zero gives 0; truncation toward zero.
  std::vector<double> n = {7, -7, 7, -7, 0, 5, -128};
  std::vector<double> d = {2, 2, -2, -2, 0, 0, 3};
  for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8})
    expectConformance(makeCase("graph.div",
                               {fromValues(t, {7}, n), fromValues(t, {7}, d)},
                               {zeros(t, {7})}));
}

TEST(ElementwiseConformance, Comparisons) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  for (const char *op : {"graph.equal", "graph.less", "graph.greater"})
    for (DType t : kAllTypes)
      for (const ShapePair &s : binaryShapes()) {
        SCOPED_TRACE(std::string(op) + " " + std::string(name(t)) + " " +
                     shapeString(s.a) + " " + shapeString(s.b));
        // Few distinct values, so equal is true often.
        CaseTensor a = randomTensor(t, s.a, rng, -3, 3);
        CaseTensor b = randomTensor(t, s.b, rng, -3, 3);
        if (isFloatType(t)) {
          std::vector<double> va(a.numel()), vb(b.numel());
          std::uniform_int_distribution<int> d(-3, 3);
          for (double &x : va)
            x = d(rng) * 0.5;
          for (double &x : vb)
            x = d(rng) * 0.5;
          a = fromValues(t, s.a, va);
          b = fromValues(t, s.b, vb);
        }
        expectConformance(makeCase(op, {a, b}, {zeros(DType::I1, s.out)}));
      }
}

TEST(ElementwiseConformance, Where) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(8);
  struct Triple {
    Shape c, a, b, out;
  };
  std::vector<Triple> shapes = {
      {{3, 5}, {3, 5}, {3, 5}, {3, 5}},
      {{3, 1}, {1, 4}, {3, 4}, {3, 4}},
      {{}, {2, 3}, {}, {2, 3}},
      {{4}, {2, 1, 4}, {3, 1}, {2, 3, 4}},
      {{}, {}, {}, {}},
      {{0, 2}, {2}, {}, {0, 2}},
      {{700, 1}, {1, 900}, {900}, {700, 900}},
      {{600011}, {600011}, {600011}, {600011}},
  };
  for (DType t : kAllTypes)
    for (const Triple &s : shapes) {
      SCOPED_TRACE(std::string(name(t)) + " " + shapeString(s.out));
      expectConformance(makeCase(
          "graph.where",
          {randomTensor(DType::I1, s.c, rng), randomTensor(t, s.a, rng, -50, 50),
           randomTensor(t, s.b, rng, -50, 50)},
          {zeros(t, s.out)}));
    }
}

TEST(ElementwiseConformance, InPlaceAdd) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(9);
  // A state update: the result is the first operand's memory.
  for (DType t : {DType::F32, DType::F64, DType::I32})
    for (const Shape &shape : {Shape{5}, Shape{64, 33}, Shape{600011}})
      for (const char *op : {"graph.add", "graph.sub", "graph.mul"}) {
        Case c = makeCase(op, {randomTensor(t, shape, rng, -9, 9),
                               randomTensor(t, shape, rng, -9, 9)},
                          {zeros(t, shape)});
        c.aliases = {0};
        expectConformance(c);
      }
}

TEST(ElementwiseConformance, BinaryErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(10);
  CaseTensor f = randomTensor(DType::F32, {4}, rng);
  // Arity.
  expectConformance(makeCase("graph.add", {f}, {zeros(DType::F32, {4})}));
  expectConformance(makeCase("graph.less", {f, f, f}, {zeros(DType::I1, {4})}));
  expectConformance(makeCase("graph.where", {f, f}, {zeros(DType::F32, {4})}));
  expectConformance(makeCase("graph.mul", {f, f}, {}));
  // pow takes floats only; nothing takes f16.
  expectConformance(makeCase("graph.pow",
                             {randomTensor(DType::I32, {4}, rng),
                              randomTensor(DType::I32, {4}, rng)},
                             {zeros(DType::I32, {4})}));
  expectConformance(makeCase("graph.add",
                             {zeros(DType::F16, {4}), zeros(DType::F16, {4})},
                             {zeros(DType::F16, {4})}));
  expectConformance(makeCase("graph.equal",
                             {zeros(DType::BF16, {4}), zeros(DType::BF16, {4})},
                             {zeros(DType::I1, {4})}));
  expectConformance(makeCase("graph.where",
                             {zeros(DType::I1, {4}), zeros(DType::F16, {4}),
                              zeros(DType::F16, {4})},
                             {zeros(DType::F16, {4})}));
}

//===----------------------------------------------------------------------===//
// Gradients: unary_grad, sum_squares, round_to, copy
//===----------------------------------------------------------------------===//

namespace {

struct UnaryGradKindCase {
  const char *kind;
  double lo, hi;
  KernelAttrs attrs;
};

std::vector<UnaryGradKindCase> unaryGradKinds() {
  return {
      {"abs", -2, 2, {}},
      {"exp", -3, 3, {}},
      {"log", 0.1, 3, {}},
      {"sqrt", 0.1, 3, {}},
      {"reciprocal", 0.1, 3, {}},
      {"tanh", -3, 3, {}},
      {"erf", -3, 3, {}},
      {"sin", -7, 7, {}},
      {"cos", -7, 7, {}},
      {"relu", -2, 2, {}},
      {"sigmoid", -4, 4, {}},
      {"softplus", -25, 25, {}},
      {"gelu", -4, 4, {}},
      {"gelu", -4, 4, attrs({{"approximate", std::string("tanh")}})},
      {"leaky_relu", -2, 2, {}},
      {"leaky_relu", -2, 2, attrs({{"alpha", 0.2}})},
      {"elu", -3, 3, {}},
      {"elu", -3, 3, attrs({{"alpha", 0.5}})},
      {"hard_sigmoid", -4, 4, {}},
      {"hard_sigmoid", -4, 4, attrs({{"alpha", 0.25}, {"beta", 0.4}})},
      {"hard_swish", -5, 5, {}},
      {"clip", -2, 2, attrs({{"min", -1.0}, {"max", 1.0}})},
      {"clip", -2, 2, attrs({{"min", 0.5}})},
      {"clip", -2, 2, {}},
      {"neg", -2, 2, {}},
      {"softsign", -3, 3, {}},
  };
}

} // namespace

TEST(ElementwiseGradConformance, UnaryGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  using Kind = UnaryGradKindCase;
  std::vector<Kind> kinds = unaryGradKinds();
  for (Kind &k : kinds) {
    k.attrs.set("kind", std::string(k.kind));
    for (DType t : {DType::F32, DType::F64})
      for (const Shape &shape : unaryShapes()) {
        SCOPED_TRACE(std::string(k.kind) + " " + shapeString(shape));
        // y is any value the kernel reads: the formulas use it as given.
        CaseTensor dy = randomTensor(t, shape, rng, -2, 2);
        CaseTensor x = randomTensor(t, shape, rng, k.lo, k.hi);
        CaseTensor y = randomTensor(t, shape, rng, -1, 1);
        expectConformance(makeCase("graph.unary_grad", {dy, x, y},
                                   {zeros(t, shape)}, k.attrs));
      }
    // Special values, including NaN outputs of relu.
    for (DType t : {DType::F32, DType::F64}) {
      std::vector<double> v = specialValues();
      Shape shape = {int64_t(v.size())};
      std::vector<double> ones(v.size(), 1.5);
      expectConformance(makeCase("graph.unary_grad",
                                 {fromValues(t, shape, ones),
                                  fromValues(t, shape, v),
                                  fromValues(t, shape, v)},
                                 {zeros(t, shape)}, k.attrs));
    }
  }
}

TEST(ElementwiseGradConformance, UnaryGradErrors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(12);
  CaseTensor f = randomTensor(DType::F32, {4}, rng);
  expectConformance(makeCase("graph.unary_grad", {f, f, f},
                             {zeros(DType::F32, {4})},
                             attrs({{"kind", std::string("cube")}})));
  expectConformance(makeCase("graph.unary_grad", {f, f, f},
                             {zeros(DType::F32, {4})}));
  expectConformance(makeCase("graph.unary_grad",
                             {f, randomTensor(DType::F32, {5}, rng), f},
                             {zeros(DType::F32, {4})},
                             attrs({{"kind", std::string("exp")}})));
  expectConformance(makeCase("graph.unary_grad",
                             {f, f, randomTensor(DType::F64, {4}, rng)},
                             {zeros(DType::F32, {4})},
                             attrs({{"kind", std::string("exp")}})));
  CaseTensor i = randomTensor(DType::I32, {4}, rng);
  expectConformance(makeCase("graph.unary_grad", {i, i, i},
                             {zeros(DType::I32, {4})},
                             attrs({{"kind", std::string("exp")}})));
  expectConformance(makeCase("graph.unary_grad", {f, f},
                             {zeros(DType::F32, {4})},
                             attrs({{"kind", std::string("exp")}})));
}

TEST(ElementwiseGradConformance, SumSquares) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(13);
  // Sizes below one block, exactly one, many, and beyond the 1024 x 256
  // elements the first pass's grid covers at once.
  for (DType in : {DType::F32, DType::F64})
    for (DType out : {DType::F32, DType::F64})
      for (const Shape &shape :
           {Shape{}, Shape{0}, Shape{1}, Shape{256}, Shape{1000}, Shape{3, 333},
            Shape{4096}, Shape{1 << 20 | 3}}) {
        SCOPED_TRACE(std::string(name(in)) + " -> " + std::string(name(out)) +
                     " " + shapeString(shape));
        Case c = makeCase("graph.sum_squares",
                          {randomTensor(in, shape, rng, -2, 2)},
                          {zeros(out, {})});
        c.rtol = out == DType::F64 ? 1e-12 : 1e-5;
        expectConformance(c);
        expectConformance(makeCase("graph.sum_squares",
                                   {randomTensor(in, shape, rng, -2, 2)},
                                   {zeros(out, {1})}));
      }
  // NaN and inf reach the result.
  expectConformance(makeCase("graph.sum_squares",
                             {fromValues(DType::F32, {3}, {1, kNaN, 2})},
                             {zeros(DType::F32, {})}));
  expectConformance(makeCase("graph.sum_squares",
                             {fromValues(DType::F64, {3}, {1, -kInf, 2})},
                             {zeros(DType::F64, {})}));
  // Errors: not a scalar, not a float, f16 either side, arity.
  CaseTensor f = randomTensor(DType::F32, {4}, rng);
  expectConformance(makeCase("graph.sum_squares", {f}, {zeros(DType::F32, {2})}));
  expectConformance(makeCase("graph.sum_squares", {f}, {zeros(DType::I32, {})}));
  expectConformance(makeCase("graph.sum_squares", {f}, {zeros(DType::F16, {})}));
  expectConformance(makeCase("graph.sum_squares",
                             {randomTensor(DType::I32, {4}, rng)},
                             {zeros(DType::F32, {})}));
  expectConformance(makeCase("graph.sum_squares", {f, f},
                             {zeros(DType::F32, {})}));
}

TEST(ElementwiseGradConformance, MultiTensorSumSquares) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(15);
  // 40 operands (two launches of at most 32), an empty one and one beyond
  // the first pass's 1024 x 256 elements.
  for (DType in : {DType::F32, DType::F64}) {
    std::vector<CaseTensor> inputs, outputs;
    for (int i = 0; i < 40; ++i) {
      Shape shape{1 + (i * 53) % 700};
      if (i == 3)
        shape = {0};
      if (i == 34)
        shape = {(1 << 19) + 7};
      inputs.push_back(randomTensor(in, shape, rng, -2, 2));
      outputs.push_back(zeros(DType::F32, {}));
    }
    Case c = makeCase("graph.sum_squares", inputs, outputs);
    c.rtol = 1e-5;
    expectConformance(c);
  }
  // Operands of two dtypes.
  expectConformance(makeCase(
      "graph.sum_squares",
      {randomTensor(DType::F32, {4}, rng), randomTensor(DType::F64, {4}, rng)},
      {zeros(DType::F32, {}), zeros(DType::F32, {})}));
}

TEST(ElementwiseGradConformance, RoundTo) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(14);
  // Bit-exact: rounding is exact arithmetic on both backends.
  auto exact = [](Case c) {
    c.rtol = 0;
    c.atol = 0;
    return c;
  };
  for (const char *dtype : {"bf16", "fp16"}) {
    KernelAttrs a = attrs({{"dtype", std::string(dtype)}});
    for (const Shape &shape : unaryShapes())
      for (auto [lo, hi] : {std::pair{-1.0, 1.0}, std::pair{-70000.0, 70000.0},
                            std::pair{-1e-6, 1e-6}, std::pair{-1e-40, 1e-40}}) {
        SCOPED_TRACE(std::string(dtype) + " " + shapeString(shape));
        expectConformance(exact(makeCase(
            "graph.round_to", {randomTensor(DType::F32, shape, rng, lo, hi)},
            {zeros(DType::F32, shape)}, a)));
      }
    // Ties, the overflow threshold, subnormals, NaN and infinities.
    std::vector<double> v = {kNaN,      kInf,       -kInf,     0.0,
                             -0.0,      65504.0,    65519.0,   65520.0,
                             -65520.0,  1.0 + 1.0 / 1024 / 2,
                             1.0 + 3.0 / 1024 / 2, 1.0 + 1.0 / 128 / 2,
                             1.0 + 3.0 / 128 / 2,  6e-8, 3e-8, 2.9e-8,
                             1e-45,     3.4e38,     -3.4e38,   1.00390625};
    Shape shape = {int64_t(v.size())};
    expectConformance(exact(makeCase("graph.round_to",
                                     {fromValues(DType::F32, shape, v)},
                                     {zeros(DType::F32, shape)}, a)));
  }
  // Errors: unknown dtype, f64, shapes differ, arity.
  CaseTensor f = randomTensor(DType::F32, {4}, rng);
  expectConformance(makeCase("graph.round_to", {f}, {zeros(DType::F32, {4})},
                             attrs({{"dtype", std::string("fp8")}})));
  expectConformance(makeCase("graph.round_to", {f}, {zeros(DType::F32, {4})}));
  expectConformance(makeCase("graph.round_to",
                             {randomTensor(DType::F64, {4}, rng)},
                             {zeros(DType::F64, {4})},
                             attrs({{"dtype", std::string("bf16")}})));
  expectConformance(makeCase("graph.round_to", {f}, {zeros(DType::F32, {5})},
                             attrs({{"dtype", std::string("bf16")}})));
  expectConformance(makeCase("graph.round_to", {f, f}, {zeros(DType::F32, {4})},
                             attrs({{"dtype", std::string("bf16")}})));
}

TEST(ElementwiseGradConformance, Copy) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(15);
  for (DType t : kAllTypes)
    for (const Shape &shape : unaryShapes()) {
      expectConformance(makeCase("runtime.copy",
                                 {randomTensor(t, shape, rng, -50, 50)},
                                 {zeros(t, shape)}));
      // Onto itself: nothing to do.
      Case c = makeCase("runtime.copy", {randomTensor(t, shape, rng, -50, 50)},
                        {zeros(t, shape)});
      c.aliases = {0};
      expectConformance(c);
    }
  CaseTensor f = randomTensor(DType::F32, {4}, rng);
  expectConformance(makeCase("runtime.copy", {f}, {zeros(DType::F32, {5})}));
  expectConformance(makeCase("runtime.copy", {f}, {zeros(DType::I32, {4})}));
  expectConformance(makeCase("runtime.copy", {f}, {}));
}

//===----------------------------------------------------------------------===//
// Coverage of the op table
//===----------------------------------------------------------------------===//

/// Every op of ElementwiseOps.def has a conformance case: a row added to the
/// table without one fails here, not silently.
TEST(ElementwiseConformance, EveryTableOpHasACase) {
  std::vector<std::string> unary, grads;
  for (const UnaryOp &u : floatUnaryOps())
    unary.push_back(u.op);
  unary.insert(unary.end(), {"graph.neg", "graph.abs"}); // NegAbsNot
  for (const UnaryGradKindCase &k : unaryGradKinds())
    grads.push_back(k.kind);
  auto has = [](const std::vector<std::string> &list, const std::string &s) {
    return std::find(list.begin(), list.end(), s) != list.end();
  };
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  EXPECT_TRUE(has(unary, "graph." Mnemonic)) << Mnemonic " has no case";       \
  EXPECT_TRUE(has(grads, Mnemonic)) << "unary_grad of " Mnemonic " has no case";
#include "strata/Runtime/ElementwiseOps.def"
}
