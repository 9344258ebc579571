//===- ConvolutionKernelsTest.cpp - CPU convolution and pooling kernels ---===//
//
// Expected values were computed with PyTorch 1.13 (torch.nn.functional as F;
// the expression is above each list). Inputs are made here and in Python by
// the same formula: ramp() gives small multiples of 1/8, so the convolution
// sums are exact in f32 and f64 alike and one list serves both dtypes; the
// sin()-based cases check rounding against PyTorch's f32 and f64 results
// separately. PyTorch has only symmetric pads: asymmetric ones are checked
// against F.pad (zeros for conv, -inf for max_pool) followed by the op, or
// by hand for avg_pool.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"

#include <cmath>
#include <string>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

using Shape = std::vector<int64_t>;
using Values = std::vector<double>;

int64_t numelOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A tensor of dtype `dt` (f32 or f64) holding `v`.
OwnedTensor make(DType dt, Shape shape, const Values &v) {
  if (dt == DType::F32)
    return f32(std::move(shape), std::vector<float>(v.begin(), v.end()));
  return f64(std::move(shape), v);
}

/// ((i * mul) % mod - off) / 8 for i in [0, numel): in Python
/// torch.tensor([((i*mul) % mod - off)/8.0 for i in range(n)]).reshape(shape).
Values ramp(const Shape &shape, int64_t mul, int64_t mod, int64_t off) {
  Values v(numelOf(shape));
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i)
    v[i] = double((i * mul) % mod - off) / 8.0;
  return v;
}

/// The inputs of the conv cases: x = ramp(shape, 7, 11, 5) and
/// w = ramp(shape, 5, 13, 6).
Values convInput(const Shape &s) { return ramp(s, 7, 11, 5); }
Values convWeight(const Shape &s) { return ramp(s, 5, 13, 6); }

/// The input of the pool cases: ramp(shape, 7, 13, 6).
Values poolInput(const Shape &s) { return ramp(s, 7, 13, 6); }

Values valuesOf(const OwnedTensor &t) {
  if (t.view().dtype == DType::F32) {
    std::vector<float> v = t.values<float>();
    return Values(v.begin(), v.end());
  }
  return t.values<double>();
}

/// Checks |actual - expected| <= rtol * |expected| + atol elementwise; NaN
/// must meet NaN.
void expectClose(const OwnedTensor &y, const Values &expected,
                 double rtol = 1e-6, double atol = 1e-7) {
  Values actual = valuesOf(y);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << "at " << i;
      continue;
    }
    EXPECT_NEAR(actual[i], expected[i], rtol * std::abs(expected[i]) + atol)
        << "at " << i;
  }
}

KernelAttrs convAttrs(Shape strides, Shape pads, Shape dilations,
                      int64_t groups = 1) {
  KernelAttrs a;
  a.set("strides", std::move(strides));
  a.set("pads", std::move(pads));
  a.set("dilations", std::move(dilations));
  a.set("groups", groups);
  return a;
}

KernelAttrs maxPoolAttrs(Shape kernel, Shape strides, Shape pads,
                         Shape dilations, bool ceilMode) {
  KernelAttrs a;
  a.set("kernel_shape", std::move(kernel));
  a.set("strides", std::move(strides));
  a.set("pads", std::move(pads));
  a.set("dilations", std::move(dilations));
  a.set("ceil_mode", int64_t(ceilMode));
  return a;
}

KernelAttrs avgPoolAttrs(Shape kernel, Shape strides, Shape pads,
                         bool ceilMode, bool countIncludePad) {
  KernelAttrs a;
  a.set("kernel_shape", std::move(kernel));
  a.set("strides", std::move(strides));
  a.set("pads", std::move(pads));
  a.set("ceil_mode", int64_t(ceilMode));
  a.set("count_include_pad", int64_t(countIncludePad));
  return a;
}

/// Runs graph.conv on convInput(xs), convWeight(ws) and `bias` (none if
/// empty) in f32 and f64 and compares with `expected` of shape `ys`.
void checkConv(const Shape &xs, const Shape &ws, const Values &bias,
               const KernelAttrs &attrs, const Shape &ys,
               const Values &expected) {
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(name(dt)));
    OwnedTensor x = make(dt, xs, convInput(xs));
    OwnedTensor w = make(dt, ws, convWeight(ws));
    OwnedTensor b = make(dt, {static_cast<int64_t>(bias.size())}, bias);
    OwnedTensor y(dt, ys);
    std::vector<const OwnedTensor *> in{&x, &w};
    if (!bias.empty())
      in.push_back(&b);
    Status s = runCpuKernel("graph.conv", in, {&y}, attrs);
    ASSERT_TRUE(s) << s.message();
    expectClose(y, expected);
  }
}

/// Runs pool `op` on `input` of shape `xs` in f32 and f64.
void checkPool(const std::string &op, const Shape &xs, const Values &input,
               const KernelAttrs &attrs, const Shape &ys,
               const Values &expected) {
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(name(dt)));
    OwnedTensor x = make(dt, xs, input);
    OwnedTensor y(dt, ys);
    Status s = runCpuKernel(op, {&x}, {&y}, attrs);
    ASSERT_TRUE(s) << s.message();
    expectClose(y, expected);
  }
}

/// Expects `op` to fail with a message containing `what`.
void expectError(const std::string &op,
                 const std::vector<const OwnedTensor *> &in, OwnedTensor &y,
                 const KernelAttrs &attrs, const std::string &what) {
  Status s = runCpuKernel(op, in, {&y}, attrs);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  EXPECT_EQ(s.message().rfind(op + ": ", 0), 0u) << s.message();
}

//===----------------------------------------------------------------------===//
// graph.conv
//===----------------------------------------------------------------------===//

TEST(ConvolutionKernels, Conv2dPadsAndBias) {
  // F.conv2d(x, w, b, padding=1) with x [2,2,3,4], w [3,2,3,3].
  checkConv({2, 2, 3, 4}, {3, 2, 3, 3}, {0.5, -0.25, 1.0},
            convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}), {2, 3, 3, 4},
            {0.984375, -0.09375, 0.734375, 0.890625, 0.28125, 0.734375,
             1.96875, 0.171875, -0.171875, 1.484375, 0.640625, -0.546875,
             0.703125, -1.296875, 0.84375, 0.203125, -1.03125, -0.1875,
             1.578125, -1.796875, -0.3125, 0.765625, -1.640625, 0.0625,
             1.40625, 0.71875, 1.9375, 1.3125, 0.875, 0.890625, 1.765625,
             -0.546875, 0.9375, 2.046875, -0.296875, 1.453125, 0.578125,
             1.390625, -0.703125, 0.4375, 2, -0.234375, -0.03125, 0.65625,
             0.578125, -0.71875, 1.359375, 0.0625, 0.703125, 0.75, -2.09375,
             0.5, 1.25, -2.15625, 0.8125, -0.140625, -1.046875, -0.09375,
             0.25, -0.546875, 1.8125, 1.09375, -0.265625, 1.75, 1.484375,
             -0.453125, 1.625, 1.0625, 0.34375, 1.3125, 1.546875, 0.640625});
}

TEST(ConvolutionKernels, Conv2dStrideDilationAsymmetricPads) {
  // pads top 1, left 0, bottom 2, right 1:
  // F.conv2d(F.pad(x, (0, 1, 1, 2)), w, stride=(2, 1), dilation=(1, 2))
  // with x [1,2,5,6], w [2,2,2,3]; the last output row sees only padding.
  checkConv({1, 2, 5, 6}, {2, 2, 2, 3}, {},
            convAttrs({2, 1}, {1, 0, 2, 1}, {1, 2}), {1, 2, 4, 3},
            {0.203125, -0.625, 0.296875, -1.296875, 0.546875, -0.03125,
             0.546875, -0.1875, -0.125, 0, 0, 0, 0.296875, -0.625, -0.109375,
             0.453125, -0.078125, 0.578125, -0.078125, 0.765625, 0.71875, 0,
             0, 0});
}

TEST(ConvolutionKernels, Conv2dGroups) {
  // F.conv2d(x, w, b, groups=2) with x [1,4,3,3], w [6,2,2,2].
  checkConv({1, 4, 3, 3}, {6, 2, 2, 2}, {1, 2, 3, -1, -2, -3},
            convAttrs({1, 1}, {0, 0, 0, 0}, {1, 1}, 2), {1, 6, 2, 2},
            {1.484375, 0.90625, 0.4375, 1.921875, 2.765625, 2.84375, 1.96875,
             1.875, 3.84375, 3.765625, 3.09375, 2.84375, -1.171875, -0.078125,
             -1.328125, -1.09375, -2.9375, -0.84375, -2.84375, -1.609375,
             -4.09375, -1.8125, -3.953125, -2.53125});
}

TEST(ConvolutionKernels, Conv2dDepthwise) {
  // F.conv2d(x, w, stride=2, padding=1, groups=3) with x [2,3,4,4],
  // w [6,1,3,3] (channel multiplier 2).
  checkConv({2, 3, 4, 4}, {6, 1, 3, 3}, {},
            convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 3), {2, 6, 2, 2},
            {0.390625, 0.59375, 0.265625, -0.234375, 0.328125, -0.265625,
             0.390625, 0.15625, 0.5, -0.921875, 0.375, -0.875, -0.640625,
             0.53125, -0.40625, 0.15625, -0.125, 0.578125, -0.34375, 0.921875,
             -0.328125, 0.5, 0.78125, -0.03125, -0.6875, 0.5, -0.359375,
             -0.09375, 0.25, -0.296875, -0.359375, -0.203125, -0.609375,
             0.3125, 0.734375, 1.015625, 0.46875, -0.390625, 0.015625,
             -0.6875, -0.390625, 0.40625, -0.1875, -0.078125, 0.40625,
             -0.8125, -0.21875, -0.515625});
}

TEST(ConvolutionKernels, Conv1d) {
  // F.conv1d(F.pad(x, (2, 1)), w, b, stride=2, dilation=2) with x [2,3,7],
  // w [4,3,3].
  checkConv({2, 3, 7}, {4, 3, 3}, {0.5, -0.25, 1.0, 0.125},
            convAttrs({2}, {2, 1}, {2}), {2, 4, 3},
            {1.203125, 0.34375, 0.328125, -0.953125, -0.15625, 0.09375,
             1.734375, -0.078125, 0.4375, -0.546875, 0.921875, -0.53125,
             0.15625, 0.265625, 0.9375, -0.59375, 0.0625, -0.03125, 0.65625,
             0.4375, 1.8125, 0.59375, -0.5, 0.109375});
}

TEST(ConvolutionKernels, Conv3d) {
  // pads (depth, height, width) begin 1, 0, 1 and end 0, 1, 0:
  // F.conv3d(F.pad(x, (1, 0, 0, 1, 1, 0)), w, stride=(1, 2, 1)) with
  // x [1,2,3,4,3], w [2,2,2,3,2].
  checkConv({1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, {},
            convAttrs({1, 2, 1}, {1, 0, 1, 0, 1, 0}, {1, 1, 1}),
            {1, 2, 3, 2, 3},
            {-0.65625, 0.71875, 0.0625, -0.0625, 0.203125, -0.53125,
             -0.046875, 0.609375, -0.828125, -0.21875, -0.625, 1.375,
             -0.09375, -0.828125, 0.3125, -0.390625, 1.375, -0.234375,
             -0.515625, -0.015625, 0.03125, 0.5, -0.03125, -0.9375, -0.578125,
             0.453125, 0.765625, -0.25, -0.859375, 0.921875, 0.078125,
             0.765625, -0.46875, -0.59375, 0.921875, 0.125});
}

TEST(ConvolutionKernels, Conv2dPointwise) {
  // F.conv2d(x, w, b) with x [1,3,2,3], w [2,3,1,1]: the input is read as
  // the GEMM operand without unfolding.
  checkConv({1, 3, 2, 3}, {2, 3, 1, 1}, {0.5, -0.25},
            convAttrs({1, 1}, {0, 0, 0, 0}, {1, 1}), {1, 2, 2, 3},
            {1.03125, 0.1875, 1.0625, 0.046875, 0.234375, 1.109375, 0.3125,
             -0.5625, 0.28125, -0.421875, -0.609375, 0.234375});
}

TEST(ConvolutionKernels, Conv2dRoundsLikePyTorch) {
  // x = torch.sin(torch.arange(150, dtype=dt)).reshape(2, 3, 5, 5),
  // w = (0.3 * torch.cos(torch.arange(108, dtype=dt))).reshape(4, 3, 3, 3),
  // b = torch.tensor([0.1, -0.2, 0.3, -0.4], dtype=dt),
  // F.conv2d(x, w, b, stride=2, padding=1).
  Values xs(150), ws(108), b{0.1, -0.2, 0.3, -0.4};
  for (int i = 0; i < 150; ++i)
    xs[i] = std::sin(double(i));
  for (int i = 0; i < 108; ++i)
    ws[i] = 0.3 * std::cos(double(i));
  KernelAttrs attrs = convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1});
  // f32: 27-term dot products of terms up to 0.3 summed in another order
  // than PyTorch's (and inputs whose float sin may differ by an ulp) differ
  // by a few 1e-8 absolute; values near zero make a purely relative bound
  // meaningless, hence 1e-6 relative plus 1e-7 absolute.
  Values expected32 =
      {-0.147548571, -0.189033404, 0.510973334, 0.176819459, 0.165817142,
       0.0111862998, 0.0722025633, -0.357012033, 0.291486144, 0.208264098,
       -0.417021394, -0.323931396, -0.289514661, -0.202679798, -0.202427492,
       0.0708367229, -0.0534328595, -0.385262251, 0.309008986, 0.7158342,
       -0.0385629684, 0.275481999, 0.235748634, 0.390231937, 0.169553623,
       0.671376109, 0.216758505, -0.813527882, -0.425941169, -0.0782538876,
       -0.296159893, -0.359779596, -0.450293034, -0.594619811, -0.763553798,
       -0.16610156, -0.0555611216, -0.306427479, 0.417060375, 0.162289977,
       0.176682189, 0.0527456068, 0.178366065, -0.331128418, 0.120969832,
       0.155772448, -0.251643807, -0.355374277, -0.251834422, -0.229138106,
       -0.219239026, -0.0799699724, 0.0986046344, -0.348553091, 0.247691199,
       0.73660177, 0.0737212896, 0.267995775, 0.240342662, 0.358495235,
       0.151503071, 0.556660414, 0.365826488, -0.725209594, -0.603452802,
       -0.112416156, -0.329466254, -0.33600533, -0.41493845, -0.43326664,
       -0.848565638, -0.289907843};
  OwnedTensor x = make(DType::F32, {2, 3, 5, 5}, xs);
  OwnedTensor w = make(DType::F32, {4, 3, 3, 3}, ws);
  OwnedTensor bias = make(DType::F32, {4}, b);
  OwnedTensor y(DType::F32, {2, 4, 3, 3});
  ASSERT_TRUE(runCpuKernel("graph.conv", {&x, &w, &bias}, {&y}, attrs));
  expectClose(y, expected32, 1e-6, 1e-7);

  Values expected64 =
      {-0.14754853380674973, -0.18903341091889411, 0.51097327381419988,
       0.17681940537962995, 0.16581711534435756, 0.011186346777625394,
       0.072202551002265955, -0.35701200248964748, 0.29148613507239646,
       0.20826409532660234, -0.41702134445556382, -0.32393137694708846,
       -0.28951467697164396, -0.20267976194092308, -0.20242746008948634,
       0.070836761896872158, -0.053432906983633344, -0.38526224241171692,
       0.30900896089172775, 0.71583412499702193, -0.038562944162067181,
       0.27548201680975049, 0.23574860957786531, 0.39023196381995756,
       0.1695535910339703, 0.67137613058288204, 0.21675844653063978,
       -0.81352782953228053, -0.42594122735945061, -0.078253872675058345,
       -0.29616001422484467, -0.35977958874424681, -0.45029305675066783,
       -0.59461984485898667, -0.76355385377769625, -0.16610158105289749,
       -0.055561078488234494, -0.30642748081536375, 0.41706036091885745,
       0.16228996160345285, 0.17668214498858592, 0.052745693142032986,
       0.17836607360095463, -0.33112838412324652, 0.12096979251572285,
       0.15577244360478404, -0.25164377514464042, -0.35537426635451386,
       -0.25183441547474145, -0.22913820555131698, -0.21923898745854598,
       -0.079969914153033672, 0.098604621020502325, -0.34855307711858996,
       0.24769120277817952, 0.73660178271391041, 0.073721345242545422,
       0.2679957271729585, 0.24034265632822097, 0.35849521661273687,
       0.15150303381593966, 0.5566603875885503, 0.36582644545061827,
       -0.72520958419141912, -0.60345287424158156, -0.11241618036001061,
       -0.32946620424908957, -0.33600534382368547, -0.41493845833719945,
       -0.43326663224376594, -0.84856554077906998, -0.28990784159566307};
  OwnedTensor x64 = make(DType::F64, {2, 3, 5, 5}, xs);
  OwnedTensor w64 = make(DType::F64, {4, 3, 3, 3}, ws);
  OwnedTensor bias64 = make(DType::F64, {4}, b);
  OwnedTensor y64(DType::F64, {2, 4, 3, 3});
  ASSERT_TRUE(runCpuKernel("graph.conv", {&x64, &w64, &bias64}, {&y64}, attrs));
  expectClose(y64, expected64, 1e-12, 1e-15);
}

TEST(ConvolutionKernels, ConvDefaultsWindowAttributes) {
  // No strides, pads, dilations or groups: unit strides and dilations, no
  // padding, one group. Hand-computed: [1 2 3 4] * [1 -1] = [-1 -1 -1].
  OwnedTensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  OwnedTensor w = f32({1, 1, 2}, {1, -1});
  OwnedTensor y(DType::F32, {1, 1, 3});
  ASSERT_TRUE(runCpuKernel("graph.conv", {&x, &w}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{-1, -1, -1}));
}

TEST(ConvolutionKernels, ConvEmptyBatch) {
  OwnedTensor x(DType::F32, {0, 2, 3});
  OwnedTensor w = f32({1, 2, 2}, {1, 1, 1, 1});
  OwnedTensor y(DType::F32, {0, 1, 2});
  EXPECT_TRUE(runCpuKernel("graph.conv", {&x, &w}, {&y},
                           convAttrs({1}, {0, 0}, {1})));
}

TEST(ConvolutionKernels, ConvErrors) {
  KernelAttrs attrs = convAttrs({1}, {0, 0}, {1});
  OwnedTensor x = f32({1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  OwnedTensor w = f32({2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  OwnedTensor y(DType::F32, {1, 2, 3});
  ASSERT_TRUE(runCpuKernel("graph.conv", {&x, &w}, {&y}, attrs));

  expectError("graph.conv", {&x}, y, attrs, "expected 2..3 inputs");
  OwnedTensor w3 = make(DType::F32, {2, 3, 2}, Values(12, 1.0));
  expectError("graph.conv", {&x, &w3}, y, attrs, "channels do not match");
  OwnedTensor w1 = make(DType::F32, {3, 1, 2}, Values(6, 1.0));
  OwnedTensor y3(DType::F32, {1, 3, 3});
  expectError("graph.conv", {&x, &w1}, y3, convAttrs({1}, {0, 0}, {1}, 2),
              "channels do not match"); // 3 filters in 2 groups
  expectError("graph.conv", {&x, &w}, y, convAttrs({1}, {0, 0}, {1}, 0),
              "channels do not match");
  OwnedTensor b3 = f32({3}, {1, 2, 3});
  expectError("graph.conv", {&x, &w, &b3}, y, attrs,
              "bias must have shape [2]");
  expectError("graph.conv", {&x, &w}, y, convAttrs({1, 1}, {0, 0}, {1}),
              "one entry per spatial dim");
  expectError("graph.conv", {&x, &w}, y, convAttrs({1}, {0}, {1}),
              "one entry per spatial dim");
  expectError("graph.conv", {&x, &w}, y, convAttrs({0}, {0, 0}, {1}),
              "must be >= 1");
  expectError("graph.conv", {&x, &w}, y, convAttrs({1}, {-1, 0}, {1}),
              "pads >= 0");
  OwnedTensor wrongY(DType::F32, {1, 2, 4});
  expectError("graph.conv", {&x, &w}, wrongY, attrs,
              "output must be f32[1x2x3]");
  OwnedTensor w64 = f64({2, 2, 2}, Values(8, 1.0));
  expectError("graph.conv", {&x, &w64}, y, attrs, "share one element type");
  OwnedTensor xi = i64({1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  OwnedTensor wi = i64({2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  OwnedTensor yi(DType::I64, {1, 2, 3});
  expectError("graph.conv", {&xi, &wi}, yi, attrs, "i64 is not supported");
  OwnedTensor x2 = make(DType::F32, {2, 4}, Values(8, 1.0));
  OwnedTensor w2 = make(DType::F32, {2, 4}, Values(8, 1.0));
  expectError("graph.conv", {&x2, &w2}, y, attrs, "rank >= 3");
}

//===----------------------------------------------------------------------===//
// graph.max_pool
//===----------------------------------------------------------------------===//

TEST(ConvolutionKernels, MaxPool2dPaddingNeverWins) {
  // x = ramp([1,2,6,6], 7, 13, 6); x[0, 1] -= 2 (all of channel 1 < 0).
  Values x = poolInput({1, 2, 6, 6});
  for (size_t i = 36; i < 72; ++i)
    x[i] -= 2;
  // F.max_pool2d(x, 3, 2, 1)
  checkPool("graph.max_pool", {1, 2, 6, 6}, x,
            maxPoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false),
            {1, 2, 3, 3},
            {0.5, 0.625, 0.75, 0.5, 0.625, 0.75, 0.75, 0.5, 0.625, -1.25,
             -1.25, -1.5, -1.375, -1.25, -1.5, -1.375, -1.25, -1.25});
  // F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
  checkPool("graph.max_pool", {1, 2, 6, 6}, x,
            maxPoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true),
            {1, 2, 4, 4},
            {0.5, 0.625, 0.75, 0.75, 0.5, 0.625, 0.75, 0.75, 0.75, 0.5, 0.625,
             0.625, 0.375, 0.5, 0.625, 0.625, -1.25, -1.25, -1.5, -2.25,
             -1.375, -1.25, -1.5, -1.5, -1.375, -1.25, -1.25, -1.5, -1.875,
             -1.75, -1.625, -2.375});
}

TEST(ConvolutionKernels, MaxPool2dDilation) {
  // F.max_pool2d(x, 2, 1, 1, dilation=2) with x = ramp([1,1,5,5], 7, 13, 6).
  checkPool("graph.max_pool", {1, 1, 5, 5}, poolInput({1, 1, 5, 5}),
            maxPoolAttrs({2, 2}, {1, 1}, {1, 1, 1, 1}, {2, 2}, false),
            {1, 1, 5, 5},
            {-0.375, 0.5, -0.25, 0.625, -0.25, 0.75, 0, 0.75, 0.125, 0.25,
             0.25, 0.5, 0.375, 0.625, 0.375, 0.75, 0.625, 0.75, 0.75, -0.125,
             0.25, -0.5, 0.375, -0.375, 0.375});
}

TEST(ConvolutionKernels, MaxPool1dCeilModeDropsWindowInPadding) {
  // F.max_pool1d(x, 2, 2, 1, ceil_mode=True) with x = ramp([1,1,5], 7, 13, 6):
  // ceil gives 4 windows, but the 4th would start in the end padding.
  checkPool("graph.max_pool", {1, 1, 5}, poolInput({1, 1, 5}),
            maxPoolAttrs({2}, {2}, {1, 1}, {1}, true), {1, 1, 3},
            {-0.75, 0.125, 0.25});
}

TEST(ConvolutionKernels, MaxPool1dAsymmetricPads) {
  // x = ramp([1,2,5], 7, 13, 6) - 2;
  // F.max_pool1d(F.pad(x, (2, 0), value=-inf), 3, 1)
  Values x = poolInput({1, 2, 5});
  for (double &v : x)
    v -= 2;
  checkPool("graph.max_pool", {1, 2, 5}, x,
            maxPoolAttrs({3}, {1}, {2, 0}, {1}, false), {1, 2, 5},
            {-2.75, -1.875, -1.875, -1.75, -1.75, -1.625, -1.625, -1.5, -1.5,
             -1.375});
}

TEST(ConvolutionKernels, MaxPool3dCeilMode) {
  // F.max_pool3d(x, (2, 2, 3), (1, 2, 2), (1, 0, 1), ceil_mode=True) with
  // x = ramp([1,1,3,4,5], 7, 13, 6).
  checkPool("graph.max_pool", {1, 1, 3, 4, 5}, poolInput({1, 1, 3, 4, 5}),
            maxPoolAttrs({2, 2, 3}, {1, 2, 2}, {1, 0, 1, 1, 0, 1}, {1, 1, 1},
                         true),
            {1, 1, 4, 2, 3},
            {0.375, 0.5, 0.625, 0.75, 0.75, 0.375, 0.5, 0.625, 0.75, 0.75,
             0.75, 0.5, 0.5, 0.625, 0.75, 0.75, 0.75, 0.5, 0.5, 0.625, 0.625,
             0.75, 0.375, 0.5});
}

TEST(ConvolutionKernels, MaxPoolPropagatesNaNAndKeepsFirstMax) {
  // F.max_pool1d(torch.tensor([[[1., nan, 2., 3.]]]), 2, 1)
  checkPool("graph.max_pool", {1, 1, 4}, {1, NAN, 2, 3},
            maxPoolAttrs({2}, {1}, {0, 0}, {1}, false), {1, 1, 3},
            {NAN, NAN, 3});
  // F.max_pool1d(torch.tensor([[[-0., 0., 0., -0.]]]), 2, 1) is
  // [-0., 0., 0.]: of equal values the first in the window wins.
  OwnedTensor x = f32({1, 1, 4}, {-0.0f, 0.0f, 0.0f, -0.0f});
  OwnedTensor y(DType::F32, {1, 1, 3});
  ASSERT_TRUE(runCpuKernel("graph.max_pool", {&x}, {&y},
                           maxPoolAttrs({2}, {1}, {0, 0}, {1}, false)));
  std::vector<float> v = y.values<float>();
  EXPECT_TRUE(std::signbit(v[0]));
  EXPECT_FALSE(std::signbit(v[1]));
  EXPECT_FALSE(std::signbit(v[2]));
}

TEST(ConvolutionKernels, MaxPoolErrors) {
  KernelAttrs attrs = maxPoolAttrs({2}, {1}, {0, 0}, {1}, false);
  OwnedTensor x = f32({1, 1, 3}, {1, 2, 3});
  OwnedTensor y(DType::F32, {1, 1, 2});
  ASSERT_TRUE(runCpuKernel("graph.max_pool", {&x}, {&y}, attrs));

  expectError("graph.max_pool", {&x, &x}, y, attrs, "expected 1 inputs");
  expectError("graph.max_pool", {&x}, y, KernelAttrs(), "missing kernel_shape");
  expectError("graph.max_pool", {&x}, y,
              maxPoolAttrs({0}, {1}, {0, 0}, {1}, false), "must be >= 1");
  expectError("graph.max_pool", {&x}, y,
              maxPoolAttrs({2}, {1}, {0, 0}, {0}, false), "must be >= 1");
  expectError("graph.max_pool", {&x}, y,
              maxPoolAttrs({2, 2}, {1}, {0, 0}, {1}, false),
              "one entry per spatial dim");
  OwnedTensor wrongY(DType::F32, {1, 1, 3});
  expectError("graph.max_pool", {&x}, wrongY, attrs,
              "output must be f32[1x1x2]");
  OwnedTensor y64(DType::F64, {1, 1, 2});
  expectError("graph.max_pool", {&x}, y64, attrs, "output must be f32[1x1x2]");
  OwnedTensor xi = i64({1, 1, 3}, {1, 2, 3});
  OwnedTensor yi(DType::I64, {1, 1, 2});
  expectError("graph.max_pool", {&xi}, yi, attrs, "i64 is not supported");
  OwnedTensor x2 = f32({1, 3}, {1, 2, 3});
  expectError("graph.max_pool", {&x2}, y, attrs, "rank >= 3");
}

//===----------------------------------------------------------------------===//
// graph.avg_pool
//===----------------------------------------------------------------------===//

// The expected lists of the ramp cases are PyTorch's f32 results, which are
// f32 roundings of thirds and so on; the f64 kernel is checked against them
// within the same 1e-6 relative, and exactly in AvgPool2dRoundsLikePyTorch.

TEST(ConvolutionKernels, AvgPool2dCountIncludePadAndCeilMode) {
  // x = ramp([1,1,6,6], 7, 13, 6).
  Shape xs{1, 1, 6, 6};
  Values x = poolInput(xs);
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=False, count_include_pad=True)
  checkPool("graph.avg_pool", xs, x,
            avgPoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false, true),
            {1, 1, 3, 3},
            {-0.0555555559694767, 0.0694444477558136, 0.1527777761220932,
             -0.0694444477558136, -0.0555555559694767, 0.0694444477558136,
             0.0694444477558136, -0.02777777798473835, 0.0972222238779068});
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True): the
  // last row and column of windows divide by 3 * 2, not counting the
  // positions past the padding.
  checkPool("graph.avg_pool", xs, x,
            avgPoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, true, true),
            {1, 1, 4, 4},
            {-0.0555555559694767, 0.0694444477558136, 0.1527777761220932,
             0.1875, -0.0694444477558136, -0.0555555559694767,
             0.0694444477558136, 0.02083333395421505, 0.0694444477558136,
             -0.02777777798473835, 0.0972222238779068, 0.125,
             -0.02083333395421505, 0.0833333358168602, 0.1458333283662796,
             0.15625});
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=False, count_include_pad=False)
  checkPool("graph.avg_pool", xs, x,
            avgPoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false, false),
            {1, 1, 3, 3},
            {-0.125, 0.1041666641831398, 0.2291666716337204,
             -0.1041666641831398, -0.0555555559694767, 0.0694444477558136,
             0.1041666641831398, -0.02777777798473835, 0.0972222238779068});
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
  checkPool("graph.avg_pool", xs, x,
            avgPoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, true, false),
            {1, 1, 4, 4},
            {-0.125, 0.1041666641831398, 0.2291666716337204, 0.5625,
             -0.1041666641831398, -0.0555555559694767, 0.0694444477558136,
             0.0416666679084301, 0.1041666641831398, -0.02777777798473835,
             0.0972222238779068, 0.25, -0.0625, 0.1666666716337204,
             0.2916666567325592, 0.625});
}

TEST(ConvolutionKernels, AvgPool1dCeilMode) {
  // x = ramp([2,3,6], 7, 13, 6).
  Shape xs{2, 3, 6};
  Values x = poolInput(xs);
  // F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True)
  checkPool("graph.avg_pool", xs, x, avgPoolAttrs({3}, {2}, {1, 1}, true, true),
            {2, 3, 4},
            {-0.2083333283662796, -0.0833333358168602, 0.0416666679084301,
             0.1875, 0.0416666679084301, 0.2916666567325592,
             0.4166666567325592, 0.375, -0.25, -0.4166666567325592,
             -0.2916666567325592, -0.25, 0, -0.0416666679084301,
             0.0833333358168602, -0.0625, 0.25, -0.2083333283662796,
             -0.0833333358168602, 0.125, -0.0416666679084301,
             0.1666666716337204, 0.2916666567325592, 0.3125});
  // F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
  checkPool("graph.avg_pool", xs, x,
            avgPoolAttrs({3}, {2}, {1, 1}, true, false), {2, 3, 4},
            {-0.3125, -0.0833333358168602, 0.0416666679084301, 0.375, 0.0625,
             0.2916666567325592, 0.4166666567325592, 0.75, -0.375,
             -0.4166666567325592, -0.2916666567325592, -0.5, 0,
             -0.0416666679084301, 0.0833333358168602, -0.125, 0.375,
             -0.2083333283662796, -0.0833333358168602, 0.25, -0.0625,
             0.1666666716337204, 0.2916666567325592, 0.625});
}

TEST(ConvolutionKernels, AvgPool3d) {
  // x = ramp([1,1,3,4,5], 7, 13, 6).
  Shape xs{1, 1, 3, 4, 5};
  Values x = poolInput(xs);
  // F.avg_pool3d(x, (2, 2, 3), (1, 2, 2), 1, count_include_pad=True)
  checkPool("graph.avg_pool", xs, x,
            avgPoolAttrs({2, 2, 3}, {1, 2, 2}, {1, 1, 1, 1, 1, 1}, false,
                         true),
            {1, 1, 4, 3, 3},
            {-0.0520833320915699, -0.02083333395421505, -0.02083333395421505,
             0.0520833320915699, -0.010416666977107525, -0.02083333395421505,
             -0.03125, 0.010416666977107525, 0, -0.03125, 0, 0.03125,
             -0.02083333395421505, -0.0729166641831398, -0.03125,
             0.010416666977107525, 0.0625, -0.0625, -0.02083333395421505,
             -0.0520833320915699, 0.0416666679084301, 0, -0.0416666679084301,
             -0.010416666977107525, 0.02083333395421505, 0.010416666977107525,
             -0.0520833320915699, -0.0416666679084301, -0.0729166641831398,
             -0.010416666977107525, 0.0729166641831398, 0.02083333395421505,
             0, -0.02083333395421505, -0.0416666679084301,
             0.010416666977107525});
  // F.avg_pool3d(x, (2, 2, 3), (1, 2, 2), 1, count_include_pad=False)
  checkPool("graph.avg_pool", xs, x,
            avgPoolAttrs({2, 2, 3}, {1, 2, 2}, {1, 1, 1, 1, 1, 1}, false,
                         false),
            {1, 1, 4, 3, 3},
            {-0.3125, -0.0833333358168602, -0.125, 0.15625,
             -0.02083333395421505, -0.0625, -0.1875, 0.0416666679084301, 0,
             -0.09375, 0, 0.09375, -0.03125, -0.0729166641831398, -0.046875,
             0.03125, 0.125, -0.1875, -0.0625, -0.1041666641831398, 0.125, 0,
             -0.0416666679084301, -0.015625, 0.0625, 0.02083333395421505,
             -0.15625, -0.25, -0.2916666567325592, -0.0625, 0.21875,
             0.0416666679084301, 0, -0.125, -0.1666666716337204, 0.0625});
}

TEST(ConvolutionKernels, AvgPool1dAsymmetricPads) {
  // By hand, x = [1 2 3 4], kernel 2, stride 1. Pads (1, 0): windows
  // [pad 1] [1 2] [2 3] [3 4].
  Values x{1, 2, 3, 4};
  checkPool("graph.avg_pool", {1, 1, 4}, x,
            avgPoolAttrs({2}, {1}, {1, 0}, false, true), {1, 1, 4},
            {0.5, 1.5, 2.5, 3.5});
  checkPool("graph.avg_pool", {1, 1, 4}, x,
            avgPoolAttrs({2}, {1}, {1, 0}, false, false), {1, 1, 4},
            {1, 1.5, 2.5, 3.5});
  // Pads (0, 1): windows [1 2] [2 3] [3 4] [4 pad].
  checkPool("graph.avg_pool", {1, 1, 4}, x,
            avgPoolAttrs({2}, {1}, {0, 1}, false, true), {1, 1, 4},
            {1.5, 2.5, 3.5, 2});
  checkPool("graph.avg_pool", {1, 1, 4}, x,
            avgPoolAttrs({2}, {1}, {0, 1}, false, false), {1, 1, 4},
            {1.5, 2.5, 3.5, 4});
  // Pads (0, 1), kernel 3, stride 2, ceil_mode: windows [1 2 3] and
  // [3 4 pad]; nothing lies past the padding, so both settings of
  // count_include_pad differ only in the last window.
  checkPool("graph.avg_pool", {1, 1, 4}, x,
            avgPoolAttrs({3}, {2}, {0, 1}, true, true), {1, 1, 2},
            {2, 7.0 / 3});
  checkPool("graph.avg_pool", {1, 1, 4}, x,
            avgPoolAttrs({3}, {2}, {0, 1}, true, false), {1, 1, 2},
            {2, 3.5});
}

TEST(ConvolutionKernels, AvgPool2dRoundsLikePyTorch) {
  // x = torch.sin(torch.arange(50, dtype=dt)).reshape(1, 2, 5, 5),
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False).
  Values xs(50);
  for (int i = 0; i < 50; ++i)
    xs[i] = std::sin(double(i));
  KernelAttrs attrs = avgPoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, true, false);
  // PyTorch sums in f32, the kernel in f64: within an ulp or two.
  OwnedTensor x = make(DType::F32, {1, 2, 5, 5}, xs);
  OwnedTensor y(DType::F32, {1, 2, 3, 3});
  ASSERT_TRUE(runCpuKernel("graph.avg_pool", {&x}, {&y}, attrs));
  expectClose(y,
              {-0.0992172062, 0.543136299, 0.196448565, -0.403327733,
               -0.194417208, 0.368523508, 0.527996361, -0.336450666,
               -0.588227212, -0.190465644, 0.522856832, 0.284066617,
               -0.3709234, -0.233174026, 0.329180986, 0.584795594,
               -0.274968654, -0.634019971});
  OwnedTensor x64 = make(DType::F64, {1, 2, 5, 5}, xs);
  OwnedTensor y64(DType::F64, {1, 2, 3, 3});
  ASSERT_TRUE(runCpuKernel("graph.avg_pool", {&x64}, {&y64}, attrs));
  expectClose(y64,
              {-0.099217197013541952, 0.54313629447278167,
               0.19644856115426934, -0.40332776113501434,
               -0.19441719954417228, 0.36852351454632104, 0.52799635318893379,
               -0.33645068837430286, -0.58822720082262958,
               -0.1904656422585243, 0.52285684386964471, 0.28406661258054811,
               -0.37092338344675896, -0.23317405237930869,
               0.32918094894959654, 0.58479559096439182, -0.27496869171309585,
               -0.63402003290158082},
              1e-14, 1e-16);
}

TEST(ConvolutionKernels, CeilModeWindowLongerThanInput) {
  // PyTorch keeps one window when it starts in the input, even if it is
  // longer than the padded input (graph::slidingWindowOutputSize says 0):
  // F.max_pool1d(torch.tensor([[[5., 7.]]]), 3, 3, ceil_mode=True) is [7.],
  // F.avg_pool1d(torch.tensor([[[3., 5.]]]), 3, 3, ceil_mode=True,
  // count_include_pad=True or False) is [4.].
  checkPool("graph.max_pool", {1, 1, 2}, {5, 7},
            maxPoolAttrs({3}, {3}, {0, 0}, {1}, true), {1, 1, 1}, {7});
  for (bool countIncludePad : {true, false})
    checkPool("graph.avg_pool", {1, 1, 2}, {3, 5},
              avgPoolAttrs({3}, {3}, {0, 0}, true, countIncludePad),
              {1, 1, 1}, {4});
}

TEST(ConvolutionKernels, AvgPoolErrors) {
  KernelAttrs attrs = avgPoolAttrs({2}, {1}, {0, 0}, false, false);
  OwnedTensor x = f64({1, 1, 3}, {1, 2, 3});
  OwnedTensor y(DType::F64, {1, 1, 2});
  ASSERT_TRUE(runCpuKernel("graph.avg_pool", {&x}, {&y}, attrs));
  EXPECT_EQ(y.values<double>(), (std::vector<double>{1.5, 2.5}));

  expectError("graph.avg_pool", {}, y, attrs, "expected 1 inputs");
  expectError("graph.avg_pool", {&x}, y, KernelAttrs(), "missing kernel_shape");
  expectError("graph.avg_pool", {&x}, y,
              avgPoolAttrs({2}, {1}, {0, 0, 0}, false, false),
              "one entry per spatial dim");
  expectError("graph.avg_pool", {&x}, y,
              avgPoolAttrs({2}, {1}, {0, -1}, false, false), "pads >= 0");
  OwnedTensor wrongY(DType::F64, {1, 2, 2});
  expectError("graph.avg_pool", {&x}, wrongY, attrs,
              "output must be f64[1x1x2]");
  OwnedTensor xi = i64({1, 1, 3}, {1, 2, 3});
  OwnedTensor yi(DType::I64, {1, 1, 2});
  expectError("graph.avg_pool", {&xi}, yi, attrs, "i64 is not supported");
}

} // namespace
