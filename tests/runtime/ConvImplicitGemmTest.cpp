//===- ConvImplicitGemmTest.cpp - CUDA's implicit-GEMM conv, on the CPU ---===//
//
// The CUDA backend's graph.conv, graph.conv_grad_input and
// graph.conv_grad_weight (runtime/cuda/kernels/ConvImplicitGemm.cuh)
// compiled as host C++ over MmaPortable.cuh's emulated blocks (threads,
// barriers, shared memory) and run against the CPU's kernels: every tile
// edge, the gathers over padding, strides, dilations and groups, and the
// split sums, without a GPU. The bars are the conformance suite's for
// convolutions (f32 rtol 1e-4, atol 1e-5; f64 1e-10, 1e-12): both sum in
// the element type, in different orders. What this cannot check (the
// launch, speed) ConvolutionConformance does on a GPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/ConvImplicitGemm.cuh"

#include "KernelTestUtils.h"
#include "strata/Runtime/WindowPlan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>

using namespace strata::runtime;
using namespace strata::runtime::testing;
namespace cg = strata::runtime::cuda::conv_gemm;
namespace mma = strata::runtime::cuda::mma;

namespace {

struct Geometry {
  std::vector<int64_t> in, kernel, strides, pads, dilations;
};

/// Storage values of type S (float, double, mma::Bf16, mma::Fp16) as
/// doubles and back.
template <typename S> double valueOf(S v) { return double(cg::widen(v)); }
template <typename S> S storageOf(double v) {
  if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>)
    return S(v);
  else
    return mma::fromFloat<S>(float(v));
}

template <typename S>
OwnedTensor randomTensor(DType dtype, std::vector<int64_t> shape,
                         std::mt19937 &rng) {
  OwnedTensor t(dtype, std::move(shape));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.view().numel(); ++i)
    t.view().as<S>()[i] = storageOf<S>(u(rng));
  return t;
}

/// A result tensor filled with NaN, so an element the kernel skips shows.
template <typename S>
OwnedTensor unwritten(DType dtype, std::vector<int64_t> shape) {
  OwnedTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.view().numel(); ++i)
    t.view().as<S>()[i] = storageOf<S>(std::numeric_limits<double>::quiet_NaN());
  return t;
}

/// The conformance suite's bars. f32 / f64 for a sum of `k` products of
/// values in [-1, 1): rtol 1e-4 (f64 1e-10), atol 1e-5 (f64 1e-12) scaled
/// by the sum's spread, max(1, sqrt(k) / 3). bf16 / fp16 (f32 sums in
/// another order, rounded once): a bf16 ulp, rtol 8e-3 (fp16 1e-3), atol
/// 1e-3.
template <typename S>
void expectNear(const OwnedTensor &got, const OwnedTensor &want, int64_t k,
                const std::string &what) {
  double rtol, atol;
  if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) {
    rtol = sizeof(S) == 4 ? 1e-4 : 1e-10;
    atol = (sizeof(S) == 4 ? 1e-5 : 1e-12) *
           std::max(1.0, std::sqrt(double(k)) / 3);
  } else {
    rtol = std::is_same_v<S, mma::Bf16> ? 8e-3 : 1e-3;
    atol = 1e-3;
  }
  ASSERT_EQ(got.view().numel(), want.view().numel());
  int64_t bad = 0, worstAt = 0;
  double worst = -1;
  for (int64_t i = 0; i < got.view().numel(); ++i) {
    double g = valueOf(got.view().as<S>()[i]),
           w = valueOf(want.view().as<S>()[i]);
    double excess = std::abs(g - w) - (atol + rtol * std::abs(w));
    if (!(excess <= 0))
      ++bad;
    if (!(excess <= worst)) {
      worst = excess;
      worstAt = i;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.view().numel()
                    << " outside the bar; worst at " << worstAt << ": "
                    << valueOf(got.view().as<S>()[worstAt]) << " vs "
                    << valueOf(want.view().as<S>()[worstAt]);
}

/// Runs one pass's kernels on the emulated device; returns its split.
template <cg::Pass P, typename S>
int64_t runEmulated(const std::vector<const OwnedTensor *> &inputs,
                    OwnedTensor &out, const KernelAttrs &attrs) {
  std::vector<TensorView> in, outs = {out.view()};
  for (const OwnedTensor *t : inputs)
    in.push_back(t->view());
  KernelContext ctx{in, outs, attrs};
  using T = typename cg::Params<S>::T;
  cg::Params<S> p;
  Status planned = cg::planPass(ctx, P, p.c, p.gemm);
  EXPECT_TRUE(planned) << planned.message();
  if (!planned)
    return 0;
  cg::bindOperands(P, ctx, p);
  std::vector<T> partial(size_t(p.gemm.partialElements(p.c.groups)),
                         std::numeric_limits<T>::quiet_NaN());
  p.partial = partial.data();
  mma::emulateLaunch(p.gemm.blocks(p.c.groups), cg::kThreads,
                     cg::sharedBytes<S>(),
                     [&](int64_t b, int t, unsigned char *shared) {
                       cg::gemmBlock<P>(p, b, t, shared);
                     });
  if (p.gemm.splits > 1)
    for (int64_t e = 0; e < p.c.groups * p.gemm.M * p.gemm.N; ++e)
      cg::addSplits<P>(p, e);
  return p.gemm.splits;
}

std::vector<int64_t> concat(std::vector<int64_t> a,
                            const std::vector<int64_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Splits {
  int64_t forward = 0, gradInput = 0, gradWeight = 0;
};

/// conv and both gradients of one geometry on both sides.
template <typename S>
Splits checkConv(DType dtype, int64_t batch, int64_t channels,
                 int64_t outChannels, int64_t groups, const Geometry &g,
                 bool bias, std::mt19937 &rng) {
  size_t n = g.in.size();
  std::vector<int64_t> out;
  for (size_t d = 0; d < n; ++d)
    out.push_back(window::windowOutputSize(g.in[d], g.kernel[d], g.strides[d],
                                           g.pads[d], g.pads[n + d],
                                           g.dilations[d], false));
  int64_t taps = 1, positions = 1;
  for (size_t d = 0; d < n; ++d)
    taps *= g.kernel[d], positions *= out[d];
  std::vector<int64_t> xShape = concat({batch, channels}, g.in);
  std::vector<int64_t> wShape = concat({outChannels, channels / groups}, g.kernel);
  std::vector<int64_t> yShape = concat({batch, outChannels}, out);
  KernelAttrs attrs;
  attrs.set("strides", g.strides);
  attrs.set("pads", g.pads);
  attrs.set("dilations", g.dilations);
  attrs.set("groups", groups);

  OwnedTensor x = randomTensor<S>(dtype, xShape, rng);
  OwnedTensor w = randomTensor<S>(dtype, wShape, rng);
  OwnedTensor b = randomTensor<S>(dtype, {outChannels}, rng);
  OwnedTensor dy = randomTensor<S>(dtype, yShape, rng);
  std::vector<const OwnedTensor *> fwdIn = {&x, &w};
  if (bias)
    fwdIn.push_back(&b);

  Splits splits;
  OwnedTensor want(dtype, yShape), got = unwritten<S>(dtype, yShape);
  EXPECT_TRUE(runCpuKernel("graph.conv", fwdIn, {&want}, attrs));
  splits.forward = runEmulated<cg::Pass::Forward, S>(fwdIn, got, attrs);
  expectNear<S>(got, want, channels / groups * taps, "conv");

  OwnedTensor wantDx(dtype, xShape), gotDx = unwritten<S>(dtype, xShape);
  EXPECT_TRUE(runCpuKernel("graph.conv_grad_input", {&dy, &w}, {&wantDx}, attrs));
  splits.gradInput =
      runEmulated<cg::Pass::GradInput, S>({&dy, &w}, gotDx, attrs);
  expectNear<S>(gotDx, wantDx, outChannels / groups * taps,
                "conv_grad_input");

  OwnedTensor wantDw(dtype, wShape), gotDw = unwritten<S>(dtype, wShape);
  EXPECT_TRUE(runCpuKernel("graph.conv_grad_weight", {&dy, &x}, {&wantDw}, attrs));
  splits.gradWeight =
      runEmulated<cg::Pass::GradWeight, S>({&dy, &x}, gotDw, attrs);
  expectNear<S>(gotDw, wantDw, batch * positions, "conv_grad_weight");
  return splits;
}

TEST(ConvImplicitGemm, Conv2dMatchesCpu) {
  // ConvolutionConformance.Conv2d's geometries: padding, asymmetric pads
  // and strides, dilation, groups, depthwise, 1x1, a window as big as the
  // input, a 7x7 stride-2 stem.
  std::mt19937 rng(1);
  checkConv<float>(DType::F32, 2, 8, 16, 1,
                   {{9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, true, rng);
  checkConv<float>(DType::F32, 3, 4, 6, 1,
                   {{11, 7}, {3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}}, false, rng);
  checkConv<float>(DType::F32, 2, 6, 9, 3,
                   {{8, 10}, {3, 3}, {1, 2}, {1, 1, 1, 1}, {1, 1}}, true, rng);
  checkConv<float>(DType::F32, 2, 5, 5, 5,
                   {{7, 7}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}}, true, rng);
  checkConv<float>(DType::F32, 4, 16, 8, 1,
                   {{5, 6}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}}, false, rng);
  checkConv<float>(DType::F32, 1, 3, 2, 1,
                   {{4, 4}, {4, 4}, {1, 1}, {0, 0, 0, 0}, {1, 1}}, true, rng);
  checkConv<float>(DType::F32, 1, 3, 8, 1,
                   {{24, 24}, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}}, true, rng);
}

TEST(ConvImplicitGemm, Conv1dAnd3dAndF64MatchCpu) {
  std::mt19937 rng(2);
  checkConv<double>(DType::F64, 2, 3, 4, 1, {{17}, {3}, {2}, {1, 2}, {2}},
                    true, rng);
  checkConv<float>(DType::F32, 1, 4, 4, 2, {{1}, {1}, {1}, {0, 0}, {1}}, false,
                   rng);
  checkConv<double>(DType::F64, 2, 2, 3, 1,
                    {{5, 4, 6}, {2, 3, 2}, {1, 2, 2}, {1, 0, 1, 0, 1, 1},
                     {1, 1, 2}},
                    true, rng);
}

TEST(ConvImplicitGemm, ManyTilesMatchCpu) {
  // More than one 64-row and 64-column tile, partial on both sides, in
  // every pass: 80 output and 72 input channels; 2 x 9 x 9 positions.
  std::mt19937 rng(3);
  checkConv<float>(DType::F32, 2, 72, 80, 1,
                   {{9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, true, rng);
}

TEST(ConvImplicitGemm, SplitSumsMatchCpu) {
  // Few tiles and long sums: the weight gradient sums 2 x 32 x 32 = 2048
  // positions and the forward 64 x 3 x 3 = 576 taps, each split over
  // blocks and added in order.
  std::mt19937 rng(4);
  Splits s = checkConv<float>(DType::F32, 2, 64, 8, 1,
                              {{32, 32}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
                              false, rng);
  EXPECT_GT(s.gradWeight, 1);
  Splits f = checkConv<float>(DType::F32, 1, 64, 8, 1,
                              {{4, 4}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
                              true, rng);
  EXPECT_GT(f.forward, 1);
}

TEST(ConvImplicitGemm, NarrowMatchesCpu) {
  // bf16 / fp16 on (emulated) tensor cores: narrow tiles, f32
  // accumulators, rounded once, against the CPU's adapter (widen, f32
  // conv, round); a split sum too.
  std::mt19937 rng(5);
  checkConv<mma::Bf16>(DType::BF16, 2, 6, 9, 3,
                       {{8, 10}, {3, 3}, {1, 2}, {1, 1, 1, 1}, {1, 1}}, true,
                       rng);
  checkConv<mma::Fp16>(DType::F16, 3, 4, 6, 1,
                       {{11, 7}, {3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}}, true,
                       rng);
  Splits s = checkConv<mma::Bf16>(
      DType::BF16, 2, 64, 8, 1,
      {{32, 32}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, false, rng);
  EXPECT_GT(s.gradWeight, 1);
}

TEST(ConvImplicitGemm, SplitsDependOnTheShapeAlone) {
  cg::Conv c;
  c.batch = 2, c.channels = 64, c.m = 8, c.groups = 1, c.cg = 64, c.mg = 8;
  c.w.spatial = 2;
  c.w.inPlane = c.w.outPlane = 32 * 32;
  c.w.taps = 9;
  cg::Gemm g = cg::planGemm(cg::Pass::GradWeight, c);
  // 1 x 9 tiles; 2048 positions in 128 steps of 16: at most 128 / 16 = 8
  // ranges of at least 16 steps.
  EXPECT_EQ(g.tilesM, 1);
  EXPECT_EQ(g.tilesN, 9);
  EXPECT_EQ(g.splits, 8);
  EXPECT_EQ(g.kChunk, 256);
  // Enough tiles: no split.
  c.batch = 64, c.w.inPlane = c.w.outPlane = 56 * 56, c.cg = c.channels = 64;
  c.m = c.mg = 64;
  EXPECT_EQ(cg::planGemm(cg::Pass::Forward, c).splits, 1);
  // An empty sum: one range, nothing to split.
  c.cg = c.channels = 0;
  EXPECT_EQ(cg::planGemm(cg::Pass::Forward, c).splits, 1);
}

TEST(ConvImplicitGemm, RefusesMoreSpatialDimsThanItTakes) {
  window::Window plan;
  plan.spatial = 7;
  cg::Window w;
  Status s = cg::windowOf("graph.conv", plan, w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message(),
            "graph.conv: more than 6 spatial dims are not supported on CUDA");
}

} // namespace
