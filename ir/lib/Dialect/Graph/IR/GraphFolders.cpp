//===- GraphFolders.cpp - Constant folding of graph ops -------------------===//
//
// The importer builds every op with createOrFold, so exporter shape
// arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, masks from
// buffers, position ranges) folds to constants as it is imported. The same
// folders serve canonicalization. Arithmetic is done in the element type's
// own semantics (APFloat / APInt), so a folded constant equals what the
// runtime would have computed for +, -, *, /.
//
//===----------------------------------------------------------------------===//

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/APSInt.h"

#include <cmath>

using namespace mlir;
using namespace strata::graph;

namespace {

/// Folding makes every element an APFloat/APInt; past this size it is not
/// worth it (and such constants are not shape arithmetic).
constexpr int64_t kMaxFoldElements = 1 << 22;

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// For every flat index of `outShape`, the flat index of `inShape` it reads
/// under numpy broadcasting.
SmallVector<int64_t> broadcastIndexMap(ArrayRef<int64_t> inShape,
                                       ArrayRef<int64_t> outShape) {
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  SmallVector<int64_t> inStrides = rowMajorStrides(inShape);
  size_t offset = outShape.size() - inShape.size();
  SmallVector<int64_t> map(total);
  SmallVector<int64_t> outStrides = rowMajorStrides(outShape);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t src = 0;
    for (size_t d = offset; d < outShape.size(); ++d) {
      int64_t coord = (flat / outStrides[d]) % outShape[d];
      if (inShape[d - offset] != 1)
        src += coord * inStrides[d - offset];
    }
    map[flat] = src;
  }
  return map;
}

/// Builds a constant of `type` whose element i is element map[i] of `in`
/// (or zero where map[i] < 0).
DenseElementsAttr remapElements(DenseElementsAttr in, RankedTensorType type,
                                ArrayRef<int64_t> map) {
  if (map.empty())
    return DenseElementsAttr::get(type, ArrayRef<Attribute>());
  if (in.isSplat() && llvm::all_of(map, [](int64_t i) { return i >= 0; }))
    return in.resizeSplat(type);
  if (auto floatType = dyn_cast<FloatType>(in.getElementType())) {
    SmallVector<APFloat> values(in.getValues<APFloat>());
    APFloat zero = APFloat::getZero(floatType.getFloatSemantics());
    SmallVector<APFloat> out;
    out.reserve(map.size());
    for (int64_t i : map)
      out.push_back(i < 0 ? zero : values[i]);
    return DenseElementsAttr::get(type, out);
  }
  SmallVector<APInt> values(in.getValues<APInt>());
  APInt zero(in.getElementType().getIntOrFloatBitWidth(), 0);
  SmallVector<APInt> out;
  out.reserve(map.size());
  for (int64_t i : map)
    out.push_back(i < 0 ? zero : values[i]);
  return DenseElementsAttr::get(type, out);
}

DenseElementsAttr getDense(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return nullptr;
  return dense;
}

/// Folds an elementwise op over constant operands broadcast to `type`.
/// `compute` receives one element of each operand (APFloat or APInt, per
/// element type) and returns the result element or nothing to give up.
template <typename T, typename Fn>
Attribute foldElementwise(ArrayRef<DenseElementsAttr> operands,
                          RankedTensorType type, Fn compute) {
  if (type.getNumElements() > kMaxFoldElements)
    return {};
  if (type.getNumElements() == 0)
    return DenseElementsAttr::get(type, ArrayRef<Attribute>());
  SmallVector<SmallVector<T>> values;
  SmallVector<SmallVector<int64_t>> maps;
  for (DenseElementsAttr operand : operands) {
    values.emplace_back(operand.getValues<T>());
    maps.push_back(broadcastIndexMap(operand.getType().getShape(),
                                     type.getShape()));
  }
  using Result = decltype(*compute(ArrayRef<T>{}));
  SmallVector<std::remove_cv_t<std::remove_reference_t<Result>>> out;
  SmallVector<T> args(operands.size(), values[0][0]);
  for (int64_t flat = 0, e = type.getNumElements(); flat < e; ++flat) {
    for (size_t k = 0; k < operands.size(); ++k)
      args[k] = values[k][maps[k][flat]];
    auto r = compute(args);
    if (!r)
      return {};
    out.push_back(*r);
  }
  return DenseElementsAttr::get(type, out);
}

/// Folds a binary op: `floatFn` on APFloats, `intFn` on APInts; each returns
/// an optional result element.
template <typename FloatFn, typename IntFn>
Attribute foldBinary(ArrayRef<Attribute> operands, RankedTensorType type,
                     FloatFn floatFn, IntFn intFn) {
  DenseElementsAttr lhs = getDense(operands[0]), rhs = getDense(operands[1]);
  if (!lhs || !rhs)
    return {};
  if (isa<FloatType>(lhs.getElementType()))
    return foldElementwise<APFloat>({lhs, rhs}, type,
                                    [&](ArrayRef<APFloat> a) {
                                      return floatFn(a[0], a[1]);
                                    });
  return foldElementwise<APInt>({lhs, rhs}, type, [&](ArrayRef<APInt> a) {
    return intFn(a[0], a[1]);
  });
}

template <typename Fn>
std::optional<APFloat> floatOp(APFloat a, const APFloat &b, Fn fn) {
  fn(a, b);
  return a;
}

std::optional<APInt> boolResult(bool b) { return APInt(1, b ? 1 : 0); }

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
        a.add(b, APFloat::rmNearestTiesToEven);
        return a;
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a + b;
      });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
        a.subtract(b, APFloat::rmNearestTiesToEven);
        return a;
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a - b;
      });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
        a.multiply(b, APFloat::rmNearestTiesToEven);
        return a;
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a * b;
      });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
        a.divide(b, APFloat::rmNearestTiesToEven);
        return a;
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        if (b.isZero())
          return std::nullopt;
        return a.sdiv(b);
      });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
        bool lost;
        APFloat r(std::pow(a.convertToDouble(), b.convertToDouble()));
        r.convert(a.getSemantics(), APFloat::rmNearestTiesToEven, &lost);
        return r;
      },
      [](const APInt &, const APInt &) -> std::optional<APInt> {
        return std::nullopt;
      });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
        return llvm::maximum(a, b);
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a.sge(b) ? a : b;
      });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
        return llvm::minimum(a, b);
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a.sle(b) ? a : b;
      });
}

/// Comparisons: the operands may be float or integer, the result is i1.
template <typename FloatPred, typename IntPred>
static Attribute foldCompare(ArrayRef<Attribute> operands,
                             RankedTensorType type, FloatPred floatPred,
                             IntPred intPred) {
  DenseElementsAttr lhs = getDense(operands[0]), rhs = getDense(operands[1]);
  if (!lhs || !rhs)
    return {};
  if (isa<FloatType>(lhs.getElementType()))
    return foldElementwise<APFloat>({lhs, rhs}, type, [&](ArrayRef<APFloat> a) {
      return boolResult(floatPred(a[0].compare(a[1])));
    });
  return foldElementwise<APInt>({lhs, rhs}, type, [&](ArrayRef<APInt> a) {
    return boolResult(intPred(a[0], a[1]));
  });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getOperands(), getType(),
      [](APFloat::cmpResult r) { return r == APFloat::cmpEqual; },
      [](const APInt &a, const APInt &b) { return a == b; });
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getOperands(), getType(),
      [](APFloat::cmpResult r) { return r == APFloat::cmpLessThan; },
      [](const APInt &a, const APInt &b) { return a.slt(b); });
}

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getOperands(), getType(),
      [](APFloat::cmpResult r) { return r == APFloat::cmpGreaterThan; },
      [](const APInt &a, const APInt &b) { return a.sgt(b); });
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getOperands(), getType(), [](APFloat::cmpResult) { return false; },
      [](const APInt &a, const APInt &b) { return !a.isZero() && !b.isZero(); });
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      adaptor.getOperands(), getType(), [](APFloat::cmpResult) { return false; },
      [](const APInt &a, const APInt &b) { return !a.isZero() || !b.isZero(); });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr cond = getDense(adaptor.getCondition());
  if (cond && cond.isSplat()) {
    Value chosen = cond.getSplatValue<bool>() ? getLhs() : getRhs();
    if (chosen.getType() == getType())
      return chosen;
  }
  DenseElementsAttr lhs = getDense(adaptor.getLhs()),
                    rhs = getDense(adaptor.getRhs());
  if (!cond || !lhs || !rhs)
    return {};
  RankedTensorType type = getType();
  if (type.getNumElements() > kMaxFoldElements)
    return {};
  if (type.getNumElements() == 0)
    return DenseElementsAttr::get(type, ArrayRef<Attribute>());
  SmallVector<bool> c(cond.getValues<bool>());
  SmallVector<int64_t> condMap =
      broadcastIndexMap(cond.getType().getShape(), type.getShape());
  SmallVector<int64_t> lhsMap =
      broadcastIndexMap(lhs.getType().getShape(), type.getShape());
  SmallVector<int64_t> rhsMap =
      broadcastIndexMap(rhs.getType().getShape(), type.getShape());
  // Select into a combined index space: lhs elements, then rhs elements.
  auto joined = [&](auto tag) -> Attribute {
    using T = decltype(tag);
    SmallVector<T> l(lhs.getValues<T>()), r(rhs.getValues<T>()), out;
    for (int64_t flat = 0; flat < type.getNumElements(); ++flat)
      out.push_back(c[condMap[flat]] ? l[lhsMap[flat]] : r[rhsMap[flat]]);
    return DenseElementsAttr::get(type, out);
  };
  if (auto floatType = dyn_cast<FloatType>(type.getElementType()))
    return joined(APFloat::getZero(floatType.getFloatSemantics()));
  return joined(APInt());
}

template <typename Fn>
static Attribute foldFloatUnary(Attribute operand, RankedTensorType type,
                                Fn fn) {
  DenseElementsAttr in = getDense(operand);
  if (!in || !isa<FloatType>(in.getElementType()))
    return {};
  return foldElementwise<APFloat>({in}, type, [&](ArrayRef<APFloat> a) {
    bool lost;
    APFloat r(fn(a[0].convertToDouble()));
    r.convert(a[0].getSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return std::optional<APFloat>(r);
  });
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in)
    return {};
  if (isa<FloatType>(in.getElementType()))
    return foldElementwise<APFloat>({in}, getType(), [](ArrayRef<APFloat> a) {
      return std::optional<APFloat>(-a[0]);
    });
  return foldElementwise<APInt>({in}, getType(), [](ArrayRef<APInt> a) {
    return std::optional<APInt>(-a[0]);
  });
}

OpFoldResult SqrtOp::fold(FoldAdaptor adaptor) {
  return foldFloatUnary(adaptor.getInput(), getType(),
                        [](double x) { return std::sqrt(x); });
}

OpFoldResult SinOp::fold(FoldAdaptor adaptor) {
  return foldFloatUnary(adaptor.getInput(), getType(),
                        [](double x) { return std::sin(x); });
}

OpFoldResult CosOp::fold(FoldAdaptor adaptor) {
  return foldFloatUnary(adaptor.getInput(), getType(),
                        [](double x) { return std::cos(x); });
}

OpFoldResult ExpOp::fold(FoldAdaptor adaptor) {
  return foldFloatUnary(adaptor.getInput(), getType(),
                        [](double x) { return std::exp(x); });
}

OpFoldResult ReciprocalOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in)
    return {};
  return foldElementwise<APFloat>({in}, getType(), [](ArrayRef<APFloat> a) {
    APFloat one(a[0].getSemantics(), 1);
    one.divide(a[0], APFloat::rmNearestTiesToEven);
    return std::optional<APFloat>(one);
  });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in)
    return {};
  return foldElementwise<APInt>({in}, getType(), [](ArrayRef<APInt> a) {
    return boolResult(a[0].isZero());
  });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in)
    return {};
  Type from = in.getElementType(), to = getType().getElementType();
  auto toFloat = dyn_cast<FloatType>(to);
  unsigned toWidth = to.getIntOrFloatBitWidth();
  if (auto fromFloat = dyn_cast<FloatType>(from)) {
    return foldElementwise<APFloat>({in}, getType(), [&](ArrayRef<APFloat> a)
                                        -> std::optional<Attribute> {
      if (toFloat) {
        APFloat r = a[0];
        bool lost;
        r.convert(toFloat.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &lost);
        return FloatAttr::get(to, r);
      }
      if (toWidth == 1)
        return IntegerAttr::get(to, APInt(1, a[0].isZero() ? 0 : 1));
      APSInt r(toWidth, /*isUnsigned=*/false);
      bool exact;
      if (a[0].convertToInteger(r, APFloat::rmTowardZero, &exact) &
          APFloat::opInvalidOp)
        return std::nullopt;
      return IntegerAttr::get(to, r);
    });
  }
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  return foldElementwise<APInt>(
      {in}, getType(), [&](ArrayRef<APInt> a) -> std::optional<Attribute> {
        // i1 is unsigned (true is 1); wider integers are signed.
        if (toFloat) {
          APFloat r(toFloat.getFloatSemantics());
          r.convertFromAPInt(a[0], /*isSigned=*/fromWidth > 1,
                             APFloat::rmNearestTiesToEven);
          return FloatAttr::get(to, r);
        }
        if (toWidth == 1)
          return IntegerAttr::get(to, APInt(1, a[0].isZero() ? 0 : 1));
        return IntegerAttr::get(to, fromWidth == 1 ? a[0].zext(toWidth)
                                                   : a[0].sextOrTrunc(toWidth));
      });
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (DenseElementsAttr dense = getDense(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in || getType().getNumElements() > kMaxFoldElements)
    return {};
  return remapElements(
      in, getType(),
      broadcastIndexMap(in.getType().getShape(), getType().getShape()));
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::all_of(llvm::enumerate(perm), [](auto p) {
        return static_cast<int64_t>(p.index()) == p.value();
      }))
    return getInput();
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in)
    return {};
  ArrayRef<int64_t> outShape = getType().getShape();
  SmallVector<int64_t> inStrides = rowMajorStrides(in.getType().getShape());
  SmallVector<int64_t> outStrides = rowMajorStrides(outShape);
  SmallVector<int64_t> map(getType().getNumElements());
  for (int64_t flat = 0; flat < static_cast<int64_t>(map.size()); ++flat) {
    int64_t src = 0;
    for (size_t d = 0; d < outShape.size(); ++d)
      src += ((flat / outStrides[d]) % outShape[d]) * inStrides[perm[d]];
    map[flat] = src;
  }
  return remapElements(in, getType(), map);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> offsets = getOffsets(), strides = getStrides();
  if (getInput().getType() == getType() &&
      llvm::all_of(offsets, [](int64_t o) { return o == 0; }) &&
      llvm::all_of(strides, [](int64_t s) { return s == 1; }))
    return getInput();
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in)
    return {};
  ArrayRef<int64_t> outShape = getType().getShape();
  SmallVector<int64_t> inStrides = rowMajorStrides(in.getType().getShape());
  SmallVector<int64_t> outStrides = rowMajorStrides(outShape);
  SmallVector<int64_t> map(getType().getNumElements());
  for (int64_t flat = 0; flat < static_cast<int64_t>(map.size()); ++flat) {
    int64_t src = 0;
    for (size_t d = 0; d < outShape.size(); ++d) {
      int64_t coord = (flat / outStrides[d]) % outShape[d];
      src += (offsets[d] + coord * strides[d]) * inStrides[d];
    }
    map[flat] = src;
  }
  return remapElements(in, getType(), map);
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  SmallVector<DenseElementsAttr> parts;
  for (Attribute attr : adaptor.getInputs()) {
    DenseElementsAttr dense = getDense(attr);
    if (!dense)
      return {};
    parts.push_back(dense);
  }
  RankedTensorType type = getType();
  int64_t axis = getAxisAttr().getInt();
  // Concatenate as [outer, axis-slab] blocks.
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= type.getDimSize(d);
  auto concat = [&](auto tag) -> Attribute {
    using T = decltype(tag);
    SmallVector<SmallVector<T>> values;
    for (DenseElementsAttr part : parts)
      values.emplace_back(part.getValues<T>());
    SmallVector<T> out;
    out.reserve(type.getNumElements());
    for (int64_t o = 0; o < outer; ++o)
      for (auto [part, vals] : llvm::zip(parts, values)) {
        int64_t slab = part.getNumElements() / std::max<int64_t>(outer, 1);
        out.append(vals.begin() + o * slab, vals.begin() + (o + 1) * slab);
      }
    return DenseElementsAttr::get(type, out);
  };
  if (type.getNumElements() == 0)
    return {};
  if (auto floatType = dyn_cast<FloatType>(type.getElementType()))
    return concat(APFloat::getZero(floatType.getFloatSemantics()));
  return concat(APInt());
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr in = getDense(adaptor.getInput());
  DenseElementsAttr indices = getDense(adaptor.getIndices());
  if (!in || !indices)
    return {};
  ArrayRef<int64_t> inShape = in.getType().getShape();
  int64_t axis = getAxisAttr().getInt();
  int64_t axisSize = inShape[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= inShape[d];
  for (size_t d = axis + 1; d < inShape.size(); ++d)
    inner *= inShape[d];
  SmallVector<int64_t> idx;
  for (const APInt &i : indices.getValues<APInt>()) {
    int64_t v = i.getSExtValue();
    if (v < -axisSize || v >= axisSize)
      return {};
    idx.push_back(v < 0 ? v + axisSize : v);
  }
  SmallVector<int64_t> map;
  map.reserve(getType().getNumElements());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx)
      for (int64_t n = 0; n < inner; ++n)
        map.push_back((o * axisSize + i) * inner + n);
  return remapElements(in, getType(), map);
}

OpFoldResult TriluOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr in = getDense(adaptor.getInput());
  if (!in)
    return {};
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t k = getKAttr().getInt();
  bool upper = getUpper();
  SmallVector<int64_t> map(getType().getNumElements());
  for (int64_t flat = 0; flat < static_cast<int64_t>(map.size()); ++flat) {
    int64_t j = flat % cols, i = (flat / cols) % rows;
    bool keep = upper ? (j - i >= k) : (j - i <= k);
    map[flat] = keep ? flat : -1;
  }
  return remapElements(in, getType(), map);
}

OpFoldResult PadOp::fold(FoldAdaptor adaptor) {
  if (llvm::all_of(getPads(), [](int64_t p) { return p == 0; }))
    return getInput();
  return {};
}
