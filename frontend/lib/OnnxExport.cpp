//===- OnnxExport.cpp - Trained weights back into the user's ONNX ---------===//

#include "strata/Frontend/OnnxExport.h"

#include "strata/Frontend/ExternalData.h"

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata::frontend {
namespace {

std::string readFile(const std::string &path, bool &ok) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  ok = static_cast<bool>(in);
  return ss.str();
}

/// Moves an initializer's external data into raw_data.
std::string internalize(onnx::TensorProto &t, const std::string &dir) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL)
    return "";
  std::string bytes;
  if (std::string why = readExternalData(t, dir, -1, bytes); !why.empty())
    return "initializer '" + t.name() + "': " + why;
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  t.set_raw_data(std::move(bytes));
  return "";
}

std::string writeAtomically(const onnx::ModelProto &model,
                            const std::string &outPath) {
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return "cannot serialize the model (over 2 GB?)";
  std::string tmp = outPath + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
      return "cannot write '" + tmp + "'";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, outPath, ec);
  if (ec)
    return "cannot write '" + outPath + "': " + ec.message();
  return "";
}

} // namespace

std::string writeModelSkeleton(const std::string &onnxPath,
                               const std::set<std::string> &emptied,
                               const std::string &outPath) {
  try {
    bool ok = false;
    std::string bytes = readFile(onnxPath, ok);
    onnx::ModelProto model;
    if (!ok || !model.ParseFromString(bytes))
      return "cannot read '" + onnxPath + "'";
    std::string dir = std::filesystem::path(onnxPath).parent_path().string();
    if (dir.empty())
      dir = ".";
    for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
      if (emptied.count(t.name())) {
        t.clear_external_data();
        t.set_data_location(onnx::TensorProto::DEFAULT);
        t.clear_raw_data();
        t.clear_float_data();
        t.clear_double_data();
        t.clear_int32_data();
        t.clear_int64_data();
        continue;
      }
      if (std::string e = internalize(t, dir); !e.empty())
        return e;
    }
    return writeAtomically(model, outPath);
  } catch (const std::exception &e) {
    return std::string("cannot keep the model in the artifact: ") + e.what();
  }
}

std::string exportTrainedModel(const std::string &skeletonPath,
                               const TrainedValue &values,
                               const std::string &outPath) {
  try {
    bool ok = false;
    std::string bytes = readFile(skeletonPath, ok);
    onnx::ModelProto model;
    if (!ok || !model.ParseFromString(bytes))
      return "cannot read '" + skeletonPath +
             "' (an artifact from before --export-onnx existed? recompile it)";
    for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
      std::string_view value = values(t.name());
      if (value.empty())
        continue;
      t.set_raw_data(std::string(value));
    }
    for (const onnx::TensorProto &t : model.graph().initializer())
      if (!t.has_raw_data() && t.float_data_size() == 0 &&
          t.int64_data_size() == 0 && t.int32_data_size() == 0 &&
          t.double_data_size() == 0 && t.string_data_size() == 0 &&
          t.uint64_data_size() == 0) {
        int64_t count = 1;
        for (int64_t d : t.dims())
          count *= d;
        if (count)
          return "no trained value for initializer '" + t.name() + "'";
      }
    onnx::checker::check_model(model);
    return writeAtomically(model, outPath);
  } catch (const std::exception &e) {
    return std::string("the exported model fails ONNX's checker: ") + e.what();
  }
}

} // namespace strata::frontend
