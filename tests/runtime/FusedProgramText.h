//===- FusedProgramText.h - Fused programs written as text, for tests -*- C++ -*-===//
//
// The kernel tests write a fused program as text ("cast_wide 0; add 1 3;
// gelu_tanh 4"): this assembles it into the integers codegen writes
// (FusedProgram.h: opcode, gradient kind, three operand value numbers per
// instruction). Test-only: the runtime reads the integers and parses no
// text.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_TESTS_FUSEDPROGRAMTEXT_H
#define STRATA_RUNTIME_TESTS_FUSEDPROGRAMTEXT_H

#include "strata/Runtime/FusedProgram.h"

#include <sstream>
#include <string>
#include <vector>

namespace strata::runtime::testing {

/// "op a b c; op a; ..." -> the program attribute. An unknown name becomes
/// opcode 255 (which the decoder refuses), so a test can write bad code.
inline std::vector<int64_t> assembleFusedProgram(const std::string &text) {
  struct Name {
    const char *name;
    FusedOpcode op;
    UnaryGradKind kind;
  };
  using O = FusedOpcode;
  using K = UnaryGradKind;
  static const Name kNames[] = {
  // Every fusible op of ElementwiseOps.def by its mnemonic, and its
  // gradient as grad_<mnemonic>.
#define STRATA_FUSIBLE_BINARY(Kind, Mnemonic, OpClass, Types) {Mnemonic, O::Kind, {}},
#define STRATA_FUSIBLE_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)         \
  {Mnemonic, O::Kind, {}}, {"grad_" Mnemonic, O::Grad, K::Kind},
#include "strata/Runtime/ElementwiseOps.def"
      {"gelu", O::Gelu, {}}, {"gelu_tanh", O::GeluTanh, {}},
      {"cast_wide", O::CastWide, {}}, {"cast_bf16", O::CastBf16, {}},
      {"cast_f16", O::CastF16, {}}, {"where", O::Where, {}},
      {"grad_gelu", O::Grad, K::Gelu}, {"grad_gelu_tanh", O::Grad, K::GeluTanh},
  };
  std::vector<int64_t> code;
  std::stringstream all(text);
  std::string item;
  while (std::getline(all, item, ';')) {
    std::stringstream words(item);
    std::string name;
    if (!(words >> name))
      continue;
    int64_t op = 255, kind = 0;
    for (const Name &n : kNames)
      if (name == n.name) {
        op = int64_t(n.op);
        kind = int64_t(n.kind);
      }
    code.push_back(op);
    code.push_back(kind);
    int64_t args[3] = {-1, -1, -1};
    for (int k = 0; k < 3 && words >> args[k]; ++k) {
    }
    code.insert(code.end(), args, args + 3);
  }
  return code;
}

} // namespace strata::runtime::testing

#endif // STRATA_RUNTIME_TESTS_FUSEDPROGRAMTEXT_H
