//===- ElementwiseKernels.cu - Elementwise ops on CUDA --------------------===//
//
// graph.neg ... graph.where, the counterparts of the CPU's
// ElementwiseKernels.cpp: unary math, binary arithmetic and comparisons with
// numpy broadcasting, select and cast. Every element is evaluated in the
// element type with the CPU's formula (softplus threshold, GELU forms, NaN
// propagation of max/min/relu/clip); the device's expf, erff, tanhf ... are
// within a few ulp of glibc's. One thread per element over a grid-stride
// loop; broadcast shapes travel by value (ElementwiseCommon.cuh).
//
// Every kernel reads element i of its operands before writing element i of
// its result, so a result may share an operand's memory (a same-typed
// in-place add). A cast between types of different widths cannot.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseCommon.cuh"

#include "strata/Runtime/NarrowFloat.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace strata::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

template <Unary K, typename T>
__global__ void __launch_bounds__(kBlock)
    unaryKernel(const T *in, T *out, int64_t n, UnaryParams p) {
  STRATA_GRID_STRIDE(i, n) out[i] = unaryFormula<K>(in[i], p);
}

/// Registers unary op `K` (ElementwiseOps.def): floats only, or every type
/// (the CPU's expressions, integer promotion and narrowing included).
template <Unary K, bool FloatOnly>
void addUnary(KernelRegistry &r, std::string op) {
  r.add(op, [op](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
      return s;
    const TensorView &x = ctx.inputs[0];
    TensorView &y = ctx.outputs[0];
    auto body = [&](auto tag) -> Status {
      using T = decltype(tag);
      if (Status s = checkResultFits(op, y, x.dtype, x.shape); !s)
        return s;
      int64_t n = x.numel();
      if (n == 0)
        return Status::ok();
      UnaryParams p = readUnaryParams(K, ctx.attrs);
      const CudaStream &cs = streamOf(ctx);
      STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, unaryKernel<K, T>)
      (x.as<T>(), y.as<T>(), n, p);
      return launchStatus(op);
    };
    if constexpr (FloatOnly)
      return dispatchFloat(x.dtype, op, body);
    else
      return dispatchAll(x.dtype, op, body);
  });
}

constexpr bool kFloatOnlyFloat = true, kFloatOnlyAny = false;

__global__ void __launch_bounds__(kBlock)
    notKernel(const uint8_t *in, uint8_t *out, int64_t n) {
  STRATA_GRID_STRIDE(i, n) out[i] = in[i] ? 0 : 1;
}

Status notKernelFn(KernelContext &ctx) {
  constexpr std::string_view op = "graph.not";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  // The CPU reads and writes one byte per element.
  if (byteWidth(y.dtype) != 1 || y.numel() != x.numel())
    return checkResultFits(op, y, DType::I1, x.shape);
  int64_t n = x.numel();
  if (n == 0)
    return Status::ok();
  const CudaStream &cs = streamOf(ctx);
  STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, notKernel)
  (static_cast<const uint8_t *>(x.data), static_cast<uint8_t *>(y.data), n);
  return launchStatus(std::string(op));
}

void registerUnary(KernelRegistry &r) {
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)                 \
  addUnary<Unary::Kind, kFloatOnly##Types>(r, "graph." Mnemonic);
#include "strata/Runtime/ElementwiseOps.def"
  r.add("graph.not", notKernelFn);
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <typename To, typename From>
__device__ inline To castElement(From v) {
  if constexpr (std::is_same_v<To, uint8_t>) // i1
    return v != From(0) ? 1 : 0;
  else
    return static_cast<To>(v); // float -> int truncates toward zero
}

template <typename To, typename From>
__global__ void __launch_bounds__(kBlock)
    castKernel(const From *in, To *out, int64_t n) {
  STRATA_GRID_STRIDE(i, n) out[i] = castElement<To>(in[i]);
}

/// To bf16 / fp16 from f32 or the other narrow type (the CPU's
/// castNarrowKernel: through f32, which holds every narrow value).
__global__ void __launch_bounds__(kBlock)
    castToNarrowKernel(const void *in, DType from, uint16_t *out, int64_t n,
                       bool toBf16) {
  STRATA_GRID_STRIDE(i, n) {
    float v = from == DType::F32 ? static_cast<const float *>(in)[i]
              : from == DType::BF16
                  ? fromBf16Bits(static_cast<const uint16_t *>(in)[i])
                  : fromFp16Bits(static_cast<const uint16_t *>(in)[i]);
    out[i] = toBf16 ? bf16Bits(v) : fp16Bits(v);
  }
}

template <typename To>
__global__ void __launch_bounds__(kBlock)
    castFromNarrowKernel(const uint16_t *in, To *out, int64_t n, bool bf16) {
  STRATA_GRID_STRIDE(i, n) {
    float v = bf16 ? fromBf16Bits(in[i]) : fromFp16Bits(in[i]);
    out[i] = castElement<To>(v);
  }
}

Status castNarrowKernelFn(KernelContext &ctx) {
  constexpr std::string_view op = "graph.cast";
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  if (Status s = checkResultFits(op, y, y.dtype, x.shape); !s)
    return s;
  int64_t n = x.numel();
  const CudaStream &cs = streamOf(ctx);
  if (isNarrowFloat(y.dtype)) {
    if (x.dtype != DType::F32 && !isNarrowFloat(x.dtype))
      return Status::error("graph.cast: " + std::string(name(x.dtype)) +
                           " to " + std::string(name(y.dtype)) +
                           " is not supported (cast through f32)");
    if (n == 0)
      return Status::ok();
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, castToNarrowKernel)
    (x.data, x.dtype, y.as<uint16_t>(), n, y.dtype == DType::BF16);
    return launchStatus(std::string(op));
  }
  return dispatchAll(y.dtype, op, [&](auto toTag) -> Status {
    using To = decltype(toTag);
    if (n == 0)
      return Status::ok();
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream,
                  castFromNarrowKernel<To>)
    (x.as<uint16_t>(), y.as<To>(), n, x.dtype == DType::BF16);
    return launchStatus(std::string(op));
  });
}

Status castKernelFn(KernelContext &ctx) {
  constexpr std::string_view op = "graph.cast";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  TensorView &y = ctx.outputs[0];
  if (isNarrowFloat(x.dtype) || isNarrowFloat(y.dtype))
    return castNarrowKernelFn(ctx);
  return dispatchAll(x.dtype, op, [&](auto fromTag) -> Status {
    using From = decltype(fromTag);
    return dispatchAll(y.dtype, op, [&](auto toTag) -> Status {
      using To = decltype(toTag);
      if (Status s = checkResultFits(op, y, y.dtype, x.shape); !s)
        return s;
      int64_t n = x.numel();
      if (n == 0)
        return Status::ok();
      const CudaStream &cs = streamOf(ctx);
      STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, castKernel<To, From>)
      (x.as<From>(), y.as<To>(), n);
      return launchStatus(std::string(op));
    });
  });
}

//===----------------------------------------------------------------------===//
// Binary with broadcasting
//===----------------------------------------------------------------------===//

template <Binary K, typename T>
__global__ void __launch_bounds__(kBlock)
    binaryKernel(const T *a, const T *b, T *out, int64_t n, Broadcast plan) {
  STRATA_GRID_STRIDE(i, n) {
    int64_t at[2];
    broadcastOffsets<2>(plan, i, at);
    out[i] = binaryFormula<K>(a[at[0]], b[at[1]]);
  }
}

template <Compare K, typename T>
__global__ void __launch_bounds__(kBlock)
    compareKernel(const T *a, const T *b, uint8_t *out, int64_t n,
                  Broadcast plan) {
  STRATA_GRID_STRIDE(i, n) {
    int64_t at[2];
    broadcastOffsets<2>(plan, i, at);
    out[i] = compareFormula<K>(a[at[0]], b[at[1]]) ? 1 : 0;
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    whereKernel(const uint8_t *c, const T *a, const T *b, T *out, int64_t n,
                Broadcast plan) {
  STRATA_GRID_STRIDE(i, n) {
    int64_t at[3];
    broadcastOffsets<3>(plan, i, at);
    out[i] = c[at[0]] ? a[at[1]] : b[at[2]];
  }
}

/// The checks of a binary op after the dtype dispatch: the second operand
/// has the first's type, the result `resultType` and the broadcast shape.
Status planBinary(std::string_view op, const TensorView &a,
                  const TensorView &b, const TensorView &y, DType resultType,
                  Broadcast &plan) {
  if (Status s = checkSameElementType(op, a, b); !s)
    return s;
  if (y.dtype != resultType)
    return checkResultFits(op, y, resultType, y.shape);
  return planBroadcast(op, {&a, &b}, y, plan);
}

template <Binary K, bool FloatOnly>
void addArithmetic(KernelRegistry &r, std::string op) {
  r.add(op, [op](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
      return s;
    const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1];
    TensorView &y = ctx.outputs[0];
    auto body = [&](auto tag) -> Status {
      using T = decltype(tag);
      Broadcast plan;
      if (Status s = planBinary(op, a, b, y, a.dtype, plan); !s)
        return s;
      int64_t n = y.numel();
      if (n == 0)
        return Status::ok();
      const CudaStream &cs = streamOf(ctx);
      STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, binaryKernel<K, T>)
      (a.as<T>(), b.as<T>(), y.as<T>(), n, plan);
      return launchStatus(op);
    };
    if constexpr (FloatOnly)
      return dispatchFloat(a.dtype, op, body);
    else
      return dispatchAll(a.dtype, op, body);
  });
}

template <Compare K> void addComparison(KernelRegistry &r, std::string op) {
  r.add(op, [op](KernelContext &ctx) -> Status {
    if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
      return s;
    const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1];
    TensorView &y = ctx.outputs[0];
    return dispatchAll(a.dtype, op, [&](auto tag) -> Status {
      using T = decltype(tag);
      Broadcast plan;
      if (Status s = planBinary(op, a, b, y, DType::I1, plan); !s)
        return s;
      int64_t n = y.numel();
      if (n == 0)
        return Status::ok();
      const CudaStream &cs = streamOf(ctx);
      STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, compareKernel<K, T>)
      (a.as<T>(), b.as<T>(), y.as<uint8_t>(), n, plan);
      return launchStatus(op);
    });
  });
}

Status whereKernelFn(KernelContext &ctx) {
  constexpr std::string_view op = "graph.where";
  if (Status s = checkArity(ctx, op, 3, 3, 1); !s)
    return s;
  const TensorView &c = ctx.inputs[0], &a = ctx.inputs[1], &b = ctx.inputs[2];
  TensorView &y = ctx.outputs[0];
  return dispatchAll(a.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    if (Status s = checkSameElementType(op, a, b); !s)
      return s;
    if (y.dtype != a.dtype)
      return checkResultFits(op, y, a.dtype, y.shape);
    // The condition is read one byte per element (i1), as on the CPU.
    Broadcast plan;
    if (Status s = planBroadcast(op, {&c, &a, &b}, y, plan); !s)
      return s;
    int64_t n = y.numel();
    if (n == 0)
      return Status::ok();
    const CudaStream &cs = streamOf(ctx);
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, whereKernel<T>)
    (c.as<uint8_t>(), a.as<T>(), b.as<T>(), y.as<T>(), n, plan);
    return launchStatus(std::string(op));
  });
}

void registerBinary(KernelRegistry &r) {
#define STRATA_BINARY(Kind, Mnemonic, OpClass, Types)                          \
  addArithmetic<Binary::Kind, kFloatOnly##Types>(r, "graph." Mnemonic);
#define STRATA_COMPARE(Kind, Mnemonic, OpClass)                                \
  addComparison<Compare::Kind>(r, "graph." Mnemonic);
#include "strata/Runtime/ElementwiseOps.def"
  r.add("graph.where", whereKernelFn);
}

} // namespace

void registerElementwiseKernels(KernelRegistry &registry) {
  registerUnary(registry);
  registerBinary(registry);
  registry.add("graph.cast", castKernelFn);
}

} // namespace strata::runtime::cuda
