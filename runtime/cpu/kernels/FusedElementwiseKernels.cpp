//===- FusedElementwiseKernels.cpp - graph.fused_elementwise on the CPU ---===//
//
// Runs a fused chain (strata-fuse-elementwise; FusedProgram.h) a chunk of
// elements at a time: each instruction over the chunk, its values in a
// small scratch, so the intermediate tensors never exist. Every instruction
// uses the formula of the op it replaces (ElementwiseFormulas.h,
// UnaryGrad.h, NarrowFloat.h): the numbers are the unfused kernels', bit
// for bit.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/ElementwiseFormulas.h"
#include "strata/Runtime/FusedProgram.h"
#include "strata/Runtime/NarrowFloat.h"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

namespace strata::runtime::cpu {
namespace {

constexpr int64_t kChunk = 512;

/// How an input's element of flat result index i is found: at i (the
/// result's size), at 0 (one element), at i mod `modulo` (an input that
/// broadcasts over leading dimensions only: [T, C] or [1, T, C] over
/// [B, T, C]), or through `map` (any other broadcast).
struct InputRead {
  int64_t modulo = 0;
  std::vector<int64_t> map;
};

/// The InputRead of an input of `in` elements in shape `inShape` against
/// a result of shape `out` (`n` elements).
InputRead inputRead(const std::vector<int64_t> &inShape,
                    const std::vector<int64_t> &out, int64_t in, int64_t n) {
  InputRead r;
  if (in == n || in == 1)
    return r;
  if (in > 0 && isTrailingBroadcast(inShape, out)) {
    r.modulo = in;
    return r;
  }
  r.map = broadcastIndexMap(inShape, out);
  return r;
}

/// Reads `len` elements of `v` from flat result index `start` into `out`
/// as `r` says. The type switch is outside the loop.
template <typename T>
void loadChunk(const TensorView &v, const InputRead &r, int64_t start,
               int64_t len, T *out) {
  auto read = [&](auto get) {
    if (!r.map.empty()) {
      for (int64_t j = 0; j < len; ++j)
        out[j] = get(r.map[start + j]);
    } else if (r.modulo > 0) {
      int64_t i = start % r.modulo;
      for (int64_t j = 0; j < len; ++j) {
        out[j] = get(i);
        if (++i == r.modulo)
          i = 0;
      }
    } else if (v.numel() == 1) {
      std::fill(out, out + len, get(0));
    } else {
      for (int64_t j = 0; j < len; ++j)
        out[j] = get(start + j);
    }
  };
  switch (v.dtype) {
  case DType::BF16: {
    const uint16_t *p = v.as<uint16_t>();
    read([p](int64_t i) { return T(fromBf16Bits(p[i])); });
    break;
  }
  case DType::F16: {
    const uint16_t *p = v.as<uint16_t>();
    read([p](int64_t i) { return T(fromFp16Bits(p[i])); });
    break;
  }
  case DType::F32: {
    const float *p = v.as<float>();
    read([p](int64_t i) { return T(p[i]); });
    break;
  }
  case DType::I1: {
    const uint8_t *p = v.as<uint8_t>();
    read([p](int64_t i) { return T(p[i]); });
    break;
  }
  default: {
    const double *p = v.as<double>();
    read([p](int64_t i) { return T(p[i]); });
    break;
  }
  }
}

/// Writes `len` values to `v` from flat index `start`, rounding to a
/// narrow type where `v` is one.
template <typename T>
void storeChunk(const TensorView &v, int64_t start, int64_t len,
                const T *in) {
  switch (v.dtype) {
  case DType::BF16:
    for (int64_t j = 0; j < len; ++j)
      v.as<uint16_t>()[start + j] = bf16Bits(float(in[j]));
    break;
  case DType::F16:
    for (int64_t j = 0; j < len; ++j)
      v.as<uint16_t>()[start + j] = fp16Bits(float(in[j]));
    break;
  case DType::F32:
    for (int64_t j = 0; j < len; ++j)
      v.as<float>()[start + j] = float(in[j]);
    break;
  default:
    for (int64_t j = 0; j < len; ++j)
      v.as<double>()[start + j] = double(in[j]);
    break;
  }
}

/// One instruction over a chunk of n elements; `none` is a unary op's
/// parameters (none), `grad` the derivative of the instruction's kind.
/// (Both come from the caller: clang leaves a default constructor
/// referenced but not emitted in a target_clones build.)
template <typename T>
STRATA_VECTOR_BODY void
evaluateBody(const FusedInstruction &in, const UnaryParams &none,
             const UnaryGradParams &grad, const T *a, const T *b, const T *c,
             T *out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    // f32 exact GELU and its gradient as the unfused kernels compute them
    // (VectorMath.h), so that fusing changes no result.
    if (in.op == FusedOpcode::Gelu) {
      geluExactF32(a, out, n);
      return;
    }
    if (in.op == FusedOpcode::Grad && in.kind == UnaryGradKind::Gelu) {
      geluExactGradF32(b, a, out, n);
      return;
    }
  }
  switch (in.op) {
#define STRATA_FUSED_CASE(OPCODE, EXPR)                                        \
  case FusedOpcode::OPCODE:                                                    \
    for (int64_t j = 0; j < n; ++j)                                            \
      out[j] = EXPR;                                                           \
    break;
    // The ops ElementwiseOps.def marks fusible, each by its formula.
#define STRATA_FUSIBLE_BINARY(Kind, Mnemonic, OpClass, Types)                  \
  STRATA_FUSED_CASE(Kind, binaryFormula<Binary::Kind>(a[j], b[j]))
#define STRATA_FUSIBLE_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)         \
  STRATA_FUSED_CASE(Kind, unaryFormula<Unary::Kind>(a[j], none))
#include "strata/Runtime/ElementwiseOps.def"
    STRATA_FUSED_CASE(Gelu, geluExact(a[j]))
    STRATA_FUSED_CASE(GeluTanh, geluTanh(a[j]))
    STRATA_FUSED_CASE(CastWide, a[j])
    STRATA_FUSED_CASE(CastBf16, T(roundToBf16(float(a[j]))))
    STRATA_FUSED_CASE(CastF16, T(roundToFp16(float(a[j]))))
  case FusedOpcode::Grad: // dy x y: the derivative at (x, y) times dy
    unaryDerivativeLoop(grad, a, b, c, out, n);
    break;
    STRATA_FUSED_CASE(Where, a[j] != T(0) ? b[j] : c[j])
#undef STRATA_FUSED_CASE
  }
}

/// evaluateBody built for the CPU at hand (VectorMath.h).
STRATA_VECTOR_DISPATCHED void
evaluate(const FusedInstruction &in, const UnaryParams &none,
         const UnaryGradParams &grad, const float *a, const float *b,
         const float *c, float *out, int64_t n) {
  evaluateBody(in, none, grad, a, b, c, out, n);
}
STRATA_VECTOR_DISPATCHED void
evaluate(const FusedInstruction &in, const UnaryParams &none,
         const UnaryGradParams &grad, const double *a, const double *b,
         const double *c, double *out, int64_t n) {
  evaluateBody(in, none, grad, a, b, c, out, n);
}

template <typename T>
Status runFused(const FusedProgram &p, KernelContext &ctx) {
  const std::vector<int64_t> &shape = ctx.outputs[0].shape;
  int64_t n = ctx.outputs[0].numel();
  // Where each input's element of flat output index i is.
  std::vector<InputRead> reads;
  for (const TensorView &v : ctx.inputs)
    reads.push_back(inputRead(v.shape, shape, v.numel(), n));
  // Chunks are independent: blocks of them run on the pool, each with its
  // own registers.
  int64_t chunks = (n + kChunk - 1) / kChunk;
  const UnaryParams none;
  parallelFor(chunks, 8, [&](int64_t first, int64_t last) {
    std::vector<T> regs(size_t(p.numValues()) * kChunk);
    auto reg = [&](int v) { return regs.data() + size_t(v) * kChunk; };
    for (int64_t c = first; c < last; ++c) {
      int64_t start = c * kChunk, len = std::min(kChunk, n - start);
      for (size_t k = 0; k < ctx.inputs.size(); ++k)
        loadChunk<T>(ctx.inputs[k], reads[k], start, len, reg(int(k)));
      for (size_t i = 0; i < p.code.size(); ++i) {
        const FusedInstruction &in = p.code[i];
        auto arg = [&](int k) -> const T * {
          return in.args[k] >= 0 ? reg(in.args[k]) : nullptr;
        };
        UnaryGradParams grad;
        grad.kind = in.kind;
        evaluate(in, none, grad, arg(0), arg(1), arg(2),
                 reg(p.numInputs + int(i)), len);
      }
      for (size_t r = 0; r < p.results.size(); ++r)
        storeChunk<T>(ctx.outputs[r], start, len, reg(p.results[r]));
    }
  });
  return Status::ok();
}

struct Prepared {
  FusedProgram program;
  DType wide = DType::F32;
};

Status prepareFused(KernelContext &ctx, std::shared_ptr<void> &out) {
  auto plan = std::make_shared<Prepared>();
  if (Status s = planFusedElementwise(ctx, plan->program, plan->wide); !s)
    return s;
  out = std::move(plan);
  return Status::ok();
}

Status fusedKernel(KernelContext &ctx) {
  std::shared_ptr<void> owned;
  const Prepared *plan = nullptr;
  if (Status s = preparedPlan(ctx, prepareFused, owned, plan); !s)
    return s;
  return plan->wide == DType::F64 ? runFused<double>(plan->program, ctx)
                                  : runFused<float>(plan->program, ctx);
}

} // namespace

void registerFusedElementwiseKernels(KernelRegistry &registry) {
  registry.add("graph.fused_elementwise", fusedKernel, prepareFused);
}

} // namespace strata::runtime::cpu
