//===- ElementwiseKernels.cpp - Elementwise ops on the CPU ----------------===//
//
// graph.neg ... graph.where: unary math, binary arithmetic and comparisons
// with numpy broadcasting, select and cast. Float math is evaluated in the
// element type except where PyTorch's own CPU kernel evaluates in a wider
// one; the formulas follow PyTorch's (softplus threshold, GELU forms, NaN
// propagation of max/min). f32 exact GELU is PyTorch's vectorized form
// (VectorMath.h: float, erf by Abramowitz and Stegun 7.1.26).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/ElementwiseFormulas.h"
#include "strata/Runtime/NarrowFloat.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace strata::runtime::cpu {

namespace {
template <typename T>
STRATA_VECTOR_BODY void divideRowBody(const T *e, double sum, T *out,
                                      int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = static_cast<T>(double(e[j]) / sum);
}
} // namespace

STRATA_VECTOR_DISPATCHED void divideRow(const float *e, double sum, float *out,
                                        int64_t n) {
  divideRowBody(e, sum, out, n);
}
STRATA_VECTOR_DISPATCHED void divideRow(const double *e, double sum,
                                        double *out, int64_t n) {
  divideRowBody(e, sum, out, n);
}

namespace {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// Registers unary op `K` (ElementwiseOps.def): floats only, or every type.
template <Unary K, bool FloatOnly>
void addUnary(KernelRegistry &r, std::string op) {
  r.add(op, [op](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
      return s;
    const TensorView &x = ctx.inputs[0];
    TensorView &y = ctx.outputs[0];
    UnaryParams p = readUnaryParams(K, ctx.attrs);
    auto body = [&](auto tag) -> Status {
      using T = decltype(tag);
      const T *in = x.as<T>();
      T *out = y.as<T>();
      if constexpr (K == Unary::Gelu && std::is_same_v<T, float>) {
        if (!p.tanhGelu) { // vectorized, as PyTorch's (VectorMath.h)
          parallelFor(x.numel(), kElementwiseGrain / 4,
                      [&](int64_t b, int64_t e) {
                        geluExactF32(in + b, out + b, e - b);
                      });
          return Status::ok();
        }
      }
      parallelFor(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          out[i] = unaryFormula<K>(in[i], p);
      });
      return Status::ok();
    };
    if constexpr (FloatOnly)
      return dispatchFloat(x.dtype, op, body);
    else
      return dispatchAll(x.dtype, op, body);
  });
}

constexpr bool kFloatOnlyFloat = true, kFloatOnlyAny = false;

void registerUnary(KernelRegistry &r) {
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  addUnary<Unary::Kind, kFloatOnly##Types>(r, "graph." Mnemonic);
#include "strata/Runtime/ElementwiseOps.def"
  r.add("graph.not", [](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, "graph.not", 1, 1, 1); !s)
      return s;
    const uint8_t *in = ctx.inputs[0].as<uint8_t>();
    uint8_t *out = ctx.outputs[0].as<uint8_t>();
    for (int64_t i = 0, n = ctx.inputs[0].numel(); i < n; ++i)
      out[i] = in[i] ? 0 : 1;
    return Status::ok();
  });
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <typename To, typename From> To castElement(From v) {
  if constexpr (std::is_same_v<To, uint8_t>) // i1
    return v != From(0) ? 1 : 0;
  else
    return static_cast<To>(v); // float -> int truncates toward zero
}

float loadNarrow(DType t, uint16_t bits) {
  return t == DType::BF16 ? fromBf16Bits(bits) : fromFp16Bits(bits);
}

/// Casts to or from bf16 / fp16 go through f32, which holds every bf16 and
/// fp16 value: from a narrow type to any type is exact up to the last
/// conversion; to a narrow type is supported from f32 and the other narrow
/// type only (from f64 or an integer, the f32 step would round twice).
Status castNarrowKernel(const TensorView &x, TensorView &y) {
  int64_t n = x.numel();
  if (isNarrowFloat(y.dtype)) {
    if (x.dtype != DType::F32 && !isNarrowFloat(x.dtype))
      return Status::error("graph.cast: " + std::string(name(x.dtype)) +
                           " to " + std::string(name(y.dtype)) +
                           " is not supported (cast through f32)");
    auto *out = y.as<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      float v = x.dtype == DType::F32 ? x.as<float>()[i]
                                      : loadNarrow(x.dtype, x.as<uint16_t>()[i]);
      out[i] = y.dtype == DType::BF16 ? bf16Bits(v) : fp16Bits(v);
    }
    return Status::ok();
  }
  return dispatchAll(y.dtype, "graph.cast", [&](auto toTag) -> Status {
    using To = decltype(toTag);
    To *out = y.as<To>();
    const auto *in = x.as<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = castElement<To>(loadNarrow(x.dtype, in[i]));
    return Status::ok();
  });
}

Status castKernel(KernelContext &ctx) {
  if (Status s = checkArity(ctx, "graph.cast", 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  if (isNarrowFloat(x.dtype) || isNarrowFloat(y.dtype))
    return castNarrowKernel(x, y);
  return dispatchAll(x.dtype, "graph.cast", [&](auto fromTag) -> Status {
    using From = decltype(fromTag);
    return dispatchAll(y.dtype, "graph.cast", [&](auto toTag) -> Status {
      using To = decltype(toTag);
      const From *in = x.as<From>();
      To *out = y.as<To>();
      for (int64_t i = 0, n = x.numel(); i < n; ++i)
        out[i] = castElement<To>(in[i]);
      return Status::ok();
    });
  });
}

//===----------------------------------------------------------------------===//
// Binary with broadcasting
//===----------------------------------------------------------------------===//

/// Applies `fn(a, b)` over the broadcast of inputs 0 and 1 into output 0;
/// the output element type is `Out` (the input type, or uint8_t for i1).
template <typename In, typename Out, typename Fn>
void broadcastBinary(const TensorView &a, const TensorView &b, TensorView &y,
                     Fn fn) {
  const In *pa = a.as<In>();
  const In *pb = b.as<In>();
  Out *out = y.as<Out>();
  int64_t n = y.numel();
  if (sameShape(a, y) && sameShape(b, y)) {
    parallelFor(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = fn(pa[i], pb[i]);
    });
  } else if (sameShape(a, y) && b.numel() == 1) {
    parallelFor(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = fn(pa[i], pb[0]);
    });
  } else if (sameShape(a, y) && isTrailingBroadcast(b.shape, y.shape)) {
    // b repeats along the leading dims (a bias): one row of b at a time.
    int64_t len = b.numel();
    parallelFor(len > 0 ? n / len : 0, kElementwiseGrain / std::max<int64_t>(len, 1) + 1,
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r)
                    for (int64_t j = 0; j < len; ++j)
                      out[r * len + j] = fn(pa[r * len + j], pb[j]);
                });
  } else {
    std::vector<int64_t> ma = broadcastIndexMap(a.shape, y.shape);
    std::vector<int64_t> mb = broadcastIndexMap(b.shape, y.shape);
    parallelFor(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = fn(pa[ma[i]], pb[mb[i]]);
    });
  }
}

template <Binary K, bool FloatOnly>
void addBinary(KernelRegistry &r, std::string op) {
  r.add(op, [op](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
      return s;
    const TensorView &a = ctx.inputs[0];
    auto body = [&](auto tag) -> Status {
      using T = decltype(tag);
      broadcastBinary<T, T>(a, ctx.inputs[1], ctx.outputs[0],
                            [](T x, T y) { return binaryFormula<K>(x, y); });
      return Status::ok();
    };
    if constexpr (FloatOnly)
      return dispatchFloat(a.dtype, op, body);
    else
      return dispatchAll(a.dtype, op, body);
  });
}

template <Compare K> void addCompare(KernelRegistry &r, std::string op) {
  r.add(op, [op](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
      return s;
    return dispatchAll(ctx.inputs[0].dtype, op, [&](auto tag) -> Status {
      using T = decltype(tag);
      broadcastBinary<T, uint8_t>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0],
                                  [](T a, T b) -> uint8_t {
                                    return compareFormula<K>(a, b) ? 1 : 0;
                                  });
      return Status::ok();
    });
  });
}

void registerBinary(KernelRegistry &r) {
#define STRATA_BINARY(Kind, Mnemonic, OpClass, Types)                          \
  addBinary<Binary::Kind, kFloatOnly##Types>(r, "graph." Mnemonic);
#define STRATA_COMPARE(Kind, Mnemonic, OpClass)                                \
  addCompare<Compare::Kind>(r, "graph." Mnemonic);
#include "strata/Runtime/ElementwiseOps.def"

  r.add("graph.where", [](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, "graph.where", 3, 3, 1); !s)
      return s;
    const TensorView &c = ctx.inputs[0], &a = ctx.inputs[1], &b = ctx.inputs[2];
    TensorView &y = ctx.outputs[0];
    std::vector<int64_t> mc = broadcastIndexMap(c.shape, y.shape);
    std::vector<int64_t> ma = broadcastIndexMap(a.shape, y.shape);
    std::vector<int64_t> mb = broadcastIndexMap(b.shape, y.shape);
    const uint8_t *pc = c.as<uint8_t>();
    return dispatchAll(a.dtype, "graph.where", [&](auto tag) -> Status {
      using T = decltype(tag);
      const T *pa = a.as<T>(), *pb = b.as<T>();
      T *out = y.as<T>();
      parallelFor(y.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          out[i] = pc[mc[i]] ? pa[ma[i]] : pb[mb[i]];
      });
      return Status::ok();
    });
  });
}

} // namespace

void registerElementwiseKernels(KernelRegistry &registry) {
  registerUnary(registry);
  registerBinary(registry);
  registry.add("graph.cast", castKernel);
}

} // namespace strata::runtime::cpu
