//===- UnaryGrad.cpp - graph.unary_grad's checks and attributes -----------===//

#include "strata/Runtime/UnaryGrad.h"
#include "strata/Runtime/ElementwiseFormulas.h"
#include "strata/Runtime/KernelChecks.h"

#include <limits>
#include <string>
#include <tuple>
#include <utility>

namespace strata::runtime {
namespace {

/// The forward op `name` names (with its GELU approximation) as the
/// derivative to take and the op whose attributes to read.
bool parseKind(const std::string &name, const std::string &approximate,
               UnaryGradKind &kind, Unary &forward) {
  using K = UnaryGradKind;
  // The unary ops ElementwiseOps.def differentiates by unary_grad.
  static const std::tuple<const char *, K, Unary> kinds[] = {
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  {Mnemonic, K::Kind, Unary::Kind},
#include "strata/Runtime/ElementwiseOps.def"
  };
  for (auto &[n, k, u] : kinds)
    if (name == n) {
      kind = k;
      forward = u;
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
  Unary forward;
  if (!parseKind(name, ctx.attrs.getString("approximate", "none"), p.kind,
                 forward))
    return Status::error("graph.unary_grad: unknown kind '" + name + "'");
  // The forward kernels' attributes and defaults.
  UnaryParams attrs = readUnaryParams(forward, ctx.attrs);
  p.alpha = attrs.alpha;
  p.beta = attrs.beta;
  double inf = std::numeric_limits<double>::infinity();
  p.lo = attrs.hasMin ? attrs.min : -inf;
  p.hi = attrs.hasMax ? attrs.max : inf;
  return Status::ok();
}

} // namespace strata::runtime
