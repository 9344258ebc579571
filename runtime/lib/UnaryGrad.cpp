//===- UnaryGrad.cpp - graph.unary_grad's checks and attributes -----------===//

#include "strata/Runtime/UnaryGrad.h"
#include "strata/Runtime/KernelChecks.h"

#include <limits>
#include <string>
#include <utility>

namespace strata::runtime {
namespace {

bool parseKind(const std::string &name, const std::string &approximate,
               UnaryGradKind &kind) {
  using K = UnaryGradKind;
  static const std::pair<const char *, K> kinds[] = {
      {"abs", K::Abs},         {"exp", K::Exp},
      {"log", K::Log},         {"sqrt", K::Sqrt},
      {"reciprocal", K::Reciprocal}, {"tanh", K::Tanh},
      {"erf", K::Erf},         {"sin", K::Sin},
      {"cos", K::Cos},         {"relu", K::Relu},
      {"sigmoid", K::Sigmoid}, {"softplus", K::Softplus},
      {"gelu", K::Gelu},       {"leaky_relu", K::LeakyRelu},
      {"elu", K::Elu},         {"hard_sigmoid", K::HardSigmoid},
      {"hard_swish", K::HardSwish}, {"clip", K::Clip},
      {"neg", K::Neg}};
  for (auto &[n, k] : kinds)
    if (name == n) {
      kind = k;
      if (k == K::Gelu && approximate == "tanh")
        kind = K::GeluTanh;
      return true;
    }
  return false;
}

} // namespace

Status planUnaryGrad(const KernelContext &ctx, UnaryGradParams &p) {
  if (Status s = checkArity(ctx, "graph.unary_grad", 3, 3, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1], &y = ctx.inputs[2];
  const TensorView &dx = ctx.outputs[0];
  if (x.shape != dy.shape || y.shape != dy.shape || dx.shape != dy.shape ||
      x.dtype != dy.dtype || y.dtype != dy.dtype || dx.dtype != dy.dtype)
    return Status::error("graph.unary_grad: operands must share one type, got " +
                         dy.describe() + ", " + x.describe() + ", " +
                         y.describe());
  std::string name = ctx.attrs.getString("kind");
  if (!parseKind(name, ctx.attrs.getString("approximate", "none"), p.kind))
    return Status::error("graph.unary_grad: unknown kind '" + name + "'");
  // The forward kernels' defaults (ElementwiseKernels.cpp).
  p.alpha = ctx.attrs.getFloat("alpha", p.kind == UnaryGradKind::LeakyRelu ? 0.01
                                        : p.kind == UnaryGradKind::Elu     ? 1.0
                                                                           : 0.2);
  p.beta = ctx.attrs.getFloat("beta", 0.5);
  double inf = std::numeric_limits<double>::infinity();
  p.lo = ctx.attrs.has("min") ? ctx.attrs.getFloat("min") : -inf;
  p.hi = ctx.attrs.has("max") ? ctx.attrs.getFloat("max") : inf;
  return Status::ok();
}

} // namespace strata::runtime
