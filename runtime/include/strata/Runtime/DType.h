//===- DType.h - Element types of runtime tensors ---------------*- C++ -*-===//
//
// The runtime's own element types, the same set the graph dialect imports
// (f32, f64, f16, bf16, i64, i32, i16, i8, i1). No MLIR here: the runtime's
// only contract with the compiler is the artifact schema.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_DTYPE_H
#define STRATA_RUNTIME_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata::runtime {

enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I16, I8, I1 };

/// Bytes per element (i1 is stored as one byte, 0 or 1).
constexpr size_t byteWidth(DType t) {
  switch (t) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
    return 2;
  case DType::I8:
  case DType::I1:
    return 1;
  }
  return 0;
}

constexpr bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 ||
         t == DType::BF16;
}

/// The 16-bit float types mixed precision stores (NarrowFloat.h).
constexpr bool isNarrowFloat(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

constexpr std::string_view name(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::I16: return "i16";
  case DType::I8: return "i8";
  case DType::I1: return "i1";
  }
  return "?";
}

} // namespace strata::runtime

#endif // STRATA_RUNTIME_DTYPE_H
