//===- UnaryGrad.h - graph.unary_grad's derivatives, for every backend -*- C++ -*-===//
//
// graph.unary_grad computes d f(x)/dx * dy for the elementwise op its
// "kind" attribute names, in double, from the forward's input x and output
// y. The checks, the attribute defaults and the formulas (PyTorch's) are
// shared: the CPU kernel calls unaryDerivative on the host, the CUDA kernel
// on the device, so the two cannot drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_UNARYGRAD_H
#define STRATA_RUNTIME_UNARYGRAD_H

#include "strata/Runtime/ElementwiseOps.h"
#include "strata/Runtime/Kernel.h"

#include <math.h>

#include "strata/Runtime/HostDevice.h"

namespace strata::runtime {

/// The derivative to take: one per unary op of ElementwiseOps.def, by its
/// Unary number, and the tanh form of GELU. Artifacts hold these numbers
/// (a fused program's gradients), so they never change.
enum class UnaryGradKind {
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  Kind = int(Unary::Kind),
#include "strata/Runtime/ElementwiseOps.def"
  GeluTanh = 128,
};

/// Whether `k` numbers a UnaryGradKind.
inline bool isUnaryGradKind(int64_t k) {
  switch (k) {
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  case int64_t(UnaryGradKind::Kind):
#include "strata/Runtime/ElementwiseOps.def"
  case int64_t(UnaryGradKind::GeluTanh):
    return true;
  default:
    return false;
  }
}

struct UnaryGradParams {
  UnaryGradKind kind = UnaryGradKind::Abs;
  double alpha = 0, beta = 0, lo = 0, hi = 0;
};

/// Checks the instruction (dy, x, y -> dx, one type and shape), parses its
/// kind and fills in the forward kernels' attribute defaults.
Status planUnaryGrad(const KernelContext &ctx, UnaryGradParams &p);

/// d f(x) / dx * dy, in double. Each kind reads x or y, never both: exp,
/// sqrt, reciprocal, tanh, relu and sigmoid read y, the others x; autodiff
/// (GraphGradients.cpp's derivativeReadsOutput) passes the one read in
/// both places, so keep the two lists in step.
STRATA_HOST_DEVICE inline double unaryDerivative(const UnaryGradParams &p,
                                                double x, double y, double dy) {
  double alpha = p.alpha, beta = p.beta;
  switch (p.kind) {
  case UnaryGradKind::Abs: return x > 0 ? dy : x < 0 ? -dy : 0.0;
  case UnaryGradKind::Exp: return dy * y;
  case UnaryGradKind::Log: return dy / x;
  case UnaryGradKind::Sqrt: return dy / (2 * y);
  case UnaryGradKind::Reciprocal: return -dy * y * y;
  case UnaryGradKind::Tanh: return dy * (1 - y * y);
  case UnaryGradKind::Erf: return dy * 2.0 / sqrt(M_PI) * exp(-x * x);
  case UnaryGradKind::Sin: return dy * cos(x);
  case UnaryGradKind::Cos: return -dy * sin(x);
  // torch's threshold_backward: 0 where y <= 0, so a NaN output passes dy.
  case UnaryGradKind::Relu: return y <= 0 ? 0.0 : dy;
  case UnaryGradKind::Sigmoid: return dy * y * (1 - y);
  case UnaryGradKind::Softplus: {
    // torch: beta = 1, threshold = 20.
    if (x > 20)
      return dy;
    double z = exp(x);
    return dy * z / (z + 1);
  }
  case UnaryGradKind::Gelu: {
    double cdf = 0.5 * (1 + erf(x * M_SQRT1_2));
    double pdf = exp(-0.5 * x * x) * (M_2_SQRTPI * M_SQRT1_2 * 0.5);
    return dy * (cdf + x * pdf);
  }
  case UnaryGradKind::GeluTanh: {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    double inner = kBeta * (x + kKappa * x * x * x);
    double t = tanh(inner);
    double left = 0.5 * x, right = 1 + t;
    double dLeft = 0.5 * right;
    double dRight = left * (1 - t * t) * kBeta * (1 + 3 * kKappa * x * x);
    return dy * (dLeft + dRight);
  }
  case UnaryGradKind::LeakyRelu: return x > 0 ? dy : dy * alpha;
  // dy * (y + alpha) in exact arithmetic; torch's elu (not elu_) backward
  // takes alpha * exp(x), which keeps its precision where y rounds to -alpha.
  case UnaryGradKind::Elu: return x > 0 ? dy : dy * alpha * exp(x);
  case UnaryGradKind::HardSigmoid: {
    double z = alpha * x + beta;
    return z > 0 && z < 1 ? dy * alpha : 0.0;
  }
  case UnaryGradKind::HardSwish:
    return x < -3 ? 0.0 : x <= 3 ? dy * (x / 3 + 0.5) : dy;
  case UnaryGradKind::Clip: return x >= p.lo && x <= p.hi ? dy : 0.0;
  case UnaryGradKind::Neg: return -dy;
  case UnaryGradKind::Softsign: {
    double d = 1 + fabs(x);
    return dy / (d * d);
  }
  }
  return 0.0;
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_UNARYGRAD_H
