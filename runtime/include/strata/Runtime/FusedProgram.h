//===- FusedProgram.h - graph.fused_elementwise's program -------*- C++ -*-===//
//
// strata-fuse-elementwise replaces a chain of elementwise ops with one
// graph.fused_elementwise whose body is the chain; codegen writes the body
// as the instruction's `program` attribute: five integers per op (its
// FusedOpcode, the UnaryGradKind of a gradient, up to three operand value
// numbers, -1 where unused). Values are numbered: the op's inputs 0..n-1,
// then each instruction's result in turn; `result_values` names the
// values the op returns. Every value has the shape of the results (an
// input may broadcast to it). The opcode numbers are the contract between
// codegen (graph::fusedCodeOf) and the kernels, as plan.proto is: they
// never change (FusedOpcode).
//
// Values are computed in one wide type (f32, or f64 in a double graph);
// a bf16 / fp16 value is held widened, exactly, and cast_bf16 / cast_f16
// round to it. Each instruction computes what the op it replaces computes,
// so the CPU's fused kernel gives the unfused numbers bit for bit.
//
// The decoder is shared by the CPU and CUDA kernels (host side).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_FUSEDPROGRAM_H
#define STRATA_RUNTIME_FUSEDPROGRAM_H

#include "strata/Runtime/ElementwiseOps.h"
#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/UnaryGrad.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::runtime {

/// Where the table's ops start among the opcodes: room for 32 binary ops
/// and 192 unary ones.
inline constexpr int kFusedBinaryBase = 32;
inline constexpr int kFusedUnaryBase = 64;
static_assert(kFusedBinaryBase + kNumBinary <= kFusedUnaryBase &&
                  kFusedUnaryBase + kNumUnary <= 256,
              "ElementwiseOps.def outgrew the fused opcodes' ranges");

/// An instruction's operation. Artifacts hold these numbers, so they never
/// change: the ops of the table are numbered from their Binary / Unary
/// number (ElementwiseOps.h; rows are only appended), the others fixed.
enum class FusedOpcode : uint8_t {
  // graph.gelu by its approximation.
  Gelu = 0, GeluTanh = 1,
  // Float casts: to the wide type (exact) or rounded to a narrow one.
  CastWide = 2, CastBf16 = 3, CastF16 = 4,
  // graph.unary_grad (dy, x, y) of a kind without parameters.
  Grad = 5,
  // graph.where (condition, a, b): the condition an i1 input.
  Where = 6,
  // The elementwise ops ElementwiseOps.def marks fusible.
#define STRATA_FUSIBLE_BINARY(Kind, Mnemonic, OpClass, Types)                  \
  Kind = kFusedBinaryBase + int(Binary::Kind),
#define STRATA_FUSIBLE_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)         \
  Kind = kFusedUnaryBase + int(Unary::Kind),
#include "strata/Runtime/ElementwiseOps.def"
};

/// Whether `op` numbers a FusedOpcode.
inline bool isFusedOpcode(int64_t op) {
  switch (op) {
  case int64_t(FusedOpcode::Gelu):
  case int64_t(FusedOpcode::GeluTanh):
  case int64_t(FusedOpcode::CastWide):
  case int64_t(FusedOpcode::CastBf16):
  case int64_t(FusedOpcode::CastF16):
  case int64_t(FusedOpcode::Grad):
  case int64_t(FusedOpcode::Where):
#define STRATA_FUSIBLE_BINARY(Kind, Mnemonic, OpClass, Types)                  \
  case int64_t(FusedOpcode::Kind):
#define STRATA_FUSIBLE_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)         \
  case int64_t(FusedOpcode::Kind):
#include "strata/Runtime/ElementwiseOps.def"
    return true;
  default:
    return false;
  }
}

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


/// Operands an instruction reads.
inline int fusedArity(FusedOpcode op) {
  switch (op) {
#define STRATA_FUSIBLE_BINARY(Kind, Mnemonic, OpClass, Types)                  \
  case FusedOpcode::Kind:
#include "strata/Runtime/ElementwiseOps.def"
    return 2;
  case FusedOpcode::Grad:
  case FusedOpcode::Where:
    return 3;
  default:
    return 1;
  }
}

/// Integers per instruction in the `program` attribute.
inline constexpr int kFusedCodeWidth = 5;

/// Decodes `code` (kFusedCodeWidth integers per instruction) for an op
/// with `numInputs` inputs returning `results`; a one-line error naming
/// what is wrong.
inline Status decodeFusedProgram(const std::vector<int64_t> &code,
                                 int numInputs,
                                 const std::vector<int64_t> &results,
                                 FusedProgram &out) {
  const std::string what = "graph.fused_elementwise: ";
  out = FusedProgram();
  out.numInputs = numInputs;
  if (numInputs < 1 || numInputs > kFusedMaxInputs)
    return Status::error(what + "takes 1 to " +
                         std::to_string(kFusedMaxInputs) + " inputs, got " +
                         std::to_string(numInputs));
  if (code.size() % kFusedCodeWidth != 0)
    return Status::error(what + "the program's " + std::to_string(code.size()) +
                         " integers are not whole instructions of " +
                         std::to_string(kFusedCodeWidth));
  for (size_t at = 0; at < code.size(); at += kFusedCodeWidth) {
    int index = int(at / kFusedCodeWidth);
    std::string where = "instruction " + std::to_string(index);
    int64_t op = code[at], kind = code[at + 1];
    if (!isFusedOpcode(op))
      return Status::error(what + where + " has unknown opcode " +
                           std::to_string(op));
    if (!isUnaryGradKind(kind))
      return Status::error(what + where + " has unknown gradient kind " +
                           std::to_string(kind));
    FusedInstruction instruction;
    instruction.op = FusedOpcode(op);
    instruction.kind = UnaryGradKind(kind);
    int arity = fusedArity(instruction.op);
    int defined = out.numValues();
    for (int k = 0; k < 3; ++k) {
      int64_t v = code[at + 2 + k];
      if (k >= arity) {
        if (v != -1)
          return Status::error(what + where + " takes " +
                               std::to_string(arity) + " operands");
        continue;
      }
      if (v < 0 || v >= defined)
        return Status::error(what + where + ": operand " + std::to_string(v) +
                             " is not a value defined before it");
      instruction.args[k] = int32_t(v);
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
  if (Status s = decodeFusedProgram(ctx.attrs.getInts("program"),
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
