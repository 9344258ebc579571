//===- OnnxSchemas.h - Strata's own table of ONNX op forms ------*- C++ -*-===//
//
// Private to the frontend. Debian's ONNX 1.12 knows the schemas of opsets
// up to 17 only, so the importer checks a model's structure against its own
// table: for every op it handles, the forms the op takes from each opset on
// (inputs, outputs, attributes and their types). The table is also where an
// op's supported opset range comes from (`--list-onnx-ops`).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_FRONTEND_ONNXSCHEMAS_H
#define STRATA_FRONTEND_ONNXSCHEMAS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include "onnx/onnx_pb.h"

#include <climits>
#include <optional>
#include <string>

namespace strata::frontend {

/// One attribute an op form accepts.
struct OnnxAttrSpec {
  std::string name;
  onnx::AttributeProto::AttributeType type;
  bool required;
};

/// The form an op takes from opset `since` until the op's next form.
struct OnnxOpForm {
  std::string op;
  int64_t since;
  int minInputs, maxInputs;
  int minOutputs, maxOutputs;
  /// A variadic last input: every input is required (none may be omitted).
  bool variadicInputs;
  llvm::SmallVector<OnnxAttrSpec> attributes;

  const OnnxAttrSpec *findAttribute(llvm::StringRef name) const;
};

/// The form of `op` at `opset`, or null when the op does not exist there
/// (or is not in the table).
const OnnxOpForm *lookupOnnxOpForm(llvm::StringRef op, int64_t opset);

/// Every form of every op, by op then opset.
llvm::ArrayRef<OnnxOpForm> getOnnxOpForms();

/// The checks of ONNX's checker that matter for import, at `opset`: every
/// node's inputs are defined before it (graph inputs, initializers or
/// earlier outputs), every value is defined once, each op exists at the
/// opset, its input and output counts are in range, its attributes are
/// known, of the right type and the required ones present, and the graph's
/// outputs are defined. Returns the first problem as one line naming the
/// node, or "".
std::string checkGraphStructure(const onnx::GraphProto &graph, int64_t opset);

} // namespace strata::frontend

#endif // STRATA_FRONTEND_ONNXSCHEMAS_H
