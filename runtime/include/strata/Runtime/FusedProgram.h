//===- FusedProgram.h - graph.fused_elementwise's program -------*- C++ -*-===//
//
// strata-fuse-elementwise replaces a chain of elementwise ops with one
// graph.fused_elementwise whose `program` attribute lists them, one
// instruction per op, `;`-separated: "add 0 1; gelu_tanh 2; cast_bf16 3".
// Values are numbered: the op's inputs 0..n-1, then each instruction's
// result in turn; `result_values` names the values the op returns. Every value
// has the shape of the results (an input may broadcast to it).
//
// Values are computed in one wide type (f32, or f64 in a double graph);
// a bf16 / fp16 value is held widened, exactly, and cast_bf16 / cast_f16
// round to it. Each instruction computes what the op it replaces computes,
// so the CPU's fused kernel gives the unfused numbers bit for bit.
//
// The parser is shared by the CPU and CUDA kernels (host side); the pass
// writes the same names.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_FUSEDPROGRAM_H
#define STRATA_RUNTIME_FUSEDPROGRAM_H

#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/UnaryGrad.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::runtime {

enum class FusedOpcode : uint8_t {
  // Binary.
  Add, Sub, Mul, Div, Max, Min,
  // Unary: the forward ops.
  Neg, Abs, Exp, Log, Sqrt, Reciprocal, Tanh, Erf, Sin, Cos, Relu, Sigmoid,
  Softplus, HardSwish, Gelu, GeluTanh,
  // Float casts: to the wide type (exact) or rounded to a narrow one.
  CastWide, CastBf16, CastF16,
  // graph.unary_grad (dy, x, y) of a kind without parameters.
  Grad,
  // graph.where (condition, a, b): the condition an i1 input.
  Where,
};

struct FusedInstruction {
  FusedOpcode op = FusedOpcode::Add;
  /// For Grad: the derivative.
  UnaryGradKind kind = UnaryGradKind::Abs;
  /// Operand value numbers (unused ones -1).
  int32_t args[3] = {-1, -1, -1};
};

/// The most a program may hold: the CUDA kernel keeps a thread's values in
/// one small array, and passes the program by value.
inline constexpr int kFusedMaxInputs = 8;
inline constexpr int kFusedMaxInstructions = 24;
inline constexpr int kFusedMaxResults = 4;
inline constexpr int kFusedMaxRank = 6;

struct FusedProgram {
  int numInputs = 0;
  std::vector<FusedInstruction> code;
  std::vector<int32_t> results;
  int numValues() const { return numInputs + int(code.size()); }
};

namespace detail {

struct FusedName {
  std::string_view name;
  FusedOpcode op;
  UnaryGradKind kind;
};

inline constexpr FusedName kFusedNames[] = {
    {"add", FusedOpcode::Add, {}},
    {"sub", FusedOpcode::Sub, {}},
    {"mul", FusedOpcode::Mul, {}},
    {"div", FusedOpcode::Div, {}},
    {"max", FusedOpcode::Max, {}},
    {"min", FusedOpcode::Min, {}},
    {"neg", FusedOpcode::Neg, {}},
    {"abs", FusedOpcode::Abs, {}},
    {"exp", FusedOpcode::Exp, {}},
    {"log", FusedOpcode::Log, {}},
    {"sqrt", FusedOpcode::Sqrt, {}},
    {"reciprocal", FusedOpcode::Reciprocal, {}},
    {"tanh", FusedOpcode::Tanh, {}},
    {"erf", FusedOpcode::Erf, {}},
    {"sin", FusedOpcode::Sin, {}},
    {"cos", FusedOpcode::Cos, {}},
    {"relu", FusedOpcode::Relu, {}},
    {"sigmoid", FusedOpcode::Sigmoid, {}},
    {"softplus", FusedOpcode::Softplus, {}},
    {"hard_swish", FusedOpcode::HardSwish, {}},
    {"gelu", FusedOpcode::Gelu, {}},
    {"gelu_tanh", FusedOpcode::GeluTanh, {}},
    {"cast_wide", FusedOpcode::CastWide, {}},
    {"cast_bf16", FusedOpcode::CastBf16, {}},
    {"cast_f16", FusedOpcode::CastF16, {}},
    {"grad_abs", FusedOpcode::Grad, UnaryGradKind::Abs},
    {"grad_exp", FusedOpcode::Grad, UnaryGradKind::Exp},
    {"grad_log", FusedOpcode::Grad, UnaryGradKind::Log},
    {"grad_sqrt", FusedOpcode::Grad, UnaryGradKind::Sqrt},
    {"grad_reciprocal", FusedOpcode::Grad, UnaryGradKind::Reciprocal},
    {"grad_tanh", FusedOpcode::Grad, UnaryGradKind::Tanh},
    {"grad_erf", FusedOpcode::Grad, UnaryGradKind::Erf},
    {"grad_sin", FusedOpcode::Grad, UnaryGradKind::Sin},
    {"grad_cos", FusedOpcode::Grad, UnaryGradKind::Cos},
    {"grad_relu", FusedOpcode::Grad, UnaryGradKind::Relu},
    {"grad_sigmoid", FusedOpcode::Grad, UnaryGradKind::Sigmoid},
    {"grad_softplus", FusedOpcode::Grad, UnaryGradKind::Softplus},
    {"grad_gelu", FusedOpcode::Grad, UnaryGradKind::Gelu},
    {"grad_gelu_tanh", FusedOpcode::Grad, UnaryGradKind::GeluTanh},
    {"grad_hard_swish", FusedOpcode::Grad, UnaryGradKind::HardSwish},
    {"grad_neg", FusedOpcode::Grad, UnaryGradKind::Neg},
    {"where", FusedOpcode::Where, {}},
};

} // namespace detail

/// Operands an instruction reads.
inline int fusedArity(FusedOpcode op) {
  if (op <= FusedOpcode::Min)
    return 2;
  return op == FusedOpcode::Grad || op == FusedOpcode::Where ? 3 : 1;
}

/// Parses `text` for an op with `numInputs` inputs returning `results`;
/// a one-line error naming what is wrong.
inline Status parseFusedProgram(std::string_view text, int numInputs,
                                const std::vector<int64_t> &results,
                                FusedProgram &out) {
  const std::string what = "graph.fused_elementwise: ";
  out = FusedProgram();
  out.numInputs = numInputs;
  if (numInputs < 1 || numInputs > kFusedMaxInputs)
    return Status::error(what + "takes 1 to " +
                         std::to_string(kFusedMaxInputs) + " inputs, got " +
                         std::to_string(numInputs));
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(';', at);
    std::string_view item =
        text.substr(at, end == std::string_view::npos ? end : end - at);
    at = end == std::string_view::npos ? text.size() : end + 1;
    // Words of the instruction.
    std::vector<std::string_view> words;
    for (size_t i = 0; i < item.size();) {
      while (i < item.size() && item[i] == ' ')
        ++i;
      size_t j = i;
      while (j < item.size() && item[j] != ' ')
        ++j;
      if (j > i)
        words.push_back(item.substr(i, j - i));
      i = j;
    }
    if (words.empty())
      continue;
    FusedInstruction instruction;
    bool known = false;
    for (const detail::FusedName &n : detail::kFusedNames)
      if (n.name == words[0]) {
        instruction.op = n.op;
        instruction.kind = n.kind;
        known = true;
      }
    if (!known)
      return Status::error(what + "unknown instruction '" +
                           std::string(words[0]) + "'");
    int arity = fusedArity(instruction.op);
    if (int(words.size()) != arity + 1)
      return Status::error(what + "'" + std::string(words[0]) + "' takes " +
                           std::to_string(arity) + " operands");
    int defined = out.numValues();
    for (int k = 0; k < arity; ++k) {
      int v = -1;
      for (char c : words[k + 1]) {
        if (c < '0' || c > '9' || v > 1000) {
          v = -1;
          break;
        }
        v = (v < 0 ? 0 : v * 10) + (c - '0');
      }
      if (v < 0 || v >= defined)
        return Status::error(what + "operand '" + std::string(words[k + 1]) +
                             "' of '" + std::string(words[0]) +
                             "' is not a value defined before it");
      instruction.args[k] = v;
    }
    out.code.push_back(instruction);
  }
  if (out.code.empty() || int(out.code.size()) > kFusedMaxInstructions)
    return Status::error(what + "the program must hold 1 to " +
                         std::to_string(kFusedMaxInstructions) +
                         " instructions");
  if (results.empty() || int(results.size()) > kFusedMaxResults)
    return Status::error(what + "returns 1 to " +
                         std::to_string(kFusedMaxResults) + " values");
  for (int64_t r : results) {
    if (r < 0 || r >= out.numValues())
      return Status::error(what + "result value " + std::to_string(r) +
                           " is not defined");
    out.results.push_back(int32_t(r));
  }
  return Status::ok();
}

/// The program of a launch, with the checks both backends make: one
/// result per returned value, every result of one shape and a float type
/// (bf16 / fp16 only where the value is narrow), every input broadcasting
/// to it, a float or an i1 (a where's condition, read as 0 or 1).
inline Status planFusedElementwise(const KernelContext &ctx,
                                   FusedProgram &program, DType &wide) {
  const std::string what = "graph.fused_elementwise: ";
  std::vector<int64_t> results = ctx.attrs.getInts("result_values");
  if (Status s = parseFusedProgram(ctx.attrs.getString("program"),
                                   int(ctx.inputs.size()), results, program);
      !s)
    return s;
  if (ctx.outputs.size() != results.size())
    return Status::error(what + "the program returns " +
                         std::to_string(results.size()) + " values into " +
                         std::to_string(ctx.outputs.size()) + " results");
  const std::vector<int64_t> &shape = ctx.outputs[0].shape;
  if (shape.size() > size_t(kFusedMaxRank))
    return Status::error(what + "rank above " +
                         std::to_string(kFusedMaxRank));
  wide = DType::F32;
  for (const TensorView &v : ctx.inputs)
    if (v.dtype == DType::F64)
      wide = DType::F64;
  for (const TensorView &v : ctx.outputs) {
    if (v.shape != shape)
      return Status::error(what + "results differ in shape: " +
                           ctx.outputs[0].describe() + ", " + v.describe());
    if (!isFloat(v.dtype))
      return Status::error(what + "result " + v.describe() +
                           " is not a float tensor");
    if (v.dtype == DType::F64)
      wide = DType::F64;
  }
  for (const TensorView &v : ctx.inputs) {
    if (!isFloat(v.dtype) && v.dtype != DType::I1)
      return Status::error(what + "input " + v.describe() +
                           " is not a float or i1 tensor");
    if (v.rank() > int64_t(shape.size()))
      return Status::error(what + "input " + v.describe() +
                           " does not broadcast to " + shapeString(shape));
    size_t lead = shape.size() - v.shape.size();
    for (size_t d = 0; d < v.shape.size(); ++d)
      if (v.shape[d] != 1 && v.shape[d] != shape[lead + d])
        return Status::error(what + "input " + v.describe() +
                             " does not broadcast to " + shapeString(shape));
  }
  for (const TensorView &v : ctx.inputs)
    if (isFloat(v.dtype) && !isNarrowFloat(v.dtype) && v.dtype != wide)
      return Status::error(what + "mixes f32 and f64 values");
  for (const TensorView &v : ctx.outputs)
    if (!isNarrowFloat(v.dtype) && v.dtype != wide)
      return Status::error(what + "mixes f32 and f64 values");
  return Status::ok();
}

/// Row-major element strides of `in` broadcast to `out` (0 along a
/// broadcast dim), right-aligned, `out.size()` of them.
inline std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                             const std::vector<int64_t> &out) {
  std::vector<int64_t> strides(out.size(), 0);
  size_t lead = out.size() - in.size();
  int64_t stride = 1;
  for (size_t d = in.size(); d-- > 0;) {
    strides[lead + d] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return strides;
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_FUSEDPROGRAM_H
