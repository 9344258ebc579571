//===- ElementwiseFormulas.h - The CPU's elementwise math -------*- C++ -*-===//
//
// Private to runtime/cpu: the per-element formulas of the elementwise ops,
// shared by their own kernels (ElementwiseKernels.cpp) and the fused
// kernel (FusedElementwiseKernels.cpp), so a fused chain computes its ops'
// numbers bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CPU_ELEMENTWISEFORMULAS_H
#define STRATA_RUNTIME_CPU_ELEMENTWISEFORMULAS_H

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace strata::runtime::cpu::formulas {

template <typename T> T relu(T x) {
  // NaN stays NaN, as in PyTorch.
  return x > 0 || x != x ? x : T(0);
}

template <typename T> T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

template <typename T> T softplus(T x) {
  // PyTorch: beta 1, threshold 20 (linear above).
  return x > T(20) ? x : std::log1p(std::exp(x));
}

template <typename T> T geluExact(T x) {
  return x * T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
}

template <typename T> T geluTanh(T x) {
  const T kBeta = T(M_SQRT2 * M_2_SQRTPI * 0.5); // sqrt(2 / pi)
  const T kKappa = T(0.044715);
  T inner = kBeta * (x + kKappa * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}

template <typename T> T hardSwish(T x) {
  return x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
}

template <typename T> T reciprocal(T x) { return T(1) / x; }

template <typename T> T abs(T x) { return x < 0 ? T(-x) : x; }

template <typename T> T nanMax(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (a != a || b != b)
      return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}

template <typename T> T nanMin(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (a != a || b != b)
      return std::numeric_limits<T>::quiet_NaN();
  return a < b ? a : b;
}

template <typename T> T divide(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return a / b;
  else
    return b == 0 ? T(0) : T(a / b); // truncation, as the folder does
}

} // namespace strata::runtime::cpu::formulas

#endif // STRATA_RUNTIME_CPU_ELEMENTWISEFORMULAS_H
