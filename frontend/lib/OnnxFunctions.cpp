//===- OnnxFunctions.cpp - Inlining model-local ONNX functions ------------===//
//
// A call is a node whose (domain, op_type) names a function of
// ModelProto.functions. Its body replaces it: the function's formal inputs
// and outputs become the call's actual names, every other value of the body
// gets a prefix unique to the call, and an attribute that refers to one of
// the function's (ref_attr_name) takes the call's value or, when the call
// does not set it, the function's default for it (FunctionProto's
// attribute_proto, IR version 9, read from the unknown fields of ONNX 1.12's
// protobuf) or, without one, is left out (the op's default). Bodies may call
// other local functions, to a bounded depth (a function calling itself is an
// error, not an endless loop).
//
//===----------------------------------------------------------------------===//

#include "OnnxFunctions.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <google/protobuf/unknown_field_set.h>

#include <map>
#include <optional>

using namespace strata::frontend;

namespace {

/// Calls nested deeper than this are taken for recursion.
constexpr int kMaxDepth = 32;

bool isDefaultDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx";
}

class Inliner {
public:
  explicit Inliner(const onnx::ModelProto &model) {
    for (const auto &function : model.functions())
      functions[{function.domain(), function.name()}] = &function;
    for (const auto &entry : model.opset_import())
      if (isDefaultDomain(entry.domain()))
        opset = entry.version();
  }

  /// Appends `node` to `out`, or the body of the function it calls.
  std::string expand(const onnx::NodeProto &node, int depth,
                     google::protobuf::RepeatedPtrField<onnx::NodeProto> &out);

private:
  std::string
  expandCall(const onnx::NodeProto &call, const onnx::FunctionProto &function,
             int depth,
             google::protobuf::RepeatedPtrField<onnx::NodeProto> &out);

  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto *>
      functions;
  int64_t opset = 0;
  int64_t calls = 0;
};

/// FunctionProto.attribute_proto: the attributes that have defaults (field
/// 11 from IR version 9; ONNX 1.12's protobuf keeps it as an unknown field).
constexpr int kAttributeProtoField = 11;

/// The function's attributes with their defaults, if any: the names of
/// `attribute` map to null.
llvm::StringMap<std::optional<onnx::AttributeProto>>
declaredAttributes(const onnx::FunctionProto &function) {
  llvm::StringMap<std::optional<onnx::AttributeProto>> declared;
  for (const auto &name : function.attribute())
    declared[name] = std::nullopt;
  const google::protobuf::UnknownFieldSet &unknown =
      function.GetReflection()->GetUnknownFields(function);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &field = unknown.field(i);
    onnx::AttributeProto attr;
    if (field.number() == kAttributeProtoField &&
        field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
        attr.ParseFromString(field.length_delimited()) && !attr.name().empty())
      declared[attr.name()] = attr;
  }
  return declared;
}

std::string callName(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return node.name();
  return node.output_size() ? node.output(0) : node.op_type();
}

std::string
Inliner::expand(const onnx::NodeProto &node, int depth,
                google::protobuf::RepeatedPtrField<onnx::NodeProto> &out) {
  auto it = functions.find({node.domain(), node.op_type()});
  if (it == functions.end()) {
    *out.Add() = node;
    return "";
  }
  return expandCall(node, *it->second, depth, out);
}

std::string
Inliner::expandCall(const onnx::NodeProto &call,
                    const onnx::FunctionProto &function, int depth,
                    google::protobuf::RepeatedPtrField<onnx::NodeProto> &out) {
  std::string where = "call '" + callName(call) + "' of local function '" +
                      function.name() + "'";
  if (depth >= kMaxDepth)
    return where + ": functions nest deeper than " + std::to_string(kMaxDepth) +
           " (a function that calls itself?)";
  for (const auto &entry : function.opset_import())
    if (isDefaultDomain(entry.domain()) && entry.version() != opset)
      return llvm::formatv("{0}: the function imports opset {1} but the "
                           "model opset {2}",
                           where, entry.version(), opset);
  if (call.input_size() > function.input_size() ||
      call.output_size() > function.output_size())
    return llvm::formatv("{0}: {1} inputs and {2} outputs given, the "
                         "function has {3} and {4}",
                         where, call.input_size(), call.output_size(),
                         function.input_size(), function.output_size());
  std::string prefix = callName(call) + "/" + function.name() + "#" +
                       std::to_string(calls++) + "/";
  llvm::StringMap<std::string> actual;
  for (int i = 0; i < function.input_size(); ++i)
    actual[function.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < function.output_size(); ++i)
    if (i < call.output_size() && !call.output(i).empty())
      actual[function.output(i)] = call.output(i);
  auto rename = [&](const std::string &name) {
    if (name.empty())
      return name;
    auto it = actual.find(name);
    return it != actual.end() ? it->second : prefix + name;
  };
  llvm::StringMap<std::optional<onnx::AttributeProto>> given =
      declaredAttributes(function);
  llvm::StringSet<> set;
  for (const auto &attr : call.attribute()) {
    if (!given.contains(attr.name()))
      return where + ": the function has no attribute '" + attr.name() + "'";
    if (!set.insert(attr.name()).second)
      return where + ": attribute '" + attr.name() + "' is given twice";
    given[attr.name()] = attr;
  }

  for (const auto &bodyNode : function.node()) {
    onnx::NodeProto node = bodyNode;
    node.set_name(prefix + callName(bodyNode));
    for (auto &input : *node.mutable_input())
      input = rename(input);
    for (auto &output : *node.mutable_output())
      output = rename(output);
    auto *attrs = node.mutable_attribute();
    for (int i = attrs->size() - 1; i >= 0; --i) {
      onnx::AttributeProto &attr = attrs->at(i);
      if (attr.ref_attr_name().empty())
        continue;
      auto value = given.find(attr.ref_attr_name());
      if (value == given.end() || !value->second) {
        attrs->DeleteSubrange(i, 1);
        continue;
      }
      std::string name = attr.name();
      attr = *value->second;
      attr.set_name(name);
    }
    if (std::string why = expand(node, depth + 1, out); !why.empty())
      return why;
  }
  return "";
}

} // namespace

std::string strata::frontend::inlineLocalFunctions(onnx::ModelProto &model) {
  if (model.functions_size() == 0)
    return "";
  Inliner inliner(model);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (const auto &node : model.graph().node())
    if (std::string why = inliner.expand(node, 0, nodes); !why.empty())
      return why;
  model.mutable_graph()->mutable_node()->Swap(&nodes);
  model.clear_functions();
  return "";
}
