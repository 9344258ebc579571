//===- ShapePlans.cpp - What the shape kernels move, for every backend ----===//

#include "strata/Runtime/ShapePlans.h"

#include "strata/Runtime/KernelChecks.h"
#include "strata/Runtime/NarrowFloat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

namespace strata::runtime::shape {

Status checkSameDType(std::string_view op, const TensorView &a,
                      const TensorView &b) {
  if (a.dtype == b.dtype)
    return Status::ok();
  return Status::error(std::string(op) + ": element types differ (" +
                       a.describe() + " vs " + b.describe() + ")");
}

Status checkShape(std::string_view op, const TensorView &t,
                  const std::vector<int64_t> &expected) {
  if (t.shape == expected)
    return Status::ok();
  TensorView want = t;
  want.shape = expected;
  return Status::error(std::string(op) + ": expected result " +
                       want.describe() + ", got " + t.describe());
}

Status checkAxis(std::string_view op, int64_t axis, int64_t rank) {
  if (axis >= 0 && axis < rank)
    return Status::ok();
  return Status::error(std::string(op) + ": axis " + std::to_string(axis) +
                       " must be in [0, " + std::to_string(rank) + ")");
}

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d)
    n *= shape[d];
  return n;
}

Status checkPart(std::string_view op, const TensorView &part,
                 const TensorView &whole, int64_t axis) {
  if (Status s = checkSameDType(op, part, whole); !s)
    return s;
  bool ok = part.rank() == whole.rank();
  for (int64_t d = 0; ok && d < part.rank(); ++d)
    ok = d == axis || part.shape[d] == whole.shape[d];
  if (ok)
    return Status::ok();
  return Status::error(std::string(op) + ": " + part.describe() +
                       " does not match " + whole.describe() +
                       " outside axis " + std::to_string(axis));
}

Status planBroadcastTo(std::string_view op, const TensorView &x,
                       const TensorView &y, StridedCopy &out) {
  if (Status s = checkSameDType(op, x, y); !s)
    return s;
  std::string bad = std::string(op) + ": cannot broadcast " + x.describe() +
                    " to " + y.describe();
  if (x.rank() > y.rank())
    return Status::error(bad);
  // Numpy rules: right-aligned; a size-1 (or missing) dim repeats.
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape);
  out.strides.assign(y.shape.size(), 0);
  out.base = 0;
  int64_t lead = y.rank() - x.rank();
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t in = x.shape[d], result = y.shape[d + lead];
    if (in == result)
      out.strides[d + lead] = inStrides[d];
    else if (in != 1)
      return Status::error(bad);
  }
  return Status::ok();
}

Status planTranspose(std::string_view op, const TensorView &x,
                     const TensorView &y, const KernelAttrs &attrs,
                     StridedCopy &out) {
  if (Status s = checkSameDType(op, x, y); !s)
    return s;
  std::vector<int64_t> perm = attrs.getInts("perm");
  if (static_cast<int64_t>(perm.size()) != x.rank())
    return Status::error(std::string(op) + ": perm must have " +
                         std::to_string(x.rank()) + " entries");
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape);
  std::vector<bool> seen(perm.size(), false);
  std::vector<int64_t> shape;
  out.strides.clear();
  out.base = 0;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[p])
      return Status::error(std::string(op) + ": perm is not a permutation");
    seen[p] = true;
    shape.push_back(x.shape[p]);
    out.strides.push_back(inStrides[p]);
  }
  return checkShape(op, y, shape);
}

Status planSlice(std::string_view op, const TensorView &x, const TensorView &y,
                 const KernelAttrs &attrs, StridedCopy &out) {
  if (Status s = checkSameDType(op, x, y); !s)
    return s;
  std::vector<int64_t> offsets = attrs.getInts("offsets"),
                       sizes = attrs.getInts("sizes"),
                       steps = attrs.getInts("strides");
  int64_t rank = x.rank();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(sizes.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return Status::error(std::string(op) +
                         ": offsets, sizes and strides need one entry per dim");
  if (Status s = checkShape(op, y, sizes); !s)
    return s;
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape);
  out.strides.assign(rank, 0);
  out.base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    std::string where = std::string(op) + ": dim " + std::to_string(d);
    if (steps[d] == 0 || sizes[d] < 0)
      return Status::error(where + ": stride must be non-zero and size >= 0");
    out.strides[d] = steps[d] * inStrides[d];
    if (sizes[d] == 0)
      continue;
    // The same bounds rule as SliceOp::inferReturnTypes: first and last
    // element read must lie inside the dim.
    int64_t last = offsets[d] + (sizes[d] - 1) * steps[d];
    if (offsets[d] < 0 || offsets[d] >= x.shape[d] || last < 0 ||
        last >= x.shape[d])
      return Status::error(where + ": slice is out of bounds for size " +
                           std::to_string(x.shape[d]));
    out.base += offsets[d] * inStrides[d];
  }
  return Status::ok();
}

namespace {

template <typename T>
Status fillAs(std::string_view op, DType dtype, double value,
              unsigned char *fill) {
  T v;
  if constexpr (std::is_same_v<T, uint8_t>) { // i1
    v = value != 0.0 ? 1 : 0;
  } else if constexpr (std::is_integral_v<T>) {
    // Truncates toward zero like a torch int fill; refuses what a cast
    // could not represent (UB in C++).
    double t = std::trunc(value);
    if (!(t >= double(std::numeric_limits<T>::min()) &&
          t <= double(std::numeric_limits<T>::max())))
      return Status::error(std::string(op) + ": value " +
                           std::to_string(value) + " does not fit " +
                           std::string(name(dtype)));
    v = static_cast<T>(t);
  } else {
    v = static_cast<T>(value);
  }
  std::memcpy(fill, &v, sizeof(T));
  return Status::ok();
}

} // namespace

namespace {

/// graph.pad's and graph.pad_grad's `mode` attribute.
Status parsePadMode(std::string_view op, const std::string &mode,
                    PadMode &out) {
  if (mode == "constant")
    out = PadMode::Constant;
  else if (mode == "reflect")
    out = PadMode::Reflect;
  else if (mode == "edge")
    out = PadMode::Edge;
  else
    return Status::error(std::string(op) + ": unknown mode \"" + mode + "\"");
  return Status::ok();
}

} // namespace

Status planPad(const KernelContext &ctx, PadGeometry &out) {
  constexpr std::string_view op = "graph.pad";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  if (Status s = checkSameDType(op, x, y); !s)
    return s;
  out.pads = ctx.attrs.getInts("pads");
  std::string mode = ctx.attrs.getString("mode", "constant");
  int64_t rank = x.rank();
  if (static_cast<int64_t>(out.pads.size()) != 2 * rank)
    return Status::error(std::string(op) + ": pads needs two entries per dim");
  if (Status s = parsePadMode(op, mode, out.mode); !s)
    return s;
  out.shape.clear();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t begin = out.pads[d], end = out.pads[d + rank], n = x.shape[d];
    if (begin < 0 || end < 0)
      return Status::error(std::string(op) + ": pads must be >= 0");
    // torch: reflect needs pad < dim; replicate needs a non-empty dim.
    if (out.mode == PadMode::Reflect && (begin >= n || end >= n))
      return Status::error(std::string(op) + ": reflect pads of dim " +
                           std::to_string(d) + " must be smaller than " +
                           std::to_string(n));
    if (out.mode == PadMode::Edge && n == 0 && begin + end > 0)
      return Status::error(std::string(op) + ": cannot edge-pad empty dim " +
                           std::to_string(d));
    out.shape.push_back(n + begin + end);
  }
  if (Status s = checkShape(op, y, out.shape); !s)
    return s;
  std::memset(out.fill, 0, sizeof(out.fill));
  if (out.mode == PadMode::Constant)
    return fillBytes(op, y.dtype, ctx.attrs.getFloat("value", 0.0), out.fill);
  return Status::ok();
}

Status fillBytes(std::string_view op, DType dtype, double value,
                 unsigned char *fill) {
  switch (dtype) {
  case DType::F16:
  case DType::BF16: {
    // As torch converts a fill scalar: to float, then rounded to nearest
    // even.
    uint16_t bits = dtype == DType::BF16 ? bf16Bits(static_cast<float>(value))
                                         : fp16Bits(static_cast<float>(value));
    std::memcpy(fill, &bits, 2);
    return Status::ok();
  }
  case DType::F32: return fillAs<float>(op, dtype, value, fill);
  case DType::F64: return fillAs<double>(op, dtype, value, fill);
  case DType::I64: return fillAs<int64_t>(op, dtype, value, fill);
  case DType::I32: return fillAs<int32_t>(op, dtype, value, fill);
  case DType::I16: return fillAs<int16_t>(op, dtype, value, fill);
  case DType::I8: return fillAs<int8_t>(op, dtype, value, fill);
  case DType::I1: return fillAs<uint8_t>(op, dtype, value, fill);
  }
  return Status::error(std::string(op) + ": element type " +
                       std::string(name(dtype)) + " is not supported");
}

namespace {

/// The checks concat and split share: `whole` against `parts`.
Status planParts(std::string_view op, const KernelContext &ctx,
                 std::span<const TensorView> parts, const TensorView &whole,
                 const char *partsName, const char *wholeName,
                 int64_t &axis) {
  axis = ctx.attrs.getInt("axis");
  if (Status s = checkAxis(op, axis, whole.rank()); !s)
    return s;
  int64_t total = 0;
  for (const TensorView &part : parts) {
    if (Status s = checkPart(op, part, whole, axis); !s)
      return s;
    total += part.shape[axis];
  }
  if (total != whole.shape[axis])
    return Status::error(std::string(op) + ": " + partsName +
                         " sizes along axis sum to " + std::to_string(total) +
                         ", " + wholeName + " has " +
                         std::to_string(whole.shape[axis]));
  return Status::ok();
}

} // namespace

Status planConcat(const KernelContext &ctx, int64_t &axis) {
  constexpr std::string_view op = "graph.concat";
  if (ctx.inputs.empty() || ctx.outputs.size() != 1)
    return Status::error(std::string(op) +
                         ": expected at least 1 input and 1 output");
  return planParts(op, ctx, ctx.inputs, ctx.outputs[0], "input", "result",
                   axis);
}

Status planSplit(const KernelContext &ctx, int64_t &axis) {
  constexpr std::string_view op = "graph.split";
  if (ctx.inputs.size() != 1 || ctx.outputs.empty())
    return Status::error(std::string(op) +
                         ": expected 1 input and at least 1 output");
  return planParts(op, ctx, ctx.outputs, ctx.inputs[0], "result", "input",
                   axis);
}

Status planTrilu(const KernelContext &ctx, TriluGeometry &out) {
  constexpr std::string_view op = "graph.trilu";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &y = ctx.outputs[0];
  if (Status s = checkSameDType(op, x, y); !s)
    return s;
  if (x.rank() < 2)
    return Status::error(std::string(op) + ": input must have rank >= 2, got " +
                         x.describe());
  if (Status s = checkShape(op, y, x.shape); !s)
    return s;
  out.upper = ctx.attrs.getBool("upper");
  out.rows = x.shape[x.rank() - 2];
  out.cols = x.shape.back();
  out.k = std::clamp<int64_t>(ctx.attrs.getInt("k"), -(out.rows + out.cols),
                              out.rows + out.cols);
  return Status::ok();
}

Status planGather(const KernelContext &ctx, GatherGeometry &out) {
  constexpr std::string_view op = "graph.gather";
  if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
    return s;
  const TensorView &x = ctx.inputs[0], &indices = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  if (Status s = checkSameDType(op, x, y); !s)
    return s;
  int64_t axis = ctx.attrs.getInt("axis");
  if (Status s = checkAxis(op, axis, x.rank()); !s)
    return s;
  std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (Status s = checkShape(op, y, shape); !s)
    return s;
  out.outer = product(x.shape, 0, axis);
  out.axisSize = x.shape[axis];
  out.inner = product(x.shape, axis + 1, x.shape.size());
  return Status::ok();
}

Status planEmbedding(const KernelContext &ctx, GatherGeometry &out) {
  constexpr std::string_view op = "graph.embedding";
  if (Status s = checkArity(ctx, op, 2, 2, 1); !s)
    return s;
  const TensorView &table = ctx.inputs[0], &indices = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  if (Status s = checkSameDType(op, table, y); !s)
    return s;
  if (table.rank() != 2)
    return Status::error(std::string(op) + ": table must have rank 2, got " +
                         table.describe());
  std::vector<int64_t> shape = indices.shape;
  shape.push_back(table.shape[1]);
  if (Status s = checkShape(op, y, shape); !s)
    return s;
  // Whole rows (axis 0). Negative indices follow the ODS (ONNX Gather);
  // torch.nn.functional.embedding would reject them.
  out.outer = 1;
  out.axisSize = table.shape[0];
  out.inner = table.shape[1];
  return Status::ok();
}

Status planEmbeddingGrad(const KernelContext &ctx, ScatterGeometry &out) {
  constexpr const char *kOp = "graph.embedding_grad";
  if (Status s = checkArity(ctx, kOp, 2, 2, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &indices = ctx.inputs[1];
  const TensorView &table = ctx.outputs[0];
  if (table.rank() != 2 || table.dtype != dy.dtype)
    return Status::error("graph.embedding_grad: the table gradient must be "
                         "[V, D] of the gradient's type, got " +
                         table.describe());
  std::vector<int64_t> expected = indices.shape;
  expected.push_back(table.shape[1]);
  if (dy.shape != expected)
    return Status::error("graph.embedding_grad: gradient " + dy.describe() +
                         " does not fit indices " + indices.describe() +
                         " and table " + table.describe());
  out.outer = 1;
  out.rows = table.shape[0];
  out.inner = table.shape[1];
  out.count = indices.numel();
  return Status::ok();
}

Status planGatherGrad(const KernelContext &ctx, ScatterGeometry &out) {
  constexpr const char *kOp = "graph.gather_grad";
  if (Status s = checkArity(ctx, kOp, 2, 2, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &indices = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  int64_t axis = ctx.attrs.getInt("axis");
  if (axis < 0 || axis >= dx.rank() || dx.dtype != dy.dtype)
    return Status::error("graph.gather_grad: axis " + std::to_string(axis) +
                         " does not fit " + dx.describe());
  std::vector<int64_t> expected(dx.shape.begin(), dx.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), dx.shape.begin() + axis + 1, dx.shape.end());
  if (dy.shape != expected)
    return Status::error("graph.gather_grad: gradient " + dy.describe() +
                         " does not fit indices " + indices.describe() +
                         " gathered from " + dx.describe());
  out.outer = product(dx.shape, 0, axis);
  out.rows = dx.shape[axis];
  out.inner = product(dx.shape, axis + 1, dx.shape.size());
  out.count = indices.numel();
  return Status::ok();
}

Status planSliceGrad(const KernelContext &ctx, SliceGradGeometry &out) {
  constexpr const char *kOp = "graph.slice_grad";
  if (Status s = checkArity(ctx, kOp, 1, 1, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &dx = ctx.outputs[0];
  out.offsets = ctx.attrs.getInts("offsets");
  out.sizes = ctx.attrs.getInts("sizes");
  out.steps = ctx.attrs.getInts("strides");
  int64_t rank = dx.rank();
  if (dx.dtype != dy.dtype || dy.shape != out.sizes ||
      static_cast<int64_t>(out.offsets.size()) != rank ||
      static_cast<int64_t>(out.steps.size()) != rank ||
      static_cast<int64_t>(out.sizes.size()) != rank)
    return Status::error("graph.slice_grad: gradient " + dy.describe() +
                         " does not fit the slice of " + dx.describe());
  // The forward's rules (planSlice): non-zero strides (negative ones walk
  // backwards), and the first and last element read in bounds.
  for (int64_t d = 0; d < rank; ++d) {
    if (out.steps[d] == 0 || out.sizes[d] < 0)
      return Status::error("graph.slice_grad: dim " + std::to_string(d) +
                           ": stride must be non-zero and size >= 0");
    int64_t last = out.offsets[d] + (out.sizes[d] - 1) * out.steps[d];
    if (out.sizes[d] > 0 &&
        (out.offsets[d] < 0 || out.offsets[d] >= dx.shape[d] || last < 0 ||
         last >= dx.shape[d]))
      return Status::error("graph.slice_grad: slice is out of bounds in dim " +
                           std::to_string(d));
  }
  return Status::ok();
}

Status planPadGrad(const KernelContext &ctx, PadGradGeometry &out) {
  constexpr const char *kOp = "graph.pad_grad";
  if (Status s = checkArity(ctx, kOp, 1, 1, 1); !s)
    return s;
  const TensorView &dy = ctx.inputs[0], &dx = ctx.outputs[0];
  out.pads = ctx.attrs.getInts("pads");
  std::string mode = ctx.attrs.getString("mode", "constant");
  int64_t rank = dx.rank();
  const std::vector<int64_t> &pads = out.pads;
  if (dx.dtype != dy.dtype || static_cast<int64_t>(pads.size()) != 2 * rank ||
      dy.rank() != rank)
    return Status::error("graph.pad_grad: gradient " + dy.describe() +
                         " does not fit " + dx.describe());
  for (int64_t d = 0; d < rank; ++d)
    if (dy.shape[d] != dx.shape[d] + pads[d] + pads[d + rank])
      return Status::error("graph.pad_grad: gradient " + dy.describe() +
                           " is not the padded " + dx.describe());
  if (Status s = parsePadMode(kOp, mode, out.mode); !s)
    return s;
  // Negative pads (a crop) need no source; positive ones need what the
  // forward needs: reflect pads < dim, edge a non-empty dim.
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = dx.shape[d], begin = pads[d], end = pads[d + rank];
    if ((out.mode == PadMode::Reflect &&
         ((begin > 0 && begin >= n) || (end > 0 && end >= n))) ||
        (out.mode == PadMode::Edge && n == 0 && (begin > 0 || end > 0)))
      return Status::error("graph.pad_grad: " + mode + " pads of dim " +
                           std::to_string(d) + " do not fit size " +
                           std::to_string(n));
  }
  return Status::ok();
}

} // namespace strata::runtime::shape
