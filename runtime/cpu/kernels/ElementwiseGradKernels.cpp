//===- ElementwiseGradKernels.cpp - Gradients of elementwise ops ----------===//
//
// graph.unary_grad (dx = f'(x) * dy for the forward op named by `kind`, with
// PyTorch's backward formulas), graph.sum_squares (the gradient norm's
// pieces) and runtime.copy (a state update codegen could not do in place).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace strata::runtime::cpu {
namespace {

enum class Kind {
  Abs, Exp, Log, Sqrt, Reciprocal, Tanh, Erf, Sin, Cos, Relu, Sigmoid,
  Softplus, Gelu, GeluTanh, LeakyRelu, Elu, HardSigmoid, HardSwish, Clip, Neg
};

bool parseKind(const std::string &name, const std::string &approximate,
               Kind &kind) {
  static const std::pair<const char *, Kind> kinds[] = {
      {"abs", Kind::Abs},         {"exp", Kind::Exp},
      {"log", Kind::Log},         {"sqrt", Kind::Sqrt},
      {"reciprocal", Kind::Reciprocal}, {"tanh", Kind::Tanh},
      {"erf", Kind::Erf},         {"sin", Kind::Sin},
      {"cos", Kind::Cos},         {"relu", Kind::Relu},
      {"sigmoid", Kind::Sigmoid}, {"softplus", Kind::Softplus},
      {"gelu", Kind::Gelu},       {"leaky_relu", Kind::LeakyRelu},
      {"elu", Kind::Elu},         {"hard_sigmoid", Kind::HardSigmoid},
      {"hard_swish", Kind::HardSwish}, {"clip", Kind::Clip},
      {"neg", Kind::Neg}};
  for (auto &[n, k] : kinds)
    if (name == n) {
      kind = k;
      if (k == Kind::Gelu && approximate == "tanh")
        kind = Kind::GeluTanh;
      return true;
    }
  return false;
}

/// d f(x) / dx * dy, in double.
double derivative(Kind kind, double x, double y, double dy, double alpha,
                  double beta, double lo, double hi) {
  switch (kind) {
  case Kind::Abs: return x > 0 ? dy : x < 0 ? -dy : 0.0;
  case Kind::Exp: return dy * y;
  case Kind::Log: return dy / x;
  case Kind::Sqrt: return dy / (2 * y);
  case Kind::Reciprocal: return -dy * y * y;
  case Kind::Tanh: return dy * (1 - y * y);
  case Kind::Erf: return dy * 2.0 / std::sqrt(M_PI) * std::exp(-x * x);
  case Kind::Sin: return dy * std::cos(x);
  case Kind::Cos: return -dy * std::sin(x);
  // torch's threshold_backward: 0 where y <= 0, so a NaN output passes dy.
  case Kind::Relu: return y <= 0 ? 0.0 : dy;
  case Kind::Sigmoid: return dy * y * (1 - y);
  case Kind::Softplus: {
    // torch: beta = 1, threshold = 20.
    if (x > 20)
      return dy;
    double z = std::exp(x);
    return dy * z / (z + 1);
  }
  case Kind::Gelu: {
    double cdf = 0.5 * (1 + std::erf(x * M_SQRT1_2));
    double pdf = std::exp(-0.5 * x * x) * (M_2_SQRTPI * M_SQRT1_2 * 0.5);
    return dy * (cdf + x * pdf);
  }
  case Kind::GeluTanh: {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    double inner = kBeta * (x + kKappa * x * x * x);
    double t = std::tanh(inner);
    double left = 0.5 * x, right = 1 + t;
    double dLeft = 0.5 * right;
    double dRight = left * (1 - t * t) * kBeta * (1 + 3 * kKappa * x * x);
    return dy * (dLeft + dRight);
  }
  case Kind::LeakyRelu: return x > 0 ? dy : dy * alpha;
  // dy * (y + alpha) in exact arithmetic; torch's elu (not elu_) backward
  // takes alpha * exp(x), which keeps its precision where y rounds to -alpha.
  case Kind::Elu: return x > 0 ? dy : dy * alpha * std::exp(x);
  case Kind::HardSigmoid: {
    double z = alpha * x + beta;
    return z > 0 && z < 1 ? dy * alpha : 0.0;
  }
  case Kind::HardSwish:
    return x < -3 ? 0.0 : x <= 3 ? dy * (x / 3 + 0.5) : dy;
  case Kind::Clip: return x >= lo && x <= hi ? dy : 0.0;
  case Kind::Neg: return -dy;
  }
  return 0.0;
}

Status unaryGradKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.unary_grad";
  if (Status s = checkArity(ctx, kOp, 3, 3, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1], &y = ctx.inputs[2];
  TensorView &dx = ctx.outputs[0];
  if (x.shape != dy.shape || y.shape != dy.shape || dx.shape != dy.shape ||
      x.dtype != dy.dtype || y.dtype != dy.dtype || dx.dtype != dy.dtype)
    return Status::error("graph.unary_grad: operands must share one type, got " +
                         dy.describe() + ", " + x.describe() + ", " +
                         y.describe());
  Kind kind;
  std::string name = ctx.attrs.getString("kind");
  if (!parseKind(name, ctx.attrs.getString("approximate", "none"), kind))
    return Status::error("graph.unary_grad: unknown kind '" + name + "'");
  // The forward kernels' defaults (ElementwiseKernels.cpp).
  double alpha = ctx.attrs.getFloat(
      "alpha", kind == Kind::LeakyRelu ? 0.01 : kind == Kind::Elu ? 1.0 : 0.2);
  double beta = ctx.attrs.getFloat("beta", 0.5);
  double inf = std::numeric_limits<double>::infinity();
  double lo = ctx.attrs.has("min") ? ctx.attrs.getFloat("min") : -inf;
  double hi = ctx.attrs.has("max") ? ctx.attrs.getFloat("max") : inf;
  return dispatchFloat(dy.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *g = dy.as<T>(), *px = x.as<T>(), *py = y.as<T>();
    T *out = dx.as<T>();
    for (int64_t i = 0, n = dy.numel(); i < n; ++i)
      out[i] = static_cast<T>(
          derivative(kind, px[i], py[i], g[i], alpha, beta, lo, hi));
    return Status::ok();
  });
}

Status sumSquaresKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.sum_squares";
  if (Status s = checkArity(ctx, kOp, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  if (out.numel() != 1 || !isFloat(out.dtype))
    return Status::error("graph.sum_squares: the result must be a float "
                         "scalar, got " + out.describe());
  return dispatchFloat(x.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *in = x.as<T>();
    double sum = 0;
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      sum += double(in[i]) * double(in[i]);
    return dispatchFloat(out.dtype, kOp, [&](auto outTag) -> Status {
      using U = decltype(outTag);
      out.as<U>()[0] = static_cast<U>(sum);
      return Status::ok();
    });
  });
}

/// f32 -> nearest bf16 (round to nearest even), back in f32.
float roundToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) // inf, nan: keep
    return v;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

/// f32 -> nearest fp16 value (round to nearest even; beyond 65504 -> inf;
/// subnormals kept), back in f32.
float roundToFp16(float v) {
  if (!std::isfinite(v))
    return v;
  float a = std::fabs(v);
  if (a >= 65520.0f) // rounds past the largest fp16, 65504
    return std::copysign(std::numeric_limits<float>::infinity(), v);
  int exponent;
  std::frexp(a, &exponent); // a = m * 2^exponent, m in [0.5, 1)
  // fp16 keeps 11 significant bits; below 2^-14 the step is fixed at 2^-24.
  int e = std::max(exponent - 11, -24);
  float step = std::ldexp(1.0f, e);
  return std::copysign(std::nearbyint(a / step) * step, v);
}

Status roundToKernel(KernelContext &ctx) {
  if (Status s = checkArity(ctx, "graph.round_to", 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  std::string dtype = ctx.attrs.getString("dtype");
  if (x.dtype != DType::F32 || y.dtype != DType::F32 || x.shape != y.shape)
    return Status::error("graph.round_to: operand and result must be one f32 "
                         "shape, got " + x.describe());
  if (dtype != "bf16" && dtype != "fp16")
    return Status::error("graph.round_to: dtype must be bf16 or fp16, not '" +
                         dtype + "'");
  const float *in = x.as<float>();
  float *out = y.as<float>();
  bool bf16 = dtype == "bf16";
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    out[i] = bf16 ? roundToBf16(in[i]) : roundToFp16(in[i]);
  return Status::ok();
}

Status copyKernel(KernelContext &ctx) {
  if (Status s = checkArity(ctx, "runtime.copy", 1, 1, 1); !s)
    return s;
  const TensorView &in = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return Status::error("runtime.copy: " + in.describe() + " does not fit " +
                         out.describe());
  if (in.data != out.data && in.bytes() > 0)
    std::memmove(out.data, in.data, in.bytes());
  return Status::ok();
}

} // namespace

void registerElementwiseGradKernels(KernelRegistry &registry) {
  registry.add("graph.unary_grad", unaryGradKernel);
  registry.add("graph.sum_squares", sumSquaresKernel);
  registry.add("runtime.copy", copyKernel);
  registry.add("graph.round_to", roundToKernel);
}

} // namespace strata::runtime::cpu
