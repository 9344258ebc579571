//===- OnnxInferenceGuards.h - Checks ONNX 1.12's inference skips -*- C++ -*-===//

#ifndef STRATA_FRONTEND_ONNXINFERENCEGUARDS_H
#define STRATA_FRONTEND_ONNXINFERENCEGUARDS_H

namespace strata::frontend {

/// Wraps the ONNX inference functions that crash on some malformed nodes
/// with the checks they lack (once per process; before any inference).
void installOnnxInferenceGuards();

} // namespace strata::frontend

#endif // STRATA_FRONTEND_ONNXINFERENCEGUARDS_H
