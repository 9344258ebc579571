//===- NodeImporter.h - What an op handler sees of its node -----*- C++ -*-===//
//
// Private to the frontend. Each ONNX op type has a handler (a function in
// Handlers/) registered in a table keyed by op type; the handler reads its
// node through NodeImporter and builds graph ops with it. Ops are created
// folded, so shape arithmetic over constants becomes constants on the spot.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_FRONTEND_NODEIMPORTER_H
#define STRATA_FRONTEND_NODEIMPORTER_H

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

#include <functional>
#include <string>

namespace strata::frontend {

class ModelImporter;

/// Ops with attributes keep them in a generated Properties struct.
template <typename T, typename = void>
struct HasProperties : std::false_type {};
template <typename T>
struct HasProperties<T, std::void_t<typename T::Properties>> : std::true_type {};

/// The view of one ONNX node given to its handler.
class NodeImporter {
public:
  NodeImporter(ModelImporter &model, const onnx::NodeProto &node,
               mlir::OpBuilder &builder, mlir::Location loc, int64_t opset)
      : model(model), node(node), builder(builder), loc(loc), opset(opset) {}

  const onnx::NodeProto &getNode() const { return node; }
  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::MLIRContext *getContext() { return builder.getContext(); }
  mlir::Location getLoc() const { return loc; }
  int64_t getOpset() const { return opset; }

  /// Inputs. An optional input left out (or given the empty name) is absent.
  unsigned getNumInputs() const { return node.input_size(); }
  bool hasInput(unsigned i) const {
    return i < static_cast<unsigned>(node.input_size()) && !node.input(i).empty();
  }
  /// The input as an SSA value (constants are materialized).
  mlir::Value getInput(unsigned i);
  mlir::RankedTensorType getInputType(unsigned i) {
    return mlir::cast<mlir::RankedTensorType>(getInput(i).getType());
  }
  /// The input's value if it is known at compile time, else null.
  mlir::DenseElementsAttr getConstantInput(unsigned i);
  /// The integer values of a compile-time input; fails naming `what`.
  mlir::FailureOr<llvm::SmallVector<int64_t>> getConstantInts(unsigned i,
                                                              llvm::StringRef what);
  /// Same, for an optional input: `fallback` when it is absent.
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  getConstantIntsOr(unsigned i, llvm::StringRef what,
                    llvm::SmallVector<int64_t> fallback) {
    if (!hasInput(i))
      return fallback;
    return getConstantInts(i, what);
  }
  /// The single float value of a compile-time scalar input.
  mlir::FailureOr<double> getConstantScalar(unsigned i, llvm::StringRef what);
  /// True if the input is a trainable parameter (a function argument).
  bool isParameter(unsigned i);

  /// Outputs. An output is used if a node or the graph output reads it.
  unsigned getNumOutputs() const { return node.output_size(); }
  bool isOutputUsed(unsigned i) const;
  void setOutput(unsigned i, mlir::Value value);
  /// Sets output 0 from a builder result; the usual last line of a handler.
  mlir::LogicalResult setResult(mlir::FailureOr<mlir::Value> result) {
    if (mlir::failed(result))
      return mlir::failure();
    setOutput(0, *result);
    return mlir::success();
  }
  /// Records that the step returns `value` as the new state of input `i`
  /// when that input is a buffer (batch-norm running statistics).
  void setBufferUpdate(unsigned i, mlir::Value value);

  /// Attributes.
  bool hasAttr(llvm::StringRef name) const { return findAttr(name) != nullptr; }
  int64_t getAttrInt(llvm::StringRef name, int64_t defaultValue) const;
  double getAttrFloat(llvm::StringRef name, double defaultValue) const;
  std::string getAttrString(llvm::StringRef name,
                            llvm::StringRef defaultValue) const;
  llvm::SmallVector<int64_t> getAttrInts(llvm::StringRef name) const;
  const onnx::AttributeProto *findAttr(llvm::StringRef name) const;

  /// Fails the import of this node with `message` (node name and op type are
  /// added by the caller).
  mlir::LogicalResult fail(const llvm::Twine &message);

  /// Builds OpTy with an inferred result type, then folds it. Shape errors
  /// become a failure of this node, never a crash.
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  create(mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) {
    mlir::SmallVector<mlir::Type> types;
    if (mlir::failed(inferTypes<OpTy>(operands, attributes, types)))
      return mlir::failure();
    return createTyped<OpTy>(types.front(), operands, attributes);
  }

  /// Builds OpTy with the given result types, verifies it, then folds it.
  template <typename OpTy>
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  createMulti(mlir::TypeRange types, mlir::ValueRange operands,
              llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) {
    auto op = builder.create<OpTy>(loc, types, operands, attributes);
    return finishOp(op);
  }
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  createTyped(mlir::Type type, mlir::ValueRange operands,
              llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) {
    auto results = createMulti<OpTy>(mlir::TypeRange(type), operands, attributes);
    if (mlir::failed(results))
      return mlir::failure();
    return results->front();
  }
  /// Same as create, inferring the result types of a multi-result op.
  template <typename OpTy>
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  createInferredMulti(mlir::ValueRange operands,
                      llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) {
    mlir::SmallVector<mlir::Type> types;
    if (mlir::failed(inferTypes<OpTy>(operands, attributes, types)))
      return mlir::failure();
    return createMulti<OpTy>(types, operands, attributes);
  }

  /// Shorthands for graph ops the handlers build often.
  mlir::FailureOr<mlir::Value> reshape(mlir::Value value,
                                       llvm::ArrayRef<int64_t> shape);
  mlir::Value constant(mlir::DenseElementsAttr value);
  /// A scalar of `like`'s element type holding `value`; fails where an
  /// integer element type cannot hold it (NaN, infinite, past int64).
  mlir::FailureOr<mlir::Value> scalarLike(mlir::Value like, double value);

  mlir::NamedAttribute attr(llvm::StringRef name, mlir::Attribute value) {
    return builder.getNamedAttr(name, value);
  }
  mlir::NamedAttribute i64Attr(llvm::StringRef name, int64_t value) {
    return attr(name, builder.getI64IntegerAttr(value));
  }
  mlir::NamedAttribute f64Attr(llvm::StringRef name, double value) {
    return attr(name, builder.getF64FloatAttr(value));
  }
  mlir::NamedAttribute boolAttr(llvm::StringRef name, bool value) {
    return attr(name, builder.getBoolAttr(value));
  }
  mlir::NamedAttribute i64ArrayAttr(llvm::StringRef name,
                                    llvm::ArrayRef<int64_t> value) {
    return attr(name, builder.getDenseI64ArrayAttr(value));
  }

private:
  template <typename OpTy>
  mlir::LogicalResult inferTypes(mlir::ValueRange operands,
                                 llvm::ArrayRef<mlir::NamedAttribute> attributes,
                                 mlir::SmallVectorImpl<mlir::Type> &types) {
    mlir::MLIRContext *context = getContext();
    auto dict = mlir::DictionaryAttr::get(context, attributes);
    if constexpr (HasProperties<OpTy>::value) {
      typename OpTy::Properties properties;
      if (mlir::failed(OpTy::setPropertiesFromAttr(
              properties, dict, [&] { return mlir::emitError(loc); })))
        return mlir::failure();
      return OpTy::inferReturnTypes(context, loc, operands, dict,
                                    mlir::OpaqueProperties(&properties),
                                    mlir::RegionRange(), types);
    } else {
      return OpTy::inferReturnTypes(context, loc, operands, dict,
                                    mlir::OpaqueProperties(nullptr),
                                    mlir::RegionRange(), types);
    }
  }
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> finishOp(mlir::Operation *op);

  ModelImporter &model;
  const onnx::NodeProto &node;
  mlir::OpBuilder &builder;
  mlir::Location loc;
  int64_t opset;
};

/// A handler imports one node; it reports errors through NodeImporter::fail
/// (or an MLIR diagnostic at the node's location) and returns failure.
using OpHandler = std::function<mlir::LogicalResult(NodeImporter &)>;
using OpHandlerTable = llvm::StringMap<OpHandler>;

void registerElementwiseHandlers(OpHandlerTable &table);
void registerShapeHandlers(OpHandlerTable &table);
void registerNeuralNetHandlers(OpHandlerTable &table);

/// The table of every handler, built once.
const OpHandlerTable &getOpHandlerTable();

/// The MLIR element type of an ONNX TensorProto data type, or null.
mlir::Type getElementType(mlir::MLIRContext *context, int32_t onnxType);

/// Reads a TensorProto (inline or external data under `baseDir`) into an
/// attribute of `type`; fails with a message.
llvm::Expected<mlir::DenseElementsAttr>
readTensor(const onnx::TensorProto &tensor, mlir::RankedTensorType type,
           llvm::StringRef baseDir);

} // namespace strata::frontend

#endif // STRATA_FRONTEND_NODEIMPORTER_H
