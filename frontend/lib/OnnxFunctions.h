//===- OnnxFunctions.h - Inlining model-local ONNX functions ----*- C++ -*-===//
//
// Private to the frontend. Exporters write some ops (LayerNorm, Gelu, their
// own modules) as model-local functions (ModelProto.functions) called from
// the main graph like ops; the importer replaces each call with the body.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_FRONTEND_ONNXFUNCTIONS_H
#define STRATA_FRONTEND_ONNXFUNCTIONS_H

#include "onnx/onnx_pb.h"

#include <string>

namespace strata::frontend {

/// Replaces every call of a model-local function in the main graph with the
/// function's body, calls inside bodies too, renaming the body's inner
/// values apart and resolving its attribute references. Returns "" or one
/// line saying what is wrong (the call named).
std::string inlineLocalFunctions(onnx::ModelProto &model);

} // namespace strata::frontend

#endif // STRATA_FRONTEND_ONNXFUNCTIONS_H
