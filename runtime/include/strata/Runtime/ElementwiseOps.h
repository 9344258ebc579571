//===- ElementwiseOps.h - The elementwise ops' enums ------------*- C++ -*-===//
//
// One enumerator per row of ElementwiseOps.def, numbered in the table's
// order. Rows are only ever appended to their section, so a number, once
// given, stays: the fused programs and graph.unary_grad's kinds that
// artifacts hold are built from these numbers (FusedProgram.h,
// UnaryGrad.h), and graph::UnaryKind repeats Unary's (GraphOps.cpp checks).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_ELEMENTWISEOPS_H
#define STRATA_RUNTIME_ELEMENTWISEOPS_H

namespace strata::runtime {

enum class Unary {
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient) Kind,
#include "strata/Runtime/ElementwiseOps.def"
};

enum class Binary {
#define STRATA_BINARY(Kind, Mnemonic, OpClass, Types) Kind,
#include "strata/Runtime/ElementwiseOps.def"
};

enum class Compare {
#define STRATA_COMPARE(Kind, Mnemonic, OpClass) Kind,
#include "strata/Runtime/ElementwiseOps.def"
};

/// How many rows each section has.
inline constexpr int kNumUnary = 0
#define STRATA_UNARY(Kind, Mnemonic, OpClass, Types, Gradient) +1
#include "strata/Runtime/ElementwiseOps.def"
    ;
inline constexpr int kNumBinary = 0
#define STRATA_BINARY(Kind, Mnemonic, OpClass, Types) +1
#include "strata/Runtime/ElementwiseOps.def"
    ;

} // namespace strata::runtime

#endif // STRATA_RUNTIME_ELEMENTWISEOPS_H
