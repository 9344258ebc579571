//===- GradKernelTestUtils.h - Finite-difference checks of gradients -*- C++
//-*-===//
//
// A gradient kernel is checked against the forward kernel it differentiates:
// for a random weight w, L(x) = sum(forward(x)[out] * w) is differentiated by
// central differences in double, and the gradient kernel, given dy = w, must
// return the same dL/dx.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_TESTS_GRADKERNELTESTUTILS_H
#define STRATA_RUNTIME_TESTS_GRADKERNELTESTUTILS_H

#include "KernelTestUtils.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace strata::runtime::testing {

/// Uniform values in [lo, hi), from a fixed seed per test.
inline std::vector<double> uniform(std::mt19937_64 &rng, int64_t n, double lo,
                                   double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v)
    x = dist(rng);
  return v;
}

inline int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// An f64 tensor of uniform values in [lo, hi).
inline OwnedTensor randomF64(std::mt19937_64 &rng, std::vector<int64_t> shape,
                             double lo = -1, double hi = 1) {
  int64_t n = numelOf(shape);
  return f64(std::move(shape), uniform(rng, n, lo, hi));
}

/// The f32 rounding of an f64 tensor.
inline OwnedTensor toF32(const OwnedTensor &t) {
  std::vector<double> v = t.values<double>();
  return f32(t.view().shape, std::vector<float>(v.begin(), v.end()));
}

/// A forward instruction: its op, operands, result buffers and attributes.
struct Forward {
  std::string op;
  std::vector<OwnedTensor *> inputs;
  std::vector<OwnedTensor *> outputs;
  KernelAttrs attrs;
  uint64_t seed = 0;
  /// The result the loss weighs.
  size_t result = 0;

  /// sum(forward(inputs)[result] * w), in double.
  double weightedSum(const std::vector<double> &w) const {
    std::vector<const OwnedTensor *> in(inputs.begin(), inputs.end());
    Status s = runCpuKernel(op, in, outputs, attrs, seed);
    EXPECT_TRUE(s) << s.message();
    std::vector<double> y = outputs[result]->values<double>();
    EXPECT_EQ(y.size(), w.size());
    double sum = 0;
    for (size_t i = 0; i < y.size() && i < w.size(); ++i)
      sum += y[i] * w[i];
    return sum;
  }

  /// dL/d inputs[which] by central differences with step h.
  std::vector<double> numericGradient(size_t which,
                                      const std::vector<double> &w,
                                      double h = 1e-6) const {
    double *x = inputs[which]->view().as<double>();
    int64_t n = inputs[which]->view().numel();
    std::vector<double> grad(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double saved = x[i];
      x[i] = saved + h;
      double plus = weightedSum(w);
      x[i] = saved - h;
      double minus = weightedSum(w);
      x[i] = saved;
      grad[i] = (plus - minus) / (2 * h);
    }
    return grad;
  }
};

/// |analytic - numeric| <= atol + rtol * |numeric|, elementwise, with the
/// index in the message.
inline void expectGradient(const std::vector<double> &analytic,
                           const std::vector<double> &numeric,
                           double rtol = 1e-6, double atol = 1e-7) {
  ASSERT_EQ(analytic.size(), numeric.size());
  for (size_t i = 0; i < analytic.size(); ++i)
    EXPECT_NEAR(analytic[i], numeric[i], atol + rtol * std::fabs(numeric[i]))
        << "at " << i;
}

/// The f32 result against the f64 one (same rounded inputs).
inline void expectF32Matches(const OwnedTensor &got32,
                             const OwnedTensor &want64, double rtol = 1e-5,
                             double atol = 1e-5) {
  std::vector<float> g = got32.values<float>();
  std::vector<double> w = want64.values<double>();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(double(g[i]), w[i], atol + rtol * std::fabs(w[i]))
        << "at " << i;
}

/// Expects an error whose message names `op`.
inline void expectErrorNaming(const Status &s, const std::string &op) {
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find(op), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

} // namespace strata::runtime::testing

#endif // STRATA_RUNTIME_TESTS_GRADKERNELTESTUTILS_H
