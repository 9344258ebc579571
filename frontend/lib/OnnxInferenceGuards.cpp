//===- OnnxInferenceGuards.cpp - Checks ONNX 1.12's inference skips -------===//
//
// ONNX's shape inference runs before any handler sees a node, and some of
// its inference functions (Debian's ONNX 1.12) index past what they checked
// on a malformed node and crash the process. Each guard here wraps one
// op's inference function with the precondition it assumes: a node that
// breaks it gets an inference error instead, which the importer's own
// handler then reports as one line. Found by tests/fuzz (docs/fuzzing.md);
// each guard has its lit test in tests/lit/Frontend/errors.test.
//
//===----------------------------------------------------------------------===//

#include "OnnxInferenceGuards.h"

#include "strata/Frontend/OnnxImporter.h"

#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"

#include <mutex>
#include <set>

using namespace strata::frontend;

namespace {

/// Wraps the inference function of every version of `op` that opsets
/// kMinOpset..kMaxOpset resolve to, calling `check` first.
void guard(const char *op, void (*check)(onnx::InferenceContext &)) {
  std::set<const onnx::OpSchema *> seen;
  for (int opset = kMinOpset; opset <= kMaxOpset; ++opset) {
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(op, opset);
    if (!schema || !seen.insert(schema).second)
      continue;
    onnx::InferenceFunction original =
        schema->GetTypeAndShapeInferenceFunction();
    if (!original)
      continue;
    // The registry hands out const schemas; this process is its only user.
    const_cast<onnx::OpSchema *>(schema)->TypeAndShapeInferenceFunction(
        [check, original](onnx::InferenceContext &ctx) {
          check(ctx);
          original(ctx);
        });
  }
}

/// Wraps the data propagation function (the known values of shape
/// tensors) of every version of `op` in range: it runs only when `check`
/// accepts its inputs; otherwise the values stay unknown.
void guardPropagation(const char *op,
                      bool (*check)(onnx::DataPropagationContext &)) {
  std::set<const onnx::OpSchema *> seen;
  for (int opset = kMinOpset; opset <= kMaxOpset; ++opset) {
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(op, opset);
    if (!schema || !seen.insert(schema).second)
      continue;
    onnx::DataPropagationFunction original =
        schema->GetDataPropagationFunction();
    const_cast<onnx::OpSchema *>(schema)->PartialDataPropagationFunction(
        [check, original](onnx::DataPropagationContext &ctx) {
          if (check(ctx))
            original(ctx);
        });
  }
}

size_t rankOf(onnx::InferenceContext &ctx, size_t input) {
  return size_t(ctx.getInputType(input)->tensor_type().shape().dim_size());
}

/// Conv takes its kernel's rank from W: a W of higher rank than X made
/// convPoolShapeInference read past X's spatial dims.
void checkConv(onnx::InferenceContext &ctx) {
  if (onnx::hasInputShape(ctx, 0) && onnx::hasInputShape(ctx, 1) &&
      rankOf(ctx, 0) != rankOf(ctx, 1))
    fail_shape_inference("W has rank ", rankOf(ctx, 1), " but X has rank ",
                         rankOf(ctx, 0));
}

/// convPoolShapeInference divides by every stride and multiplies by every
/// dilation unchecked: a stride of 0 was a division by zero.
void checkWindow(onnx::InferenceContext &ctx) {
  for (const char *name : {"strides", "dilations", "kernel_shape"})
    if (const onnx::AttributeProto *attr = ctx.getAttribute(name))
      for (int64_t v : attr->ints())
        if (v <= 0)
          fail_shape_inference(name, " must be positive, not ", v);
}

void checkConvWindow(onnx::InferenceContext &ctx) {
  checkConv(ctx);
  checkWindow(ctx);
}

/// No model has tensors of this many dims; a longer shape operand is damage.
constexpr int64_t kMaxRank = 64;

/// Expand, Reshape and ConstantOfShape give their output one dim per entry
/// of their shape operand (input `index`): a shape operand of length 2^40
/// made ONNX allocate 2^40 dims (out of memory).
template <size_t index>
void checkShapeOperand(onnx::InferenceContext &ctx) {
  if (!onnx::hasInputShape(ctx, index))
    return;
  const auto &shape = ctx.getInputType(index)->tensor_type().shape();
  if (shape.dim_size() == 1 && shape.dim(0).has_dim_value() &&
      shape.dim(0).dim_value() > kMaxRank)
    fail_shape_inference("the shape operand has ", shape.dim(0).dim_value(),
                         " entries; at most ", kMaxRank, " dims are supported");
}

/// Add, Sub, Mul and Div propagate the values of two shape tensors by
/// broadcasting them, and read entry 0 of an empty one (the Shape of a
/// scalar): a null dereference.
bool noEmptyValues(onnx::DataPropagationContext &ctx) {
  for (size_t i = 0; i < ctx.getNumInputs(); ++i)
    if (const onnx::TensorShapeProto *values = ctx.getInputData(i);
        values && values->dim_size() == 0)
      return false;
  return true;
}

} // namespace

void strata::frontend::installOnnxInferenceGuards() {
  static std::once_flag once;
  std::call_once(once, [] {
    guard("Conv", checkConvWindow);
    guard("MaxPool", checkWindow);
    guard("AveragePool", checkWindow);
    guard("Expand", checkShapeOperand<1>);
    guard("Reshape", checkShapeOperand<1>);
    guard("ConstantOfShape", checkShapeOperand<0>);
    for (const char *op : {"Add", "Sub", "Mul", "Div"})
      guardPropagation(op, noEmptyValues);
  });
}
