//===- ShapeOps.cpp - Handlers for shape and data-movement ONNX ops -------===//
//
// Shapes are static, so Shape/Size become constants and every shape operand
// (Reshape's target, Slice's bounds, Unsqueeze's axes, ...) must fold to a
// constant; one that does not is reported with the node's name.
//
//===----------------------------------------------------------------------===//

#include "../NodeImporter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using llvm::Expected;
using namespace strata;
using namespace strata::frontend;
namespace g = strata::graph;

namespace {

/// The product of `dims`, INT64_MAX when it would overflow (a target shape
/// from a model's constants can hold any value; found by fuzz-onnx-import),
/// which no tensor's element count equals.
int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(p, d, &p))
      return std::numeric_limits<int64_t>::max();
  return p;
}

/// Normalizes a possibly negative axis; fails the node if out of range.
FailureOr<int64_t> normalizeAxis(NodeImporter &n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    (void)n.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

LogicalResult setReshaped(NodeImporter &n, Value x, ArrayRef<int64_t> shape) {
  return n.setResult(n.reshape(x, shape));
}

LogicalResult importReshape(NodeImporter &n) {
  Value x = n.getInput(0);
  ArrayRef<int64_t> in = n.getInputType(0).getShape();
  FailureOr<SmallVector<int64_t>> target =
      n.getConstantInts(1, "the target shape");
  if (failed(target))
    return failure();
  bool allowZero = n.getAttrInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int inferred = -1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return n.fail("target dim " + std::to_string(i) +
                      " copies an input dim that does not exist");
      shape.push_back(in[i]);
    } else if (d == -1) {
      if (inferred >= 0)
        return n.fail("target shape has more than one -1");
      inferred = i;
      shape.push_back(1);
    } else if (d < 0) {
      return n.fail("target dim " + std::to_string(d) + " is negative");
    } else {
      shape.push_back(d);
    }
  }
  int64_t total = product(in);
  if (inferred >= 0) {
    int64_t known = product(shape);
    if (known == 0 || total % known != 0)
      return n.fail("cannot infer the -1 dim of the target shape");
    shape[inferred] = total / known;
  }
  if (product(shape) != total)
    return n.fail("target shape does not hold the input's " +
                  std::to_string(total) + " elements");
  return setReshaped(n, x, shape);
}

LogicalResult importFlatten(NodeImporter &n) {
  ArrayRef<int64_t> in = n.getInputType(0).getShape();
  int64_t rank = in.size();
  int64_t axis = n.getAttrInt("axis", 1);
  if (axis < -rank || axis > rank)
    return n.fail("axis out of range");
  if (axis < 0)
    axis += rank;
  return setReshaped(n, n.getInput(0),
                     {product(in.take_front(axis)), product(in.drop_front(axis))});
}

/// The axes of Squeeze/Unsqueeze: an input from opset 13 on.
FailureOr<SmallVector<int64_t>> getAxes(NodeImporter &n, unsigned inputIndex) {
  return n.getConstantIntsOr(inputIndex, "axes", n.getAttrInts("axes"));
}

LogicalResult importUnsqueeze(NodeImporter &n) {
  ArrayRef<int64_t> in = n.getInputType(0).getShape();
  FailureOr<SmallVector<int64_t>> axes = getAxes(n, 1);
  if (failed(axes))
    return failure();
  int64_t rank = in.size() + axes->size();
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    FailureOr<int64_t> a = normalizeAxis(n, axis, rank);
    if (failed(a))
      return failure();
    if (inserted[*a])
      return n.fail("axis " + std::to_string(axis) + " repeats");
    inserted[*a] = true;
  }
  SmallVector<int64_t> shape;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[d] ? 1 : in[next++]);
  return setReshaped(n, n.getInput(0), shape);
}

LogicalResult importSqueeze(NodeImporter &n) {
  ArrayRef<int64_t> in = n.getInputType(0).getShape();
  FailureOr<SmallVector<int64_t>> axes = getAxes(n, 1);
  if (failed(axes))
    return failure();
  SmallVector<bool> removed(in.size(), false);
  if (axes->empty()) {
    for (auto [d, size] : llvm::enumerate(in))
      removed[d] = size == 1;
  }
  for (int64_t axis : *axes) {
    FailureOr<int64_t> a = normalizeAxis(n, axis, in.size());
    if (failed(a))
      return failure();
    if (in[*a] != 1)
      return n.fail("cannot squeeze dim " + std::to_string(*a) + " of size " +
                    std::to_string(in[*a]));
    removed[*a] = true;
  }
  SmallVector<int64_t> shape;
  for (auto [d, size] : llvm::enumerate(in))
    if (!removed[d])
      shape.push_back(size);
  return setReshaped(n, n.getInput(0), shape);
}

LogicalResult importTranspose(NodeImporter &n) {
  int64_t rank = n.getInputType(0).getRank();
  SmallVector<int64_t> perm = n.getAttrInts("perm");
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  return n.setResult(n.create<g::TransposeOp>({n.getInput(0)}, {n.i64ArrayAttr("perm", perm)}));
}

LogicalResult importConcat(NodeImporter &n) {
  SmallVector<Value> inputs;
  for (unsigned i = 0; i < n.getNumInputs(); ++i)
    inputs.push_back(n.getInput(i));
  int64_t rank = cast<RankedTensorType>(inputs.front().getType()).getRank();
  FailureOr<int64_t> axis = normalizeAxis(n, n.getAttrInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  return n.setResult(n.create<g::ConcatOp>(inputs, {n.i64Attr("axis", *axis)}));
}

LogicalResult importSplit(NodeImporter &n) {
  RankedTensorType type = n.getInputType(0);
  FailureOr<int64_t> axis =
      normalizeAxis(n, n.getAttrInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  // From opset 18 a split without sizes must say how many parts it makes.
  if (n.getOpset() >= 18 && n.hasInput(1) == n.hasAttr("num_outputs"))
    return n.fail("give either the split input or num_outputs, not both or "
                  "neither");
  if (n.hasAttr("num_outputs") &&
      n.getAttrInt("num_outputs", 0) != int64_t(n.getNumOutputs()))
    return n.fail(llvm::formatv("num_outputs is {0} but the node has {1} "
                                "outputs",
                                n.getAttrInt("num_outputs", 0),
                                n.getNumOutputs())
                      .str());
  if (n.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> split = n.getConstantInts(1, "split");
    if (failed(split))
      return failure();
    sizes = *split;
  } else if (n.hasAttr("split")) {
    sizes = n.getAttrInts("split");
  } else {
    int64_t parts = n.getAttrInt("num_outputs", n.getNumOutputs());
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t start = 0; start < dim; start += chunk)
      sizes.push_back(std::min(chunk, dim - start));
  }
  if (sizes.size() != n.getNumOutputs())
    return n.fail("split sizes do not match the number of outputs");
  SmallVector<Type> types;
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    types.push_back(type.clone(shape));
  }
  FailureOr<SmallVector<Value>> results = n.createMulti<g::SplitOp>(
      types, {n.getInput(0)}, {n.i64Attr("axis", *axis)});
  if (failed(results))
    return failure();
  for (auto [i, v] : llvm::enumerate(*results))
    n.setOutput(i, v);
  return success();
}

LogicalResult importSlice(NodeImporter &n) {
  RankedTensorType type = n.getInputType(0);
  int64_t rank = type.getRank();
  FailureOr<SmallVector<int64_t>> starts = n.getConstantInts(1, "starts");
  FailureOr<SmallVector<int64_t>> ends = n.getConstantInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  FailureOr<SmallVector<int64_t>> axesOr = n.getConstantIntsOr(
      3, "axes", llvm::to_vector(llvm::seq<int64_t>(0, starts->size())));
  FailureOr<SmallVector<int64_t>> stepsOr = n.getConstantIntsOr(
      4, "steps", SmallVector<int64_t>(starts->size(), 1));
  if (failed(axesOr) || failed(stepsOr))
    return failure();
  const SmallVector<int64_t> &axes = *axesOr, &steps = *stepsOr;
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return n.fail("starts, ends, axes and steps differ in length");

  SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape()),
      strides(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    FailureOr<int64_t> axis = normalizeAxis(n, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = type.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return n.fail("slice step is 0");
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (start < 0)
      start += dim;
    if (end < 0 && end > std::numeric_limits<int64_t>::min() / 2)
      end += dim;
    // ceil(span / |step|) as (span - 1) / |step| + 1, in unsigned: a step
    // near +-2^63 neither overflows the sum nor its negation.
    uint64_t stride = step > 0 ? uint64_t(step) : 0 - uint64_t(step);
    int64_t size;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      size = end > start ? int64_t(uint64_t(end - start - 1) / stride) + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      size = start > end ? int64_t(uint64_t(start - end - 1) / stride) + 1 : 0;
    }
    offsets[*axis] = start;
    sizes[*axis] = size;
    strides[*axis] = step;
  }
  return n.setResult(n.create<g::SliceOp>( {n.getInput(0)}, {n.i64ArrayAttr("offsets", offsets), n.i64ArrayAttr("sizes", sizes), n.i64ArrayAttr("strides", strides)}));
}

LogicalResult importExpand(NodeImporter &n) {
  RankedTensorType type = n.getInputType(0);
  FailureOr<SmallVector<int64_t>> shape = n.getConstantInts(1, "the shape");
  if (failed(shape))
    return failure();
  std::optional<SmallVector<int64_t>> result =
      g::broadcastShapes(type.getShape(), *shape);
  if (!result)
    return n.fail("input does not broadcast to the requested shape");
  return n.setResult(n.createTyped<g::BroadcastToOp>(type.clone(*result), n.getInput(0)));
}

LogicalResult importShape(NodeImporter &n) {
  ArrayRef<int64_t> shape = n.getInputType(0).getShape();
  int64_t rank = shape.size();
  int64_t start = n.getAttrInt("start", 0), end = n.getAttrInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  SmallVector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  auto type = RankedTensorType::get({static_cast<int64_t>(dims.size())},
                                    n.getBuilder().getI64Type());
  n.setOutput(0, n.constant(DenseElementsAttr::get(type, ArrayRef(dims))));
  return success();
}

LogicalResult importSize(NodeImporter &n) {
  auto type = RankedTensorType::get({}, n.getBuilder().getI64Type());
  n.setOutput(0, n.constant(DenseElementsAttr::get(
                     type, product(n.getInputType(0).getShape()))));
  return success();
}

/// The `value` tensor attribute of Constant / ConstantOfShape.
FailureOr<DenseElementsAttr> readTensorAttr(NodeImporter &n,
                                            const onnx::TensorProto &tensor) {
  Type element = getElementType(n.getContext(), tensor.data_type());
  if (!element) {
    (void)n.fail("unsupported tensor element type");
    return failure();
  }
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  Expected<DenseElementsAttr> attr =
      readTensor(tensor, RankedTensorType::get(shape, element), ".");
  if (!attr) {
    (void)n.fail(llvm::toString(attr.takeError()));
    return failure();
  }
  return *attr;
}

LogicalResult importConstant(NodeImporter &n) {
  Builder &b = n.getBuilder();
  DenseElementsAttr value;
  if (const onnx::AttributeProto *attr = n.findAttr("value")) {
    FailureOr<DenseElementsAttr> tensor = readTensorAttr(n, attr->t());
    if (failed(tensor))
      return failure();
    value = *tensor;
  } else if (const onnx::AttributeProto *attr = n.findAttr("value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   attr->f());
  } else if (const onnx::AttributeProto *attr = n.findAttr("value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   static_cast<int64_t>(attr->i()));
  } else if (const onnx::AttributeProto *attr = n.findAttr("value_floats")) {
    SmallVector<float> floats(attr->floats().begin(), attr->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(floats.size())},
                              b.getF32Type()),
        ArrayRef(floats));
  } else if (const onnx::AttributeProto *attr = n.findAttr("value_ints")) {
    SmallVector<int64_t> ints(attr->ints().begin(), attr->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(ints.size())},
                              b.getI64Type()),
        ArrayRef(ints));
  } else {
    return n.fail("Constant without a supported value attribute");
  }
  n.setOutput(0, n.constant(value));
  return success();
}

LogicalResult importConstantOfShape(NodeImporter &n) {
  FailureOr<SmallVector<int64_t>> shape = n.getConstantInts(0, "the shape");
  if (failed(shape))
    return failure();
  // Each entry a size (found by fuzz-onnx-import: a shape of [-1] made a
  // splat whose element count read as -1, expanded value by value).
  int64_t count = 1;
  for (int64_t d : *shape)
    if (d < 0 || __builtin_mul_overflow(count, d, &count))
      return n.fail("the shape's entries must be sizes whose product fits "
                    "int64");
  DenseElementsAttr fill = DenseElementsAttr::get(
      RankedTensorType::get({1}, n.getBuilder().getF32Type()), 0.0f);
  if (const onnx::AttributeProto *attr = n.findAttr("value")) {
    FailureOr<DenseElementsAttr> tensor = readTensorAttr(n, attr->t());
    if (failed(tensor))
      return failure();
    fill = *tensor;
  }
  auto type = RankedTensorType::get(*shape, fill.getElementType());
  n.setOutput(0, n.constant(DenseElementsAttr::get(
                     type, *fill.getValues<Attribute>().begin())));
  return success();
}

LogicalResult importRange(NodeImporter &n) {
  DenseElementsAttr start = n.getConstantInput(0), limit = n.getConstantInput(1),
                    delta = n.getConstantInput(2);
  if (!start || !limit || !delta)
    return n.fail("start, limit and delta must be compile-time scalars");
  Type element = start.getElementType();
  auto s = n.getConstantScalar(0, "start"), l = n.getConstantScalar(1, "limit"),
       d = n.getConstantScalar(2, "delta");
  if (failed(s) || failed(l) || failed(d) || *d == 0)
    return n.fail("Range needs a non-zero delta");
  // Folded here, element by element: bounded first (found by
  // fuzz-onnx-import: a count past int64's range was converted to it).
  // Bounds within 2^53 are exact as doubles and keep start + i * delta,
  // which lies between start and limit, inside int64.
  constexpr double kMaxBound = 9007199254740992.0; // 2^53
  constexpr double kMaxCount = 16777216.0;         // 2^24
  if (!(std::abs(*s) <= kMaxBound && std::abs(*l) <= kMaxBound &&
        std::abs(*d) <= kMaxBound))
    return n.fail("Range's start, limit and delta must lie within 2^53");
  double steps = std::ceil((*l - *s) / *d);
  if (!(steps <= kMaxCount))
    return n.fail("Range folds to more than 2^24 elements");
  // A limit behind the start is no elements, however far behind (found by
  // fuzz-onnx-import: -4e29 steps were converted to int64).
  int64_t count = steps > 0 ? static_cast<int64_t>(steps) : 0;
  auto type = RankedTensorType::get({count}, element);
  if (isa<FloatType>(element)) {
    SmallVector<APFloat> values;
    for (int64_t i = 0; i < count; ++i) {
      APFloat v(*s + i * *d);
      bool lost;
      v.convert(cast<FloatType>(element).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
    n.setOutput(0, n.constant(DenseElementsAttr::get(type, values)));
    return success();
  }
  SmallVector<APInt> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(APInt(element.getIntOrFloatBitWidth(),
                           static_cast<uint64_t>(static_cast<int64_t>(*s) +
                                                 i * static_cast<int64_t>(*d)),
                           true));
  n.setOutput(0, n.constant(DenseElementsAttr::get(type, values)));
  return success();
}

LogicalResult importTrilu(NodeImporter &n) {
  int64_t k = 0;
  if (n.hasInput(1)) {
    FailureOr<double> kValue = n.getConstantScalar(1, "k");
    if (failed(kValue))
      return failure();
    k = static_cast<int64_t>(*kValue);
  }
  Value x = n.getInput(0);
  return n.setResult(n.createTyped<g::TriluOp>( x.getType(), x, {n.boolAttr("upper", n.getAttrInt("upper", 1) != 0), n.i64Attr("k", k)}));
}

/// The sorted, normalized axes of a Reduce* node; ReduceSum takes them as an
/// input from opset 13, the others from 18. Empty means "leave the input
/// alone" (noop_with_empty_axes).
FailureOr<SmallVector<int64_t>> getReduceAxes(NodeImporter &n,
                                              int64_t axesInputSince) {
  int64_t rank = n.getInputType(0).getRank();
  SmallVector<int64_t> axes;
  if (n.getOpset() >= axesInputSince) {
    if (n.hasInput(1)) {
      FailureOr<SmallVector<int64_t>> a = n.getConstantInts(1, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
  } else {
    axes = n.getAttrInts("axes");
  }
  if (axes.empty()) {
    if (n.getAttrInt("noop_with_empty_axes", 0))
      return axes;
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  for (int64_t &axis : axes) {
    FailureOr<int64_t> a = normalizeAxis(n, axis, rank);
    if (failed(a))
      return failure();
    axis = *a;
  }
  llvm::sort(axes);
  return axes;
}

template <typename OpTy>
FailureOr<Value> buildReduce(NodeImporter &n, Value x, ArrayRef<int64_t> axes) {
  return n.create<OpTy>({x}, {n.i64ArrayAttr("axes", axes),
                              n.boolAttr("keepdims",
                                         n.getAttrInt("keepdims", 1) != 0)});
}

template <typename OpTy>
LogicalResult importReduce(NodeImporter &n, int64_t axesInputSince) {
  FailureOr<SmallVector<int64_t>> axes = getReduceAxes(n, axesInputSince);
  if (failed(axes))
    return failure();
  if (axes->empty()) {
    n.setOutput(0, n.getInput(0));
    return success();
  }
  return n.setResult(buildReduce<OpTy>(n, n.getInput(0), *axes));
}

/// ReduceL2 = sqrt(sum(x * x)); ReduceMin = -max(-x).
LogicalResult importReduceL2(NodeImporter &n) {
  FailureOr<SmallVector<int64_t>> axes = getReduceAxes(n, 18);
  if (failed(axes))
    return failure();
  Value x = n.getInput(0);
  FailureOr<Value> squared = n.create<g::MulOp>({x, x});
  if (failed(squared))
    return failure();
  Value sum = *squared;
  if (!axes->empty()) {
    FailureOr<Value> reduced = buildReduce<g::ReduceSumOp>(n, sum, *axes);
    if (failed(reduced))
      return failure();
    sum = *reduced;
  }
  return n.setResult(n.createTyped<g::SqrtOp>(sum.getType(), sum));
}

LogicalResult importReduceMin(NodeImporter &n) {
  FailureOr<SmallVector<int64_t>> axes = getReduceAxes(n, 18);
  if (failed(axes))
    return failure();
  Value x = n.getInput(0);
  if (axes->empty()) {
    n.setOutput(0, x);
    return success();
  }
  FailureOr<Value> negated = n.createTyped<g::NegOp>(x.getType(), x);
  if (failed(negated))
    return failure();
  FailureOr<Value> max = buildReduce<g::ReduceMaxOp>(n, *negated, *axes);
  if (failed(max))
    return failure();
  return n.setResult(n.createTyped<g::NegOp>(max->getType(), *max));
}

/// ScatterND of compile-time tensors (exporters write position tables with
/// it); it folds, so it never reaches the passes.
LogicalResult importScatterND(NodeImporter &n) {
  DenseElementsAttr data = n.getConstantInput(0),
                    indices = n.getConstantInput(1),
                    updates = n.getConstantInput(2);
  if (!data || !indices || !updates)
    return n.fail("ScatterND is supported on compile-time tensors only");
  if (n.getAttrString("reduction", "none") != "none")
    return n.fail("ScatterND reductions are not supported");
  ArrayRef<int64_t> shape = data.getType().getShape();
  ArrayRef<int64_t> indexShape = indices.getType().getShape();
  // What ONNX requires and the loops below index by (found by
  // fuzz-onnx-import: a scalar `indices` was read at its last dim).
  if (indexShape.empty() || !isa<IntegerType>(indices.getElementType()))
    return n.fail("indices must be an integer tensor of rank >= 1");
  int64_t k = indexShape.back();
  if (k > static_cast<int64_t>(shape.size()))
    return n.fail("index depth exceeds the data rank");
  if (k < 1)
    return n.fail("index depth must be at least 1");
  SmallVector<int64_t> updateShape(indexShape.drop_back());
  llvm::append_range(updateShape, shape.drop_front(k));
  if (updates.getType().getElementType() != data.getType().getElementType() ||
      updates.getType().getShape() != ArrayRef<int64_t>(updateShape))
    return n.fail("updates must have the data's element type and shape "
                  "indices.shape[:-1] + data.shape[k:]");
  int64_t slice = product(shape.drop_front(k));
  int64_t count = product(indexShape.drop_back());
  SmallVector<int64_t> idx;
  for (const APInt &v : indices.getValues<APInt>())
    idx.push_back(v.getSExtValue());
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  auto scatter = [&](auto tag) -> LogicalResult {
    using T = decltype(tag);
    SmallVector<T> out(data.getValues<T>()), upd(updates.getValues<T>());
    for (int64_t i = 0; i < count; ++i) {
      int64_t offset = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = idx[i * k + j];
        if (v < 0)
          v += shape[j];
        if (v < 0 || v >= shape[j])
          return n.fail("ScatterND index out of range");
        offset += v * strides[j];
      }
      for (int64_t e = 0; e < slice; ++e)
        out[offset + e] = upd[i * slice + e];
    }
    n.setOutput(0, n.constant(DenseElementsAttr::get(data.getType(), out)));
    return success();
  };
  if (auto f = dyn_cast<FloatType>(data.getElementType()))
    return scatter(APFloat::getZero(f.getFloatSemantics()));
  return scatter(APInt());
}

LogicalResult importGather(NodeImporter &n) {
  RankedTensorType type = n.getInputType(0);
  FailureOr<int64_t> axis =
      normalizeAxis(n, n.getAttrInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> result;
  // A parameter table indexed on rows is an embedding.
  if (*axis == 0 && type.getRank() == 2 && n.isParameter(0))
    result = n.create<g::EmbeddingOp>({n.getInput(0), n.getInput(1)});
  else
    result = n.create<g::GatherOp>({n.getInput(0), n.getInput(1)},
                                   {n.i64Attr("axis", *axis)});
  if (failed(result))
    return failure();
  n.setOutput(0, *result);
  return success();
}

LogicalResult importPad(NodeImporter &n) {
  int64_t rank = n.getInputType(0).getRank();
  FailureOr<SmallVector<int64_t>> pads = n.getConstantInts(1, "pads");
  if (failed(pads))
    return failure();
  FailureOr<SmallVector<int64_t>> axesOr = n.getConstantIntsOr(
      3, "axes", llvm::to_vector(llvm::seq<int64_t>(0, rank)));
  if (failed(axesOr))
    return failure();
  const SmallVector<int64_t> &axes = *axesOr;
  if (pads->size() != 2 * axes.size())
    return n.fail("pads needs two entries per padded axis");
  SmallVector<int64_t> full(2 * rank, 0);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    FailureOr<int64_t> a = normalizeAxis(n, axis, rank);
    if (failed(a))
      return failure();
    full[*a] = (*pads)[i];
    full[*a + rank] = (*pads)[i + axes.size()];
  }
  if (llvm::any_of(full, [](int64_t p) { return p < 0; }))
    return n.fail("negative pads (cropping) are not supported");
  double value = 0.0;
  if (n.hasInput(2)) {
    FailureOr<double> v = n.getConstantScalar(2, "constant_value");
    if (failed(v))
      return failure();
    value = *v;
  }
  std::string mode = n.getAttrString("mode", "constant");
  std::optional<g::PadMode> padMode = g::symbolizePadMode(mode);
  if (!padMode)
    return n.fail("pad mode '" + mode + "' is not supported");
  return n.setResult(n.create<g::PadOp>(
      {n.getInput(0)},
      {n.i64ArrayAttr("pads", full),
       n.attr("mode", g::PadModeAttr::get(n.getBuilder().getContext(), *padMode)),
       n.f64Attr("value", value)}));
}

} // namespace

void strata::frontend::registerShapeHandlers(OpHandlerTable &table) {
  table["Reshape"] = importReshape;
  table["Flatten"] = importFlatten;
  table["Unsqueeze"] = importUnsqueeze;
  table["Squeeze"] = importSqueeze;
  table["Transpose"] = importTranspose;
  table["Concat"] = importConcat;
  table["Split"] = importSplit;
  table["Slice"] = importSlice;
  table["Expand"] = importExpand;
  table["Shape"] = importShape;
  table["Size"] = importSize;
  table["Constant"] = importConstant;
  table["ConstantOfShape"] = importConstantOfShape;
  table["Range"] = importRange;
  table["Trilu"] = importTrilu;
  table["Pad"] = importPad;
  table["Gather"] = importGather;
  table["ReduceSum"] = [](NodeImporter &n) {
    return importReduce<g::ReduceSumOp>(n, 13);
  };
  table["ReduceMean"] = [](NodeImporter &n) {
    return importReduce<g::ReduceMeanOp>(n, 18);
  };
  table["ReduceMax"] = [](NodeImporter &n) {
    return importReduce<g::ReduceMaxOp>(n, 18);
  };
  table["ReduceMin"] = importReduceMin;
  table["ReduceL2"] = importReduceL2;
  table["ScatterND"] = importScatterND;
}
