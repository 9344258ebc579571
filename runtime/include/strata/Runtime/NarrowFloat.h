//===- NarrowFloat.h - bf16 and fp16 rounding and storage -------*- C++ -*-===//
//
// The one definition of mixed precision's narrow types, shared by the CPU
// kernels and the CUDA kernels (host and device): rounding an f32 to the
// nearest bf16 / fp16 value (ties to even; fp16 overflows to inf and keeps
// subnormals), and the 16-bit storage of those values. For every f32 `v`,
// `fromBf16Bits(bf16Bits(v)) == roundToBf16(v)` bit for bit (NaN stays a
// NaN), so storing a tensor narrow computes exactly what rounding it in f32
// storage (graph.round_to) computes.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_NARROWFLOAT_H
#define STRATA_RUNTIME_NARROWFLOAT_H

#include "strata/Runtime/HostDevice.h"

#include <cstdint>
#include <cstring>
#include <math.h>

namespace strata::runtime {

STRATA_HOST_DEVICE inline uint32_t floatBits(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits;
#endif
}

STRATA_HOST_DEVICE inline float bitsFloat(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
#endif
}

/// f32 -> nearest bf16 value (round to nearest even), still an f32.
STRATA_HOST_DEVICE inline float roundToBf16(float v) {
  uint32_t bits = floatBits(v);
  if ((bits & 0x7f800000u) == 0x7f800000u) // inf, nan: keep
    return v;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bitsFloat(bits & 0xffff0000u);
}

/// f32 -> nearest fp16 value (round to nearest even; from 65520 on -> inf;
/// subnormals kept), still an f32. Each step is exact.
STRATA_HOST_DEVICE inline float roundToFp16(float v) {
  if ((floatBits(v) & 0x7f800000u) == 0x7f800000u) // inf, nan: keep
    return v;
  float a = fabsf(v);
  if (a >= 65520.0f) // rounds past the largest fp16, 65504
    return copysignf(bitsFloat(0x7f800000u), v);
  int exponent;
  frexpf(a, &exponent); // a = m * 2^exponent, m in [0.5, 1)
  // fp16 keeps 11 significant bits; below 2^-14 the step is fixed at 2^-24.
  int e = exponent - 11 > -24 ? exponent - 11 : -24;
  float step = ldexpf(1.0f, e);
  return copysignf(rintf(a / step) * step, v);
}

/// The bf16 storage of roundToBf16(v).
STRATA_HOST_DEVICE inline uint16_t bf16Bits(float v) {
  uint32_t bits = floatBits(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it one (quiet)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>(floatBits(roundToBf16(v)) >> 16);
}

STRATA_HOST_DEVICE inline float fromBf16Bits(uint16_t h) {
  return bitsFloat(static_cast<uint32_t>(h) << 16);
}

/// The fp16 storage of roundToFp16(v).
STRATA_HOST_DEVICE inline uint16_t fp16Bits(float v) {
  uint32_t bits = floatBits(v);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN
    return sign | 0x7e00u;
  float a = fabsf(roundToFp16(v));
  if (a == 0.0f)
    return sign;
  if ((floatBits(a) & 0x7f800000u) == 0x7f800000u) // inf
    return sign | 0x7c00u;
  int exponent;
  frexpf(a, &exponent); // a = 1.f * 2^(exponent - 1)
  int e = exponent - 1;
  if (e < -14) // subnormal: a is a multiple of 2^-24
    return sign | static_cast<uint16_t>(ldexpf(a, 24));
  uint16_t mantissa = static_cast<uint16_t>(ldexpf(a, 10 - e) - 1024.0f);
  return sign | static_cast<uint16_t>((e + 15) << 10) | mantissa;
}

STRATA_HOST_DEVICE inline float fromFp16Bits(uint16_t h) {
  float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu)
    return m ? bitsFloat(0x7fc00000u | (static_cast<uint32_t>(h & 0x8000u)
                                        << 16))
             : sign * bitsFloat(0x7f800000u);
  if (e == 0) // zero and subnormals
    return sign * ldexpf(static_cast<float>(m), -24);
  return sign * ldexpf(static_cast<float>(m + 1024u), static_cast<int>(e) - 25);
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_NARROWFLOAT_H
