//===- OnnxImporter.cpp - ONNX to the graph dialect -----------------------===//
//
// The import runs in stages, each of which can reject the model with one
// line: parse (binary or text), opset and IR version, inlining of local
// functions, unsupported ops (all listed at once), Strata's own structural
// checks (OnnxSchemas.cpp), static input shapes, then one handler per node,
// which infers its results' shapes as it builds graph ops. Where Debian's
// ONNX 1.12 knows the model's opset and IR version (opset <= 17, IR <= 8),
// its checker and shape inference run too, as a second opinion the handlers'
// shapes are compared against. Initializers become parameters when
// gradients can flow from them to an output, buffers when they are
// batch-norm statistics, and constants otherwise (so masks and shape tables
// fold away).
//
// This library is compiled with exceptions: protobuf and ONNX throw. Nothing
// thrown crosses importOnnxFile/importOnnxText/importOnnxModel.
//
//===----------------------------------------------------------------------===//

#include "strata/Frontend/OnnxImporter.h"

#include "strata/Frontend/ExternalData.h"

#include "NodeImporter.h"
#include "OnnxFunctions.h"
#include "OnnxInferenceGuards.h"
#include "OnnxSchemas.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include <cmath>
#include <cstring>
#include <fstream>

using namespace mlir;
using namespace strata;
using namespace strata::frontend;
using llvm::Error;
using llvm::Expected;

namespace strata::frontend {

/// One import of one model.
class ModelImporter {
public:
  ModelImporter(MLIRContext &context, onnx::ModelProto &model,
                std::string baseDir, std::string modelPath,
                const ImportOptions &options)
      : context(context), builder(&context), model(model),
        baseDir(std::move(baseDir)), modelPath(std::move(modelPath)),
        options(options) {}

  Expected<OwningOpRef<ModuleOp>> run();

  // Used by NodeImporter.
  Value lookup(StringRef name);
  DenseElementsAttr lookupConstant(StringRef name);
  bool isParameter(StringRef name) const { return parameterNames.contains(name); }
  bool isUsed(StringRef name) const { return usedNames.contains(name); }
  void define(StringRef name, Value value) { values[name] = value; }
  void setNodeError(std::string message) {
    if (nodeError.empty())
      nodeError = std::move(message);
  }

private:
  Error fail(const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  }
  Error checkOpsetAndIrVersion();
  Error checkSupportedOps();
  Error runChecker();
  Error resolveInputShapes();
  Error runShapeInference();
  void classifyInitializers();
  Error importNode(const onnx::NodeProto &node, int64_t opset);
  Error checkAgainstOnnxShapes(const onnx::NodeProto &node);
  Expected<RankedTensorType> convertValueType(const onnx::ValueInfoProto &info);

  /// An argument of @main: what it is called, what it is, its type.
  struct MainArgument {
    std::string name;
    graph::Role role;
    Type type;
  };
  Expected<SmallVector<MainArgument>> collectArguments();
  Error addInitializerArguments(const llvm::StringSet<> &names,
                                graph::Role role,
                                SmallVectorImpl<MainArgument> &args);
  func::FuncOp createMain(ModuleOp module, ArrayRef<MainArgument> args);
  Error buildResults(func::FuncOp func);
  Error checkDeclaredShape(const onnx::ValueInfoProto &output, Value value);
  Error verifyModule(ModuleOp module);

  MLIRContext &context;
  OpBuilder builder;
  onnx::ModelProto &model;
  std::string baseDir, modelPath;
  const ImportOptions &options;
  int64_t opset = 0;
  /// Whether ONNX 1.12's checker and shape inference know this model's opset
  /// and IR version.
  bool onnxLibraryKnowsModel = false;

  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<DenseElementsAttr> constantCache;
  llvm::StringSet<> parameterNames, bufferNames, usedNames;
  /// Static shapes of graph inputs after --input-shape / --batch.
  llvm::StringMap<RankedTensorType> inputTypes;
  /// Fully static shapes ONNX shape inference found, by value name.
  llvm::StringMap<SmallVector<int64_t>> onnxShapes;
  /// Buffers whose updated value the step returns (batch-norm statistics).
  llvm::MapVector<StringRef, Value> bufferUpdates;
  std::string nodeError;
  /// Cleared after a node where ONNX's inference is known to be wrong.
  bool onnxShapesTrusted = true;
  friend class NodeImporter;
};

} // namespace strata::frontend

//===----------------------------------------------------------------------===//
// Tensors and types
//===----------------------------------------------------------------------===//

static std::string nodeName(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return node.name();
  return node.output_size() ? node.output(0) : "?";
}

/// No tensor of a model may hold more elements than this (2^40: far beyond
/// any single weight or activation, and small enough that its byte count,
/// and a product of two dims within it, cannot wrap).
static constexpr int64_t kMaxElements = int64_t(1) << 40;

/// The product of `dims`, or nullopt when one is negative or the product
/// exceeds kMaxElements.
template <typename Dims>
static std::optional<int64_t> elementCount(const Dims &dims) {
  int64_t count = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) ||
        count > kMaxElements)
      return std::nullopt;
  return count;
}

/// How many values an inline tensor holds (raw bytes over the element
/// width, or the typed field ONNX keeps its type in), or nullopt for types
/// the importer does not read and for raw bytes that are not whole values.
static std::optional<int64_t> storedValues(const onnx::TensorProto &t) {
  int64_t width = 0, typed = -1;
  switch (t.data_type()) {
  case onnx::TensorProto::DOUBLE:
    width = 8, typed = t.double_data_size();
    break;
  case onnx::TensorProto::INT64:
    width = 8, typed = t.int64_data_size();
    break;
  case onnx::TensorProto::FLOAT:
    width = 4, typed = t.float_data_size();
    break;
  case onnx::TensorProto::INT32:
    width = 4, typed = t.int32_data_size();
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
    width = 2, typed = t.int32_data_size();
    break;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    width = 1, typed = t.int32_data_size();
    break;
  default:
    return std::nullopt;
  }
  if (!t.has_raw_data())
    return typed;
  if (typed > 0 || t.raw_data().size() % width != 0)
    return -1; // both kinds of data, or a partial value: never a count
  return int64_t(t.raw_data().size()) / width;
}

/// A tensor of the graph (initializer or Constant value) whose dims are
/// negative or multiply past kMaxElements, or whose inline data does not
/// hold one value per element, as "tensor 'x' ...", or "". Checked before
/// ONNX's shape inference, which reads constant data unchecked (ONNX 1.12
/// indexed an empty raw_data of a Range bound and crashed).
static std::string findMalformedTensor(const onnx::GraphProto &graph) {
  auto check = [](const onnx::TensorProto &t,
                  const std::string &name) -> std::string {
    std::optional<int64_t> count = elementCount(t.dims());
    SmallVector<std::string> parts;
    for (int64_t d : t.dims())
      parts.push_back(std::to_string(d));
    std::string dims = llvm::join(parts, "x");
    if (!count)
      return llvm::formatv("tensor '{0}' has dims {1}: negative, or more "
                           "than 2^40 elements",
                           name, dims);
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      return "";
    std::optional<int64_t> values = storedValues(t);
    if (values && *values != *count)
      return llvm::formatv("tensor '{0}' has {1} elements ([{2}]) but its "
                           "data holds {3}",
                           name, *count, dims,
                           *values < 0 ? std::string("no whole number of "
                                                     "values")
                                       : std::to_string(*values));
    return "";
  };
  for (const auto &init : graph.initializer())
    if (std::string why = check(init, init.name()); !why.empty())
      return why;
  for (const auto &node : graph.node())
    for (const auto &attr : node.attribute())
      if (attr.has_t())
        if (std::string why = check(attr.t(), nodeName(node)); !why.empty())
          return why;
  return "";
}

Type strata::frontend::getElementType(MLIRContext *context, int32_t onnxType) {
  Builder b(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::INT8:
    return b.getIntegerType(8);
  case onnx::TensorProto::INT16:
    return b.getIntegerType(16);
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    return nullptr;
  }
}

static const char *dataTypeName(int32_t onnxType) {
  return onnx::TensorProto::DataType_IsValid(onnxType)
             ? onnx::TensorProto::DataType_Name(
                   static_cast<onnx::TensorProto::DataType>(onnxType))
                   .c_str()
             : "unknown";
}

/// The raw little-endian bytes of `tensor` (i1 as one byte per element),
/// from raw_data, external data under `baseDir`, or the typed fields.
static Expected<std::string> readTensorBytes(const onnx::TensorProto &tensor,
                                             StringRef baseDir) {
  auto fail = [&](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "tensor '" + tensor.name() + "': " + message);
  };
  std::optional<int64_t> elements = elementCount(tensor.dims());
  if (!elements)
    return fail("dims are negative or hold more than 2^40 elements");
  int64_t count = *elements;
  size_t width;
  switch (tensor.data_type()) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    width = 8;
    break;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    width = 4;
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
    width = 2;
    break;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    width = 1;
    break;
  default:
    return fail(llvm::formatv("unsupported element type {0}",
                              dataTypeName(tensor.data_type()))
                    .str());
  }
  size_t bytes = static_cast<size_t>(count) * width;

  std::string raw;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    if (std::string why =
            readExternalData(tensor, baseDir.str(), int64_t(bytes), raw);
        !why.empty())
      return fail(why);
  } else if (tensor.has_raw_data()) {
    raw = tensor.raw_data();
    if (raw.size() != bytes)
      return fail(llvm::formatv("raw data has {0} bytes, expected {1}",
                                raw.size(), bytes)
                      .str());
  }

  if (!raw.empty() || count == 0)
    return raw;

  // Typed fields, widened or narrowed to the element's bytes.
  auto fromValues = [&](auto values, auto convert) -> Expected<std::string> {
    if (values.size() != count)
      return fail(llvm::formatv("has {0} values for {1} elements",
                                values.size(), count)
                      .str());
    std::string out(bytes, '\0');
    for (int64_t i = 0; i < count; ++i)
      convert(values.Get(i), out.data() + i * width);
    return out;
  };
  auto copyAs = [&](auto tag) {
    return [](auto v, char *dst) {
      auto narrowed = static_cast<decltype(tag)>(v);
      std::memcpy(dst, &narrowed, sizeof(narrowed));
    };
  };
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    return fromValues(tensor.float_data(), copyAs(float{}));
  case onnx::TensorProto::DOUBLE:
    return fromValues(tensor.double_data(), copyAs(double{}));
  case onnx::TensorProto::INT64:
    return fromValues(tensor.int64_data(), copyAs(int64_t{}));
  case onnx::TensorProto::INT32:
    return fromValues(tensor.int32_data(), copyAs(int32_t{}));
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    // 16-bit values travel as int32 bit patterns.
    return fromValues(tensor.int32_data(), copyAs(uint16_t{}));
  case onnx::TensorProto::INT8:
    return fromValues(tensor.int32_data(), copyAs(int8_t{}));
  case onnx::TensorProto::BOOL:
    return fromValues(tensor.int32_data(), [](int32_t v, char *dst) {
      *dst = v != 0 ? 1 : 0;
    });
  default:
    return fail("has no data");
  }
}

Expected<DenseElementsAttr>
strata::frontend::readTensor(const onnx::TensorProto &tensor,
                             RankedTensorType type, StringRef baseDir) {
  Expected<std::string> raw = readTensorBytes(tensor, baseDir);
  if (!raw)
    return raw.takeError();
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> flags;
    for (char c : *raw)
      flags.push_back(c != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(flags));
  }
  bool detectedSplat = false;
  ArrayRef<char> buffer(raw->data(), raw->size());
  if (!DenseElementsAttr::isValidRawBuffer(type, buffer, detectedSplat))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "tensor '" + tensor.name() +
                                       "': raw data does not fit its type");
  return DenseElementsAttr::getFromRawBuffer(type, buffer);
}

static RankedTensorType tensorTypeOf(MLIRContext *context,
                                     const onnx::TensorProto &tensor) {
  Type element = getElementType(context, tensor.data_type());
  if (!element)
    return nullptr;
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  return RankedTensorType::get(shape, element);
}

//===----------------------------------------------------------------------===//
// NodeImporter
//===----------------------------------------------------------------------===//

Value NodeImporter::getInput(unsigned i) {
  return hasInput(i) ? model.lookup(node.input(i)) : Value();
}

DenseElementsAttr NodeImporter::getConstantInput(unsigned i) {
  if (!hasInput(i))
    return nullptr;
  if (DenseElementsAttr attr = model.lookupConstant(node.input(i)))
    return attr;
  DenseElementsAttr attr;
  Value value = getInput(i);
  if (value && matchPattern(value, m_Constant(&attr)))
    return attr;
  return nullptr;
}

FailureOr<SmallVector<int64_t>>
NodeImporter::getConstantInts(unsigned i, StringRef what) {
  DenseElementsAttr attr = getConstantInput(i);
  if (!attr || !isa<IntegerType>(attr.getElementType())) {
    (void)fail(Twine(what) + " must be a compile-time integer tensor");
    return failure();
  }
  // Every such operand is a list by dimension or by output (a shape,
  // axes, starts, pads, split sizes): a longer one is damage, and a splat
  // of 2^40 (ConstantOfShape) would be expanded here value by value.
  constexpr int64_t kMaxIntList = int64_t(1) << 16;
  if (attr.getNumElements() > kMaxIntList) {
    (void)fail(Twine(what) + " holds " + Twine(attr.getNumElements()) +
               " values; at most " + Twine(kMaxIntList) + " are supported");
    return failure();
  }
  SmallVector<int64_t> ints;
  for (const APInt &v : attr.getValues<APInt>())
    ints.push_back(v.getSExtValue());
  return ints;
}

FailureOr<double> NodeImporter::getConstantScalar(unsigned i, StringRef what) {
  DenseElementsAttr attr = getConstantInput(i);
  if (!attr || attr.getNumElements() != 1) {
    (void)fail(Twine(what) + " must be a compile-time scalar");
    return failure();
  }
  if (isa<FloatType>(attr.getElementType()))
    return (*attr.getValues<APFloat>().begin()).convertToDouble();
  return static_cast<double>((*attr.getValues<APInt>().begin()).getSExtValue());
}

bool NodeImporter::isParameter(unsigned i) {
  return hasInput(i) && model.isParameter(node.input(i));
}

bool NodeImporter::isOutputUsed(unsigned i) const {
  return i < static_cast<unsigned>(node.output_size()) &&
         !node.output(i).empty() && model.isUsed(node.output(i));
}

void NodeImporter::setOutput(unsigned i, Value value) {
  if (i < static_cast<unsigned>(node.output_size()) && !node.output(i).empty())
    model.define(node.output(i), value);
}

const onnx::AttributeProto *NodeImporter::findAttr(StringRef name) const {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t NodeImporter::getAttrInt(StringRef name, int64_t defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->i() : defaultValue;
}

double NodeImporter::getAttrFloat(StringRef name, double defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->f() : defaultValue;
}

std::string NodeImporter::getAttrString(StringRef name,
                                        StringRef defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->s() : defaultValue.str();
}

SmallVector<int64_t> NodeImporter::getAttrInts(StringRef name) const {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr)
    return {};
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

LogicalResult NodeImporter::fail(const Twine &message) {
  model.setNodeError(message.str());
  return failure();
}

FailureOr<SmallVector<Value>> NodeImporter::finishOp(Operation *op) {
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    op->erase();
    return failure();
  }
  SmallVector<Value> results;
  if (succeeded(builder.tryFold(op, results)) && !results.empty()) {
    op->erase();
    return results;
  }
  return SmallVector<Value>(op->getResults());
}

FailureOr<Value> NodeImporter::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  return createTyped<graph::ReshapeOp>(type.clone(shape), value);
}

Value NodeImporter::constant(DenseElementsAttr value) {
  return builder.create<graph::ConstantOp>(loc, value);
}

FailureOr<Value> NodeImporter::scalarLike(Value like, double value) {
  Type element = getElementTypeOrSelf(like.getType());
  auto type = RankedTensorType::get({}, element);
  if (auto floatType = dyn_cast<FloatType>(element)) {
    APFloat v(value);
    bool lost;
    v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return constant(DenseElementsAttr::get(type, v));
  }
  // An integer element type: the value truncated toward zero, where int64
  // holds it (converting NaN or a value past it is undefined).
  if (!std::isfinite(value) || value >= 0x1p63 || value < -0x1p63) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "the value " << value << " does not fit the element type "
       << element;
    return fail(os.str());
  }
  return constant(DenseElementsAttr::get(
      type, APInt(element.getIntOrFloatBitWidth(),
                  static_cast<uint64_t>(static_cast<int64_t>(value)), true)));
}

void NodeImporter::setBufferUpdate(unsigned i, Value value) {
  if (hasInput(i) && model.bufferNames.contains(node.input(i)))
    model.bufferUpdates[node.input(i)] = value;
}

//===----------------------------------------------------------------------===//
// ModelImporter
//===----------------------------------------------------------------------===//

Value ModelImporter::lookup(StringRef name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  if (DenseElementsAttr attr = lookupConstant(name)) {
    Value value = builder.create<graph::ConstantOp>(
        NameLoc::get(builder.getStringAttr(name)), attr);
    values[name] = value;
    return value;
  }
  return nullptr;
}

DenseElementsAttr ModelImporter::lookupConstant(StringRef name) {
  auto cached = constantCache.find(name);
  if (cached != constantCache.end())
    return cached->second;
  auto it = initializers.find(name);
  if (it == initializers.end() || parameterNames.contains(name) ||
      bufferNames.contains(name))
    return nullptr;
  RankedTensorType type = tensorTypeOf(&context, *it->second);
  if (!type)
    return nullptr;
  Expected<DenseElementsAttr> attr = readTensor(*it->second, type, baseDir);
  if (!attr) {
    setNodeError(llvm::toString(attr.takeError()));
    return nullptr;
  }
  constantCache[name] = *attr;
  return *attr;
}

Error ModelImporter::checkOpsetAndIrVersion() {
  bool found = false;
  for (const auto &entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") {
      opset = entry.version();
      found = true;
    }
  }
  if (!found)
    return fail("model imports no default-domain ONNX opset");
  // The suggestion: PyTorch 1.13's default for an older model, the newest
  // Strata reads for a newer one (torch.onnx.export's opset_version).
  if (opset < kMinOpset || opset > kMaxOpset)
    return fail(llvm::formatv("opset {0} is outside the supported range "
                              "{1}..{2}; re-export with opset_version={3}",
                              opset, kMinOpset, kMaxOpset,
                              opset < kMinOpset ? 17 : kMaxOpset));
  if (model.ir_version() < 1 || model.ir_version() > kMaxIrVersion)
    return fail(llvm::formatv("IR version {0} is outside the supported range "
                              "1..{1}",
                              model.ir_version(), kMaxIrVersion));
  onnxLibraryKnowsModel = opset <= kOnnxLibraryMaxOpset &&
                          model.ir_version() <= onnx::IR_VERSION;
  return Error::success();
}

Error ModelImporter::checkSupportedOps() {
  const OpHandlerTable &table = getOpHandlerTable();
  SmallVector<std::string> unsupported;
  for (const auto &node : model.graph().node()) {
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (defaultDomain && table.contains(node.op_type()))
      continue;
    std::string type = defaultDomain ? node.op_type()
                                     : node.domain() + "::" + node.op_type();
    std::string name = node.name().empty()
                           ? (node.output_size() ? node.output(0) : "?")
                           : node.name();
    unsupported.push_back(type + " (node '" + name + "')");
  }
  if (!unsupported.empty())
    return fail(llvm::formatv("unsupported ONNX ops ({0}): {1}",
                              unsupported.size(),
                              llvm::join(unsupported, ", ")));
  return Error::success();
}

Error ModelImporter::runChecker() {
  if (!onnxLibraryKnowsModel)
    return Error::success();
  try {
    if (!modelPath.empty())
      onnx::checker::check_model(modelPath);
    else
      onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    std::string message = e.what();
    // ONNX's messages span lines; keep the first that says something.
    std::string first = message.substr(0, message.find('\n'));
    return fail("ONNX checker rejected the model: " + first);
  }
  return Error::success();
}

Expected<RankedTensorType>
ModelImporter::convertValueType(const onnx::ValueInfoProto &info) {
  if (!info.type().has_tensor_type())
    return fail("graph input '" + info.name() + "' is not a tensor");
  const auto &tensorType = info.type().tensor_type();
  Type element = getElementType(&context, tensorType.elem_type());
  if (!element)
    return fail(llvm::formatv("graph input '{0}' has unsupported element type "
                              "{1}",
                              info.name(), dataTypeName(tensorType.elem_type())));
  auto override = options.inputShapes.find(info.name());
  if (override != options.inputShapes.end()) {
    if (tensorType.has_shape() &&
        tensorType.shape().dim_size() !=
            static_cast<int>(override->second.size()))
      return fail(llvm::formatv("--input-shape {0} gives rank {1}, but the "
                                "model's input has rank {2}",
                                info.name(), override->second.size(),
                                tensorType.shape().dim_size()));
    return RankedTensorType::get(override->second, element);
  }
  if (!tensorType.has_shape())
    return fail("graph input '" + info.name() +
                "' has no shape; give one with --input-shape " + info.name() +
                "=DxD...");
  SmallVector<int64_t> shape;
  std::vector<std::string> suggestion;
  int dynamicDim = -1;
  std::string dynamicName;
  for (int d = 0; d < tensorType.shape().dim_size(); ++d) {
    const auto &dim = tensorType.shape().dim(d);
    if (dim.has_dim_value() && dim.dim_value() > 0) {
      shape.push_back(dim.dim_value());
      suggestion.push_back(std::to_string(dim.dim_value()));
      continue;
    }
    if (d == 0 && options.batch) {
      shape.push_back(*options.batch);
      suggestion.push_back(std::to_string(*options.batch));
      continue;
    }
    if (dynamicDim < 0) {
      dynamicDim = d;
      dynamicName = dim.has_dim_param() ? dim.dim_param() : "?";
    }
    suggestion.push_back("N");
    shape.push_back(ShapedType::kDynamic);
  }
  if (dynamicDim >= 0)
    return fail(llvm::formatv(
        "input '{0}' has dynamic dimension {1} ('{2}'); make it static with "
        "--input-shape {0}={3}{4}",
        info.name(), dynamicDim, dynamicName, llvm::join(suggestion, "x"),
        dynamicDim == 0 ? " or --batch N" : ""));
  if (!elementCount(shape))
    return fail(llvm::formatv("graph input '{0}' has shape {1}: more than "
                              "2^40 elements",
                              info.name(), llvm::join(suggestion, "x")));
  return RankedTensorType::get(shape, element);
}

Error ModelImporter::resolveInputShapes() {
  for (const auto &entry : options.inputShapes) {
    bool found = false;
    for (const auto &input : model.graph().input())
      found |= input.name() == entry.first();
    if (!found)
      return fail("--input-shape names '" + entry.first().str() +
                  "', which is not an input of the model");
  }
  for (const auto &input : model.graph().input()) {
    if (initializers.contains(input.name()))
      continue;
    Expected<RankedTensorType> type = convertValueType(input);
    if (!type)
      return type.takeError();
    inputTypes[input.name()] = *type;
  }
  return Error::success();
}

Error ModelImporter::runShapeInference() {
  if (!onnxLibraryKnowsModel)
    return Error::success();
  // Infer on a copy whose inputs carry the resolved static shapes. Large
  // initializers travel as typed inputs without data, so an inline model is
  // not held twice; small ones keep their values for data propagation.
  constexpr int64_t kPropagatedElements = 4096;
  auto isLarge = [](const onnx::TensorProto &init) {
    std::optional<int64_t> elements = elementCount(init.dims());
    return !elements || *elements > kPropagatedElements;
  };
  // Swap the large payloads out of the model around the copy (O(1) each).
  std::vector<std::string> payloads;
  for (auto &init : *model.mutable_graph()->mutable_initializer())
    if (isLarge(init))
      payloads.emplace_back().swap(*init.mutable_raw_data());
  onnx::ModelProto copy;
  copy.CopyFrom(model);
  size_t next = 0;
  for (auto &init : *model.mutable_graph()->mutable_initializer())
    if (isLarge(init))
      payloads[next++].swap(*init.mutable_raw_data());

  copy.mutable_graph()->clear_value_info();
  auto *inits = copy.mutable_graph()->mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i) {
    const onnx::TensorProto &init = inits->Get(i);
    if (!isLarge(init))
      continue;
    bool listed = false;
    for (const auto &input : copy.graph().input())
      listed |= input.name() == init.name();
    if (!listed) {
      auto *input = copy.mutable_graph()->add_input();
      input->set_name(init.name());
      auto *tensorType = input->mutable_type()->mutable_tensor_type();
      tensorType->set_elem_type(init.data_type());
      for (int64_t d : init.dims())
        tensorType->mutable_shape()->add_dim()->set_dim_value(d);
    }
    inits->DeleteSubrange(i, 1);
  }
  for (auto &input : *copy.mutable_graph()->mutable_input()) {
    auto it = inputTypes.find(input.name());
    if (it == inputTypes.end())
      continue;
    auto *shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : it->second.getShape())
      shape->add_dim()->set_dim_value(d);
  }
  try {
    onnx::ShapeInferenceOptions inferenceOptions(/*check_type_val=*/true,
                                                 /*strict_mode_val=*/0,
                                                 /*data_prop_val=*/true);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(),
                                       inferenceOptions);
  } catch (const std::exception &e) {
    std::string message = e.what();
    return fail("ONNX shape inference rejected the model: " +
                message.substr(0, message.find('\n')));
  }
  auto record = [&](const onnx::ValueInfoProto &info) {
    if (!info.type().has_tensor_type() ||
        !info.type().tensor_type().has_shape())
      return;
    SmallVector<int64_t> shape;
    for (const auto &dim : info.type().tensor_type().shape().dim()) {
      if (!dim.has_dim_value())
        return;
      shape.push_back(dim.dim_value());
    }
    onnxShapes[info.name()] = shape;
  };
  for (const auto &info : copy.graph().value_info())
    record(info);
  return Error::success();
}

/// Inputs through which no gradient flows, per op type; every output of a
/// comparison or shape op is non-differentiable.
static bool isDifferentiableEdge(const onnx::NodeProto &node, int input) {
  StringRef type = node.op_type();
  if (llvm::is_contained({"Shape", "Size", "Equal", "Less", "Greater",
                          "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or",
                          "ConstantOfShape", "Range", "ScatterND"},
                         type))
    return false;
  if (llvm::is_contained({"Reshape", "Expand", "Unsqueeze", "Squeeze", "Split",
                          "Trilu", "Dropout", "ReduceSum", "CastLike",
                          "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2",
                          "Pad"},
                         type))
    return input == 0;
  if (type == "Slice")
    return input == 0;
  if (type == "Gather")
    return input == 0;
  if (type == "Where")
    return input != 0;
  if (type == "BatchNormalization")
    return input < 3;
  if (type == "SoftmaxCrossEntropyLoss")
    return input != 1;
  if (type == "Clip")
    return input == 0;
  return true;
}

void ModelImporter::classifyInitializers() {
  const auto &graph = model.graph();
  SmallVector<StringRef> floatInits;
  llvm::StringMap<unsigned> index;
  for (const auto &init : graph.initializer()) {
    initializers[init.name()] = &init;
    Type element = getElementType(&context, init.data_type());
    if (element && isa<FloatType>(element)) {
      index[init.name()] = floatInits.size();
      floatInits.push_back(init.name());
    }
  }
  for (const auto &node : graph.node())
    for (const auto &input : node.input())
      usedNames.insert(input);
  for (const auto &output : graph.output())
    usedNames.insert(output.name());

  // Batch-norm statistics are state the step updates.
  for (const auto &node : graph.node())
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        if (initializers.contains(node.input(i)))
          bufferNames.insert(node.input(i));

  // Forward propagation of "depends differentiably on initializer k".
  llvm::StringMap<llvm::BitVector> reach;
  for (auto [k, name] : llvm::enumerate(floatInits)) {
    llvm::BitVector bits(floatInits.size());
    bits.set(k);
    reach[name] = bits;
  }
  for (const auto &node : graph.node()) {
    llvm::BitVector bits(floatInits.size());
    for (int i = 0; i < node.input_size(); ++i) {
      auto it = reach.find(node.input(i));
      if (it != reach.end() && isDifferentiableEdge(node, i))
        bits |= it->second;
    }
    if (bits.none())
      continue;
    for (const auto &output : node.output())
      reach[output] = bits;
  }
  llvm::BitVector trainable(floatInits.size());
  for (const auto &output : graph.output()) {
    auto it = reach.find(output.name());
    if (it != reach.end())
      trainable |= it->second;
  }
  for (unsigned k : trainable.set_bits())
    if (!bufferNames.contains(floatInits[k]))
      parameterNames.insert(floatInits[k]);
}

/// A node's name for messages: its own, else its first output's.
static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  for (int64_t d : shape) {
    if (!s.empty())
      s += 'x';
    s += std::to_string(d);
  }
  return s;
}

Error ModelImporter::checkAgainstOnnxShapes(const onnx::NodeProto &node) {
  if (!onnxShapesTrusted)
    return Error::success();
  for (const auto &output : node.output()) {
    if (output.empty())
      continue;
    auto expected = onnxShapes.find(output);
    auto it = values.find(output);
    if (expected == onnxShapes.end() || it == values.end())
      continue;
    auto type = cast<RankedTensorType>(it->second.getType());
    if (type.getShape() == ArrayRef<int64_t>(expected->second))
      continue;
    // ONNX 1.12 sizes ceil-mode pools without the rule that the last window
    // must start inside the input (PyTorch's, and ONNX's own since 1.16).
    // Its shapes after such a pool are not to be trusted.
    bool ceilPool = (node.op_type() == "MaxPool" ||
                     node.op_type() == "AveragePool") &&
                    llvm::any_of(node.attribute(), [](const auto &attr) {
                      return attr.name() == "ceil_mode" && attr.i() != 0;
                    });
    if (ceilPool) {
      onnxShapesTrusted = false;
      return Error::success();
    }
    return fail(llvm::formatv("node '{0}' ({1}): imported shape [{2}] of "
                              "'{3}' differs from ONNX shape inference [{4}]",
                              nodeName(node), node.op_type(),
                              shapeString(type.getShape()), output,
                              shapeString(expected->second)));
  }
  return Error::success();
}

Error ModelImporter::importNode(const onnx::NodeProto &node, int64_t opset) {
  const OpHandler &handler = getOpHandlerTable().find(node.op_type())->second;
  std::string name = nodeName(node);
  for (const auto &input : node.input())
    if (!input.empty() && !lookup(input)) {
      if (!nodeError.empty())
        return fail("node '" + name + "' (" + node.op_type() + "): " +
                    nodeError);
      return fail("node '" + name + "' (" + node.op_type() +
                  ") reads '" + input + "', which nothing defines");
    }
  Location loc = NameLoc::get(builder.getStringAttr(name));
  NodeImporter importer(*this, node, builder, loc, opset);

  std::string diagnostic;
  ScopedDiagnosticHandler handler_(&context, [&](Diagnostic &diag) {
    if (diagnostic.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostic = diag.str();
    return success();
  });
  if (failed(handler(importer)) || !nodeError.empty() || !diagnostic.empty()) {
    std::string why = !nodeError.empty() ? nodeError
                      : !diagnostic.empty()
                          ? diagnostic
                          : std::string("could not be imported");
    return fail("node '" + name + "' (" + node.op_type() + "): " + why);
  }
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty() && !values.contains(node.output(i)) &&
        usedNames.contains(node.output(i)))
      return fail("node '" + name + "' (" + node.op_type() + "): output " +
                  std::to_string(i) + " is not supported");
  return checkAgainstOnnxShapes(node);
}

/// Arguments: graph inputs, then parameters, then buffers.
Expected<SmallVector<ModelImporter::MainArgument>>
ModelImporter::collectArguments() {
  SmallVector<MainArgument> args;
  for (const auto &input : model.graph().input()) {
    auto it = inputTypes.find(input.name());
    if (it == inputTypes.end())
      continue;
    args.push_back({input.name(), graph::Role::Input, it->second});
  }
  if (Error e = addInitializerArguments(parameterNames, graph::Role::Parameter,
                                        args))
    return std::move(e);
  if (Error e = addInitializerArguments(bufferNames, graph::Role::Buffer, args))
    return std::move(e);
  return args;
}

/// The initializers in `names`, in the order of the initializer list.
Error ModelImporter::addInitializerArguments(
    const llvm::StringSet<> &names, graph::Role role,
    SmallVectorImpl<MainArgument> &args) {
  for (const auto &init : model.graph().initializer()) {
    if (!names.contains(init.name()))
      continue;
    RankedTensorType type = tensorTypeOf(&context, init);
    if (!type)
      return fail(llvm::formatv("initializer '{0}' has unsupported element "
                                "type {1}",
                                init.name(), dataTypeName(init.data_type())));
    args.push_back({init.name(), role, type});
  }
  return Error::success();
}

/// An empty @main with `args`, each defining its name; the builder is left
/// at the end of its body.
func::FuncOp ModelImporter::createMain(ModuleOp module,
                                       ArrayRef<MainArgument> args) {
  SmallVector<Type> argTypes;
  for (const MainArgument &arg : args)
    argTypes.push_back(arg.type);
  builder.setInsertionPointToEnd(module.getBody());
  auto func = builder.create<func::FuncOp>(
      module.getLoc(), "main", builder.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  // Every argument's attributes at once: one setArgAttr per argument
  // rebuilds the whole list each time (quadratic in the parameters).
  SmallVector<DictionaryAttr> argAttrs;
  for (auto [i, arg] : llvm::enumerate(args)) {
    argAttrs.push_back(graph::roleAndName(&context, arg.role, arg.name));
    values[arg.name] = entry->getArgument(i);
  }
  func.setAllArgAttrs(argAttrs);
  builder.setInsertionPointToEnd(entry);
  return func;
}

/// A fully static declared shape of a graph output must be what was
/// imported (unless the user re-shaped the inputs, which changes the outputs
/// too).
Error ModelImporter::checkDeclaredShape(const onnx::ValueInfoProto &output,
                                        Value value) {
  if (!options.inputShapes.empty() || options.batch ||
      !output.type().tensor_type().has_shape())
    return Error::success();
  SmallVector<int64_t> declared;
  for (const auto &dim : output.type().tensor_type().shape().dim())
    declared.push_back(dim.has_dim_value() ? dim.dim_value()
                                           : ShapedType::kDynamic);
  auto type = cast<RankedTensorType>(value.getType());
  if (!llvm::is_contained(declared, ShapedType::kDynamic) &&
      type.getShape() != ArrayRef<int64_t>(declared))
    return fail(llvm::formatv("graph output '{0}' is declared [{1}] but "
                              "imports as [{2}]",
                              output.name(), shapeString(declared),
                              shapeString(type.getShape())));
  return Error::success();
}

/// Results: graph outputs, then updated buffers.
Error ModelImporter::buildResults(func::FuncOp func) {
  const auto &graph = model.graph();
  SmallVector<Value> results;
  SmallVector<Attribute> outputNames;
  for (const auto &output : graph.output()) {
    Value value = lookup(output.name());
    if (!value)
      return fail("graph output '" + output.name() + "' is never defined");
    if (Error e = checkDeclaredShape(output, value))
      return e;
    results.push_back(value);
    outputNames.push_back(builder.getStringAttr(output.name()));
  }
  SmallVector<std::pair<StringRef, Value>> updates(bufferUpdates.begin(),
                                                   bufferUpdates.end());
  for (auto &[name, value] : updates)
    results.push_back(value);
  builder.create<func::ReturnOp>(func.getLoc(), results);
  func.setFunctionType(builder.getFunctionType(
      func.getArgumentTypes(), ValueRange(results).getTypes()));
  func->setAttr(graph::kOutputNamesAttrName, builder.getArrayAttr(outputNames));
  for (auto [i, update] : llvm::enumerate(updates)) {
    unsigned index = graph.output_size() + i;
    func.setResultAttr(index, graph::kNameAttrName,
                       builder.getStringAttr(update.first));
    func.setResultAttr(index, graph::kRoleAttrName,
                       graph::RoleAttr::get(&context, graph::Role::Buffer));
  }
  for (unsigned i = 0; i < static_cast<unsigned>(graph.output_size()); ++i) {
    func.setResultAttr(i, graph::kNameAttrName, outputNames[i]);
    func.setResultAttr(i, graph::kRoleAttrName,
                       graph::RoleAttr::get(&context, graph::Role::Output));
  }
  return Error::success();
}

Error ModelImporter::verifyModule(ModuleOp module) {
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diagnostic.empty())
      diagnostic = diag.str();
    return success();
  });
  if (failed(mlir::verify(module)))
    return fail("internal error: imported IR does not verify: " + diagnostic);
  return Error::success();
}

Expected<OwningOpRef<ModuleOp>> ModelImporter::run() {
  if (!model.has_graph())
    return fail("model has no graph");
  if (Error e = checkOpsetAndIrVersion())
    return std::move(e);
  if (std::string why = inlineLocalFunctions(model); !why.empty())
    return fail(why);
  if (Error e = checkSupportedOps())
    return std::move(e);
  if (std::string why = checkGraphStructure(model.graph(), opset);
      !why.empty())
    return fail(why);
  if (Error e = runChecker())
    return std::move(e);
  if (std::string why = findMalformedTensor(model.graph()); !why.empty())
    return fail(why);
  classifyInitializers();
  if (Error e = resolveInputShapes())
    return std::move(e);
  if (Error e = runShapeInference())
    return std::move(e);

  const auto &graph = model.graph();
  Location moduleLoc = modelPath.empty()
                           ? builder.getUnknownLoc()
                           : FileLineColLoc::get(&context, modelPath, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(moduleLoc);
  if (!graph.name().empty())
    (*module)->setAttr("graph.model", builder.getStringAttr(graph.name()));

  Expected<SmallVector<MainArgument>> args = collectArguments();
  if (!args)
    return args.takeError();
  func::FuncOp func = createMain(*module, *args);
  for (const auto &node : graph.node())
    if (Error e = importNode(node, opset))
      return std::move(e);
  if (Error e = buildResults(func))
    return std::move(e);
  if (Error e = verifyModule(*module))
    return std::move(e);
  return std::move(module);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

static Expected<OwningOpRef<ModuleOp>>
importModel(MLIRContext &context, onnx::ModelProto &model, std::string baseDir,
            std::string path, const ImportOptions &options) {
  context.loadDialect<func::FuncDialect, graph::GraphDialect>();
  try {
    installOnnxInferenceGuards();
    ModelImporter importer(context, model, std::move(baseDir), std::move(path),
                           options);
    return importer.run();
  } catch (const std::exception &e) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   std::string("import failed: ") + e.what());
  }
}

/// Parses ONNX text into `model`.
static Error parseOnnxText(StringRef text, onnx::ModelProto &model) {
  try {
    // ONNX's parser (1.12) has no comments; blank whole-line `//` comments
    // (lit RUN/CHECK lines) and keep the line numbers.
    std::string copy;
    SmallVector<StringRef> lines;
    text.split(lines, '\n');
    for (StringRef line : lines) {
      if (!line.ltrim().starts_with("//"))
        copy += line;
      copy += '\n';
    }
    onnx::OnnxParser parser(copy.c_str());
    auto status = parser.Parse(model);
    if (!status.IsOK()) {
      std::string message = status.ErrorMessage();
      std::replace(message.begin(), message.end(), '\n', ' ');
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cannot parse ONNX text: " + message);
    }
  } catch (const std::exception &e) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   std::string("cannot parse ONNX text: ") +
                                       e.what());
  }
  return Error::success();
}

/// Reads the model at `path` (binary, or text for .onnxtxt) into `model`
/// and sets `baseDir` to the folder its external data is relative to.
static Error loadModel(StringRef path, onnx::ModelProto &model,
                       std::string &baseDir) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read '" + path +
                                                          "': " +
                                                          buffer.getError().message());
  SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  baseDir = dir.empty() ? "." : dir.str().str();
  if (path.ends_with(".onnxtxt"))
    return parseOnnxText((*buffer)->getBuffer(), model);
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty() || !model.ParseFromArray(bytes.data(), bytes.size()) ||
      !model.has_graph())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "'" + path + "' is not a valid ONNX model (truncated or not ONNX "
                     "protobuf)");
  return Error::success();
}

Expected<OwningOpRef<ModuleOp>>
strata::frontend::importOnnxText(MLIRContext &context, StringRef text,
                                 const ImportOptions &options) {
  onnx::ModelProto model;
  if (Error e = parseOnnxText(text, model))
    return std::move(e);
  return importModel(context, model, ".", "", options);
}

Expected<OwningOpRef<ModuleOp>>
strata::frontend::importOnnxModel(MLIRContext &context,
                                  onnx::ModelProto &model, StringRef baseDir,
                                  const ImportOptions &options) {
  return importModel(context, model, baseDir.empty() ? "." : baseDir.str(), "",
                     options);
}

Expected<OwningOpRef<ModuleOp>>
strata::frontend::importOnnxFile(MLIRContext &context, StringRef path,
                                 const ImportOptions &options) {
  onnx::ModelProto model;
  std::string baseDir;
  if (Error e = loadModel(path, model, baseDir))
    return std::move(e);
  // ONNX's checker reads a text model's path as binary: check it in memory.
  std::string checkedPath = path.ends_with(".onnxtxt") ? "" : path.str();
  return importModel(context, model, baseDir, checkedPath, options);
}

namespace {
class OnnxWeightsImpl : public OnnxWeights {
public:
  onnx::ModelProto model;
  std::string baseDir;
  llvm::StringMap<const onnx::TensorProto *> byName;

  Expected<std::string> read(StringRef name) override {
    auto it = byName.find(name);
    if (it == byName.end())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the model has no initializer '" + name +
                                         "'");
    try {
      return readTensorBytes(*it->second, baseDir);
    } catch (const std::exception &e) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "reading '" + name + "': " + e.what());
    }
  }
};
} // namespace

Expected<std::unique_ptr<OnnxWeights>>
strata::frontend::openOnnxWeights(StringRef path) {
  auto weights = std::make_unique<OnnxWeightsImpl>();
  try {
    if (Error e = loadModel(path, weights->model, weights->baseDir))
      return std::move(e);
  } catch (const std::exception &e) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   std::string("cannot read weights: ") +
                                       e.what());
  }
  for (const auto &init : weights->model.graph().initializer())
    weights->byName[init.name()] = &init;
  return std::unique_ptr<OnnxWeights>(std::move(weights));
}

std::vector<OnnxOpSupport> strata::frontend::getSupportedOnnxOpsets() {
  std::vector<OnnxOpSupport> ops;
  for (const std::string &op : getSupportedOnnxOps()) {
    int64_t since = kMaxOpset + 1;
    for (const OnnxOpForm &form : getOnnxOpForms())
      if (form.op == op)
        since = std::min(since, form.since);
    ops.push_back({op, since, kMaxOpset});
  }
  return ops;
}

std::vector<std::string> strata::frontend::getSupportedOnnxOps() {
  std::vector<std::string> ops;
  for (const auto &entry : getOpHandlerTable())
    ops.push_back(entry.first().str());
  std::sort(ops.begin(), ops.end());
  return ops;
}

const OpHandlerTable &strata::frontend::getOpHandlerTable() {
  static const OpHandlerTable table = [] {
    OpHandlerTable t;
    registerElementwiseHandlers(t);
    registerShapeHandlers(t);
    registerNeuralNetHandlers(t);
    return t;
  }();
  return table;
}

Error strata::frontend::parseInputShapeFlag(StringRef flag,
                                            ImportOptions &options) {
  auto [name, dims] = flag.rsplit('=');
  if (name.empty() || dims.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--input-shape expects NAME=D0xD1x..., got '" +
                                       flag + "'");
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t d;
    if (part.getAsInteger(10, d) || d <= 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--input-shape " + flag +
                                         ": dimensions must be positive "
                                         "integers separated by 'x'");
    shape.push_back(d);
  }
  options.inputShapes[name] = shape;
  return Error::success();
}
