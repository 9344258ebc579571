//===- OnnxImporterTest.cpp - The ONNX importer's API ---------------------===//

#include "strata/Frontend/OnnxImporter.h"
#include "strata/Tools/CompileDriver.h"
#include "strata/Tools/InitStrata.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <map>

using namespace mlir;
using namespace strata;

namespace {

class OnnxImporterTest : public ::testing::Test {
protected:
  OnnxImporterTest() {
    DialectRegistry registry;
    registerAllStrataDialectsAndPasses(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  std::string modelPath(llvm::StringRef name) {
    return (llvm::Twine(STRATA_MODELS_DIR) + "/" + name).str();
  }

  /// Op name -> count in @main.
  static std::map<std::string, int> countOps(ModuleOp module) {
    std::map<std::string, int> counts;
    module.walk([&](Operation *op) { ++counts[op->getName().getStringRef().str()]; });
    return counts;
  }

  /// Number of elements over arguments with the given role.
  static int64_t countElements(ModuleOp module, llvm::StringRef role) {
    int64_t total = 0;
    auto func = *module.getOps<func::FuncOp>().begin();
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      std::optional<graph::Role> attr = graph::getArgumentRole(func, i);
      if (attr && graph::stringifyRole(*attr) == role)
        total += cast<RankedTensorType>(func.getArgument(i).getType())
                     .getNumElements();
    }
    return total;
  }

  std::string importError(llvm::StringRef text,
                          const frontend::ImportOptions &options = {}) {
    auto module = frontend::importOnnxText(context, text, options);
    if (module)
      return "";
    return llvm::toString(module.takeError());
  }

  MLIRContext context;
};

TEST_F(OnnxImporterTest, GptImportsWithPatternsRecognised) {
  auto module = importGraph(context, modelPath("gpt_tiny.onnx"), {});
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto counts = countOps(**module);
  EXPECT_EQ(counts["graph.attention"], 2);
  EXPECT_EQ(counts["graph.gelu"], 2);
  EXPECT_EQ(counts["graph.embedding"], 2);
  EXPECT_EQ(counts["graph.layer_norm"], 5);
  // c_attn, c_proj, c_fc, mlp c_proj per block, plus the tied lm_head.
  EXPECT_EQ(counts["graph.linear"], 9);
  EXPECT_EQ(counts["graph.matmul"], 0);
  EXPECT_EQ(counts["graph.softmax"], 0);
  EXPECT_EQ(counts["graph.dropout"], 0);
  EXPECT_EQ(counts["graph.erf"], 0);
  EXPECT_EQ(counts["graph.where"], 0);
  // Trainable parameters, tied weight counted once (models/manifest.json).
  EXPECT_EQ(countElements(**module, "parameter"), 120576);
}

TEST_F(OnnxImporterTest, BertImportsWithPaddingMask) {
  auto module = importGraph(context, modelPath("bert_tiny.onnx"), {});
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto counts = countOps(**module);
  EXPECT_EQ(counts["graph.attention"], 2);
  EXPECT_EQ(counts["graph.gelu"], 3);
  EXPECT_EQ(counts["graph.embedding"], 3);
  EXPECT_EQ(counts["graph.tanh"], 1);
  EXPECT_EQ(counts["graph.matmul"], 0);
  EXPECT_EQ(countElements(**module, "parameter"), 129538);
  bool masked = false;
  (*module)->walk([&](graph::AttentionOp op) {
    masked |= static_cast<bool>(op.getMask());
    EXPECT_FALSE(op.getCausal());
  });
  EXPECT_TRUE(masked);
}

TEST_F(OnnxImporterTest, MlpAndExternalDataImportTheSame) {
  auto inline_ = importGraph(context, modelPath("mlp.onnx"), {});
  auto external = importGraph(context, modelPath("mlp_external.onnx"), {});
  ASSERT_TRUE(static_cast<bool>(inline_)) << llvm::toString(inline_.takeError());
  ASSERT_TRUE(static_cast<bool>(external))
      << llvm::toString(external.takeError());
  EXPECT_EQ(countOps(**inline_)["graph.linear"], 3);
  EXPECT_EQ(countElements(**inline_, "parameter"), 26122);
  EXPECT_EQ(countElements(**external, "parameter"), 26122);
}

TEST_F(OnnxImporterTest, DynamicBatchNeedsAShape) {
  auto module = frontend::importOnnxFile(context, modelPath("mlp_dynamic_batch.onnx"));
  ASSERT_FALSE(static_cast<bool>(module));
  std::string message = llvm::toString(module.takeError());
  EXPECT_NE(message.find("input 'features' has dynamic dimension 0"),
            std::string::npos) << message;
  EXPECT_NE(message.find("--input-shape features=Nx64"), std::string::npos);

  frontend::ImportOptions options;
  options.batch = 16;
  auto fixed = frontend::importOnnxFile(context, modelPath("mlp_dynamic_batch.onnx"),
                                        options);
  ASSERT_TRUE(static_cast<bool>(fixed)) << llvm::toString(fixed.takeError());
  auto func = *(*fixed)->getOps<func::FuncOp>().begin();
  EXPECT_EQ(cast<RankedTensorType>(func.getArgument(0).getType()).getDimSize(0), 16);
}

TEST_F(OnnxImporterTest, TruncatedFileIsAnError) {
  auto buffer = llvm::MemoryBuffer::getFile(modelPath("mlp.onnx"));
  ASSERT_TRUE(static_cast<bool>(buffer));
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("truncated", "onnx", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << (*buffer)->getBuffer().take_front((*buffer)->getBufferSize() / 2);
  }
  auto module = frontend::importOnnxFile(context, path);
  llvm::sys::fs::remove(path);
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(llvm::toString(module.takeError()).find("not a valid ONNX model"),
            std::string::npos);
}

TEST_F(OnnxImporterTest, MissingFileIsAnError) {
  auto module = frontend::importOnnxFile(context, "/nonexistent/model.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(llvm::toString(module.takeError()).find("cannot read"),
            std::string::npos);
}

TEST_F(OnnxImporterTest, AllUnsupportedOpsAreListedInOneLine) {
  std::string message = importError(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3,3] x) => (float[3,3] y) {
      a = Hardmax(x)
      b = Relu(a)
      y = Det(b)
    })");
  EXPECT_NE(message.find("unsupported ONNX ops (2): Hardmax (node 'a'), Det "
                         "(node 'y')"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(OnnxImporterTest, OpsetOutsideTheRangeIsAnError) {
  std::string message = importError(R"(
    <ir_version: 7, opset_import: ["" : 11]>
    g (float[2] x) => (float[2] y) { y = Relu(x) })");
  EXPECT_NE(message.find("opset 11 is outside the supported range 13..17"),
            std::string::npos)
      << message;
}

TEST_F(OnnxImporterTest, NonConstantShapeNamesTheNode) {
  std::string message = importError(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x, int64[2] s) => (float[3,2] y) { y = Reshape(x, s) })");
  EXPECT_NE(message.find("(Reshape): the target shape must be a compile-time "
                         "integer tensor"),
            std::string::npos)
      << message;
}

TEST_F(OnnxImporterTest, InputShapeFlag) {
  frontend::ImportOptions options;
  EXPECT_FALSE(static_cast<bool>(frontend::parseInputShapeFlag("ids=8x64", options)));
  EXPECT_EQ(options.inputShapes["ids"], (llvm::SmallVector<int64_t>{8, 64}));
  llvm::Error bad = frontend::parseInputShapeFlag("ids=8xa", options);
  ASSERT_TRUE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(std::move(bad)).find("positive integers"),
            std::string::npos);
}

TEST_F(OnnxImporterTest, SupportedOpsCoverTheIssueList) {
  std::vector<std::string> ops = frontend::getSupportedOnnxOps();
  for (const char *op :
       {"MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt",
        "Reciprocal", "Neg", "Exp", "Log", "Erf", "Tanh", "Relu", "Sigmoid",
        "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization",
        "Gather", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Flatten",
        "Concat", "Split", "Slice", "Expand", "Where", "Equal", "Less",
        "Greater", "Not", "Cast", "Constant", "ConstantOfShape", "Identity",
        "Dropout", "Shape", "Trilu", "ReduceMean", "ReduceSum", "ReduceMax",
        "Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
        "SoftmaxCrossEntropyLoss"})
    EXPECT_TRUE(std::find(ops.begin(), ops.end(), op) != ops.end()) << op;
}

} // namespace
