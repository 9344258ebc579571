//===- ShapeConformanceTest.cpp - Shape kernels, CUDA vs CPU --------------===//
//
// Every op of ShapeKernels.cu and ShapeGradKernels.cu against its CPU
// kernel. The forward ops move bits, so every dtype compares exactly; the
// gradients (f32, f64) add in the CPU's order, within f32 rtol 1e-5 and
// f64 rtol 1e-12. The CPU's error cases must fail with its messages, all
// but one: an index out of range in gather/embedding gives NaN on CUDA
// (the kernel cannot read indices on the host;
// NeuralNetGradConformance.OutOfRangeIndexOrLabelIsNaNOnCuda).
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

using Shape = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

Case makeCase(std::string op, std::vector<CaseTensor> inputs,
              std::vector<CaseTensor> outputs, KernelAttrs attrs = {}) {
  Case c;
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  c.attrs = std::move(attrs);
  DType t = c.outputs.empty() ? DType::F32 : c.outputs[0].dtype;
  c.rtol = t == DType::F64 ? 1e-12 : 1e-5;
  c.atol = t == DType::F64 ? 1e-12 : 1e-6;
  return c;
}

/// Bit moves: exactly.
Case exactCase(std::string op, std::vector<CaseTensor> inputs,
               std::vector<CaseTensor> outputs, KernelAttrs attrs = {}) {
  Case c = makeCase(std::move(op), std::move(inputs), std::move(outputs),
                    std::move(attrs));
  c.rtol = 0;
  c.atol = 0;
  return c;
}

KernelAttrs sliceAttrs(Ints offsets, Ints sizes, Ints strides) {
  KernelAttrs a;
  a.set("offsets", std::move(offsets));
  a.set("sizes", std::move(sizes));
  a.set("strides", std::move(strides));
  return a;
}

KernelAttrs intAttr(const char *name, int64_t v) {
  KernelAttrs a;
  a.set(name, v);
  return a;
}

KernelAttrs padAttrs(Ints pads, std::string mode, double value = 0.0) {
  KernelAttrs a;
  a.set("pads", std::move(pads));
  a.set("mode", std::move(mode));
  a.set("value", value);
  return a;
}

const std::vector<DType> kAllTypes = {DType::F32, DType::F64, DType::I64,
                                      DType::I32, DType::I16, DType::I8,
                                      DType::I1};

CaseTensor values(DType t, Shape shape, std::mt19937_64 &rng) {
  return randomTensor(t, std::move(shape), rng, -100, 100);
}

} // namespace

//===----------------------------------------------------------------------===//
// Reshape, broadcast_to, transpose, slice
//===----------------------------------------------------------------------===//

TEST(ShapeConformance, Reshape) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(21);
  for (DType t : kAllTypes) {
    expectConformance(exactCase("graph.reshape", {values(t, {3, 4}, rng)},
                                {zeros(t, {12})}));
    expectConformance(exactCase("graph.reshape", {values(t, {2, 3, 4}, rng)},
                                {zeros(t, {4, 1, 6})}));
    expectConformance(exactCase("graph.reshape", {values(t, {}, rng)},
                                {zeros(t, {1, 1})}));
    expectConformance(exactCase("graph.reshape", {values(t, {0, 3}, rng)},
                                {zeros(t, {0})}));
    expectConformance(exactCase("graph.reshape", {values(t, {600011}, rng)},
                                {zeros(t, {600011, 1})}));
  }
  // Errors: counts, types, arity.
  expectConformance(exactCase("graph.reshape", {values(DType::F32, {3, 4}, rng)},
                              {zeros(DType::F32, {13})}));
  expectConformance(exactCase("graph.reshape", {values(DType::F32, {3, 4}, rng)},
                              {zeros(DType::I32, {12})}));
  expectConformance(exactCase("graph.reshape", {}, {zeros(DType::I32, {12})}));
}

TEST(ShapeConformance, BroadcastTo) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(22);
  struct Pair {
    Shape in, out;
  };
  std::vector<Pair> pairs = {
      {{3}, {2, 3}},          {{3, 1}, {3, 4}},       {{}, {2, 2}},
      {{1}, {5}},             {{2, 1, 3}, {4, 2, 5, 3}}, {{4, 5}, {4, 5}},
      {{0}, {3, 0}},          {{1, 1000}, {700, 1000}}, {{700, 1}, {700, 999}},
      {{1, 3, 1, 2}, {2, 2, 3, 2, 2}}, {{1}, {600011}},
  };
  for (DType t : kAllTypes)
    for (const Pair &p : pairs) {
      SCOPED_TRACE(std::string(name(t)) + " " + shapeString(p.in) + " -> " +
                   shapeString(p.out));
      expectConformance(exactCase("graph.broadcast_to", {values(t, p.in, rng)},
                                  {zeros(t, p.out)}));
    }
  // Errors.
  expectConformance(exactCase("graph.broadcast_to",
                              {values(DType::F32, {3}, rng)},
                              {zeros(DType::F32, {4})}));
  expectConformance(exactCase("graph.broadcast_to",
                              {values(DType::F32, {2, 3}, rng)},
                              {zeros(DType::F32, {3})}));
  expectConformance(exactCase("graph.broadcast_to",
                              {values(DType::F32, {3}, rng)},
                              {zeros(DType::F64, {2, 3})}));
}

TEST(ShapeConformance, Transpose) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(23);
  struct Perm {
    Shape in;
    Ints perm;
  };
  std::vector<Perm> perms = {
      {{3, 5}, {1, 0}},          {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4, 5}, {0, 2, 1, 3}}, {{1, 7}, {1, 0}},
      {{513, 1025}, {1, 0}},     {{0, 4}, {1, 0}},
      {{}, {}},                  {{6}, {0}},
      {{2, 3, 4, 5, 6}, {4, 3, 2, 1, 0}},
      {{2, 1, 3, 1, 2, 1, 3, 1, 2}, {8, 6, 4, 2, 0, 1, 3, 5, 7}},
  };
  for (DType t : kAllTypes)
    for (const Perm &p : perms) {
      SCOPED_TRACE(std::string(name(t)) + " " + shapeString(p.in));
      Shape out;
      for (int64_t d : p.perm)
        out.push_back(p.in[d]);
      KernelAttrs a;
      a.set("perm", p.perm);
      expectConformance(exactCase("graph.transpose", {values(t, p.in, rng)},
                                  {zeros(t, out)}, a));
    }
  // Errors: perm length, not a permutation, result shape.
  auto perm = [](Ints p) {
    KernelAttrs a;
    a.set("perm", std::move(p));
    return a;
  };
  CaseTensor x = values(DType::F32, {2, 3}, rng);
  expectConformance(exactCase("graph.transpose", {x}, {zeros(DType::F32, {3, 2})},
                              perm({1})));
  expectConformance(exactCase("graph.transpose", {x}, {zeros(DType::F32, {3, 2})},
                              perm({1, 1})));
  expectConformance(exactCase("graph.transpose", {x}, {zeros(DType::F32, {3, 2})},
                              perm({1, 2})));
  expectConformance(exactCase("graph.transpose", {x}, {zeros(DType::F32, {2, 3})},
                              perm({1, 0})));
}

TEST(ShapeConformance, Slice) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(24);
  struct S {
    Shape in;
    Ints offsets, sizes, strides;
  };
  std::vector<S> slices = {
      {{10}, {2}, {3}, {2}},
      {{10}, {9}, {5}, {-2}},
      {{6, 8}, {1, 2}, {3, 2}, {2, 3}},
      {{6, 8}, {5, 0}, {6, 8}, {-1, 1}},
      {{6, 8}, {0, 0}, {0, 8}, {1, 1}},
      {{6, 8}, {0, 0}, {6, 8}, {1, 1}},
      {{4, 5, 6}, {1, 4, 0}, {2, 3, 3}, {2, -1, 2}},
      {{1000, 1001}, {1, 3}, {998, 990}, {1, 1}},
      {{}, {}, {}, {}},
  };
  for (DType t : kAllTypes)
    for (const S &s : slices) {
      SCOPED_TRACE(std::string(name(t)) + " " + shapeString(s.in));
      expectConformance(exactCase("graph.slice", {values(t, s.in, rng)},
                                  {zeros(t, s.sizes)},
                                  sliceAttrs(s.offsets, s.sizes, s.strides)));
    }
  // Errors: stride 0, out of bounds both ways, attribute lengths, result.
  CaseTensor x = values(DType::F32, {10}, rng);
  expectConformance(exactCase("graph.slice", {x}, {zeros(DType::F32, {3})},
                              sliceAttrs({0}, {3}, {0})));
  expectConformance(exactCase("graph.slice", {x}, {zeros(DType::F32, {3})},
                              sliceAttrs({8}, {3}, {1})));
  expectConformance(exactCase("graph.slice", {x}, {zeros(DType::F32, {3})},
                              sliceAttrs({1}, {3}, {-1})));
  expectConformance(exactCase("graph.slice", {x}, {zeros(DType::F32, {3})},
                              sliceAttrs({0, 0}, {3}, {1})));
  expectConformance(exactCase("graph.slice", {x}, {zeros(DType::F32, {4})},
                              sliceAttrs({0}, {3}, {1})));
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

TEST(ShapeConformance, ConcatSplit) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(25);
  struct C {
    std::vector<Shape> parts;
    int64_t axis;
  };
  std::vector<C> cases = {
      {{{2, 3}, {4, 3}}, 0},
      {{{2, 3}, {2, 1}, {2, 5}}, 1},
      {{{2, 3, 4}, {2, 0, 4}, {2, 2, 4}}, 1},
      {{{2, 3, 4}, {2, 3, 1}, {2, 3, 7}}, 2},
      {{{5}}, 0},
      {{{0, 3}, {0, 2}}, 1},
      {{{300, 257}, {300, 300}, {300, 1}}, 1},
      {{{1, 600011}, {2, 600011}}, 0},
  };
  for (DType t : kAllTypes)
    for (const C &c : cases) {
      Shape whole = c.parts[0];
      whole[c.axis] = 0;
      std::vector<CaseTensor> parts, empty;
      for (const Shape &p : c.parts) {
        whole[c.axis] += p[c.axis];
        parts.push_back(values(t, p, rng));
        empty.push_back(zeros(t, p));
      }
      SCOPED_TRACE(std::string(name(t)) + " " + shapeString(whole) +
                   " axis " + std::to_string(c.axis));
      KernelAttrs a = intAttr("axis", c.axis);
      expectConformance(exactCase("graph.concat", parts, {zeros(t, whole)}, a));
      expectConformance(exactCase("graph.split", {values(t, whole, rng)}, empty,
                                  a));
    }
  // Errors: axis, parts that do not match, sums, types, arity.
  CaseTensor a = values(DType::F32, {2, 3}, rng), b = values(DType::F32, {2, 4}, rng);
  expectConformance(exactCase("graph.concat", {a, b}, {zeros(DType::F32, {2, 7})},
                              intAttr("axis", 2)));
  expectConformance(exactCase("graph.concat", {a, b}, {zeros(DType::F32, {4, 3})},
                              intAttr("axis", 0)));
  expectConformance(exactCase("graph.concat", {a, b}, {zeros(DType::F32, {2, 8})},
                              intAttr("axis", 1)));
  expectConformance(exactCase("graph.concat", {a, values(DType::F64, {2, 4}, rng)},
                              {zeros(DType::F32, {2, 7})}, intAttr("axis", 1)));
  expectConformance(exactCase("graph.concat", {}, {zeros(DType::F32, {2, 7})},
                              intAttr("axis", 1)));
  CaseTensor w = values(DType::F32, {2, 7}, rng);
  expectConformance(exactCase("graph.split", {w},
                              {zeros(DType::F32, {2, 3}), zeros(DType::F32, {2, 3})},
                              intAttr("axis", 1)));
  expectConformance(exactCase("graph.split", {w},
                              {zeros(DType::F32, {2, 3}), zeros(DType::F32, {1, 4})},
                              intAttr("axis", 1)));
  expectConformance(exactCase("graph.split", {w}, {zeros(DType::F32, {2, 7})},
                              intAttr("axis", -1)));
  expectConformance(exactCase("graph.split", {w, w}, {zeros(DType::F32, {2, 7})},
                              intAttr("axis", 0)));
  expectConformance(exactCase("graph.split", {w}, {}, intAttr("axis", 0)));
}

//===----------------------------------------------------------------------===//
// Pad and trilu
//===----------------------------------------------------------------------===//

TEST(ShapeConformance, Pad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(26);
  struct P {
    Shape in;
    Ints pads;
  };
  std::vector<P> shapes = {
      {{5}, {2, 3}},
      {{5}, {0, 0}},
      {{3, 4}, {1, 2, 2, 1}},
      {{3, 4}, {0, 3, 2, 0}},
      {{2, 3, 4}, {1, 0, 2, 1, 2, 3}},
      {{1, 2, 1, 3}, {0, 1, 0, 2, 0, 1, 0, 2}},
      {{}, {}},
      {{300, 500}, {7, 11, 13, 17}},
  };
  for (DType t : kAllTypes)
    for (const P &p : shapes)
      for (const char *mode : {"constant", "reflect", "edge"}) {
        Shape out = p.in;
        bool fits = true;
        for (size_t d = 0; d < out.size(); ++d) {
          int64_t begin = p.pads[d], end = p.pads[d + out.size()];
          fits = fits && (std::string(mode) != "reflect" ||
                          (begin < p.in[d] && end < p.in[d]));
          out[d] += begin + end;
        }
        if (!fits)
          continue;
        SCOPED_TRACE(std::string(name(t)) + " " + shapeString(p.in) + " " +
                     mode);
        expectConformance(exactCase("graph.pad", {values(t, p.in, rng)},
                                    {zeros(t, out)}, padAttrs(p.pads, mode)));
        if (std::string(mode) == "constant")
          expectConformance(exactCase("graph.pad", {values(t, p.in, rng)},
                                      {zeros(t, out)},
                                      padAttrs(p.pads, mode, -7.75)));
      }
  // Empty: an empty result, and constant padding of an empty dim.
  expectConformance(exactCase("graph.pad", {values(DType::F32, {0, 3}, rng)},
                              {zeros(DType::F32, {0, 5})},
                              padAttrs({0, 1, 0, 1}, "edge")));
  expectConformance(exactCase("graph.pad", {values(DType::I32, {0, 3}, rng)},
                              {zeros(DType::I32, {2, 3})},
                              padAttrs({1, 0, 1, 0}, "constant", 4)));
  // The mode's default is constant, the value's 0.
  {
    KernelAttrs a;
    a.set("pads", Ints{1, 2});
    expectConformance(exactCase("graph.pad", {values(DType::F32, {3}, rng)},
                                {zeros(DType::F32, {6})}, a));
  }
  // bf16 / fp16 fills rounded as torch rounds them (1/3 is inexact in both).
  for (DType t : {DType::BF16, DType::F16})
    expectConformance(exactCase("graph.pad", {values(t, {2, 3}, rng)},
                                {zeros(t, {3, 5})},
                                padAttrs({1, 1, 0, 1}, "constant", 1.0 / 3)));
  // Errors: pads count, negative pads, reflect too wide, edge of empty,
  // unknown mode, values that do not fit, result shape.
  CaseTensor x = values(DType::F32, {3, 4}, rng);
  expectConformance(exactCase("graph.pad", {x}, {zeros(DType::F32, {4, 5})},
                              padAttrs({1, 1}, "constant")));
  expectConformance(exactCase("graph.pad", {x}, {zeros(DType::F32, {2, 4})},
                              padAttrs({-1, 0, 0, 0}, "constant")));
  expectConformance(exactCase("graph.pad", {x}, {zeros(DType::F32, {6, 4})},
                              padAttrs({3, 0, 0, 0}, "reflect")));
  expectConformance(exactCase("graph.pad", {values(DType::F32, {0, 3}, rng)},
                              {zeros(DType::F32, {1, 3})},
                              padAttrs({1, 0, 0, 0}, "edge")));
  expectConformance(exactCase("graph.pad", {x}, {zeros(DType::F32, {4, 4})},
                              padAttrs({1, 0, 0, 0}, "wrap")));
  expectConformance(exactCase("graph.pad", {values(DType::I8, {3}, rng)},
                              {zeros(DType::I8, {4})},
                              padAttrs({1, 0}, "constant", 300)));
  expectConformance(exactCase("graph.pad", {x}, {zeros(DType::F32, {5, 4})},
                              padAttrs({1, 0, 0, 0}, "constant")));
  expectConformance(exactCase("graph.pad", {x}, {zeros(DType::I32, {4, 4})},
                              padAttrs({1, 0, 0, 0}, "constant")));
}

TEST(ShapeConformance, Trilu) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(27);
  for (DType t : kAllTypes)
    for (const Shape &shape : {Shape{4, 5}, Shape{5, 4}, Shape{2, 3, 4},
                               Shape{1, 1}, Shape{0, 3}, Shape{3, 0},
                               Shape{300, 1001}})
      for (bool upper : {false, true})
        for (int64_t k : Ints{0, 1, -2, 3, 100, -100, INT64_MAX, INT64_MIN}) {
          KernelAttrs a;
          a.set("upper", int64_t(upper));
          a.set("k", k);
          expectConformance(exactCase("graph.trilu", {values(t, shape, rng)},
                                      {zeros(t, shape)}, a));
        }
  // In place: the result is the operand's memory.
  {
    KernelAttrs a;
    a.set("upper", int64_t(1));
    a.set("k", int64_t(1));
    Case c = exactCase("graph.trilu", {values(DType::F32, {33, 65}, rng)},
                       {zeros(DType::F32, {33, 65})}, a);
    c.aliases = {0};
    expectConformance(c);
  }
  // Errors: rank, result.
  expectConformance(exactCase("graph.trilu", {values(DType::F32, {5}, rng)},
                              {zeros(DType::F32, {5})}));
  expectConformance(exactCase("graph.trilu", {values(DType::F32, {4, 5}, rng)},
                              {zeros(DType::F32, {5, 4})}));
  expectConformance(exactCase("graph.trilu", {values(DType::F32, {4, 5}, rng)},
                              {zeros(DType::I64, {4, 5})}));
}

//===----------------------------------------------------------------------===//
// Gather and embedding
//===----------------------------------------------------------------------===//

TEST(ShapeConformance, Gather) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(28);
  struct G {
    Shape in, indices;
    int64_t axis;
  };
  std::vector<G> cases = {
      {{10}, {4}, 0},         {{5, 7}, {3}, 0},     {{5, 7}, {2, 3}, 1},
      {{3, 4, 5}, {6}, 1},    {{3, 4, 5}, {}, 2},   {{3, 4, 5}, {0}, 1},
      {{0, 4}, {3}, 1},       {{50, 3000}, {700}, 0}, {{3000, 50}, {9, 80}, 1},
  };
  for (DType t : kAllTypes)
    for (DType it : {DType::I64, DType::I32, DType::I16, DType::I8})
      for (const G &g : cases) {
        int64_t size = g.in[g.axis];
        // Negative indices count from the end (i8 holds -128..127).
        int64_t lo = std::max<int64_t>(-size, -128), hi = std::min<int64_t>(size, 127);
        Shape out(g.in.begin(), g.in.begin() + g.axis);
        out.insert(out.end(), g.indices.begin(), g.indices.end());
        out.insert(out.end(), g.in.begin() + g.axis + 1, g.in.end());
        SCOPED_TRACE(std::string(name(t)) + " " + std::string(name(it)) + " " +
                     shapeString(g.in) + " axis " + std::to_string(g.axis));
        CaseTensor idx = size > 0 ? randomTensor(it, g.indices, rng, double(lo),
                                                 double(hi))
                                  : zeros(it, g.indices);
        expectConformance(exactCase("graph.gather", {values(t, g.in, rng), idx},
                                    {zeros(t, out)}, intAttr("axis", g.axis)));
      }
  // Errors (an index out of range is NaN on CUDA, see above).
  CaseTensor x = values(DType::F32, {5, 7}, rng);
  CaseTensor idx = fromValues(DType::I64, {2}, {1, 2});
  expectConformance(exactCase("graph.gather", {x, idx},
                              {zeros(DType::F32, {5, 2})}, intAttr("axis", 2)));
  expectConformance(exactCase("graph.gather", {x, idx},
                              {zeros(DType::F32, {5, 3})}, intAttr("axis", 1)));
  expectConformance(exactCase("graph.gather",
                              {x, fromValues(DType::F32, {2}, {1, 2})},
                              {zeros(DType::F32, {5, 2})}, intAttr("axis", 1)));
  expectConformance(exactCase("graph.gather",
                              {x, fromValues(DType::I1, {2}, {1, 0})},
                              {zeros(DType::F32, {5, 2})}, intAttr("axis", 1)));
  expectConformance(exactCase("graph.gather", {x, idx},
                              {zeros(DType::F64, {5, 2})}, intAttr("axis", 1)));
  expectConformance(exactCase("graph.gather", {x}, {zeros(DType::F32, {5, 2})},
                              intAttr("axis", 1)));
}

TEST(ShapeConformance, Embedding) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(29);
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I8})
    for (DType it : {DType::I64, DType::I32})
      for (auto [table, indices] :
           {std::pair{Shape{10, 4}, Shape{3, 5}}, std::pair{Shape{10, 4}, Shape{}},
            std::pair{Shape{1000, 257}, Shape{64, 33}},
            std::pair{Shape{10, 0}, Shape{3}}, std::pair{Shape{10, 4}, Shape{0}}}) {
        Shape out = indices;
        out.push_back(table[1]);
        expectConformance(exactCase(
            "graph.embedding",
            {values(t, table, rng),
             randomTensor(it, indices, rng, -double(table[0]), double(table[0]))},
            {zeros(t, out)}));
      }
  // Errors: table rank, result shape, index type.
  CaseTensor idx = fromValues(DType::I64, {2}, {1, 2});
  expectConformance(exactCase("graph.embedding",
                              {values(DType::F32, {10, 4, 2}, rng), idx},
                              {zeros(DType::F32, {2, 4, 2})}));
  expectConformance(exactCase("graph.embedding",
                              {values(DType::F32, {10, 4}, rng), idx},
                              {zeros(DType::F32, {2, 5})}));
  expectConformance(exactCase("graph.embedding",
                              {values(DType::F32, {10, 4}, rng),
                               fromValues(DType::F64, {2}, {1, 2})},
                              {zeros(DType::F32, {2, 4})}));
}

//===----------------------------------------------------------------------===//
// Gradients: slice_grad, pad_grad
//===----------------------------------------------------------------------===//

TEST(ShapeGradConformance, SliceGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(30);
  struct S {
    Shape dx;
    Ints offsets, sizes, strides;
  };
  std::vector<S> slices = {
      {{10}, {2}, {3}, {2}},
      {{10}, {9}, {5}, {-2}},
      {{6, 8}, {1, 2}, {3, 2}, {2, 3}},
      {{6, 8}, {5, 0}, {6, 8}, {-1, 1}},
      {{6, 8}, {0, 0}, {0, 8}, {1, 1}},
      {{4, 5, 6}, {1, 4, 0}, {2, 3, 3}, {2, -1, 2}},
      {{1000, 1001}, {1, 3}, {499, 990}, {2, 1}},
      {{}, {}, {}, {}},
      {{0, 3}, {0, 0}, {0, 2}, {1, 1}},
  };
  for (DType t : {DType::F32, DType::F64})
    for (const S &s : slices) {
      SCOPED_TRACE(shapeString(s.dx));
      expectConformance(makeCase("graph.slice_grad",
                                 {randomTensor(t, s.sizes, rng)},
                                 {zeros(t, s.dx)},
                                 sliceAttrs(s.offsets, s.sizes, s.strides)));
    }
  // Errors: shapes, types, stride 0, out of bounds, integers.
  CaseTensor dy = randomTensor(DType::F32, {3}, rng);
  expectConformance(makeCase("graph.slice_grad", {dy}, {zeros(DType::F32, {10})},
                             sliceAttrs({0}, {4}, {1})));
  expectConformance(makeCase("graph.slice_grad", {dy}, {zeros(DType::F64, {10})},
                             sliceAttrs({0}, {3}, {1})));
  expectConformance(makeCase("graph.slice_grad", {dy}, {zeros(DType::F32, {10})},
                             sliceAttrs({0}, {3}, {0})));
  expectConformance(makeCase("graph.slice_grad", {dy}, {zeros(DType::F32, {10})},
                             sliceAttrs({8}, {3}, {1})));
  expectConformance(makeCase("graph.slice_grad", {dy}, {zeros(DType::F32, {10})},
                             sliceAttrs({0, 0}, {3}, {1})));
  expectConformance(makeCase("graph.slice_grad",
                             {randomTensor(DType::I32, {3}, rng, -9, 9)},
                             {zeros(DType::I32, {10})}, sliceAttrs({0}, {3}, {1})));
  expectConformance(makeCase("graph.slice_grad", {}, {zeros(DType::F32, {10})},
                             sliceAttrs({0}, {3}, {1})));
}

TEST(ShapeGradConformance, PadGrad) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(31);
  struct P {
    Shape dx;
    Ints pads;
  };
  // Positive pads, crops (negative pads), pads wider than the dim (edge:
  // one element collects many), and a larger one.
  std::vector<P> shapes = {
      {{5}, {2, 3}},
      {{5}, {0, 0}},
      {{5}, {-1, -2}},
      {{5}, {-2, 3}},
      {{2}, {7, 5}},
      {{1}, {3, 4}},
      {{3, 4}, {1, 2, 2, 1}},
      {{3, 4}, {-1, 3, 2, -2}},
      {{2, 3, 4}, {1, 0, 2, 1, 2, 3}},
      {{2, 2, 2}, {4, 5, 3, 3, 6, 2}},
      {{}, {}},
      {{300, 500}, {7, 11, 13, 17}},
      {{0, 3}, {0, 0, 1, 1}},
  };
  for (DType t : {DType::F32, DType::F64})
    for (const P &p : shapes)
      for (std::string mode : {"constant", "reflect", "edge"}) {
        Shape dy = p.dx;
        bool fits = true;
        for (size_t d = 0; d < dy.size(); ++d) {
          int64_t n = p.dx[d], begin = p.pads[d], end = p.pads[d + dy.size()];
          if (mode == "reflect")
            fits = fits && !(begin > 0 && begin >= n) && !(end > 0 && end >= n);
          if (mode == "edge")
            fits = fits && !(n == 0 && (begin > 0 || end > 0));
          dy[d] += begin + end;
        }
        if (!fits)
          continue;
        SCOPED_TRACE(shapeString(p.dx) + " " + mode);
        expectConformance(makeCase("graph.pad_grad",
                                   {randomTensor(t, dy, rng)}, {zeros(t, p.dx)},
                                   padAttrs(p.pads, mode)));
      }
  // Errors: shapes, pads count, mode, reflect too wide, edge of empty,
  // integers, types.
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::F32, {7}, rng)},
                             {zeros(DType::F32, {5})}, padAttrs({1, 2}, "constant")));
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::F32, {7}, rng)},
                             {zeros(DType::F32, {5})}, padAttrs({2}, "constant")));
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::F32, {7}, rng)},
                             {zeros(DType::F32, {5})}, padAttrs({1, 1}, "wrap")));
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::F32, {11}, rng)},
                             {zeros(DType::F32, {5})}, padAttrs({5, 1}, "reflect")));
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::F32, {2, 3}, rng)},
                             {zeros(DType::F32, {0, 3})},
                             padAttrs({1, 0, 1, 0}, "edge")));
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::I32, {7}, rng, -9, 9)},
                             {zeros(DType::I32, {5})}, padAttrs({1, 1}, "constant")));
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::F32, {7}, rng)},
                             {zeros(DType::F64, {5})}, padAttrs({1, 1}, "constant")));
  expectConformance(makeCase("graph.pad_grad",
                             {randomTensor(DType::F32, {7}, rng)},
                             {zeros(DType::F32, {5, 1})},
                             padAttrs({1, 0, 1, 0}, "constant")));
}
