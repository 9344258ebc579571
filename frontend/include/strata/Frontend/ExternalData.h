//===- ExternalData.h - An ONNX initializer's bytes in another file -*- C++ -*-===//
//
// torch.onnx.export writes large initializers to files beside the model
// (data_location EXTERNAL, with "location", "offset" and "length" entries).
// The importer and the exporter read them here, trusting nothing: the file
// must resolve inside the model's folder (as ONNX's checker requires:
// no absolute path, no "..", no symbolic link leading out), be a regular
// file (a FIFO would block forever), and hold the bytes the entries
// name; offsets and lengths are plain decimal byte counts. No MLIR here:
// strata-run's exporter links it.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_FRONTEND_EXTERNALDATA_H
#define STRATA_FRONTEND_EXTERNALDATA_H

#include <cstdint>
#include <string>

namespace onnx {
class TensorProto;
} // namespace onnx

namespace strata::frontend {

/// Reads `tensor`'s external data from under `baseDir` into `out`. With
/// `expectedBytes` >= 0 the data must be that long (a "length" entry must
/// say so too); otherwise it is "length" bytes, or the rest of the file.
/// Returns "" or a one-line reason (without the tensor's name).
std::string readExternalData(const onnx::TensorProto &tensor,
                             const std::string &baseDir,
                             int64_t expectedBytes, std::string &out);

} // namespace strata::frontend

#endif // STRATA_FRONTEND_EXTERNALDATA_H
