//===- VectorMath.h - Float exp and GELU over arrays, vectorized -*- C++ -*-===//
//
// Private to runtime/cpu: exp and exact GELU (and its gradient) over float
// arrays, written so that GCC's vectorizer turns the loops into SIMD code
// (no libm call per element). Used where a softmax's exponentials or GELU
// dominate a kernel (attention, cross entropy, softmax, gelu and its
// gradient); PyTorch's CPU kernels compute these in float, vectorized, too.
//
// Each function is compiled three times (VectorMath.cpp): for the baseline
// ISA, x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512), picked once at load
// time by the CPU. All evaluate the same IEEE operations in the same order
// (no contraction the compiler chooses, no reassociation; the fused
// multiply-adds are written out, one instruction on v3 and v4, libm's
// exactly rounded fmaf on the baseline), so the results are bit-identical
// on every x86-64 CPU; only the vector width differs. (A NaN result's sign
// aside: which operand's NaN an operation returns follows the operand
// order the compiler picks, and IEEE 754 leaves it unspecified.)
//
// Accuracy: within 2 ulp of exp over [-86.6, 88.7] (Cephes' expf:
// Cody-Waite reduction by ln 2, a degree-6 polynomial, in fused
// multiply-adds as PyTorch's vectorized exp computes it), +inf above, and 0
// below -86.6 instead of the denormals expf would give (a softmax term
// below 1e-38 of the largest). NaN gives NaN. erf by Abramowitz and Stegun
// 7.1.26, |error| <= 1.5e-7 (absolute), the formula of PyTorch's vectorized
// CPU erf (so of its GELU and GELU gradient).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CPU_VECTORMATH_H
#define STRATA_RUNTIME_CPU_VECTORMATH_H

#include <cstdint>

namespace strata::runtime::cpu {

/// A loop body written once, inlined into each build of its callers.
#define STRATA_VECTOR_BODY __attribute__((always_inline)) inline

/// A function compiled for x86-64-v4 (AVX-512) and for the baseline ISA,
/// the CPU choosing once at load time (GCC's target_clones). The CPU
/// kernels are compiled without FMA contraction (runtime/CMakeLists.txt),
/// so both builds round every operation alike and the results are
/// bit-identical whichever runs; only the vector width differs.
#define STRATA_VECTOR_DISPATCHED                                               \
  __attribute__((target_clones("arch=x86-64-v4", "default")))

/// The same for loops that fuse multiply-adds (VectorMath.cpp's fma): an
/// x86-64-v3 (AVX2 and FMA) build as well, so a CPU without AVX-512 runs
/// them in FMA instructions and not libm's fmaf, which the baseline build
/// calls (exactly rounded too: every build gives the same bits).
#define STRATA_VECTOR_DISPATCHED_FMA                                           \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

/// out[i] = exp(in[i] - shift) for i < n (out may be in).
void expShifted(const float *in, float shift, float *out, int64_t n);

/// y = GELU(x) = x * (1 + erf(x / sqrt 2)) / 2 over n floats, as PyTorch's
/// CPU kernel computes it (float).
void geluExactF32(const float *x, float *y, int64_t n);

/// dx = dy * (Phi(x) + x * phi(x)), GELU's derivative, over n floats, as
/// PyTorch's CPU gelu_backward computes it (float).
void geluExactGradF32(const float *x, const float *dy, float *dx, int64_t n);

/// The same three compiled for the baseline ISA only, whatever the CPU:
/// the reference the tests hold the dispatched versions to, bit for bit.
namespace baseline {
void expShifted(const float *in, float shift, float *out, int64_t n);
void geluExactF32(const float *x, float *y, int64_t n);
void geluExactGradF32(const float *x, const float *dy, float *dx, int64_t n);
} // namespace baseline

} // namespace strata::runtime::cpu

#endif // STRATA_RUNTIME_CPU_VECTORMATH_H
