//===- ConvWinogradTest.cpp - Winograd 3x3 convolutions against im2col ----===//
//
// graph.conv, graph.conv_grad_input and graph.conv_grad_weight in f32 take
// the Winograd F(2x2, 3x3) path (ConvWinograd.cpp) for 3 x 3 stride-1
// convolutions with 16 or more channels over 64 tiles or more (256 for
// conv_grad_weight); in f64 they keep im2col's direct sums. Each case runs
// the f32 Winograd functions and the f64 kernels on the same values and
// bounds the difference by the magnitude of the result: odd and even
// sizes (tiles past the edge), batch 1, channels that are no multiple of
// the vector width, every pad from 0 to 2 (asymmetric too), blocks of
// tiles that end mid-row, and the CIFAR ResNet-18 shapes. The large cases
// also run the f32 kernels, which must give the Winograd functions' bits
// (they took that path). winogradApplies is checked on the geometries it
// must take
// and refuse. A disabled test times the ResNet-18 shapes.
//
//===----------------------------------------------------------------------===//

#include "kernels/ConvWinograd.h"
#include "KernelTestUtils.h"
#include "kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <random>

using namespace strata::runtime;
using namespace strata::runtime::testing;
namespace cpu = strata::runtime::cpu;

namespace {

struct Case {
  int64_t batch, cin, cout, h, w;
  std::vector<int64_t> pads; // top, left, bottom, right
};

std::vector<double> randomValues(std::mt19937 &rng, int64_t n) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double &x : v)
    x = double(float(u(rng))); // representable in f32 exactly
  return v;
}

OwnedTensor tensorOf(DType dt, std::vector<int64_t> shape,
                     const std::vector<double> &v) {
  if (dt == DType::F32)
    return f32(std::move(shape), std::vector<float>(v.begin(), v.end()));
  return f64(std::move(shape), v);
}

std::vector<double> valuesOf(const OwnedTensor &t) {
  if (t.view().dtype == DType::F32) {
    std::vector<float> v = t.values<float>();
    return std::vector<double>(v.begin(), v.end());
  }
  return t.values<double>();
}

/// Every element of `actual` within `rtol` of the largest |expected|
/// (Winograd's transforms add and subtract up to 16 terms of that size
/// before the products, so its error scales with the result's range, not
/// with each element).
void expectNear(const std::vector<double> &actual,
                const std::vector<double> &expected, double rtol,
                const char *what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0, worst = 0;
  for (double e : expected)
    scale = std::max(scale, std::abs(e));
  size_t at = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_FALSE(std::isnan(actual[i])) << what << " at " << i;
    double d = std::abs(actual[i] - expected[i]);
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  EXPECT_LE(worst, rtol * scale)
      << what << ": worst difference " << worst << " at " << at << " ("
      << actual[at] << " against " << expected[at] << "), scale " << scale;
}

KernelAttrs attrsOf(const Case &c) {
  KernelAttrs a;
  a.set("strides", std::vector<int64_t>{1, 1});
  a.set("pads", c.pads);
  a.set("dilations", std::vector<int64_t>{1, 1});
  a.set("groups", int64_t(1));
  return a;
}

/// The three Winograd functions in f32 and the three kernels in f64 (im2col)
/// on the same random values; with `viaKernels`, the f32 kernels too, which
/// must have taken the Winograd path: the same bits as the direct calls.
void checkCase(const Case &c, uint32_t seed, bool viaKernels = false) {
  SCOPED_TRACE(::testing::Message()
               << "x [" << c.batch << ", " << c.cin << ", " << c.h << ", "
               << c.w << "], " << c.cout << " out, pads " << c.pads[0] << " "
               << c.pads[1] << " " << c.pads[2] << " " << c.pads[3]);
  std::mt19937 rng(seed);
  int64_t oh = c.h + c.pads[0] + c.pads[2] - 2;
  int64_t ow = c.w + c.pads[1] + c.pads[3] - 2;
  std::vector<int64_t> xs{c.batch, c.cin, c.h, c.w}, ws{c.cout, c.cin, 3, 3},
      ys{c.batch, c.cout, oh, ow};
  std::vector<double> xv = randomValues(rng, c.batch * c.cin * c.h * c.w);
  std::vector<double> wv = randomValues(rng, c.cout * c.cin * 9);
  std::vector<double> bv = randomValues(rng, c.cout);
  std::vector<double> dyv = randomValues(rng, c.batch * c.cout * oh * ow);
  KernelAttrs attrs = attrsOf(c);
  // results[0]: the f64 kernels; [1]: the f32 Winograd functions; [2]: the
  // f32 kernels.
  std::vector<double> results[3][3];
  for (int i = 0; i < (viaKernels ? 3 : 2); ++i) {
    DType dt = i == 0 ? DType::F64 : DType::F32;
    OwnedTensor x = tensorOf(dt, xs, xv), w = tensorOf(dt, ws, wv),
                b = tensorOf(dt, {c.cout}, bv), dy = tensorOf(dt, ys, dyv);
    OwnedTensor y(dt, ys), dx(dt, xs), dw(dt, ws);
    if (i == 1) {
      cpu::Conv3x3Shape s;
      s.batch = c.batch;
      s.cin = c.cin;
      s.cout = c.cout;
      s.inH = c.h;
      s.inW = c.w;
      s.outH = oh;
      s.outW = ow;
      s.padTop = c.pads[0];
      s.padLeft = c.pads[1];
      cpu::winogradConv3x3(s, x.view().as<float>(), w.view().as<float>(),
                           b.view().as<float>(), y.view().as<float>());
      cpu::winogradConv3x3GradInput(s, dy.view().as<float>(),
                                    w.view().as<float>(),
                                    dx.view().as<float>());
      cpu::winogradConv3x3GradWeight(s, dy.view().as<float>(),
                                     x.view().as<float>(),
                                     dw.view().as<float>());
    } else {
      Status st = runCpuKernel("graph.conv", {&x, &w, &b}, {&y}, attrs);
      ASSERT_TRUE(st) << st.message();
      st = runCpuKernel("graph.conv_grad_input", {&dy, &w}, {&dx}, attrs);
      ASSERT_TRUE(st) << st.message();
      st = runCpuKernel("graph.conv_grad_weight", {&dy, &x}, {&dw}, attrs);
      ASSERT_TRUE(st) << st.message();
    }
    results[i][0] = valuesOf(y);
    results[i][1] = valuesOf(dx);
    results[i][2] = valuesOf(dw);
  }
  // f32 im2col on these sums is within about 1e-7 of the scale; Winograd
  // within a few 1e-7 (measured: 1.3e-7 to 8.2e-7, the most for
  // conv_grad_weight over 64 channels and 9 x 16 x 16 outputs).
  const char *names[3] = {"conv", "conv_grad_input", "conv_grad_weight"};
  for (int k = 0; k < 3; ++k) {
    expectNear(results[1][k], results[0][k], 2e-6, names[k]);
    if (viaKernels)
      EXPECT_TRUE(results[2][k] == results[1][k])
          << names[k] << ": the f32 kernel did not take the Winograd path";
  }
}

window::ConvGeometry geometryOf(int64_t groups, int64_t cg, int64_t mg,
                                std::vector<int64_t> kernel,
                                std::vector<int64_t> strides,
                                std::vector<int64_t> pads,
                                std::vector<int64_t> dilations) {
  window::ConvGeometry g;
  g.groups = groups;
  g.cg = cg;
  g.mg = mg;
  g.m = mg * groups;
  g.w.spatial = kernel.size();
  g.w.kernel = kernel;
  g.w.strides = strides;
  size_t n = kernel.size();
  g.w.padBegin.assign(pads.begin(), pads.begin() + n);
  g.w.padEnd.assign(pads.begin() + n, pads.end());
  g.w.dilations = dilations;
  g.w.in.assign(n, 8);
  g.w.out.assign(n, 8);
  return g;
}

TEST(ConvWinograd, MatchesDirectSumsOnOddShapes) {
  uint32_t seed = 1;
  for (const Case &c : std::vector<Case>{
           {1, 16, 16, 1, 1, {1, 1, 1, 1}},   // one output, one tile
           {1, 16, 16, 2, 2, {0, 0, 0, 0}},   // no padding: 0 x 0 out
           {1, 17, 19, 5, 7, {1, 1, 1, 1}},   // odd everything
           {2, 16, 33, 6, 3, {0, 0, 0, 0}},   // tile past the right edge
           {3, 21, 18, 9, 4, {2, 2, 2, 2}},   // pad 2: flipped pad 0
           {2, 16, 16, 7, 5, {1, 0, 2, 1}},   // asymmetric pads
           {1, 24, 20, 11, 13, {0, 2, 1, 0}}, // asymmetric, odd
           {5, 18, 17, 3, 50, {1, 1, 1, 1}},  // long rows, several runs
       }) {
    if (c.h + c.pads[0] + c.pads[2] < 3 || c.w + c.pads[1] + c.pads[3] < 3)
      continue;
    checkCase(c, seed++);
  }
}

TEST(ConvWinograd, MatchesDirectSumsOnManyBlocks) {
  // 2 x 64 x 64 x 16 x 16 -> 128 tiles an image, 2 MiB blocks of
  // 16 * (64 + 64) * 4 bytes a tile: 256-tile blocks, the second one
  // straddling the images; grad_weight sums over blocks of 1024.
  checkCase({9, 64, 64, 16, 16, {1, 1, 1, 1}}, 11, /*viaKernels=*/true);
  checkCase({3, 64, 48, 33, 31, {1, 1, 1, 1}}, 12, /*viaKernels=*/true);
}

TEST(ConvWinograd, MatchesDirectSumsOnResNet18Shapes) {
  // The 3 x 3 stride-1 convolutions of the CIFAR ResNet-18 (batch 2 to 16, 256
  // tiles or more).
  checkCase({2, 64, 64, 32, 32, {1, 1, 1, 1}}, 21, /*viaKernels=*/true);
  checkCase({4, 128, 128, 16, 16, {1, 1, 1, 1}}, 22, /*viaKernels=*/true);
  checkCase({16, 256, 256, 8, 8, {1, 1, 1, 1}}, 23, /*viaKernels=*/true);
  // 4 x 4 at batch 16 is 64 tiles: Winograd's for all three kernels at 512
  // channels (conv_grad_weight from 64 tiles only where both channel
  // counts reach 128).
  checkCase({16, 512, 512, 4, 4, {1, 1, 1, 1}}, 24, /*viaKernels=*/true);
}

TEST(ConvWinograd, KeepsNonFiniteOutputsNonFinite) {
  // An Inf in x (and one in dy): every output whose direct sum meets it
  // is non-finite here too (Winograd may make it NaN, or spread it within
  // the tile), so an overflow check downstream still sees it.
  cpu::Conv3x3Shape s;
  s.batch = 1;
  s.cin = 16;
  s.cout = 16;
  s.inH = s.inW = s.outH = s.outW = 9;
  s.padTop = s.padLeft = 1;
  std::mt19937 rng(41);
  auto values = [&](int64_t n) {
    std::vector<double> v = randomValues(rng, n);
    return std::vector<float>(v.begin(), v.end());
  };
  std::vector<float> x = values(16 * 81), w = values(16 * 16 * 9),
                     dy = values(16 * 81);
  x[5 * 81 + 4 * 9 + 6] = std::numeric_limits<float>::infinity();
  dy[3 * 81 + 8 * 9 + 8] = -std::numeric_limits<float>::infinity();
  std::vector<float> y(16 * 81), dx(16 * 81), dw(16 * 16 * 9);
  cpu::winogradConv3x3(s, x.data(), w.data(), nullptr, y.data());
  cpu::winogradConv3x3GradInput(s, dy.data(), w.data(), dx.data());
  cpu::winogradConv3x3GradWeight(s, dy.data(), x.data(), dw.data());
  // y[k][r][c] meets x[5][4][6] for |r - 4| <= 1, |c - 6| <= 1; dx[c][r][q]
  // meets dy[3][8][8] for r, q in 7..8; dw[3][5] meets both.
  for (int64_t k = 0; k < 16; ++k)
    for (int64_t r = 3; r <= 5; ++r)
      for (int64_t c = 5; c <= 7; ++c)
        EXPECT_FALSE(std::isfinite(y[k * 81 + r * 9 + c])) << k << r << c;
  for (int64_t c = 0; c < 16; ++c)
    for (int64_t r = 7; r <= 8; ++r)
      for (int64_t q = 7; q <= 8; ++q)
        EXPECT_FALSE(std::isfinite(dx[c * 81 + r * 9 + q])) << c << r << q;
  for (int64_t i = 0; i < 9; ++i)
    EXPECT_FALSE(std::isfinite(dw[(3 * 16 + 5) * 9 + i])) << i;
}

TEST(ConvWinograd, AppliesToUngroupedUnitStride3x3Only) {
  std::vector<int64_t> k3{3, 3}, one{1, 1}, pad1{1, 1, 1, 1};
  EXPECT_TRUE(cpu::winogradApplies(geometryOf(1, 64, 64, k3, one, pad1, one),
                                   64, false));
  EXPECT_TRUE(cpu::winogradApplies(
      geometryOf(1, 16, 16, k3, one, {0, 2, 2, 0}, one), 64, false));
  // 64 tiles of 2 x 2 outputs at the least (4 samples of 8 x 8), 256 for
  // conv_grad_weight.
  EXPECT_TRUE(cpu::winogradApplies(geometryOf(1, 64, 64, k3, one, pad1, one), 4,
                                   false));
  EXPECT_FALSE(cpu::winogradApplies(geometryOf(1, 64, 64, k3, one, pad1, one),
                                    3, false));
  EXPECT_TRUE(cpu::winogradApplies(geometryOf(1, 64, 64, k3, one, pad1, one),
                                   16, true));
  EXPECT_FALSE(cpu::winogradApplies(geometryOf(1, 64, 64, k3, one, pad1, one),
                                    15, true));
  // ... and from 64 where both channel counts reach 128 (the ResNet's
  // 512-channel 4 x 4 layer at batch 16), not at the digits CNN's 16 and 32
  // (128 tiles: its losses left PyTorch's by 1.2e-4 in 20 AdamW steps).
  EXPECT_TRUE(cpu::winogradApplies(
      geometryOf(1, 128, 128, k3, one, pad1, one), 4, true));
  EXPECT_FALSE(cpu::winogradApplies(
      geometryOf(1, 128, 128, k3, one, pad1, one), 3, true));
  EXPECT_FALSE(cpu::winogradApplies(
      geometryOf(1, 127, 128, k3, one, pad1, one), 4, true));
  EXPECT_FALSE(cpu::winogradApplies(geometryOf(1, 16, 32, k3, one, pad1, one),
                                    8, true));
  // Too few channels (the ResNet stem: 3 in).
  EXPECT_FALSE(cpu::winogradApplies(geometryOf(1, 3, 64, k3, one, pad1, one),
                                    64, false));
  EXPECT_FALSE(cpu::winogradApplies(geometryOf(1, 64, 15, k3, one, pad1, one),
                                    64, false));
  EXPECT_FALSE(cpu::winogradApplies(geometryOf(2, 32, 32, k3, one, pad1, one),
                                    64, false));
  EXPECT_FALSE(cpu::winogradApplies(
      geometryOf(1, 64, 64, k3, {2, 2}, pad1, one), 64, false));
  EXPECT_FALSE(cpu::winogradApplies(
      geometryOf(1, 64, 64, k3, one, pad1, {2, 2}), 64, false));
  EXPECT_FALSE(cpu::winogradApplies(
      geometryOf(1, 64, 64, {1, 1}, one, {0, 0, 0, 0}, one), 64, false));
  EXPECT_FALSE(cpu::winogradApplies(
      geometryOf(1, 64, 64, {5, 5}, one, {2, 2, 2, 2}, one), 64, false));
  EXPECT_FALSE(cpu::winogradApplies(
      geometryOf(1, 64, 64, k3, one, {3, 1, 1, 1}, one), 64, false));
  EXPECT_FALSE(cpu::winogradApplies(geometryOf(1, 64, 64, {3, 3, 3}, {1, 1, 1},
                                               {1, 1, 1, 1, 1, 1}, {1, 1, 1}),
                                    64, false));
}

//===----------------------------------------------------------------------===//
// Timing (not a test: --gtest_also_run_disabled_tests)
//===----------------------------------------------------------------------===//

/// Process CPU milliseconds of fn(), the least of `reps` runs.
template <typename Fn> double cpuMs(int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    fn();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    best = std::min(best, (b.tv_sec - a.tv_sec) * 1e3 +
                              (b.tv_nsec - a.tv_nsec) * 1e-6);
  }
  return best;
}

/// The CIFAR ResNet-18's 3 x 3 stride-1 convolutions at batch 16: each
/// kernel with Winograd and with im2col (STRATA_CONV_WINOGRAD=0), and the
/// direct product's GEMM alone ([cout, 9 cin] x [9 cin, N H W]), the floor
/// of the im2col path. Run with STRATA_NUM_THREADS=1 for one core.
TEST(ConvWinograd, DISABLED_TimesResNet18Shapes) {
  std::printf("%s %-16s %9s %9s %9s %9s\n", "shape", "kernel", "im2col",
              "winograd", "gemm", "16 gemms");
  // STRATA_TIMES_CHANNELS=C times the layer of C channels alone;
  // STRATA_TIMES_BATCH=N at batch N (16).
  const char *only = std::getenv("STRATA_TIMES_CHANNELS");
  const char *batchEnv = std::getenv("STRATA_TIMES_BATCH");
  const int64_t nb = batchEnv ? std::atoll(batchEnv) : 16;
  for (int64_t ch : {64, 128, 256, 512}) {
    if (only && std::atoll(only) != ch)
      continue;
    int64_t hw = 32 * 64 / ch;
    Case c{nb, ch, ch, hw, hw, {1, 1, 1, 1}};
    std::mt19937 rng(5);
    std::vector<int64_t> xs{nb, ch, hw, hw}, ws{ch, ch, 3, 3};
    OwnedTensor x =
        tensorOf(DType::F32, xs, randomValues(rng, nb * ch * hw * hw));
    OwnedTensor w = tensorOf(DType::F32, ws, randomValues(rng, ch * ch * 9));
    OwnedTensor dy =
        tensorOf(DType::F32, xs, randomValues(rng, nb * ch * hw * hw));
    OwnedTensor y(DType::F32, xs), dx(DType::F32, xs), dw(DType::F32, ws);
    KernelAttrs attrs = attrsOf(c);
    struct Op {
      const char *name;
      std::vector<const OwnedTensor *> in;
      OwnedTensor *out;
    } ops[] = {{"graph.conv", {&x, &w}, &y},
               {"graph.conv_grad_input", {&dy, &w}, &dx},
               {"graph.conv_grad_weight", {&dy, &x}, &dw}};
    std::vector<float> col(size_t(9 * ch * nb * hw * hw)),
        out(size_t(ch * nb * hw * hw));
    double gemm = cpuMs(3, [&] {
      strata::runtime::cpu::blasGemm<float>(
          false, false, ch, nb * hw * hw, 9 * ch, w.view().as<float>(), 9 * ch,
          col.data(), nb * hw * hw, out.data(), nb * hw * hw, false);
    });
    int64_t tiles = nb * ((hw + 1) / 2) * ((hw + 1) / 2);
    std::vector<float> u(size_t(16 * ch * ch)), v(size_t(16 * ch * tiles)),
        m(size_t(16 * ch * tiles));
    double winoGemm = cpuMs(3, [&] {
      for (int e = 0; e < 16; ++e)
        strata::runtime::cpu::blasGemm<float>(
            false, false, ch, tiles, ch, u.data() + e * ch * ch, ch,
            v.data() + e * ch * tiles, tiles, m.data() + e * ch * tiles, tiles,
            false);
    });
    for (const Op &op : ops) {
      double ms[2];
      for (int wino = 0; wino < 2; ++wino) {
        setenv("STRATA_CONV_WINOGRAD", wino ? "1" : "0", 1);
        ms[wino] = cpuMs(5, [&] {
          ASSERT_TRUE(runCpuKernel(op.name, op.in, {op.out}, attrs));
        });
      }
      unsetenv("STRATA_CONV_WINOGRAD");
      std::printf("%lldx%lldx%lldx%lld %-16s %9.2f %9.2f %9.2f %9.2f\n",
                  (long long)nb, (long long)ch, (long long)hw, (long long)hw,
                  op.name + 6, ms[0], ms[1], gemm, winoGemm);
    }
  }
}

} // namespace
