//===- ElementwiseFormulas.h - The elementwise ops' math, for every backend -*- C++ -*-===//
//
// The per-element formula of every op in ElementwiseOps.def, written once:
// the CPU kernels call it on the host, the CUDA kernels on the device, and
// each backend's fused kernel calls the same function for the op an
// instruction replaces, so a fused chain computes its ops' numbers.
//
// Math is evaluated in the element type (expf for float, exp for double),
// as PyTorch's CPU kernels do; the formulas are PyTorch's (softplus
// threshold 20, both GELU forms, NaN propagation of relu / max / min /
// clip). On the host, expf is glibc's; on the device CUDA's, within a few
// ulp of it (the CUDA tests' tolerances).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_ELEMENTWISEFORMULAS_H
#define STRATA_RUNTIME_ELEMENTWISEFORMULAS_H

#include "strata/Runtime/ElementwiseOps.h"
#include "strata/Runtime/HostDevice.h"
#include "strata/Runtime/Kernel.h"

#include <math.h>

#include <limits>
#include <type_traits>

namespace strata::runtime {

//===----------------------------------------------------------------------===//
// Math in the element type
//===----------------------------------------------------------------------===//

#define STRATA_MATH1(NAME, F32, F64)                                           \
  STRATA_HOST_DEVICE inline float NAME(float x) { return F32(x); }             \
  STRATA_HOST_DEVICE inline double NAME(double x) { return F64(x); }
STRATA_MATH1(mathExp, expf, exp)
STRATA_MATH1(mathLog, logf, log)
STRATA_MATH1(mathSqrt, sqrtf, sqrt)
STRATA_MATH1(mathTanh, tanhf, tanh)
STRATA_MATH1(mathErf, erff, erf)
STRATA_MATH1(mathSin, sinf, sin)
STRATA_MATH1(mathCos, cosf, cos)
STRATA_MATH1(mathLog1p, log1pf, log1p)
STRATA_MATH1(mathExpm1, expm1f, expm1)
#undef STRATA_MATH1

STRATA_HOST_DEVICE inline float mathPow(float a, float b) { return powf(a, b); }
STRATA_HOST_DEVICE inline double mathPow(double a, double b) {
  return pow(a, b);
}

/// std::max / std::min / std::clamp exactly: with a NaN operand the result
/// depends on the order (fmax / fmin would drop the NaN).
template <typename T> STRATA_HOST_DEVICE inline T stdMax(T a, T b) {
  return a < b ? b : a;
}
template <typename T> STRATA_HOST_DEVICE inline T stdMin(T a, T b) {
  return b < a ? b : a;
}
template <typename T> STRATA_HOST_DEVICE inline T stdClamp(T v, T lo, T hi) {
  return v < lo ? lo : hi < v ? hi : v;
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// A unary op's attributes, read once on the host (readUnaryParams).
struct UnaryParams {
  double alpha = 0, beta = 0, min = 0, max = 0;
  bool hasMin = false, hasMax = false, tanhGelu = false;
};

/// `kind`'s attributes with the ONNX defaults filled in; graph.unary_grad
/// reads the same (planUnaryGrad).
inline UnaryParams readUnaryParams(Unary kind, const KernelAttrs &attrs) {
  UnaryParams p;
  switch (kind) {
  case Unary::Gelu:
    p.tanhGelu = attrs.getString("approximate", "none") == "tanh";
    break;
  case Unary::LeakyRelu: p.alpha = attrs.getFloat("alpha", 0.01); break;
  case Unary::Elu: p.alpha = attrs.getFloat("alpha", 1.0); break;
  case Unary::HardSigmoid:
    p.alpha = attrs.getFloat("alpha", 0.2);
    p.beta = attrs.getFloat("beta", 0.5);
    break;
  case Unary::Clip:
    p.hasMin = attrs.has("min");
    p.hasMax = attrs.has("max");
    if (p.hasMin)
      p.min = attrs.getFloat("min");
    if (p.hasMax)
      p.max = attrs.getFloat("max");
    break;
  default: break;
  }
  return p;
}

template <typename T> STRATA_HOST_DEVICE inline T geluExact(T x) {
  return x * T(0.5) * (T(1) + mathErf(x * T(M_SQRT1_2)));
}

template <typename T> STRATA_HOST_DEVICE inline T geluTanh(T x) {
  const T kBeta = T(M_SQRT2 * M_2_SQRTPI * 0.5); // sqrt(2 / pi)
  const T kKappa = T(0.044715);
  T inner = kBeta * (x + kKappa * x * x * x);
  return T(0.5) * x * (T(1) + mathTanh(inner));
}

/// Op `K` of one element. Abs and Neg take every element type (integer
/// promotion and narrowing as C++ does them), the others floats.
template <Unary K, typename T>
STRATA_HOST_DEVICE inline T unaryFormula(T x, const UnaryParams &p) {
  if constexpr (K == Unary::Abs) {
    if constexpr (std::is_unsigned_v<T>) // i1: never negative
      return x;
    else
      return x < 0 ? T(-x) : x;
  } else if constexpr (K == Unary::Neg)
    return T(-x);
  else if constexpr (K == Unary::Exp)
    return mathExp(x);
  else if constexpr (K == Unary::Log)
    return mathLog(x);
  else if constexpr (K == Unary::Sqrt)
    return mathSqrt(x);
  else if constexpr (K == Unary::Reciprocal)
    return T(1) / x;
  else if constexpr (K == Unary::Tanh)
    return mathTanh(x);
  else if constexpr (K == Unary::Erf)
    return mathErf(x);
  else if constexpr (K == Unary::Sin)
    return mathSin(x);
  else if constexpr (K == Unary::Cos)
    return mathCos(x);
  else if constexpr (K == Unary::Relu)
    return x > 0 || x != x ? x : T(0); // NaN stays NaN, as in PyTorch
  else if constexpr (K == Unary::Sigmoid)
    return T(1) / (T(1) + mathExp(-x));
  else if constexpr (K == Unary::Softplus)
    return x > T(20) ? x : mathLog1p(mathExp(x)); // beta 1, threshold 20
  else if constexpr (K == Unary::Gelu)
    return p.tanhGelu ? geluTanh(x) : geluExact(x);
  else if constexpr (K == Unary::LeakyRelu)
    return x > 0 ? x : x * T(p.alpha);
  else if constexpr (K == Unary::Elu)
    return x > 0 ? x : T(p.alpha) * mathExpm1(x);
  else if constexpr (K == Unary::HardSigmoid) {
    T v = T(p.alpha) * x + T(p.beta);
    return stdMin(stdMax(v, T(0)), T(1));
  } else if constexpr (K == Unary::HardSwish)
    return x * stdMin(stdMax(x + T(3), T(0)), T(6)) / T(6);
  else if constexpr (K == Unary::Softsign)
    return x / (T(1) + (x < 0 ? T(-x) : x));
  else {
    static_assert(K == Unary::Clip, "a unary op without a formula");
    if (x != x)
      return x;
    if (p.hasMin)
      x = stdMax(x, T(p.min));
    if (p.hasMax)
      x = stdMin(x, T(p.max));
    return x;
  }
}

//===----------------------------------------------------------------------===//
// Binary and comparisons
//===----------------------------------------------------------------------===//

/// max / min propagate a NaN from either operand, as torch.maximum does.
template <typename T> STRATA_HOST_DEVICE inline T nanMax(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (a != a || b != b)
      return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}

template <typename T> STRATA_HOST_DEVICE inline T nanMin(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (a != a || b != b)
      return std::numeric_limits<T>::quiet_NaN();
  return a < b ? a : b;
}

template <Binary K, typename T>
STRATA_HOST_DEVICE inline T binaryFormula(T a, T b) {
  if constexpr (K == Binary::Add)
    return T(a + b);
  else if constexpr (K == Binary::Sub)
    return T(a - b);
  else if constexpr (K == Binary::Mul)
    return T(a * b);
  else if constexpr (K == Binary::Div) {
    if constexpr (std::is_floating_point_v<T>)
      return a / b;
    else
      return b == 0 ? T(0) : T(a / b); // truncation, as the folder does
  } else if constexpr (K == Binary::Pow)
    return mathPow(a, b); // floats only
  else if constexpr (K == Binary::Max)
    return nanMax(a, b);
  else if constexpr (K == Binary::Min)
    return nanMin(a, b);
  else if constexpr (K == Binary::And)
    return T(a && b);
  else {
    static_assert(K == Binary::Or, "a binary op without a formula");
    return T(a || b);
  }
}

template <Compare K, typename T>
STRATA_HOST_DEVICE inline bool compareFormula(T a, T b) {
  if constexpr (K == Compare::Equal)
    return a == b;
  else if constexpr (K == Compare::Less)
    return a < b;
  else {
    static_assert(K == Compare::Greater, "a comparison without a formula");
    return a > b;
  }
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_ELEMENTWISEFORMULAS_H
