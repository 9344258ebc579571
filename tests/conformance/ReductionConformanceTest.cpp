//===- ReductionConformanceTest.cpp - Reductions, CUDA vs CPU -------------===//
//
// graph.reduce_sum, graph.reduce_mean and graph.reduce_max against the CPU's
// kernels over every path of ReductionKernels.cu: rows (the innermost dim
// reduced, a warp or a whole block per result), columns (the innermost dim
// kept, 32- and 8-wide tiles), few columns (a group per column), several
// reduced and kept runs, size-1 and empty dims, full reductions of long
// tensors, keepdims either way.
//
// Tolerances: f32 rtol 1e-4 (both sum in double; the GPU in another
// order), f64 rtol 1e-12 with atol 1e-10 (sums near zero), integers
// exactly (they wrap in 64 bits on both).
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace strata::runtime;
using namespace strata::runtime::conformance;

namespace {

using Shape = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct R {
  Shape in;
  Ints axes;
};

/// Every path: rows short and long, one long row, columns wide and narrow,
/// few columns of long rows, alternating runs, size-1 and empty dims,
/// nothing reduced, a scalar.
std::vector<R> reductions() {
  return {
      {{4096}, {0}},
      {{3, 4096}, {1}},
      {{4096, 3}, {0}},
      {{300, 700}, {0}},
      {{100, 5000}, {0}},
      {{2000, 64}, {0}},
      {{5000, 63}, {0}},
      {{70, 100}, {1}},
      {{1500, 5}, {1}},
      {{2, 3, 4, 5}, {1, 3}},
      {{2, 3, 4, 5}, {0, 2}},
      {{6, 50, 70}, {0, 2}},
      {{64, 33, 100}, {0}},
      {{8, 1, 16}, {1}},
      {{8, 1, 16}, {0, 1}},
      {{5, 7}, {}},
      {{1000, 1000}, {0, 1}},
      {{1 << 20 | 5}, {0}},
      {{3, 5, 2, 7, 2}, {0, 2, 4}},
      {{}, {}},
      {{1}, {0}},
      {{0, 5}, {1}},
      {{3, 0, 4}, {0}},
      {{4, 0}, {1}},
      {{2, 0, 3}, {1}},
  };
}

Shape resultShape(const R &r, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < r.in.size(); ++d) {
    bool reduced = false;
    for (int64_t a : r.axes)
      reduced = reduced || a == int64_t(d);
    if (!reduced)
      out.push_back(r.in[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

Case reduceCase(const char *op, CaseTensor in, Shape out, Ints axes,
                bool keepdims, bool setKeepdims = true) {
  Case c;
  c.op = op;
  DType t = in.dtype;
  c.inputs = {std::move(in)};
  c.outputs = {zeros(t, std::move(out))};
  c.attrs.set("axes", std::move(axes));
  if (setKeepdims)
    c.attrs.set("keepdims", int64_t(keepdims));
  c.rtol = t == DType::F64 ? 1e-12 : 1e-4;
  c.atol = t == DType::F64 ? 1e-10 : 1e-6;
  return c;
}

} // namespace

TEST(ReductionConformance, Sum) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(41);
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I16,
                  DType::I8})
    for (const R &r : reductions())
      for (bool keepdims : {true, false}) {
        SCOPED_TRACE(std::string(name(t)) + " " + shapeString(r.in) +
                     " keepdims " + std::to_string(keepdims));
        // Integers wide enough that i8 and i16 sums wrap.
        CaseTensor in = randomTensor(t, r.in, rng, -100, 100);
        expectConformance(reduceCase("graph.reduce_sum", in,
                                     resultShape(r, keepdims), r.axes,
                                     keepdims));
      }
}

TEST(ReductionConformance, Mean) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(42);
  for (DType t : {DType::F32, DType::F64})
    for (const R &r : reductions())
      for (bool keepdims : {true, false}) {
        SCOPED_TRACE(std::string(name(t)) + " " + shapeString(r.in) +
                     " keepdims " + std::to_string(keepdims));
        // Values away from zero keep the means away from zero.
        CaseTensor in = randomTensor(t, r.in, rng, 0.5, 2);
        expectConformance(reduceCase("graph.reduce_mean", in,
                                     resultShape(r, keepdims), r.axes,
                                     keepdims));
      }
}

TEST(ReductionConformance, Max) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(43);
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I16,
                  DType::I8, DType::I1})
    for (const R &r : reductions())
      for (bool keepdims : {true, false}) {
        SCOPED_TRACE(std::string(name(t)) + " " + shapeString(r.in) +
                     " keepdims " + std::to_string(keepdims));
        // An empty group with results is an error on both.
        CaseTensor in = randomTensor(t, r.in, rng, -1000, 1000);
        expectConformance(reduceCase("graph.reduce_max", in,
                                     resultShape(r, keepdims), r.axes,
                                     keepdims));
      }
}

TEST(ReductionConformance, KeepdimsDefault) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(44);
  // keepdims absent: true.
  for (const char *op : {"graph.reduce_sum", "graph.reduce_mean",
                         "graph.reduce_max"})
    expectConformance(reduceCase(op, randomTensor(DType::F32, {6, 9}, rng),
                                 {6, 1}, {1}, true, false));
}

TEST(ReductionConformance, SpecialValues) {
  STRATA_REQUIRE_GPU();
  // NaN wins max wherever it is in the group (first, middle, last, alone
  // with -inf); inf and NaN reach sums and means; -inf alone is the max.
  std::vector<double> v = {kNaN, 1,    2,    3,    // NaN first
                           1,    kNaN, 5,    2,    // NaN inside
                           1,    2,    3,    kNaN, // NaN last
                           -kInf, -kInf, -kInf, -kInf,
                           kInf, 1,    -kInf, 2,   // inf - inf
                           -0.0, 0.0,  -0.0, 0.0,
                           kInf, 1,    2,    3,
                           -5,   -7,   -1e30, -6};
  for (DType t : {DType::F32, DType::F64}) {
    CaseTensor in = fromValues(t, {8, 4}, v);
    for (const char *op : {"graph.reduce_sum", "graph.reduce_mean",
                           "graph.reduce_max"}) {
      // Rows (the innermost dim reduced) and columns (kept).
      expectConformance(reduceCase(op, in, {8, 1}, {1}, true));
      expectConformance(reduceCase(op, in, {1, 4}, {0}, true));
      expectConformance(reduceCase(op, in, {}, {0, 1}, false));
    }
    // Long rows with a NaN: every lane of a group, the block tree.
    std::vector<double> longRow(3 * 5000, 1.0);
    longRow[4999] = kNaN;
    longRow[5000 + 17] = kNaN;
    longRow[10000 + 2500] = kNaN;
    CaseTensor rows = fromValues(t, {3, 5000}, longRow);
    expectConformance(reduceCase("graph.reduce_max", rows, {3, 1}, {1}, true));
    expectConformance(reduceCase("graph.reduce_sum", rows, {3, 1}, {1}, true));
    // Columns (32- and 8-wide tiles) with a NaN in some.
    for (Shape shape : {Shape{300, 100}, Shape{50, 4100}}) {
      std::vector<double> cols(size_t(shape[0] * shape[1]), -3.0);
      cols[7] = kNaN;
      cols[size_t(shape[1] * 5 + 64)] = kNaN;
      cols[size_t(shape[0] * shape[1] - 1)] = kNaN;
      CaseTensor in = fromValues(t, shape, cols);
      expectConformance(reduceCase("graph.reduce_max", in, {1, shape[1]}, {0},
                                   true));
      expectConformance(reduceCase("graph.reduce_mean", in, {shape[1]}, {0},
                                   false));
    }
  }
}

TEST(ReductionConformance, Errors) {
  STRATA_REQUIRE_GPU();
  std::mt19937_64 rng(45);
  CaseTensor x = randomTensor(DType::F32, {3, 4}, rng);
  for (const char *op : {"graph.reduce_sum", "graph.reduce_mean",
                         "graph.reduce_max"}) {
    // Axes out of range or repeated, the wrong result shape, differing
    // types, arity.
    expectConformance(reduceCase(op, x, {3, 1}, {2}, true));
    expectConformance(reduceCase(op, x, {3, 1}, {-1}, true));
    expectConformance(reduceCase(op, x, {3, 1}, {1, 1}, true));
    expectConformance(reduceCase(op, x, {3}, {1}, true));
    expectConformance(reduceCase(op, x, {3, 1}, {1}, false));
    Case c = reduceCase(op, x, {3, 1}, {1}, true);
    c.outputs = {zeros(DType::F64, {3, 1})};
    expectConformance(c);
    c = reduceCase(op, x, {3, 1}, {1}, true);
    c.inputs.push_back(x);
    expectConformance(c);
    c.inputs.clear();
    expectConformance(c);
    // f16 is no element type of theirs.
    expectConformance(reduceCase(op, zeros(DType::F16, {3, 4}), {3, 1}, {1},
                                 true));
    // More than 16 kept runs (alternating dims; empty, so no memory).
    Shape big(34, 2);
    big[0] = 0;
    Ints axes;
    for (int64_t d = 1; d < 34; d += 2)
      axes.push_back(d);
    Shape out = big;
    for (int64_t d : axes)
      out[d] = 1;
    expectConformance(reduceCase(op, zeros(DType::F32, big), out, axes, true));
  }
  // Sums refuse i1; means refuse integers; max refuses an empty group.
  expectConformance(reduceCase("graph.reduce_sum",
                               randomTensor(DType::I1, {3, 4}, rng), {3, 1}, {1},
                               true));
  expectConformance(reduceCase("graph.reduce_mean",
                               randomTensor(DType::I32, {3, 4}, rng), {3, 1},
                               {1}, true));
  expectConformance(reduceCase("graph.reduce_max", zeros(DType::F32, {4, 0}),
                               {4, 1}, {1}, true));
  expectConformance(reduceCase("graph.reduce_max", zeros(DType::I32, {4, 0, 2}),
                               {4, 2}, {1}, false));
}
