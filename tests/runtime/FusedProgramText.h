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
      {"add", O::Add, {}}, {"sub", O::Sub, {}}, {"mul", O::Mul, {}},
      {"div", O::Div, {}}, {"max", O::Max, {}}, {"min", O::Min, {}},
      {"neg", O::Neg, {}}, {"abs", O::Abs, {}}, {"exp", O::Exp, {}},
      {"log", O::Log, {}}, {"sqrt", O::Sqrt, {}},
      {"reciprocal", O::Reciprocal, {}}, {"tanh", O::Tanh, {}},
      {"erf", O::Erf, {}}, {"sin", O::Sin, {}}, {"cos", O::Cos, {}},
      {"relu", O::Relu, {}}, {"sigmoid", O::Sigmoid, {}},
      {"softplus", O::Softplus, {}}, {"hard_swish", O::HardSwish, {}},
      {"gelu", O::Gelu, {}}, {"gelu_tanh", O::GeluTanh, {}},
      {"cast_wide", O::CastWide, {}}, {"cast_bf16", O::CastBf16, {}},
      {"cast_f16", O::CastF16, {}}, {"where", O::Where, {}},
      {"grad_abs", O::Grad, K::Abs}, {"grad_exp", O::Grad, K::Exp},
      {"grad_log", O::Grad, K::Log}, {"grad_sqrt", O::Grad, K::Sqrt},
      {"grad_reciprocal", O::Grad, K::Reciprocal},
      {"grad_tanh", O::Grad, K::Tanh}, {"grad_erf", O::Grad, K::Erf},
      {"grad_sin", O::Grad, K::Sin}, {"grad_cos", O::Grad, K::Cos},
      {"grad_relu", O::Grad, K::Relu}, {"grad_sigmoid", O::Grad, K::Sigmoid},
      {"grad_softplus", O::Grad, K::Softplus}, {"grad_gelu", O::Grad, K::Gelu},
      {"grad_gelu_tanh", O::Grad, K::GeluTanh},
      {"grad_hard_swish", O::Grad, K::HardSwish}, {"grad_neg", O::Grad, K::Neg},
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
