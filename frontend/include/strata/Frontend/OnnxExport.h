//===- OnnxExport.h - Trained weights back into the user's ONNX -*- C++ -*-===//
//
// strata-compile keeps the user's model in the artifact as model.onnx with
// the parameter and buffer initializers emptied (their values are in
// params.bin); strata-run --export-onnx refills them with the trained
// values, so the result is the original graph with trained weights. No MLIR
// here: strata-run links this library.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_FRONTEND_ONNXEXPORT_H
#define STRATA_FRONTEND_ONNXEXPORT_H

#include <functional>
#include <set>
#include <string>
#include <string_view>

namespace strata::frontend {

/// Writes `onnxPath` (external data read in) to `outPath` with the data of
/// the initializers in `emptied` removed. Returns "" or a one-line error.
std::string writeModelSkeleton(const std::string &onnxPath,
                               const std::set<std::string> &emptied,
                               const std::string &outPath);

/// The bytes of a trained tensor by initializer name; empty if unknown.
using TrainedValue = std::function<std::string_view(const std::string &)>;

/// Fills every emptied initializer of `skeletonPath` from `values`, checks
/// the model with ONNX's checker and writes it to `outPath` (temp + rename).
/// Returns "" or a one-line error.
std::string exportTrainedModel(const std::string &skeletonPath,
                               const TrainedValue &values,
                               const std::string &outPath);

} // namespace strata::frontend

#endif // STRATA_FRONTEND_ONNXEXPORT_H
