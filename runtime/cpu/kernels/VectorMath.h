//===- VectorMath.h - Float exp the compiler vectorizes ---------*- C++ -*-===//
//
// Private to runtime/cpu: exp, erf and exact GELU over float arrays written
// so that GCC's vectorizer turns the loops into SIMD code at the baseline
// ISA (no libm call per element). Used where a softmax's exponentials or
// GELU dominate a kernel (attention, cross entropy, softmax, gelu and its
// gradient); PyTorch's CPU kernels compute these in float, vectorized, too.
//
// Accuracy: within 2 ulp of exp over [-86.6, 88.7] (Cephes' expf:
// Cody-Waite reduction by ln 2, a degree-6 polynomial), +inf above, and 0
// below -86.6 instead of the denormals expf would give (a softmax term
// below 1e-38 of the largest). NaN gives NaN.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CPU_VECTORMATH_H
#define STRATA_RUNTIME_CPU_VECTORMATH_H

#include <cstdint>
#include <cstring>

namespace strata::runtime::cpu {

// The selects below must not stop if-conversion: GCC keeps the branches of
// a float compare under -ftrapping-math (its default), so these two
// functions are compiled without it (they raise no exceptions anyone
// reads: the kernels never test the FP flags).
#define STRATA_VECTOR_MATH __attribute__((optimize("no-trapping-math")))

/// exp(x) for one float, in the form expShifted's loop vectorizes.
STRATA_VECTOR_MATH inline float vectorExp(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float kRound = 12582912.0f; // 1.5 * 2^23: adding it rounds to int
  float c = x > 88.7f ? 88.7f : x < -86.6f ? -86.6f : x;
  float n = (c * kLog2e + kRound) - kRound;
  float r = c - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // 2^n as 2^(n-1) * 2: n reaches 128 near the top of the range.
  int32_t bits = (static_cast<int32_t>(n) + 126) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  y = y * scale * 2.0f;
  y = x > 88.7f ? __builtin_inff() : y;
  y = x < -86.6f ? 0.0f : y;
  return x != x ? x : y;
}

/// out[i] = exp(in[i] - shift) for i < n (out may be in).
STRATA_VECTOR_MATH inline void expShifted(const float *in, float shift, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = vectorExp(in[i] - shift);
}

/// erf(x) for one float: Abramowitz and Stegun 7.1.26, |error| <= 1.5e-7
/// (absolute), the formula of PyTorch's vectorized CPU erf (so of its
/// GELU and GELU gradient).
STRATA_VECTOR_MATH inline float vectorErf(float x) {
  const float p = 0.3275911f, a1 = 0.254829592f, a2 = -0.284496736f,
              a3 = 1.421413741f, a4 = -1.453152027f, a5 = 1.061405429f;
  float ax = x < 0.0f ? -x : x;
  float t = 1.0f / (1.0f + p * ax);
  float poly = (((a5 * t + a4) * t + a3) * t + a2) * t + a1;
  float y = 1.0f - poly * t * vectorExp(-ax * ax);
  return x < 0.0f ? -y : y;
}

/// y = GELU(x) = x * (1 + erf(x / sqrt 2)) / 2 over n floats, as PyTorch's
/// CPU kernel computes it (float, vectorErf).
STRATA_VECTOR_MATH inline void geluExactF32(const float *x, float *y,
                                            int64_t n) {
  const float kAlpha = 0.707106781186547524f; // 1 / sqrt 2
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * 0.5f * (1.0f + vectorErf(x[i] * kAlpha));
}

/// dx = dy * (Phi(x) + x * phi(x)), GELU's derivative, over n floats, as
/// PyTorch's CPU gelu_backward computes it (float, vectorErf, vectorExp).
STRATA_VECTOR_MATH inline void geluExactGradF32(const float *x,
                                                const float *dy, float *dx,
                                                int64_t n) {
  const float kAlpha = 0.707106781186547524f;
  const float kBeta = 0.398942280401432678f; // 1 / sqrt(2 pi)
  for (int64_t i = 0; i < n; ++i) {
    float cdf = 0.5f * (1.0f + vectorErf(x[i] * kAlpha));
    float pdf = kBeta * vectorExp(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

} // namespace strata::runtime::cpu

#endif // STRATA_RUNTIME_CPU_VECTORMATH_H
