//===- ShapeGradKernelsTest.cpp - Gradients of slice and pad --------------===//
//
// slice_grad and pad_grad against central differences of graph.slice and
// graph.pad (negative strides; constant, reflect and edge modes, where one
// input element feeds several outputs), and pad_grad's crop for negative
// pads, which the forward does not take.
//
//===----------------------------------------------------------------------===//

#include "GradKernelTestUtils.h"

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

void checkSlice(std::mt19937_64 &rng, std::vector<int64_t> xShape,
                const KernelAttrs &attrs) {
  std::vector<int64_t> yShape = attrs.getInts("sizes");
  OwnedTensor x = randomF64(rng, xShape), y(DType::F64, yShape);
  OwnedTensor w = randomF64(rng, yShape), dx(DType::F64, xShape);
  std::fill_n(dx.view().as<double>(), dx.view().numel(), 9.0); // stale
  Status s = runCpuKernel("graph.slice_grad", {&w}, {&dx}, attrs);
  ASSERT_TRUE(s) << s.message();
  Forward f{"graph.slice", {&x}, {&y}, attrs};
  expectGradient(dx.values<double>(), f.numericGradient(0, w.values<double>()));

  OwnedTensor w32 = toF32(w), dx32(DType::F32, xShape);
  ASSERT_TRUE(runCpuKernel("graph.slice_grad", {&w32}, {&dx32}, attrs));
  expectF32Matches(dx32, dx, 1e-7, 0); // dy rounded once
}

TEST(ShapeGradKernels, SliceGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(30);
  checkSlice(rng, {4, 5, 6}, sliceAttrs({3, 1, 5}, {2, 2, 3}, {-2, 2, -2}));
  checkSlice(rng, {4, 5}, sliceAttrs({0, 0}, {4, 5}, {1, 1}));
  checkSlice(rng, {3, 4}, sliceAttrs({1, 0}, {0, 2}, {1, 3})); // empty
}

TEST(ShapeGradKernels, SliceGradChecksTheSlice) {
  OwnedTensor dy(DType::F32, {2}), dx(DType::F32, {5});
  expectErrorNaming(
      runCpuKernel("graph.slice_grad", {&dy}, {&dx}, sliceAttrs({1}, {2}, {0})),
      "graph.slice_grad");
  expectErrorNaming(
      runCpuKernel("graph.slice_grad", {&dy}, {&dx}, sliceAttrs({4}, {2}, {1})),
      "graph.slice_grad"); // reads index 5
  expectErrorNaming(
      runCpuKernel("graph.slice_grad", {&dy}, {&dx}, sliceAttrs({0}, {3}, {1})),
      "graph.slice_grad"); // dy is not [3]
  // sizes of another rank than dx (the CPU kernel used to walk dy's extra
  // dims into dx's first; the shared plan refuses it, as CUDA did).
  OwnedTensor dy2(DType::F32, {2, 3});
  expectErrorNaming(runCpuKernel("graph.slice_grad", {&dy2}, {&dx},
                                 sliceAttrs({0}, {2, 3}, {1})),
                    "does not fit the slice");
}

KernelAttrs padAttrs(std::vector<int64_t> pads, const std::string &mode,
                     double value = 0) {
  KernelAttrs a;
  a.set("pads", std::move(pads));
  a.set("mode", mode);
  a.set("value", value);
  return a;
}

TEST(ShapeGradKernels, PadGradMatchesFiniteDifferences) {
  std::mt19937_64 rng(31);
  struct Case {
    std::vector<int64_t> x, pads;
  };
  for (std::string mode : {"constant", "reflect", "edge"})
    for (const Case &c : std::vector<Case>{{{3, 4}, {1, 2, 2, 3}},
                                           {{2, 3, 4}, {0, 2, 1, 1, 0, 3}},
                                           {{5}, {0, 4}}}) {
      SCOPED_TRACE(mode + " " + std::to_string(c.x.size()));
      KernelAttrs attrs = padAttrs(c.pads, mode, 1.5);
      size_t rank = c.x.size();
      std::vector<int64_t> yShape = c.x;
      for (size_t d = 0; d < rank; ++d)
        yShape[d] += c.pads[d] + c.pads[d + rank];
      OwnedTensor x = randomF64(rng, c.x), y(DType::F64, yShape);
      OwnedTensor w = randomF64(rng, yShape), dx(DType::F64, c.x);
      Status s = runCpuKernel("graph.pad_grad", {&w}, {&dx}, attrs);
      ASSERT_TRUE(s) << s.message();
      Forward f{"graph.pad", {&x}, {&y}, attrs};
      expectGradient(dx.values<double>(),
                     f.numericGradient(0, w.values<double>()));

      OwnedTensor w32 = toF32(w), dx32(DType::F32, c.x);
      ASSERT_TRUE(runCpuKernel("graph.pad_grad", {&w32}, {&dx32}, attrs));
      expectF32Matches(dx32, dx, 1e-6, 1e-6);
    }
}

TEST(ShapeGradKernels, PadGradOfNegativePadsIsTheCropsAdjoint) {
  // x [4, 3] padded by (-1, 0) rows and (1, -1) columns: dy [3, 3] holds
  // x[1:4, 0:2] at dy[:, 1:3], column 0 being the fill. Cropped positions
  // (row 0, column 2) get 0.
  OwnedTensor dy = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  OwnedTensor dx(DType::F32, {4, 3});
  ASSERT_TRUE(runCpuKernel("graph.pad_grad", {&dy}, {&dx},
                           padAttrs({-1, 1, 0, -1}, "constant")));
  EXPECT_EQ(dx.values<float>(),
            (std::vector<float>{0, 0, 0, 2, 3, 0, 5, 6, 0, 8, 9, 0}));
}

TEST(ShapeGradKernels, PadGradChecksItsOperands) {
  OwnedTensor dy(DType::F32, {7}), dx(DType::F32, {3});
  expectErrorNaming(
      runCpuKernel("graph.pad_grad", {&dy}, {&dx}, padAttrs({3, 1}, "reflect")),
      "graph.pad_grad"); // reflect pads must be < 3
  expectErrorNaming(runCpuKernel("graph.pad_grad", {&dy}, {&dx},
                                 padAttrs({2, 1}, "constant")),
                    "graph.pad_grad"); // dy is not [6]
  expectErrorNaming(
      runCpuKernel("graph.pad_grad", {&dy}, {&dx}, padAttrs({2, 2}, "wrap")),
      "graph.pad_grad");
}

} // namespace
