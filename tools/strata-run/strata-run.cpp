//===- strata-run.cpp - Runs a Strata artifact ----------------------------===//
//
// The runtime knows no ONNX; this main installs the exporter that writes the
// artifact's model.onnx back with trained weights (--export-onnx).
//
//===----------------------------------------------------------------------===//

#include "strata/Frontend/OnnxExport.h"
#include "strata/Runtime/RunDriver.h"
#include "strata/Runtime/Training.h"

#include <map>

using namespace strata;

int main(int argc, char **argv) {
  runtime::setOnnxExporter([](const std::string &artifactDir,
                              runtime::Executor &executor,
                              const std::string &outPath) {
    std::map<std::string, std::string_view> values;
    for (const auto &state : executor.getStates())
      values[state.name] = std::string_view(
          static_cast<const char *>(state.view->data), state.view->bytes());
    std::string error = frontend::exportTrainedModel(
        artifactDir + "/model.onnx",
        [&](const std::string &name) {
          auto it = values.find(name);
          return it == values.end() ? std::string_view() : it->second;
        },
        outPath);
    return error.empty() ? runtime::Status::ok()
                         : runtime::Status::error("--export-onnx: " + error);
  });
  return runtime::runMain(argc, argv);
}
