//===- ModelStructure.h - What a model is, apart from its batch --*- C++ -*-===//
//
// A checkpoint may be resumed by an artifact compiled for another topology
// (resharding), but only for the same model: strata-compile fingerprints
// the model's structure (this) with the training options that give its
// state a meaning (tools/lib/CompileDriver.cpp) and codegen records the
// hash as Plan.model_fingerprint. No MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_FRONTEND_MODELSTRUCTURE_H
#define STRATA_FRONTEND_MODELSTRUCTURE_H

#include <string>

namespace strata::frontend {

/// The canonical bytes of the model at `onnxPath` that a resumed checkpoint
/// must agree with: the graph's nodes (op types, edges, attributes) and its
/// initializers' names, element types and dimensions, but not their values
/// (the checkpoint holds those), the graph inputs' and outputs' shapes (the
/// micro-batch may change with the topology), names of the producer or
/// documentation strings. A `.onnxtxt` model's text is taken whole.
/// Returns "" or a one-line error.
std::string readModelStructure(const std::string &onnxPath, std::string &out);

} // namespace strata::frontend

#endif // STRATA_FRONTEND_MODELSTRUCTURE_H
