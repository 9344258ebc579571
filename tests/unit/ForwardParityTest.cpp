//===- ForwardParityTest.cpp - Imported models compute what PyTorch does --===//
//
// Compiles each committed model to a forward-only artifact, runs it on the
// CPU backend with the inputs in tests/golden/forward/<model>/ and compares
// every output with PyTorch's (models/forward_reference.py wrote both). This
// checks the importer's semantics, codegen and the kernels together.
//
//===----------------------------------------------------------------------===//

#include "strata/Codegen/ArtifactWriter.h"
#include "strata/Frontend/OnnxImporter.h"
#include "strata/Runtime/Executor.h"
#include "strata/Tools/CompileDriver.h"
#include "strata/Tools/InitStrata.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace strata;
using namespace strata::runtime;

namespace {

std::string goldenPath(const std::string &model, const std::string &file) {
  return std::string(STRATA_SOURCE_DIR) + "/tests/golden/forward/" + model +
         "/" + file;
}

std::vector<char> readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return {};
  return std::vector<char>((*buffer)->getBufferStart(),
                           (*buffer)->getBufferEnd());
}

class ForwardParityTest : public ::testing::TestWithParam<const char *> {};

TEST_P(ForwardParityTest, MatchesPyTorch) {
  std::string model = GetParam();
  std::string onnxPath = std::string(STRATA_SOURCE_DIR) + "/models/" + model +
                         ".onnx";
  mlir::DialectRegistry registry;
  registerAllStrataDialectsAndPasses(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = importGraph(context, onnxPath, {});
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("parity", dir));
  std::string artifactDir = (dir + "/" + model + ".strata").str();
  auto weights = frontend::openOnnxWeights(onnxPath);
  ASSERT_TRUE(static_cast<bool>(weights)) << llvm::toString(weights.takeError());
  llvm::Error written = codegen::writeArtifact(
      **module, artifactDir,
      [&](llvm::StringRef name) { return (*weights)->read(name); });
  ASSERT_FALSE(static_cast<bool>(written)) << llvm::toString(std::move(written));

  std::unique_ptr<Artifact> artifact;
  Status loaded = Artifact::load(artifactDir, artifact);
  ASSERT_TRUE(loaded) << loaded.message();
  std::unique_ptr<Executor> executor;
  Status created = Executor::create(*artifact, getCpuKernels(), executor);
  ASSERT_TRUE(created) << created.message();

  for (const std::string &name : executor->getInputNames()) {
    std::vector<char> bytes = readFile(goldenPath(model, "input." + name + ".bin"));
    TensorView *input = executor->findInput(name);
    ASSERT_EQ(bytes.size(), input->bytes()) << name;
    std::memcpy(input->data, bytes.data(), bytes.size());
  }
  Status ran = executor->run();
  ASSERT_TRUE(ran) << ran.message();

  for (const std::string &name : executor->getOutputNames()) {
    const TensorView *output = executor->findOutput(name);
    ASSERT_EQ(output->dtype, DType::F32);
    std::vector<char> bytes = readFile(goldenPath(model, "output." + name + ".bin"));
    if (bytes.empty())
      bytes = readFile(goldenPath(model, "output." + name + ".row0.bin"));
    ASSERT_FALSE(bytes.empty()) << "no reference for output " << name;
    ASSERT_LE(bytes.size(), output->bytes());
    const float *ref = reinterpret_cast<const float *>(bytes.data());
    const float *got = output->as<float>();
    size_t count = bytes.size() / sizeof(float);
    double maxRef = 0, maxDiff = 0;
    for (size_t i = 0; i < count; ++i) {
      maxRef = std::max(maxRef, std::abs(double(ref[i])));
      maxDiff = std::max(maxDiff, std::abs(double(ref[i]) - double(got[i])));
    }
    // fp32 against PyTorch's fp32 with other summation orders.
    EXPECT_LE(maxDiff, 1e-5 * std::max(1.0, maxRef))
        << model << "." << name << ": max |diff| " << maxDiff
        << ", max |ref| " << maxRef << " over " << count << " values";
    std::cout << model << "." << name << ": max |diff| " << maxDiff
              << " (max |ref| " << maxRef << ", " << count << " values)\n";
  }
  llvm::sys::fs::remove_directories(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardParityTest,
                         ::testing::Values("mlp", "gpt_tiny", "bert_tiny"));

} // namespace
