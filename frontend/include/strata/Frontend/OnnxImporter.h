//===- OnnxImporter.h - ONNX to the graph dialect ---------------*- C++ -*-===//
//
// Reads an ONNX model (binary protobuf, optionally with external data, or
// ONNX's textual syntax) and builds one `func.func @main` of graph-dialect
// ops with fully static shapes. Every failure is one line naming what is
// wrong; the importer never crashes on bad input.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_FRONTEND_ONNXIMPORTER_H
#define STRATA_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace strata::frontend {

/// The ONNX default-domain opsets the importer understands: from the one
/// where most axes became inputs (ReduceSum, Squeeze, Unsqueeze, Split) to
/// ONNX 1.16's (what recent PyTorch exporters write).
inline constexpr int64_t kMinOpset = 13;
inline constexpr int64_t kMaxOpset = 21;
/// The newest opset and IR version Debian's ONNX 1.12 knows: up to them its
/// checker and shape inference also run at import.
inline constexpr int64_t kOnnxLibraryMaxOpset = 17;
/// The newest ONNX IR version the importer reads (ONNX 1.16's).
inline constexpr int64_t kMaxIrVersion = 10;

struct ImportOptions {
  /// Static shapes for graph inputs, by name (`--input-shape name=8x64`).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Replaces a dynamic first dimension of every graph input (`--batch`).
  std::optional<int64_t> batch;
};

/// Imports the model at `path`: binary ONNX, or ONNX text when the file name
/// ends in `.onnxtxt`. External data is read relative to the model's folder,
/// one tensor at a time and only for the tensors the graph needs as
/// constants.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxFile(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options = {});

/// Imports a model written in ONNX's textual syntax. Whole lines starting
/// with `//` are comments (ONNX's own parser has none).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxText(mlir::MLIRContext &context, llvm::StringRef text,
               const ImportOptions &options = {});

/// Imports a model already parsed from binary ONNX (what importOnnxFile does
/// after reading the file, with ONNX's checker run on the model in memory).
/// External data is read relative to `baseDir`. The fuzzer's entry point.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxModel(mlir::MLIRContext &context, onnx::ModelProto &model,
                llvm::StringRef baseDir, const ImportOptions &options = {});

/// The ONNX op types (default domain) the importer handles, sorted.
std::vector<std::string> getSupportedOnnxOps();

/// An op the importer handles and the opsets it handles it at.
struct OnnxOpSupport {
  std::string op;
  int64_t minOpset, maxOpset;
};

/// getSupportedOnnxOps with each op's opset range, sorted by op.
std::vector<OnnxOpSupport> getSupportedOnnxOpsets();

/// The initializers of an ONNX model, read one at a time: what codegen
/// writes into params.bin. External data is read by offset, so a large model
/// is never in memory at once.
class OnnxWeights {
public:
  virtual ~OnnxWeights() = default;
  /// The raw little-endian bytes of initializer `name` (i1 as one byte per
  /// element), or an error naming it.
  virtual llvm::Expected<std::string> read(llvm::StringRef name) = 0;
};

/// Opens the initializers of the model at `path` (binary or .onnxtxt).
llvm::Expected<std::unique_ptr<OnnxWeights>> openOnnxWeights(llvm::StringRef path);

/// Parses `name=8x64` (as given to --input-shape) into `options`.
llvm::Error parseInputShapeFlag(llvm::StringRef flag, ImportOptions &options);

} // namespace strata::frontend

#endif // STRATA_FRONTEND_ONNXIMPORTER_H
