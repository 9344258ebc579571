//===- strata-run.cpp - Runs a Strata artifact ----------------------------===//
//
// The runtime knows no ONNX; this main installs the exporter that writes the
// artifact's model.onnx back with trained weights (--export-onnx).
//
//===----------------------------------------------------------------------===//

#include "strata/Frontend/OnnxExport.h"
#include "strata/Runtime/RunDriver.h"
#include "strata/Runtime/Training.h"

using namespace strata;

int main(int argc, char **argv) {
  runtime::setOnnxExporter([](const std::string &artifactDir,
                              const runtime::WeightLookup &weights,
                              const std::string &outPath) {
    std::string error = frontend::exportTrainedModel(
        artifactDir + "/model.onnx",
        [&](const std::string &name) { return weights(name); }, outPath);
    return error.empty() ? runtime::Status::ok()
                         : runtime::Status::error("--export-onnx: " + error);
  });
  return runtime::runMain(argc, argv);
}
