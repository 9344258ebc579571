//===- VectorMath.cpp - Float exp and GELU over arrays, vectorized --------===//
//
// The loops of VectorMath.h. Each is written once as an always-inline body
// and instantiated twice: with GCC's target_clones (x86-64-v4 and the
// baseline, the CPU choosing at load time) for the kernels, and for the
// baseline alone as the tests' reference.
//
// The library's float options (runtime/CMakeLists.txt: no FMA
// contraction, no trapping math, so the selects if-convert and the loops
// vectorize) keep the two builds bit-identical.
//
//===----------------------------------------------------------------------===//

#include "kernels/VectorMath.h"

#include <cstring>

namespace strata::runtime::cpu {
namespace {


/// a * b + c rounded once: one instruction in the x86-64-v3 and -v4
/// builds, libm's fmaf (exactly rounded too) in the baseline's, so every
/// build gives the same bits.
STRATA_VECTOR_BODY float fma(float a, float b, float c) {
  return __builtin_fmaf(a, b, c);
}

/// exp(x) for one float (Cephes' expf, the selects in vectorizable form,
/// the reduction and polynomial in fused multiply-adds).
STRATA_VECTOR_BODY float vectorExp(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float kRound = 12582912.0f; // 1.5 * 2^23: adding it rounds to int
  float c = x > 88.7f ? 88.7f : x < -86.6f ? -86.6f : x;
  float n = fma(c, kLog2e, kRound) - kRound;
  float r = fma(-n, kLn2Hi, c);
  r = fma(-n, kLn2Lo, r);
  float p = 1.9875691500e-4f;
  p = fma(p, r, 1.3981999507e-3f);
  p = fma(p, r, 8.3334519073e-3f);
  p = fma(p, r, 4.1665795894e-2f);
  p = fma(p, r, 1.6666665459e-1f);
  p = fma(p, r, 5.0000001201e-1f);
  float y = fma(p, r * r, r) + 1.0f;
  // 2^n as 2^(n-1) * 2: n reaches 128 near the top of the range.
  int32_t bits = (static_cast<int32_t>(n) + 126) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  y = y * scale * 2.0f;
  y = x > 88.7f ? __builtin_inff() : y;
  y = x < -86.6f ? 0.0f : y;
  return x != x ? x : y;
}

/// erf(x) for one float: Abramowitz and Stegun 7.1.26, given
/// exp(-x * x) (`gauss`, which GELU's gradient shares with its density).
STRATA_VECTOR_BODY float vectorErf(float x, float gauss) {
  const float p = 0.3275911f, a1 = 0.254829592f, a2 = -0.284496736f,
              a3 = 1.421413741f, a4 = -1.453152027f, a5 = 1.061405429f;
  float ax = x < 0.0f ? -x : x;
  float t = 1.0f / fma(p, ax, 1.0f);
  float poly = fma(fma(fma(fma(a5, t, a4), t, a3), t, a2), t, a1);
  float y = fma(-(poly * t), gauss, 1.0f);
  return x < 0.0f ? -y : y;
}

STRATA_VECTOR_BODY float vectorErf(float x) {
  return vectorErf(x, vectorExp(-(x * x)));
}

STRATA_VECTOR_BODY void expShiftedBody(const float *in, float shift,
                                       float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = vectorExp(in[i] - shift);
}

STRATA_VECTOR_BODY void geluBody(const float *x, float *y, int64_t n) {
  const float kAlpha = 0.707106781186547524f; // 1 / sqrt 2
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * 0.5f * (1.0f + vectorErf(x[i] * kAlpha));
}

STRATA_VECTOR_BODY void geluGradBody(const float *x, const float *dy,
                                     float *dx, int64_t n) {
  const float kAlpha = 0.707106781186547524f;
  const float kBeta = 0.398942280401432678f; // 1 / sqrt(2 pi)
  for (int64_t i = 0; i < n; ++i) {
    // exp(-(x / sqrt 2)^2) = exp(-x^2 / 2): erf's term and the density's.
    float u = x[i] * kAlpha;
    float gauss = vectorExp(-(u * u));
    float cdf = 0.5f * (1.0f + vectorErf(u, gauss));
    float pdf = kBeta * gauss;
    dx[i] = dy[i] * fma(x[i], pdf, cdf);
  }
}

} // namespace

STRATA_VECTOR_DISPATCHED_FMA void expShifted(const float *in, float shift,
                                         float *out, int64_t n) {
  expShiftedBody(in, shift, out, n);
}

STRATA_VECTOR_DISPATCHED_FMA void geluExactF32(const float *x, float *y,
                                           int64_t n) {
  geluBody(x, y, n);
}

STRATA_VECTOR_DISPATCHED_FMA void geluExactGradF32(const float *x, const float *dy,
                                               float *dx, int64_t n) {
  geluGradBody(x, dy, dx, n);
}

namespace baseline {

void expShifted(const float *in, float shift,
                                       float *out, int64_t n) {
  expShiftedBody(in, shift, out, n);
}

void geluExactF32(const float *x, float *y, int64_t n) {
  geluBody(x, y, n);
}

void geluExactGradF32(const float *x, const float *dy,
                                             float *dx, int64_t n) {
  geluGradBody(x, dy, dx, n);
}

} // namespace baseline

} // namespace strata::runtime::cpu
