//===- NeuralNetOps.cpp - Handlers for ONNX neural-network ops ------------===//

#include "../NodeImporter.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace strata;
using namespace strata::frontend;
namespace g = strata::graph;

namespace {

LogicalResult importMatMul(NodeImporter &n) {
  Value a = n.getInput(0), b = n.getInput(1);
  auto aType = cast<RankedTensorType>(a.getType());
  auto bType = cast<RankedTensorType>(b.getType());
  // numpy semantics for 1-D operands: promote, multiply, then drop the dim.
  bool vecA = aType.getRank() == 1, vecB = bType.getRank() == 1;
  if (vecA) {
    FailureOr<Value> r = n.reshape(a, {1, aType.getDimSize(0)});
    if (failed(r))
      return failure();
    a = *r;
  }
  if (vecB) {
    FailureOr<Value> r = n.reshape(b, {bType.getDimSize(0), 1});
    if (failed(r))
      return failure();
    b = *r;
  }
  FailureOr<Value> product = n.create<g::MatmulOp>({a, b});
  if (failed(product))
    return failure();
  if (vecA || vecB) {
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(product->getType()).getShape());
    if (vecB)
      shape.erase(shape.end() - 1);
    if (vecA)
      shape.erase(shape.end() - (vecB ? 1 : 2));
    return n.setResult(n.reshape(*product, shape));
  }
  return n.setResult(product);
}

LogicalResult importGemm(NodeImporter &n) {
  Value a = n.getInput(0), b = n.getInput(1);
  // ONNX's inference reports other ranks, but the import goes on without it.
  if (n.getInputType(0).getRank() != 2 || n.getInputType(1).getRank() != 2)
    return n.fail("A and B must be matrices (rank 2)");
  Value c = n.hasInput(2) ? n.getInput(2) : Value();
  double alpha = n.getAttrFloat("alpha", 1.0), beta = n.getAttrFloat("beta", 1.0);
  bool transA = n.getAttrInt("transA", 0), transB = n.getAttrInt("transB", 0);
  if (transA) {
    FailureOr<Value> t =
        n.create<g::TransposeOp>({a}, {n.i64ArrayAttr("perm", {1, 0})});
    if (failed(t))
      return failure();
    a = *t;
  }
  if (alpha != 1.0) {
    FailureOr<Value> factor = n.scalarLike(a, alpha);
    if (failed(factor))
      return failure();
    FailureOr<Value> scaled = n.create<g::MulOp>({a, *factor});
    if (failed(scaled))
      return failure();
    a = *scaled;
  }
  // linear takes a rank-1 bias; other shapes of C are added after.
  Value bias;
  if (c && beta == 1.0 && cast<RankedTensorType>(c.getType()).getRank() == 1 &&
      cast<RankedTensorType>(c.getType()).getDimSize(0) ==
          cast<RankedTensorType>(b.getType()).getDimSize(transB ? 0 : 1))
    bias = c;
  SmallVector<Value> operands{a, b};
  if (bias)
    operands.push_back(bias);
  FailureOr<Value> y = n.create<g::LinearOp>(
      operands, {n.boolAttr("transpose_weight", transB)});
  if (failed(y))
    return failure();
  if (c && !bias) {
    Value addend = c;
    if (beta != 1.0) {
      FailureOr<Value> factor = n.scalarLike(c, beta);
      if (failed(factor))
        return failure();
      FailureOr<Value> scaled = n.create<g::MulOp>({c, *factor});
      if (failed(scaled))
        return failure();
      addend = *scaled;
    }
    y = n.create<g::AddOp>({*y, addend});
  }
  return n.setResult(y);
}

LogicalResult importLayerNorm(NodeImporter &n) {
  RankedTensorType type = n.getInputType(0);
  int64_t axis = n.getAttrInt("axis", -1);
  if (axis < 0)
    axis += type.getRank();
  if (n.isOutputUsed(1) || n.isOutputUsed(2))
    return n.fail("the Mean and InvStdDev outputs are not supported");
  SmallVector<Value> operands{n.getInput(0), n.getInput(1)};
  if (n.hasInput(2))
    operands.push_back(n.getInput(2));
  return n.setResult(n.create<g::LayerNormOp>(
                          operands, {n.i64Attr("axis", axis),
                                     n.f64Attr("epsilon",
                                               n.getAttrFloat("epsilon", 1e-5))}));
}

LogicalResult importBatchNorm(NodeImporter &n) {
  bool training = n.getAttrInt("training_mode", 0) != 0;
  // ONNX: running = running * momentum + batch * (1 - momentum).
  double momentum = 1.0 - n.getAttrFloat("momentum", 0.9);
  SmallVector<Value> operands;
  for (unsigned i = 0; i < 5; ++i)
    operands.push_back(n.getInput(i));
  FailureOr<SmallVector<Value>> results = n.createInferredMulti<g::BatchNormOp>(
      operands, {n.f64Attr("epsilon", n.getAttrFloat("epsilon", 1e-5)),
                 n.f64Attr("momentum", momentum),
                 n.boolAttr("training", training)});
  if (failed(results))
    return failure();
  for (unsigned i = 0; i < 3; ++i)
    n.setOutput(i, (*results)[i]);
  if (training)
    for (unsigned i = 0; i < 2; ++i)
      n.setBufferUpdate(3 + i, (*results)[1 + i]);
  return success();
}

/// (x - mean) / sqrt(var + epsilon), the statistics over `axes` of x.
FailureOr<Value> normalizeOver(NodeImporter &n, Value x,
                               ArrayRef<int64_t> axes, double epsilon) {
  SmallVector<NamedAttribute> reduce{n.i64ArrayAttr("axes", axes),
                                     n.boolAttr("keepdims", true)};
  FailureOr<Value> mean = n.create<g::ReduceMeanOp>({x}, reduce);
  if (failed(mean))
    return failure();
  FailureOr<Value> centered = n.create<g::SubOp>({x, *mean});
  if (failed(centered))
    return failure();
  FailureOr<Value> squared = n.create<g::MulOp>({*centered, *centered});
  if (failed(squared))
    return failure();
  FailureOr<Value> var = n.create<g::ReduceMeanOp>({*squared}, reduce);
  if (failed(var))
    return failure();
  FailureOr<Value> eps = n.scalarLike(x, epsilon);
  if (failed(eps))
    return failure();
  FailureOr<Value> shifted = n.create<g::AddOp>({*var, *eps});
  if (failed(shifted))
    return failure();
  FailureOr<Value> std = n.createTyped<g::SqrtOp>(shifted->getType(), *shifted);
  if (failed(std))
    return failure();
  return n.create<g::DivOp>({*centered, *std});
}

/// normalized * scale + bias, scale and bias (inputs 1 and 2) reshaped to
/// `shape`.
FailureOr<Value> applyAffine(NodeImporter &n, FailureOr<Value> normalized,
                             ArrayRef<int64_t> shape) {
  FailureOr<Value> scale = n.reshape(n.getInput(1), shape);
  FailureOr<Value> bias = n.reshape(n.getInput(2), shape);
  if (failed(normalized) || failed(scale) || failed(bias))
    return failure();
  FailureOr<Value> scaled = n.create<g::MulOp>({*normalized, *scale});
  if (failed(scaled))
    return failure();
  return n.create<g::AddOp>({*scaled, *bias});
}

/// InstanceNormalization: per sample and channel over the spatial dims,
/// y = (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c].
LogicalResult importInstanceNorm(NodeImporter &n) {
  Value x = n.getInput(0);
  RankedTensorType type = n.getInputType(0);
  int64_t rank = type.getRank();
  if (rank < 3)
    return n.fail("input must have rank >= 3");
  // Per-channel operands as [C, 1, ...] to broadcast over the spatial dims.
  SmallVector<int64_t> channelShape(rank - 1, 1);
  channelShape[0] = type.getDimSize(1);
  FailureOr<Value> normalized =
      normalizeOver(n, x, llvm::to_vector(llvm::seq<int64_t>(2, rank)),
                    n.getAttrFloat("epsilon", 1e-5));
  return n.setResult(applyAffine(n, normalized, channelShape));
}

/// GroupNormalization: x [N, C, ...] viewed as [N, G, C/G * ...] and
/// normalized over its last dim. Scale and bias are per channel ([C]) from
/// opset 21; opset 18 gave them per group ([G]).
LogicalResult importGroupNorm(NodeImporter &n) {
  Value x = n.getInput(0);
  RankedTensorType type = n.getInputType(0);
  int64_t rank = type.getRank();
  if (rank < 3)
    return n.fail("input must have rank >= 3");
  if (!isa<FloatType>(type.getElementType()))
    return n.fail("the input must be a float tensor");
  int64_t channels = type.getDimSize(1);
  int64_t groups = n.getAttrInt("num_groups", 0);
  if (groups <= 0 || channels % groups != 0)
    return n.fail(llvm::formatv("num_groups ({0}) must be positive and "
                                "divide the {1} channels",
                                groups, channels)
                      .str());
  bool perChannel = n.getOpset() >= 21;
  int64_t affineSize = perChannel ? channels : groups;
  for (unsigned i : {1u, 2u})
    if (n.getInputType(i).getNumElements() != affineSize ||
        n.getInputType(i).getRank() != 1)
      return n.fail(llvm::formatv("scale and bias must have shape [{0}] (one "
                                  "per {1} at opset {2})",
                                  affineSize,
                                  perChannel ? "channel" : "group",
                                  n.getOpset())
                        .str());
  int64_t batch = type.getDimSize(0);
  FailureOr<Value> grouped =
      n.reshape(x, {batch, groups, type.getNumElements() / (batch * groups)});
  if (failed(grouped))
    return failure();
  FailureOr<Value> normalized =
      normalizeOver(n, *grouped, {2}, n.getAttrFloat("epsilon", 1e-5));
  if (failed(normalized))
    return failure();
  if (!perChannel) {
    FailureOr<Value> result = applyAffine(n, normalized, {groups, 1});
    if (failed(result))
      return failure();
    return n.setResult(n.reshape(*result, type.getShape()));
  }
  FailureOr<Value> restored = n.reshape(*normalized, type.getShape());
  SmallVector<int64_t> channelShape(rank - 1, 1);
  channelShape[0] = channels;
  return n.setResult(applyAffine(n, restored, channelShape));
}

template <typename OpTy>
LogicalResult importSoftmax(NodeImporter &n) {
  RankedTensorType type = n.getInputType(0);
  int64_t axis = n.getAttrInt("axis", -1);
  if (axis < 0)
    axis += type.getRank();
  return n.setResult(n.createTyped<OpTy>(type, n.getInput(0),
                                          {n.i64Attr("axis", axis)}));
}

LogicalResult importDropout(NodeImporter &n) {
  Value x = n.getInput(0);
  double ratio = 0.5;
  if (n.hasInput(1)) {
    FailureOr<double> r = n.getConstantScalar(1, "ratio");
    if (failed(r))
      return failure();
    ratio = *r;
  }
  bool training = false;
  if (n.hasInput(2)) {
    FailureOr<double> t = n.getConstantScalar(2, "training_mode");
    if (failed(t))
      return failure();
    training = *t != 0;
  }
  auto maskType = cast<RankedTensorType>(x.getType())
                      .clone(n.getBuilder().getI1Type());
  if (!training || ratio == 0.0) {
    n.setOutput(0, x);
    n.setOutput(1, n.constant(DenseElementsAttr::get(maskType, true)));
    return success();
  }
  FailureOr<SmallVector<Value>> results = n.createInferredMulti<g::DropoutOp>(
      {x}, {n.f64Attr("ratio", ratio)});
  if (failed(results))
    return failure();
  n.setOutput(0, (*results)[0]);
  n.setOutput(1, (*results)[1]);
  return success();
}

/// Pads from `auto_pad` or `pads`, begin pads then end pads.
FailureOr<SmallVector<int64_t>>
getWindowPads(NodeImporter &n, ArrayRef<int64_t> spatial,
              ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
              ArrayRef<int64_t> dilations) {
  size_t rank = spatial.size();
  // Checked before the arithmetic below and the op's own: a stride of 0
  // divided by zero, values near 2^63 overflowed (found by fuzz-onnx-import).
  constexpr int64_t kMaxWindow = int64_t(1) << 31;
  if (kernel.size() != rank || strides.size() != rank ||
      dilations.size() != rank) {
    (void)n.fail(llvm::formatv("window attributes need one entry per spatial "
                               "dim ({0}) and pads two",
                               rank));
    return failure();
  }
  for (ArrayRef<int64_t> values : {kernel, strides, dilations})
    for (int64_t v : values)
      if (v < 1 || v > kMaxWindow) {
        (void)n.fail("kernel, strides and dilations must be in 1..2^31");
        return failure();
      }
  std::string autoPad = n.getAttrString("auto_pad", "NOTSET");
  SmallVector<int64_t> pads = n.getAttrInts("pads");
  if (autoPad == "NOTSET") {
    if (pads.empty())
      pads.assign(2 * rank, 0);
    if (pads.size() != 2 * rank) {
      (void)n.fail("pads needs two entries per spatial dim");
      return failure();
    }
    for (int64_t v : pads)
      if (v < 0 || v > kMaxWindow) {
        (void)n.fail("pads must be in 0..2^31");
        return failure();
      }
    return pads;
  }
  pads.assign(2 * rank, 0);
  if (autoPad == "VALID")
    return pads;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER") {
    (void)n.fail("unknown auto_pad '" + autoPad + "'");
    return failure();
  }
  for (size_t i = 0; i < rank; ++i) {
    int64_t out = (spatial[i] + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(
        (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - spatial[i],
        0);
    int64_t small = total / 2, large = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : large;
    pads[i + rank] = autoPad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

SmallVector<int64_t> getAttrIntsOr(NodeImporter &n, StringRef name,
                                   size_t count, int64_t fill) {
  SmallVector<int64_t> v = n.getAttrInts(name);
  if (v.empty())
    v.assign(count, fill);
  return v;
}

LogicalResult importConv(NodeImporter &n) {
  RankedTensorType input = n.getInputType(0), weight = n.getInputType(1);
  if (input.getRank() < 3)
    return n.fail("input must have rank >= 3");
  // The kernel's shape is read from W's dims 2.. below.
  if (weight.getRank() != input.getRank())
    return n.fail("W must have the rank of X");
  size_t spatial = input.getRank() - 2;
  SmallVector<int64_t> kernel = n.getAttrInts("kernel_shape");
  if (kernel.empty())
    kernel.assign(weight.getShape().begin() + 2, weight.getShape().end());
  SmallVector<int64_t> strides = getAttrIntsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = getAttrIntsOr(n, "dilations", spatial, 1);
  FailureOr<SmallVector<int64_t>> pads = getWindowPads(
      n, input.getShape().drop_front(2), kernel, strides, dilations);
  if (failed(pads))
    return failure();
  SmallVector<Value> operands{n.getInput(0), n.getInput(1)};
  if (n.hasInput(2))
    operands.push_back(n.getInput(2));
  return n.setResult(n.create<g::ConvOp>(operands, {n.i64ArrayAttr("strides", strides),
                                        n.i64ArrayAttr("pads", *pads),
                                        n.i64ArrayAttr("dilations", dilations),
                                        n.i64Attr("groups",
                                                  n.getAttrInt("group", 1))}));
}

template <typename OpTy>
LogicalResult importPool(NodeImporter &n) {
  RankedTensorType input = n.getInputType(0);
  if (input.getRank() < 3)
    return n.fail("input must have rank >= 3");
  size_t spatial = input.getRank() - 2;
  SmallVector<int64_t> kernel = n.getAttrInts("kernel_shape");
  if (kernel.size() != spatial)
    return n.fail("kernel_shape needs one entry per spatial dim");
  SmallVector<int64_t> strides = getAttrIntsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = getAttrIntsOr(n, "dilations", spatial, 1);
  FailureOr<SmallVector<int64_t>> pads = getWindowPads(
      n, input.getShape().drop_front(2), kernel, strides, dilations);
  if (failed(pads))
    return failure();
  SmallVector<NamedAttribute> attrs{
      n.i64ArrayAttr("kernel_shape", kernel), n.i64ArrayAttr("strides", strides),
      n.i64ArrayAttr("pads", *pads),
      n.boolAttr("ceil_mode", n.getAttrInt("ceil_mode", 0) != 0)};
  if constexpr (std::is_same_v<OpTy, g::MaxPoolOp>) {
    if (n.isOutputUsed(1))
      return n.fail("the Indices output is not supported");
    attrs.push_back(n.i64ArrayAttr("dilations", dilations));
  } else {
    if (llvm::any_of(dilations, [](int64_t d) { return d != 1; }))
      return n.fail("dilated average pooling is not supported");
    attrs.push_back(n.boolAttr("count_include_pad",
                               n.getAttrInt("count_include_pad", 0) != 0));
  }
  return n.setResult(n.create<OpTy>({n.getInput(0)}, attrs));
}

template <typename OpTy>
LogicalResult importGlobalPool(NodeImporter &n) {
  int64_t rank = n.getInputType(0).getRank();
  if (rank < 3)
    return n.fail("input must have rank >= 3");
  return n.setResult(n.create<OpTy>(
                          {n.getInput(0)},
                          {n.i64ArrayAttr("axes", llvm::to_vector(llvm::seq<int64_t>(2, rank))),
                           n.boolAttr("keepdims", true)}));
}

LogicalResult importSoftmaxCrossEntropy(NodeImporter &n) {
  SmallVector<Value> operands{n.getInput(0), n.getInput(1)};
  if (n.hasInput(2))
    operands.push_back(n.getInput(2));
  std::string reductionName = n.getAttrString("reduction", "mean");
  std::optional<g::Reduction> reduction = g::symbolizeReduction(reductionName);
  if (!reduction)
    return n.fail("reduction '" + reductionName + "' is not supported");
  SmallVector<NamedAttribute> attrs{n.attr(
      "reduction",
      g::ReductionAttr::get(n.getBuilder().getContext(), *reduction))};
  if (n.hasAttr("ignore_index"))
    attrs.push_back(n.i64Attr("ignore_index", n.getAttrInt("ignore_index", 0)));
  if (failed(n.setResult(n.create<g::CrossEntropyOp>(operands, attrs))))
    return failure();
  if (n.isOutputUsed(1)) {
    Value scores = n.getInput(0);
    FailureOr<Value> logProb = n.createTyped<g::LogSoftmaxOp>(
        scores.getType(), scores, {n.i64Attr("axis", 1)});
    if (failed(logProb))
      return failure();
    n.setOutput(1, *logProb);
  }
  return success();
}

} // namespace

void strata::frontend::registerNeuralNetHandlers(OpHandlerTable &table) {
  table["MatMul"] = importMatMul;
  table["Gemm"] = importGemm;
  table["LayerNormalization"] = importLayerNorm;
  table["BatchNormalization"] = importBatchNorm;
  table["InstanceNormalization"] = importInstanceNorm;
  table["GroupNormalization"] = importGroupNorm;
  table["Softmax"] = importSoftmax<g::SoftmaxOp>;
  table["LogSoftmax"] = importSoftmax<g::LogSoftmaxOp>;
  table["Dropout"] = importDropout;
  table["Conv"] = importConv;
  table["MaxPool"] = importPool<g::MaxPoolOp>;
  table["AveragePool"] = importPool<g::AvgPoolOp>;
  table["GlobalAveragePool"] = importGlobalPool<g::ReduceMeanOp>;
  table["GlobalMaxPool"] = importGlobalPool<g::ReduceMaxOp>;
  table["SoftmaxCrossEntropyLoss"] = importSoftmaxCrossEntropy;
}
