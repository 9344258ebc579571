//===- WindowPlan.cpp - Sliding windows of conv and pooling ---------------===//

#include "strata/Runtime/WindowPlan.h"

#include "strata/Runtime/KernelChecks.h"

#include <climits>
#include <utility>

namespace strata::runtime::window {

int64_t windowOutputSize(int64_t input, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation,
                         bool ceilMode) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t numerator =
      input + padBegin + padEnd - span + (ceilMode ? stride - 1 : 0);
  if (numerator < 0) // PyTorch's floor division gives out <= 0
    return 0;
  int64_t out = numerator / stride + 1;
  if (ceilMode && (out - 1) * stride >= input + padBegin)
    --out;
  return out;
}

Status readWindow(const std::string &op, const KernelAttrs &attrs,
                  const TensorView &x, const TensorView &y,
                  std::vector<int64_t> kernel, bool withDilations,
                  bool ceilMode, int64_t outChannels, Window &w) {
  if (x.rank() < 3)
    return Status::error(op + ": input must have rank >= 3, got " +
                         x.describe());
  w.spatial = static_cast<size_t>(x.rank() - 2);
  size_t n = w.spatial;
  w.kernel = std::move(kernel);
  w.strides = attrs.has("strides") ? attrs.getInts("strides")
                                   : std::vector<int64_t>(n, 1);
  std::vector<int64_t> pads = attrs.has("pads") ? attrs.getInts("pads")
                                                : std::vector<int64_t>(2 * n);
  w.dilations = withDilations && attrs.has("dilations")
                    ? attrs.getInts("dilations")
                    : std::vector<int64_t>(n, 1);
  if (w.kernel.size() != n || w.strides.size() != n || pads.size() != 2 * n ||
      w.dilations.size() != n)
    return Status::error(op + ": window attributes need one entry per spatial "
                              "dim (" +
                         std::to_string(n) + ") and pads two");
  w.padBegin.assign(pads.begin(), pads.begin() + n);
  w.padEnd.assign(pads.begin() + n, pads.end());
  std::vector<int64_t> expected{x.shape[0], outChannels};
  for (size_t d = 0; d < n; ++d) {
    if (w.kernel[d] < 1 || w.strides[d] < 1 || w.dilations[d] < 1 ||
        w.padBegin[d] < 0 || w.padEnd[d] < 0)
      return Status::error(op + ": kernel, strides and dilations must be >= 1 "
                                "and pads >= 0");
    w.in.push_back(x.shape[d + 2]);
    w.out.push_back(windowOutputSize(x.shape[d + 2], w.kernel[d], w.strides[d],
                                     w.padBegin[d], w.padEnd[d],
                                     w.dilations[d], ceilMode));
    expected.push_back(w.out.back());
    w.inPlane *= w.in.back();
    w.outPlane *= w.out.back();
  }
  if (y.shape != expected || y.dtype != x.dtype) {
    TensorView e = y;
    e.shape = expected;
    e.dtype = x.dtype;
    return Status::error(op + ": output must be " + e.describe() + ", got " +
                         y.describe());
  }
  return Status::ok();
}

Status planConv(const KernelContext &ctx, ConvGeometry &g) {
  const std::string op = "graph.conv";
  if (Status s = checkArity(ctx, op, 2, 3, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView *bias = ctx.inputs.size() == 3 ? &ctx.inputs[2] : nullptr;
  const TensorView &y = ctx.outputs[0];
  if (wt.dtype != x.dtype || (bias && bias->dtype != x.dtype))
    return Status::error(op + ": input, weight and bias must share one "
                              "element type, got " +
                         x.describe() + ", " + wt.describe() +
                         (bias ? ", " + bias->describe() : ""));
  if (x.rank() < 3 || wt.rank() != x.rank())
    return Status::error(op + ": input [N, C, x...] and weight [M, C/g, k...] "
                              "must have one rank >= 3, got " +
                         x.describe() + " and " + wt.describe());
  g.groups = ctx.attrs.getInt("groups", 1);
  g.m = wt.shape[0];
  g.cg = wt.shape[1];
  if (g.groups < 1 || g.m % g.groups != 0 || g.cg * g.groups != x.shape[1])
    return Status::error(op + ": channels do not match: input " +
                         x.describe() + ", weight " + wt.describe() +
                         ", groups " + std::to_string(g.groups));
  if (bias && (bias->rank() != 1 || bias->shape[0] != g.m))
    return Status::error(op + ": bias must have shape [" +
                         std::to_string(g.m) + "], got " + bias->describe());
  std::vector<int64_t> kernel(wt.shape.begin() + 2, wt.shape.end());
  if (Status s = readWindow(op, ctx.attrs, x, y, kernel, /*withDilations=*/true,
                            /*ceilMode=*/false, g.m, g.w);
      !s)
    return s;
  g.mg = g.m / g.groups;
  g.taps = 1;
  for (int64_t k : kernel)
    g.taps *= k;
  if (g.mg > INT_MAX || g.w.outPlane > INT_MAX || g.cg * g.taps > INT_MAX)
    return Status::error(op + ": a GEMM dimension exceeds the BLAS int range");
  return Status::ok();
}

Status planConvGrad(const KernelContext &ctx, bool wantInput,
                    ConvGeometry &g) {
  const std::string op =
      wantInput ? "graph.conv_grad_input" : "graph.conv_grad_weight";
  if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = wantInput ? ctx.outputs[0] : ctx.inputs[1];
  const TensorView &wt = wantInput ? ctx.inputs[1] : ctx.outputs[0];
  if (x.dtype != dy.dtype || wt.dtype != dy.dtype || x.rank() < 3 ||
      wt.rank() != x.rank())
    return Status::error(op + ": operands do not fit: gradient " +
                         dy.describe() + ", input " + x.describe() +
                         ", weight " + wt.describe());
  g.groups = ctx.attrs.getInt("groups", 1);
  g.m = wt.shape[0];
  g.cg = wt.shape[1];
  if (g.groups < 1 || g.m % g.groups != 0 || g.cg * g.groups != x.shape[1])
    return Status::error(op + ": channels do not match");
  std::vector<int64_t> kernel(wt.shape.begin() + 2, wt.shape.end());
  if (Status s = readWindow(op, ctx.attrs, x, dy, kernel, true, false, g.m,
                            g.w);
      !s)
    return s;
  g.mg = g.m / g.groups;
  g.taps = 1;
  for (int64_t k : kernel)
    g.taps *= k;
  return Status::ok();
}

Status planPool(const std::string &op, const KernelContext &ctx,
                bool withDilations, Window &w) {
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  if (!ctx.attrs.has("kernel_shape"))
    return Status::error(op + ": missing kernel_shape");
  if (x.rank() < 3)
    return Status::error(op + ": input must have rank >= 3, got " +
                         x.describe());
  return readWindow(op, ctx.attrs, x, ctx.outputs[0],
                    ctx.attrs.getInts("kernel_shape"), withDilations,
                    ctx.attrs.getBool("ceil_mode", false), x.shape[1], w);
}

Status planMaxPoolGrad(const KernelContext &ctx, Window &w) {
  const std::string op = "graph.max_pool_grad";
  if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  if (dx.shape != x.shape || dx.dtype != x.dtype || dy.dtype != x.dtype)
    return Status::error(op + ": operands do not fit " + x.describe());
  if (!ctx.attrs.has("kernel_shape"))
    return Status::error(op + ": missing kernel_shape");
  return readWindow(op, ctx.attrs, x, dy, ctx.attrs.getInts("kernel_shape"),
                    true, ctx.attrs.getBool("ceil_mode", false), x.shape[1], w);
}

Status planAvgPoolGrad(const KernelContext &ctx, Window &w) {
  const std::string op = "graph.avg_pool_grad";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &dx = ctx.outputs[0];
  if (dx.dtype != dy.dtype || !ctx.attrs.has("kernel_shape"))
    return Status::error(op + ": operands do not fit or no kernel_shape");
  return readWindow(op, ctx.attrs, dx, dy, ctx.attrs.getInts("kernel_shape"),
                    false, ctx.attrs.getBool("ceil_mode", false), dx.shape[1],
                    w);
}

} // namespace strata::runtime::window
