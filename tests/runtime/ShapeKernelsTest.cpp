//===- ShapeKernelsTest.cpp - CPU shape and lookup kernels ----------------===//
//
// Expected values were computed with PyTorch 1.13; each test names the torch
// expression. Inputs are aranges, so every value is exact and compared with
// EXPECT_EQ.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>
#include <numeric>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

/// torch.arange(start, start + numel(shape)).reshape(shape), as T.
template <typename T>
OwnedTensor arange(DType dtype, std::vector<int64_t> shape, T start = 0) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), start);
  return OwnedTensor::of<T>(dtype, std::move(shape), std::move(v));
}

OwnedTensor i32(std::vector<int64_t> shape, std::vector<int32_t> v) {
  return OwnedTensor::of<int32_t>(DType::I32, std::move(shape), std::move(v));
}

KernelAttrs ints(const std::string &key, std::vector<int64_t> v) {
  KernelAttrs a;
  a.set(key, std::move(v));
  return a;
}

KernelAttrs axisAttr(int64_t axis) {
  KernelAttrs a;
  a.set("axis", axis);
  return a;
}

void expectError(const Status &s, const std::string &text) {
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
}

//===----------------------------------------------------------------------===//
// Reshape, broadcast_to, transpose
//===----------------------------------------------------------------------===//

TEST(ShapeKernels, ReshapeCopiesTheBytes) {
  OwnedTensor x = arange<float>(DType::F32, {2, 3, 4});
  OwnedTensor y(DType::F32, {6, 4});
  ASSERT_TRUE(runCpuKernel("graph.reshape", {&x}, {&y}));
  EXPECT_EQ(y.values<float>(), x.values<float>());

  OwnedTensor xi = i64({2, 2}, {-1, 5, 7, 9});
  OwnedTensor yi(DType::I64, {4});
  ASSERT_TRUE(runCpuKernel("graph.reshape", {&xi}, {&yi}));
  EXPECT_EQ(yi.values<int64_t>(), (std::vector<int64_t>{-1, 5, 7, 9}));

  OwnedTensor wrongCount(DType::F32, {5, 5});
  expectError(runCpuKernel("graph.reshape", {&x}, {&wrongCount}),
              "graph.reshape: element counts differ");
  OwnedTensor wrongType(DType::F64, {24});
  expectError(runCpuKernel("graph.reshape", {&x}, {&wrongType}),
              "graph.reshape: element types differ");
}

TEST(ShapeKernels, BroadcastToFollowsNumpy) {
  // torch.tensor([[1.],[2.],[3.]]).expand(2, 3, 4)
  OwnedTensor x = f32({3, 1}, {1, 2, 3});
  OwnedTensor y(DType::F32, {2, 3, 4});
  ASSERT_TRUE(runCpuKernel("graph.broadcast_to", {&x}, {&y}));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));

  // A row broadcast down, in f64; a scalar to a matrix, in i1.
  OwnedTensor row = f64({1, 3}, {0.5, -1.25, 2});
  OwnedTensor rows(DType::F64, {2, 3});
  ASSERT_TRUE(runCpuKernel("graph.broadcast_to", {&row}, {&rows}));
  EXPECT_EQ(rows.values<double>(),
            (std::vector<double>{0.5, -1.25, 2, 0.5, -1.25, 2}));
  OwnedTensor flag = i1({}, {1});
  OwnedTensor flags(DType::I1, {2, 2});
  ASSERT_TRUE(runCpuKernel("graph.broadcast_to", {&flag}, {&flags}));
  EXPECT_EQ(flags.values<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1}));

  OwnedTensor bad(DType::F32, {2, 2});
  expectError(runCpuKernel("graph.broadcast_to", {&x}, {&bad}),
              "graph.broadcast_to: cannot broadcast f32[3x1] to f32[2x2]");
}

TEST(ShapeKernels, TransposePermutesDims) {
  // torch.arange(24.).reshape(2, 3, 4).permute(2, 0, 1)
  OwnedTensor x = arange<float>(DType::F32, {2, 3, 4});
  OwnedTensor y(DType::F32, {4, 2, 3});
  KernelAttrs perm = ints("perm", {2, 0, 1});
  ASSERT_TRUE(runCpuKernel("graph.transpose", {&x}, {&y}, perm));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{0, 4, 8,  12, 16, 20, 1, 5, 9,  13, 17, 21,
                                2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23}));

  // The same permutation in f64 and i64 moves the same elements.
  OwnedTensor xd = arange<double>(DType::F64, {2, 3, 4});
  OwnedTensor yd(DType::F64, {4, 2, 3});
  ASSERT_TRUE(runCpuKernel("graph.transpose", {&xd}, {&yd}, perm));
  OwnedTensor xi = arange<int64_t>(DType::I64, {2, 3, 4});
  OwnedTensor yi(DType::I64, {4, 2, 3});
  ASSERT_TRUE(runCpuKernel("graph.transpose", {&xi}, {&yi}, perm));
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_EQ(yd.values<double>()[i], y.values<float>()[i]);
    EXPECT_EQ(yi.values<int64_t>()[i], y.values<float>()[i]);
  }

  // torch.arange(6.).reshape(2, 1, 3).permute(1, 0, 2): moving a size-1 dim
  // keeps the order.
  OwnedTensor z = arange<float>(DType::F32, {2, 1, 3});
  OwnedTensor zt(DType::F32, {1, 2, 3});
  ASSERT_TRUE(
      runCpuKernel("graph.transpose", {&z}, {&zt}, ints("perm", {1, 0, 2})));
  EXPECT_EQ(zt.values<float>(), z.values<float>());

  expectError(
      runCpuKernel("graph.transpose", {&x}, {&y}, ints("perm", {2, 0, 0})),
      "graph.transpose: perm is not a permutation");
  expectError(runCpuKernel("graph.transpose", {&x}, {&y}, ints("perm", {1, 0})),
              "graph.transpose: perm must have 3 entries");
  OwnedTensor wrongShape(DType::F32, {4, 3, 2});
  expectError(runCpuKernel("graph.transpose", {&x}, {&wrongShape}, perm),
              "graph.transpose: expected result f32[4x2x3]");
}

TEST(ShapeKernels, TransposeMovesF16Bits) {
  // Byte copies serve the 16-bit float types too: the bit patterns move.
  OwnedTensor x = OwnedTensor::of<uint16_t>(
      DType::F16, {2, 3}, {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x7e00});
  OwnedTensor y(DType::F16, {3, 2});
  ASSERT_TRUE(
      runCpuKernel("graph.transpose", {&x}, {&y}, ints("perm", {1, 0})));
  EXPECT_EQ(
      y.values<uint16_t>(),
      (std::vector<uint16_t>{0x3c00, 0x4400, 0x4000, 0x4500, 0x4200, 0x7e00}));
}

//===----------------------------------------------------------------------===//
// Slice
//===----------------------------------------------------------------------===//

TEST(ShapeKernels, SliceWithStrides) {
  // m = torch.arange(24.).reshape(4, 6); m[1:3, 0:6:2]
  OwnedTensor m = arange<float>(DType::F32, {4, 6});
  OwnedTensor y(DType::F32, {2, 3});
  ASSERT_TRUE(runCpuKernel("graph.slice", {&m}, {&y},
                           sliceAttrs({1, 0}, {2, 3}, {1, 2})));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{6, 8, 10, 12, 14, 16}));

  // Negative strides walk backwards: rows 3, 1 and columns 1, 3, 5, i.e.
  // m[[3, 1]][:, [1, 3, 5]] (torch slicing has no negative steps).
  ASSERT_TRUE(runCpuKernel("graph.slice", {&m}, {&y},
                           sliceAttrs({3, 1}, {2, 3}, {-2, 2})));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{19, 21, 23, 7, 9, 11}));

  // A whole reversed row in f64: m.double()[2].flip(0).
  OwnedTensor md = arange<double>(DType::F64, {4, 6});
  OwnedTensor r(DType::F64, {1, 6});
  ASSERT_TRUE(runCpuKernel("graph.slice", {&md}, {&r},
                           sliceAttrs({2, 5}, {1, 6}, {1, -1})));
  EXPECT_EQ(r.values<double>(), (std::vector<double>{17, 16, 15, 14, 13, 12}));

  // An empty slice may start anywhere.
  OwnedTensor empty(DType::F32, {0, 3});
  ASSERT_TRUE(runCpuKernel("graph.slice", {&m}, {&empty},
                           sliceAttrs({9, 0}, {0, 3}, {1, 1})));

  expectError(runCpuKernel("graph.slice", {&m}, {&y},
                           sliceAttrs({3, 0}, {2, 3}, {1, 1})),
              "graph.slice: dim 0: slice is out of bounds for size 4");
  expectError(runCpuKernel("graph.slice", {&m}, {&y},
                           sliceAttrs({0, 0}, {2, 3}, {1, 0})),
              "graph.slice: dim 1: stride must be non-zero");
  expectError(
      runCpuKernel("graph.slice", {&m}, {&y}, sliceAttrs({0}, {2}, {1})),
      "graph.slice: offsets, sizes and strides need one entry per dim");
  expectError(runCpuKernel("graph.slice", {&m}, {&y},
                           sliceAttrs({0, 0}, {2, 2}, {1, 1})),
              "graph.slice: expected result f32[2x2]");
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

TEST(ShapeKernels, ConcatAlongAnAxis) {
  // torch.cat([a, b, torch.zeros(2, 0)], 1) with a = torch.arange(4.)
  // .reshape(2, 2), b = torch.arange(10., 16.).reshape(2, 3)
  OwnedTensor a = arange<float>(DType::F32, {2, 2});
  OwnedTensor b = arange<float>(DType::F32, {2, 3}, 10);
  OwnedTensor none(DType::F32, {2, 0});
  OwnedTensor y(DType::F32, {2, 5});
  ASSERT_TRUE(runCpuKernel("graph.concat", {&a, &b, &none}, {&y}, axisAttr(1)));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{0, 1, 10, 11, 12, 2, 3, 13, 14, 15}));

  // torch.cat([a, a + 10], 0), in f64.
  OwnedTensor ad = arange<double>(DType::F64, {2, 2});
  OwnedTensor bd = arange<double>(DType::F64, {2, 2}, 10);
  OwnedTensor yd(DType::F64, {4, 2});
  ASSERT_TRUE(runCpuKernel("graph.concat", {&ad, &bd}, {&yd}, axisAttr(0)));
  EXPECT_EQ(yd.values<double>(),
            (std::vector<double>{0, 1, 2, 3, 10, 11, 12, 13}));

  // Bools along the last axis of rank-1 tensors.
  OwnedTensor p = i1({2}, {1, 0}), q = i1({1}, {1});
  OwnedTensor pq(DType::I1, {3});
  ASSERT_TRUE(runCpuKernel("graph.concat", {&p, &q}, {&pq}, axisAttr(0)));
  EXPECT_EQ(pq.values<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));

  expectError(runCpuKernel("graph.concat", {&a, &b}, {&y}, axisAttr(2)),
              "graph.concat: axis 2 must be in [0, 2)");
  expectError(runCpuKernel("graph.concat", {&a, &a}, {&y}, axisAttr(1)),
              "graph.concat: input sizes along axis sum to 4, result has 5");
  OwnedTensor tall = arange<float>(DType::F32, {3, 3});
  expectError(runCpuKernel("graph.concat", {&a, &tall}, {&y}, axisAttr(1)),
              "graph.concat: f32[3x3] does not match f32[2x5] outside axis 1");
  expectError(runCpuKernel("graph.concat", {&a, &bd}, {&y}, axisAttr(1)),
              "graph.concat: element types differ");
}

TEST(ShapeKernels, SplitIntoTheResultShapes) {
  // torch.split(torch.arange(10.).reshape(5, 2), [2, 3], 0)
  OwnedTensor x = arange<float>(DType::F32, {5, 2});
  OwnedTensor y0(DType::F32, {2, 2}), y1(DType::F32, {3, 2});
  ASSERT_TRUE(runCpuKernel("graph.split", {&x}, {&y0, &y1}, axisAttr(0)));
  EXPECT_EQ(y0.values<float>(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(y1.values<float>(), (std::vector<float>{4, 5, 6, 7, 8, 9}));

  // torch.split(torch.arange(12.).reshape(2, 6), [1, 3, 2], 1), in i64.
  OwnedTensor z = arange<int64_t>(DType::I64, {2, 6});
  OwnedTensor z0(DType::I64, {2, 1}), z1(DType::I64, {2, 3}),
      z2(DType::I64, {2, 2});
  ASSERT_TRUE(runCpuKernel("graph.split", {&z}, {&z0, &z1, &z2}, axisAttr(1)));
  EXPECT_EQ(z0.values<int64_t>(), (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(z1.values<int64_t>(), (std::vector<int64_t>{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(z2.values<int64_t>(), (std::vector<int64_t>{4, 5, 10, 11}));

  // f64 halves of a [2, 2] along dim 1.
  OwnedTensor d = f64({2, 2}, {0.25, -0.5, 1.5, 3});
  OwnedTensor d0(DType::F64, {2, 1}), d1(DType::F64, {2, 1});
  ASSERT_TRUE(runCpuKernel("graph.split", {&d}, {&d0, &d1}, axisAttr(1)));
  EXPECT_EQ(d0.values<double>(), (std::vector<double>{0.25, 1.5}));
  EXPECT_EQ(d1.values<double>(), (std::vector<double>{-0.5, 3}));

  OwnedTensor short0(DType::F32, {2, 2}), short1(DType::F32, {2, 2});
  expectError(
      runCpuKernel("graph.split", {&x}, {&short0, &short1}, axisAttr(0)),
      "graph.split: result sizes along axis sum to 4, input has 5");
  expectError(runCpuKernel("graph.split", {&x}, {&y0, &y1}, axisAttr(-1)),
              "graph.split: axis -1 must be in [0, 2)");
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

KernelAttrs padAttrs(std::vector<int64_t> pads, std::string mode,
                     double value = 0.0) {
  KernelAttrs a;
  a.set("pads", std::move(pads));
  a.set("mode", std::move(mode));
  a.set("value", value);
  return a;
}

// p = torch.arange(1., 13.).reshape(1, 1, 3, 4), padded by
// F.pad(p, (2, 1, 1, 2), mode=...): rows 1 before and 2 after, columns 2
// before and 1 after; in ONNX order for the [3, 4] view: {1, 2, 2, 1}.
TEST(ShapeKernels, PadReflectMirrorsWithoutTheEdge) {
  OwnedTensor x = arange<float>(DType::F32, {3, 4}, 1);
  OwnedTensor y(DType::F32, {6, 7});
  ASSERT_TRUE(
      runCpuKernel("graph.pad", {&x}, {&y}, padAttrs({1, 2, 2, 1}, "reflect")));
  EXPECT_EQ(
      y.values<float>(),
      (std::vector<float>{7, 6, 5, 6, 7, 8, 7, 3,  2,  1, 2,  3,  4,  3,
                          7, 6, 5, 6, 7, 8, 7, 11, 10, 9, 10, 11, 12, 11,
                          7, 6, 5, 6, 7, 8, 7, 3,  2,  1, 2,  3,  4,  3}));

  // F.pad(torch.arange(1., 5.).reshape(1, 1, 4), (3, 3), mode='reflect'):
  // the largest reflect pad (dim - 1), in f64.
  OwnedTensor v = arange<double>(DType::F64, {4}, 1);
  OwnedTensor w(DType::F64, {10});
  ASSERT_TRUE(
      runCpuKernel("graph.pad", {&v}, {&w}, padAttrs({3, 3}, "reflect")));
  EXPECT_EQ(w.values<double>(),
            (std::vector<double>{4, 3, 2, 1, 2, 3, 4, 3, 2, 1}));

  OwnedTensor tooFar(DType::F64, {12});
  expectError(
      runCpuKernel("graph.pad", {&v}, {&tooFar}, padAttrs({4, 4}, "reflect")),
      "graph.pad: reflect pads of dim 0 must be smaller than 4");
}

TEST(ShapeKernels, PadEdgeReplicates) {
  // F.pad(p, (2, 1, 1, 2), mode='replicate')
  OwnedTensor x = arange<float>(DType::F32, {3, 4}, 1);
  OwnedTensor y(DType::F32, {6, 7});
  ASSERT_TRUE(
      runCpuKernel("graph.pad", {&x}, {&y}, padAttrs({1, 2, 2, 1}, "edge")));
  EXPECT_EQ(
      y.values<float>(),
      (std::vector<float>{1, 1, 1, 2,  3,  4,  4,  1, 1, 1, 2,  3,  4,  4,
                          5, 5, 5, 6,  7,  8,  8,  9, 9, 9, 10, 11, 12, 12,
                          9, 9, 9, 10, 11, 12, 12, 9, 9, 9, 10, 11, 12, 12}));

  // Edge pads may exceed the dim; an empty dim has no edge.
  OwnedTensor one = i64({1}, {7});
  OwnedTensor many(DType::I64, {5});
  ASSERT_TRUE(
      runCpuKernel("graph.pad", {&one}, {&many}, padAttrs({3, 1}, "edge")));
  EXPECT_EQ(many.values<int64_t>(), (std::vector<int64_t>{7, 7, 7, 7, 7}));
  OwnedTensor empty(DType::I64, {0});
  OwnedTensor two(DType::I64, {2});
  expectError(
      runCpuKernel("graph.pad", {&empty}, {&two}, padAttrs({1, 1}, "edge")),
      "graph.pad: cannot edge-pad empty dim 0");
}

TEST(ShapeKernels, PadConstantFillsTheValue) {
  // F.pad(p, (2, 1, 1, 2), mode='constant', value=1.5)
  OwnedTensor x = arange<float>(DType::F32, {3, 4}, 1);
  OwnedTensor y(DType::F32, {6, 7});
  ASSERT_TRUE(runCpuKernel("graph.pad", {&x}, {&y},
                           padAttrs({1, 2, 2, 1}, "constant", 1.5)));
  const float c = 1.5f;
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{c, c, c, c, c, c, c, c, c, 1, 2,  3,  4,  c,
                                c, c, 5, 6, 7, 8, c, c, c, 9, 10, 11, 12, c,
                                c, c, c, c, c, c, c, c, c, c, c,  c,  c,  c}));

  // F.pad(torch.arange(1., 5.).reshape(2, 2), (0, 1, 1, 0), value=-1), in
  // f64; mode and value take their defaults ("constant", 0) when absent.
  OwnedTensor s = arange<double>(DType::F64, {2, 2}, 1);
  OwnedTensor t(DType::F64, {3, 3});
  ASSERT_TRUE(runCpuKernel("graph.pad", {&s}, {&t},
                           padAttrs({1, 0, 0, 1}, "constant", -1)));
  EXPECT_EQ(t.values<double>(),
            (std::vector<double>{-1, -1, -1, 1, 2, -1, 3, 4, -1}));
  ASSERT_TRUE(
      runCpuKernel("graph.pad", {&s}, {&t}, ints("pads", {1, 0, 0, 1})));
  EXPECT_EQ(t.values<double>(),
            (std::vector<double>{0, 0, 0, 1, 2, 0, 3, 4, 0}));

  // Integers truncate the value like a torch fill; bools take value != 0.
  OwnedTensor n = i32({2}, {5, 6});
  OwnedTensor m(DType::I32, {4});
  ASSERT_TRUE(runCpuKernel("graph.pad", {&n}, {&m},
                           padAttrs({1, 1}, "constant", -2.75)));
  EXPECT_EQ(m.values<int32_t>(), (std::vector<int32_t>{-2, 5, 6, -2}));
  OwnedTensor b = i1({1}, {0});
  OwnedTensor bb(DType::I1, {3});
  ASSERT_TRUE(runCpuKernel("graph.pad", {&b}, {&bb},
                           padAttrs({1, 1}, "constant", 0.5)));
  EXPECT_EQ(bb.values<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));

  // bf16 / fp16 take the value as torch does: to float, rounded to nearest
  // even (1/3: f32 0x3eaaaaab, bf16 0x3eab, fp16 0x3555; -2.5 is exact).
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(name(t));
    OwnedTensor h(t, {1});
    OwnedTensor hh(t, {3});
    ASSERT_TRUE(runCpuKernel("graph.pad", {&h}, {&hh},
                             padAttrs({1, 1}, "constant", 1.0 / 3)));
    uint16_t third = t == DType::BF16 ? 0x3eab : 0x3555;
    EXPECT_EQ(hh.values<uint16_t>(), (std::vector<uint16_t>{third, 0, third}));
    ASSERT_TRUE(runCpuKernel("graph.pad", {&h}, {&hh},
                             padAttrs({0, 2}, "constant", -2.5)));
    uint16_t minus = t == DType::BF16 ? 0xc020 : 0xc100;
    EXPECT_EQ(hh.values<uint16_t>(), (std::vector<uint16_t>{0, minus, minus}));
  }

  expectError(
      runCpuKernel("graph.pad", {&n}, {&m}, padAttrs({1, 1}, "constant", 1e20)),
      "graph.pad: value 100000000000000000000.000000 does not fit i32");
  expectError(runCpuKernel("graph.pad", {&n}, {&m}, padAttrs({1, 1}, "wrap")),
              "graph.pad: unknown mode \"wrap\"");
  expectError(runCpuKernel("graph.pad", {&n}, {&m}, padAttrs({1}, "edge")),
              "graph.pad: pads needs two entries per dim");
  expectError(runCpuKernel("graph.pad", {&n}, {&m}, padAttrs({3, -1}, "edge")),
              "graph.pad: pads must be >= 0");
  OwnedTensor wrong(DType::I32, {5});
  expectError(
      runCpuKernel("graph.pad", {&n}, {&wrong}, padAttrs({1, 1}, "edge")),
      "graph.pad: expected result i32[4], got i32[5]");
}

//===----------------------------------------------------------------------===//
// Trilu
//===----------------------------------------------------------------------===//

KernelAttrs triluAttrs(bool upper, int64_t k) {
  KernelAttrs a;
  a.set("upper", int64_t(upper));
  a.set("k", k);
  return a;
}

TEST(ShapeKernels, TriluKeepsATriangleOfEveryMatrix) {
  // t = torch.arange(1., 25.).reshape(2, 3, 4); torch.triu(t, k) and
  // torch.tril(t, k).
  OwnedTensor t = arange<float>(DType::F32, {2, 3, 4}, 1);
  OwnedTensor y(DType::F32, {2, 3, 4});
  struct Case {
    bool upper;
    int64_t k;
    std::vector<float> expected;
  };
  std::vector<Case> cases = {
      {true, 0, {1,  2,  3,  4,  0, 6,  7,  8,  0, 0, 11, 12,
                 13, 14, 15, 16, 0, 18, 19, 20, 0, 0, 23, 24}},
      {false, 0, {1,  0, 0, 0, 5,  6,  0, 0, 9,  10, 11, 0,
                  13, 0, 0, 0, 17, 18, 0, 0, 21, 22, 23, 0}},
      {true, 1, {0, 2,  3,  4,  0, 0, 7,  8,  0, 0, 0, 12,
                 0, 14, 15, 16, 0, 0, 19, 20, 0, 0, 0, 24}},
      {false, 1, {1,  2,  0, 0, 5,  6,  7,  0, 9,  10, 11, 12,
                  13, 14, 0, 0, 17, 18, 19, 0, 21, 22, 23, 24}},
      {true, -1, {1,  2,  3,  4,  5,  6,  7,  8,  0, 10, 11, 12,
                  13, 14, 15, 16, 17, 18, 19, 20, 0, 22, 23, 24}},
      {false, -1, {0, 0, 0, 0, 5,  0, 0, 0, 9,  10, 0, 0,
                   0, 0, 0, 0, 17, 0, 0, 0, 21, 22, 0, 0}},
      {true, 2, {0, 0, 3,  4,  0, 0, 0, 8,  0, 0, 0, 0,
                 0, 0, 15, 16, 0, 0, 0, 20, 0, 0, 0, 0}},
      {false, 2, {1,  2,  3,  0, 5,  6,  7,  8,  9,  10, 11, 12,
                  13, 14, 15, 0, 17, 18, 19, 20, 21, 22, 23, 24}},
      {true, 5, std::vector<float>(24, 0)},
      {false, -5, std::vector<float>(24, 0)},
  };
  for (const Case &c : cases) {
    ASSERT_TRUE(
        runCpuKernel("graph.trilu", {&t}, {&y}, triluAttrs(c.upper, c.k)));
    EXPECT_EQ(y.values<float>(), c.expected)
        << (c.upper ? "triu " : "tril ") << c.k;
  }
  // Extreme k keeps everything or nothing without overflowing.
  ASSERT_TRUE(
      runCpuKernel("graph.trilu", {&t}, {&y}, triluAttrs(false, INT64_MAX)));
  EXPECT_EQ(y.values<float>(), t.values<float>());
  ASSERT_TRUE(
      runCpuKernel("graph.trilu", {&t}, {&y}, triluAttrs(true, INT64_MIN)));
  EXPECT_EQ(y.values<float>(), t.values<float>());

  // The causal mask shape: torch.tril(torch.ones(3, 3, dtype=torch.bool)),
  // and f64 upper with the defaults k = 0.
  OwnedTensor ones = i1({3, 3}, std::vector<uint8_t>(9, 1));
  OwnedTensor mask(DType::I1, {3, 3});
  ASSERT_TRUE(
      runCpuKernel("graph.trilu", {&ones}, {&mask}, triluAttrs(false, 0)));
  EXPECT_EQ(mask.values<uint8_t>(),
            (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  OwnedTensor d = f64({2, 2}, {1.5, 2.5, 3.5, 4.5});
  OwnedTensor du(DType::F64, {2, 2});
  KernelAttrs upperOnly;
  upperOnly.set("upper", int64_t(1));
  ASSERT_TRUE(runCpuKernel("graph.trilu", {&d}, {&du}, upperOnly));
  EXPECT_EQ(du.values<double>(), (std::vector<double>{1.5, 2.5, 0, 4.5}));

  OwnedTensor vec = f32({3}, {1, 2, 3});
  OwnedTensor vout(DType::F32, {3});
  expectError(runCpuKernel("graph.trilu", {&vec}, {&vout}, triluAttrs(true, 0)),
              "graph.trilu: input must have rank >= 2");
}

//===----------------------------------------------------------------------===//
// Gather and embedding
//===----------------------------------------------------------------------===//

TEST(ShapeKernels, GatherIndexesOneAxis) {
  // g = torch.arange(12.).reshape(2, 3, 2); g[:, idx % 3] with idx =
  // [[0, -1], [2, 1]] (torch indexing wants the negatives normalized).
  OwnedTensor g = arange<float>(DType::F32, {2, 3, 2});
  OwnedTensor idx = i64({2, 2}, {0, -1, 2, 1});
  OwnedTensor y(DType::F32, {2, 2, 2, 2});
  ASSERT_TRUE(runCpuKernel("graph.gather", {&g, &idx}, {&y}, axisAttr(1)));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{0, 1, 4, 5, 4, 5, 2, 3, 6, 7,
                                                   10, 11, 10, 11, 8, 9}));

  // A rank-0 index drops the axis: g[:, 1], with i32 indices, in f64.
  OwnedTensor gd = arange<double>(DType::F64, {2, 3, 2});
  OwnedTensor one = i32({}, {1});
  OwnedTensor yd(DType::F64, {2, 2});
  ASSERT_TRUE(runCpuKernel("graph.gather", {&gd, &one}, {&yd}, axisAttr(1)));
  EXPECT_EQ(yd.values<double>(), (std::vector<double>{2, 3, 8, 9}));

  // g[torch.tensor([1, -2, 1]) % 2], gathering i64 data along axis 0.
  OwnedTensor gi = arange<int64_t>(DType::I64, {2, 3, 2});
  OwnedTensor rows = i64({3}, {1, -2, 1});
  OwnedTensor yi(DType::I64, {3, 3, 2});
  ASSERT_TRUE(runCpuKernel("graph.gather", {&gi, &rows}, {&yi}, axisAttr(0)));
  EXPECT_EQ(yi.values<int64_t>(),
            (std::vector<int64_t>{6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8,
                                  9, 10, 11}));

  OwnedTensor far = i64({2, 2}, {0, 3, 2, 1});
  expectError(runCpuKernel("graph.gather", {&g, &far}, {&y}, axisAttr(1)),
              "graph.gather: index 3 is out of range for size 3");
  OwnedTensor farNeg = i64({2, 2}, {0, -4, 2, 1});
  expectError(runCpuKernel("graph.gather", {&g, &farNeg}, {&y}, axisAttr(1)),
              "graph.gather: index -4 is out of range for size 3");
  OwnedTensor floats = f32({2, 2}, {0, 1, 2, 1});
  expectError(runCpuKernel("graph.gather", {&g, &floats}, {&y}, axisAttr(1)),
              "graph.gather: indices must be i64, i32, i16 or i8, got f32");
  expectError(runCpuKernel("graph.gather", {&g, &idx}, {&y}, axisAttr(3)),
              "graph.gather: axis 3 must be in [0, 3)");
  OwnedTensor wrong(DType::F32, {2, 2, 2});
  expectError(runCpuKernel("graph.gather", {&g, &idx}, {&wrong}, axisAttr(1)),
              "graph.gather: expected result f32[2x2x2x2]");
}

TEST(ShapeKernels, EmbeddingSelectsRows) {
  // F.embedding(ei % 4, tab), ei = [[3, 0], [-1, -4]]; negative indices
  // count from the end as the ODS says (F.embedding itself rejects them).
  OwnedTensor tab = f32({4, 3}, {0.5, 1.5, 2.5, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  OwnedTensor ei = i64({2, 2}, {3, 0, -1, -4});
  OwnedTensor y(DType::F32, {2, 2, 3});
  ASSERT_TRUE(runCpuKernel("graph.embedding", {&tab, &ei}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{9, 10, 11, 0.5, 1.5, 2.5, 9,
                                                   10, 11, 0.5, 1.5, 2.5}));

  // f64 table, i32 indices of rank 1.
  OwnedTensor tabd = f64({3, 2}, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6});
  OwnedTensor ids = i32({2}, {2, 1});
  OwnedTensor yd(DType::F64, {2, 2});
  ASSERT_TRUE(runCpuKernel("graph.embedding", {&tabd, &ids}, {&yd}));
  EXPECT_EQ(yd.values<double>(), (std::vector<double>{0.5, 0.6, 0.3, 0.4}));

  OwnedTensor far = i64({2, 2}, {3, 0, 4, 1});
  expectError(runCpuKernel("graph.embedding", {&tab, &far}, {&y}),
              "graph.embedding: index 4 is out of range for size 4");
  OwnedTensor flat = f32({4}, {1, 2, 3, 4});
  OwnedTensor flatOut(DType::F32, {2, 2});
  expectError(runCpuKernel("graph.embedding", {&flat, &ei}, {&flatOut}),
              "graph.embedding: table must have rank 2");
  expectError(runCpuKernel("graph.embedding", {&tab}, {&y}),
              "graph.embedding: expected 2 inputs");
}

} // namespace
