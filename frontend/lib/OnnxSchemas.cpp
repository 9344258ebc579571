//===- OnnxSchemas.cpp - Strata's own table of ONNX op forms --------------===//
//
// One row per op and opset where the op's form (inputs, outputs,
// attributes) changed, from ONNX's operator changelog; versions that only
// widened the element types are not rows. The first row of an op is the
// opset it appears at (or kMinOpset), and the row holds until the op's next
// row or kMaxOpset. Attributes are written `name:type`, `!` marking the
// required ones; the types are i, f, s, t (tensor), st (sparse tensor), is,
// fs, ss (lists).
//
//===----------------------------------------------------------------------===//

#include "OnnxSchemas.h"

#include "strata/Frontend/OnnxImporter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace strata::frontend;
using llvm::StringRef;

namespace {

constexpr int kMany = INT_MAX;

struct Row {
  const char *op;
  int64_t since;
  int minInputs, maxInputs, minOutputs, maxOutputs;
  const char *attributes;
};

// clang-format off
const Row kRows[] = {
  {"Abs", 13, 1, 1, 1, 1, ""},
  {"Add", 13, 2, 2, 1, 1, ""},
  {"And", 7, 2, 2, 1, 1, ""},
  {"AveragePool", 11, 1, 1, 1, 1, "auto_pad:s ceil_mode:i count_include_pad:i kernel_shape:is! pads:is strides:is"},
  {"AveragePool", 19, 1, 1, 1, 1, "auto_pad:s ceil_mode:i count_include_pad:i dilations:is kernel_shape:is! pads:is strides:is"},
  {"BatchNormalization", 9, 5, 5, 1, 5, "epsilon:f momentum:f"},
  {"BatchNormalization", 14, 5, 5, 1, 3, "epsilon:f momentum:f training_mode:i"},
  {"Cast", 13, 1, 1, 1, 1, "to:i!"},
  {"Cast", 19, 1, 1, 1, 1, "saturate:i to:i!"},
  {"CastLike", 15, 2, 2, 1, 1, ""},
  {"CastLike", 19, 2, 2, 1, 1, "saturate:i"},
  {"Clip", 13, 1, 3, 1, 1, ""},
  {"Concat", 13, 1, kMany, 1, 1, "axis:i!"},
  {"Constant", 13, 0, 0, 1, 1, "sparse_value:st value:t value_float:f value_floats:fs value_int:i value_ints:is value_string:s value_strings:ss"},
  {"ConstantOfShape", 9, 1, 1, 1, 1, "value:t"},
  {"Conv", 11, 2, 3, 1, 1, "auto_pad:s dilations:is group:i kernel_shape:is pads:is strides:is"},
  {"Cos", 7, 1, 1, 1, 1, ""},
  {"Div", 13, 2, 2, 1, 1, ""},
  {"Dropout", 13, 1, 3, 1, 2, "seed:i"},
  {"Elu", 6, 1, 1, 1, 1, "alpha:f"},
  {"Equal", 13, 2, 2, 1, 1, ""},
  {"Erf", 13, 1, 1, 1, 1, ""},
  {"Exp", 13, 1, 1, 1, 1, ""},
  {"Expand", 13, 2, 2, 1, 1, ""},
  {"Flatten", 13, 1, 1, 1, 1, "axis:i"},
  {"Gather", 13, 2, 2, 1, 1, "axis:i"},
  {"Gelu", 20, 1, 1, 1, 1, "approximate:s"},
  {"Gemm", 13, 2, 3, 1, 1, "alpha:f beta:f transA:i transB:i"},
  {"GlobalAveragePool", 1, 1, 1, 1, 1, ""},
  {"GlobalMaxPool", 1, 1, 1, 1, 1, ""},
  {"Greater", 13, 2, 2, 1, 1, ""},
  {"GreaterOrEqual", 12, 2, 2, 1, 1, ""},
  {"GroupNormalization", 18, 3, 3, 1, 1, "epsilon:f num_groups:i!"},
  {"GroupNormalization", 21, 3, 3, 1, 1, "epsilon:f num_groups:i! stash_type:i"},
  {"HardSigmoid", 6, 1, 1, 1, 1, "alpha:f beta:f"},
  {"HardSwish", 14, 1, 1, 1, 1, ""},
  {"Identity", 13, 1, 1, 1, 1, ""},
  {"InstanceNormalization", 6, 3, 3, 1, 1, "epsilon:f"},
  {"LayerNormalization", 17, 2, 3, 1, 3, "axis:i epsilon:f stash_type:i"},
  {"LeakyRelu", 6, 1, 1, 1, 1, "alpha:f"},
  {"Less", 13, 2, 2, 1, 1, ""},
  {"LessOrEqual", 12, 2, 2, 1, 1, ""},
  {"Log", 13, 1, 1, 1, 1, ""},
  {"LogSoftmax", 13, 1, 1, 1, 1, "axis:i"},
  {"MatMul", 13, 2, 2, 1, 1, ""},
  {"Max", 13, 1, kMany, 1, 1, ""},
  {"MaxPool", 12, 1, 1, 1, 2, "auto_pad:s ceil_mode:i dilations:is kernel_shape:is! pads:is storage_order:i strides:is"},
  {"Min", 13, 1, kMany, 1, 1, ""},
  {"Mul", 13, 2, 2, 1, 1, ""},
  {"Neg", 13, 1, 1, 1, 1, ""},
  {"Not", 1, 1, 1, 1, 1, ""},
  {"Or", 7, 2, 2, 1, 1, ""},
  {"PRelu", 9, 2, 2, 1, 1, ""},
  {"Pad", 13, 2, 3, 1, 1, "mode:s"},
  {"Pad", 18, 2, 4, 1, 1, "mode:s"},
  {"Pow", 13, 2, 2, 1, 1, ""},
  {"Range", 11, 3, 3, 1, 1, ""},
  {"Reciprocal", 13, 1, 1, 1, 1, ""},
  {"ReduceL2", 13, 1, 1, 1, 1, "axes:is keepdims:i"},
  {"ReduceL2", 18, 1, 2, 1, 1, "keepdims:i noop_with_empty_axes:i"},
  {"ReduceMax", 13, 1, 1, 1, 1, "axes:is keepdims:i"},
  {"ReduceMax", 18, 1, 2, 1, 1, "keepdims:i noop_with_empty_axes:i"},
  {"ReduceMean", 13, 1, 1, 1, 1, "axes:is keepdims:i"},
  {"ReduceMean", 18, 1, 2, 1, 1, "keepdims:i noop_with_empty_axes:i"},
  {"ReduceMin", 13, 1, 1, 1, 1, "axes:is keepdims:i"},
  {"ReduceMin", 18, 1, 2, 1, 1, "keepdims:i noop_with_empty_axes:i"},
  {"ReduceSum", 13, 1, 2, 1, 1, "keepdims:i noop_with_empty_axes:i"},
  {"Relu", 13, 1, 1, 1, 1, ""},
  {"Reshape", 13, 2, 2, 1, 1, ""},
  {"Reshape", 14, 2, 2, 1, 1, "allowzero:i"},
  {"ScatterND", 13, 3, 3, 1, 1, ""},
  {"ScatterND", 16, 3, 3, 1, 1, "reduction:s"},
  {"Selu", 6, 1, 1, 1, 1, "alpha:f gamma:f"},
  {"Shape", 13, 1, 1, 1, 1, ""},
  {"Shape", 15, 1, 1, 1, 1, "end:i start:i"},
  {"Sigmoid", 13, 1, 1, 1, 1, ""},
  {"Sin", 7, 1, 1, 1, 1, ""},
  {"Size", 13, 1, 1, 1, 1, ""},
  {"Slice", 13, 3, 5, 1, 1, ""},
  {"Softmax", 13, 1, 1, 1, 1, "axis:i"},
  {"SoftmaxCrossEntropyLoss", 13, 2, 3, 1, 2, "ignore_index:i reduction:s"},
  {"Softplus", 1, 1, 1, 1, 1, ""},
  {"Softsign", 1, 1, 1, 1, 1, ""},
  {"Split", 13, 1, 2, 1, kMany, "axis:i"},
  {"Split", 18, 1, 2, 1, kMany, "axis:i num_outputs:i"},
  {"Sqrt", 13, 1, 1, 1, 1, ""},
  {"Squeeze", 13, 1, 2, 1, 1, ""},
  {"Sub", 13, 2, 2, 1, 1, ""},
  {"Sum", 13, 1, kMany, 1, 1, ""},
  {"Tanh", 13, 1, 1, 1, 1, ""},
  {"Transpose", 13, 1, 1, 1, 1, "perm:is"},
  {"Trilu", 14, 1, 2, 1, 1, "upper:i"},
  {"Unsqueeze", 13, 2, 2, 1, 1, ""},
  {"Where", 9, 3, 3, 1, 1, ""},
};
// clang-format on

onnx::AttributeProto::AttributeType parseType(StringRef type) {
  using A = onnx::AttributeProto;
  return llvm::StringSwitch<A::AttributeType>(type)
      .Case("i", A::INT)
      .Case("f", A::FLOAT)
      .Case("s", A::STRING)
      .Case("t", A::TENSOR)
      .Case("st", A::SPARSE_TENSOR)
      .Case("is", A::INTS)
      .Case("fs", A::FLOATS)
      .Case("ss", A::STRINGS)
      .Default(A::UNDEFINED);
}

const char *typeName(onnx::AttributeProto::AttributeType type) {
  using A = onnx::AttributeProto;
  switch (type) {
  case A::INT:
    return "an int";
  case A::FLOAT:
    return "a float";
  case A::STRING:
    return "a string";
  case A::TENSOR:
    return "a tensor";
  case A::SPARSE_TENSOR:
    return "a sparse tensor";
  case A::INTS:
    return "a list of ints";
  case A::FLOATS:
    return "a list of floats";
  case A::STRINGS:
    return "a list of strings";
  case A::GRAPH:
  case A::GRAPHS:
    return "a graph";
  default:
    return "of unknown type";
  }
}

/// The forms, built once from kRows; an op's rows are contiguous and in
/// opset order.
const std::vector<OnnxOpForm> &forms() {
  static const std::vector<OnnxOpForm> all = [] {
    std::vector<OnnxOpForm> result;
    for (const Row &row : kRows) {
      OnnxOpForm form{row.op,
                      std::max(row.since, kMinOpset),
                      row.minInputs,
                      row.maxInputs,
                      row.minOutputs,
                      row.maxOutputs,
                      row.maxInputs == kMany,
                      {}};
      llvm::SmallVector<StringRef> specs;
      StringRef(row.attributes).split(specs, ' ', -1, /*KeepEmpty=*/false);
      for (StringRef spec : specs) {
        auto [name, type] = spec.split(':');
        bool required = type.consume_back("!");
        form.attributes.push_back({name.str(), parseType(type), required});
      }
      result.push_back(std::move(form));
    }
    return result;
  }();
  return all;
}

const llvm::StringMap<std::pair<size_t, size_t>> &formIndex() {
  static const llvm::StringMap<std::pair<size_t, size_t>> index = [] {
    llvm::StringMap<std::pair<size_t, size_t>> result;
    const std::vector<OnnxOpForm> &all = forms();
    for (size_t i = 0; i < all.size(); ++i) {
      auto [it, inserted] = result.try_emplace(all[i].op, i, i + 1);
      if (!inserted)
        it->second.second = i + 1;
    }
    return result;
  }();
  return index;
}

std::string nodeName(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return node.name();
  return node.output_size() ? node.output(0) : "?";
}

std::string countRange(int low, int high) {
  if (low == high)
    return std::to_string(low);
  if (high == kMany)
    return std::to_string(low) + " or more";
  return std::to_string(low) + " to " + std::to_string(high);
}

/// The problem with one node's form at `opset`, or "".
std::string checkNodeForm(const onnx::NodeProto &node, int64_t opset) {
  const OnnxOpForm *form = lookupOnnxOpForm(node.op_type(), opset);
  if (!form) {
    auto range = formIndex().find(node.op_type());
    if (range == formIndex().end())
      return "is not a supported op";
    return llvm::formatv("does not exist at opset {0} (ONNX has it from "
                         "opset {1})",
                         opset, forms()[range->second.first].since);
  }
  if (node.input_size() < form->minInputs ||
      node.input_size() > form->maxInputs)
    return llvm::formatv("has {0} inputs; {1} at opset {2} takes {3}",
                         node.input_size(), node.op_type(), opset,
                         countRange(form->minInputs, form->maxInputs));
  if (node.output_size() < form->minOutputs ||
      node.output_size() > form->maxOutputs)
    return llvm::formatv("has {0} outputs; {1} at opset {2} gives {3}",
                         node.output_size(), node.op_type(), opset,
                         countRange(form->minOutputs, form->maxOutputs));
  for (int i = 0; i < node.input_size(); ++i)
    if (node.input(i).empty() && (i < form->minInputs || form->variadicInputs))
      return "input " + std::to_string(i) + " is omitted but is not optional";
  llvm::StringSet<> seen;
  for (const auto &attr : node.attribute()) {
    if (!seen.insert(attr.name()).second)
      return "has attribute '" + attr.name() + "' twice";
    const OnnxAttrSpec *spec = form->findAttribute(attr.name());
    if (!spec)
      return llvm::formatv("has attribute '{0}', which {1} does not take at "
                           "opset {2}",
                           attr.name(), node.op_type(), opset);
    if (!attr.ref_attr_name().empty())
      return "attribute '" + attr.name() + "' refers to '" +
             attr.ref_attr_name() + "' outside a function";
    if (attr.type() != spec->type)
      return llvm::formatv("attribute '{0}' must be {1}, not {2}", attr.name(),
                           typeName(spec->type), typeName(attr.type()));
  }
  for (const OnnxAttrSpec &spec : form->attributes)
    if (spec.required && !seen.contains(spec.name))
      return "lacks the required attribute '" + spec.name + "'";
  if (node.op_type() == "Constant" && node.attribute_size() != 1)
    return "must have exactly one value attribute";
  return "";
}

} // namespace

const OnnxAttrSpec *OnnxOpForm::findAttribute(StringRef name) const {
  for (const OnnxAttrSpec &spec : attributes)
    if (spec.name == name)
      return &spec;
  return nullptr;
}

llvm::ArrayRef<OnnxOpForm> strata::frontend::getOnnxOpForms() {
  return forms();
}

const OnnxOpForm *strata::frontend::lookupOnnxOpForm(StringRef op,
                                                     int64_t opset) {
  auto range = formIndex().find(op);
  if (range == formIndex().end())
    return nullptr;
  const OnnxOpForm *found = nullptr;
  for (size_t i = range->second.first; i < range->second.second; ++i)
    if (forms()[i].since <= opset)
      found = &forms()[i];
  return found;
}

std::string strata::frontend::checkGraphStructure(const onnx::GraphProto &graph,
                                                  int64_t opset) {
  llvm::StringSet<> defined;
  auto define = [&](const std::string &name,
                    const std::string &by) -> std::string {
    if (name.empty())
      return "";
    if (!defined.insert(name).second)
      return "'" + name + "' is defined twice (again by " + by + ")";
    return "";
  };
  llvm::StringSet<> initializers;
  for (const auto &init : graph.initializer()) {
    initializers.insert(init.name());
    if (std::string why = define(init.name(), "an initializer"); !why.empty())
      return why;
  }
  for (const auto &input : graph.input())
    if (!initializers.contains(input.name()))
      if (std::string why = define(input.name(), "a graph input"); !why.empty())
        return why;
  for (const auto &node : graph.node()) {
    std::string where =
        "node '" + nodeName(node) + "' (" + node.op_type() + ")";
    if (std::string why = checkNodeForm(node, opset); !why.empty())
      return where + ": " + why;
    for (const auto &input : node.input())
      if (!input.empty() && !defined.contains(input))
        return where + " reads '" + input +
               "', which nothing defines before it";
    for (const auto &output : node.output())
      if (std::string why = define(output, where); !why.empty())
        return why;
  }
  for (const auto &output : graph.output())
    if (!defined.contains(output.name()))
      return "graph output '" + output.name() + "' is never defined";
  return "";
}
