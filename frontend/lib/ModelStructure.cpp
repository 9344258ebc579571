//===- ModelStructure.cpp - What a model is, apart from its batch ---------===//

#include "strata/Frontend/ModelStructure.h"

#include "onnx/onnx_pb.h"

#include <fstream>
#include <sstream>

namespace strata::frontend {
namespace {

/// Drops an initializer's values, keeping its name, type and dimensions.
void keepSignature(onnx::TensorProto &t) {
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.clear_uint64_data();
  t.clear_string_data();
  t.clear_external_data();
  t.clear_data_location();
  t.clear_doc_string();
}

/// Drops what may change between exports of one model: every value's
/// shape (the batch) and the documentation.
void canonicalize(onnx::GraphProto &g) {
  for (onnx::TensorProto &t : *g.mutable_initializer())
    keepSignature(t);
  for (auto *values : {g.mutable_input(), g.mutable_output()})
    for (onnx::ValueInfoProto &v : *values) {
      if (v.has_type() && v.type().has_tensor_type())
        v.mutable_type()->mutable_tensor_type()->clear_shape();
      v.clear_doc_string();
    }
  g.clear_value_info();
  g.clear_doc_string();
  for (onnx::NodeProto &node : *g.mutable_node()) {
    node.clear_doc_string();
    for (onnx::AttributeProto &a : *node.mutable_attribute()) {
      a.clear_doc_string();
      if (a.has_g())
        canonicalize(*a.mutable_g());
    }
  }
}

} // namespace

std::string readModelStructure(const std::string &onnxPath, std::string &out) {
  std::ifstream in(onnxPath, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in)
    return "cannot read '" + onnxPath + "'";
  std::string bytes = ss.str();
  if (onnxPath.size() >= 8 &&
      onnxPath.compare(onnxPath.size() - 8, 8, ".onnxtxt") == 0) {
    out = bytes;
    return "";
  }
  try {
    onnx::ModelProto model;
    if (!model.ParseFromString(bytes))
      return "cannot parse '" + onnxPath + "' as an ONNX model";
    onnx::ModelProto kept;
    *kept.mutable_opset_import() = model.opset_import();
    *kept.mutable_graph() = model.graph();
    canonicalize(*kept.mutable_graph());
    kept.mutable_graph()->clear_name();
    out.clear();
    if (!kept.SerializeToString(&out))
      return "cannot serialize '" + onnxPath + "'";
  } catch (const std::exception &e) {
    return "cannot read '" + onnxPath + "': " + e.what();
  }
  return "";
}

} // namespace strata::frontend
