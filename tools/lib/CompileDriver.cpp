//===- CompileDriver.cpp - strata-compile ---------------------------------===//
//
// strata-compile MODEL.onnx [--emit=STAGE] [-o OUT] [--input-shape N=DxD]...
// Each --emit value stops after one stage of the flow, so every stage is a
// test seam. Every error ends the run with one line and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "strata/Tools/CompileDriver.h"

#include "strata/Codegen/ArtifactWriter.h"
#include "strata/Frontend/OnnxImporter.h"
#include "strata/Tools/GraphSummary.h"
#include "strata/Tools/InitStrata.h"
#include "strata/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

enum class EmitStage { Onnx, Graph, Summary };

struct CompileOptions {
  cl::OptionCategory category{"strata-compile options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<model.onnx>"),
                             cl::Required, cl::cat(category)};
  cl::opt<std::string> output{"o", cl::desc("Output file (default: stdout)"),
                              cl::value_desc("path"), cl::init("-"),
                              cl::cat(category)};
  cl::opt<EmitStage> emit{
      "emit", cl::desc("Stop after a stage and print its result"),
      cl::values(
          clEnumValN(EmitStage::Onnx, "onnx",
                     "the imported graph before cleanup (folding, patterns)"),
          clEnumValN(EmitStage::Graph, "graph",
                     "the graph dialect after import and cleanup"),
          clEnumValN(EmitStage::Summary, "summary",
                     "a readable summary: inputs, parameters, op counts")),
      cl::cat(category)};
  cl::list<std::string> inputShapes{
      "input-shape",
      cl::desc("Static shape of a graph input, e.g. input_ids=8x64 "
               "(repeatable)"),
      cl::value_desc("name=DxD..."), cl::cat(category)};
  cl::opt<int64_t> batch{"batch",
                         cl::desc("Static size for a dynamic first input dim"),
                         cl::init(0), cl::cat(category)};
  cl::opt<bool> noFuseAttention{
      "no-fuse-attention",
      cl::desc("Keep attention as matmul/softmax instead of one op"),
      cl::init(false), cl::cat(category)};
  cl::opt<bool> forwardOnly{
      "forward-only",
      cl::desc("With -o: write an inference artifact (the forward pass) "
               "that strata-run --forward evaluates"),
      cl::init(false), cl::cat(category)};
  cl::opt<bool> listOps{"list-onnx-ops",
                        cl::desc("Print the supported ONNX ops and exit"),
                        cl::init(false), cl::cat(category)};
};

int error(const llvm::Twine &message) {
  llvm::errs() << "strata-compile: error: " << message << "\n";
  return 1;
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
strata::importGraph(MLIRContext &context, llvm::StringRef path,
                    const frontend::ImportOptions &options, bool fuseAttention) {
  auto module = frontend::importOnnxFile(context, path, options);
  if (!module)
    return module.takeError();
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diagnostic.empty())
      diagnostic = diag.str();
    return success();
  });
  PassManager pm(&context);
  GraphPipelineOptions pipelineOptions;
  pipelineOptions.fuseAttention = fuseAttention;
  buildGraphPipeline(pm, pipelineOptions);
  if (failed(pm.run(**module)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "graph pipeline failed: " + diagnostic);
  return module;
}


int strata::compileMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --list-onnx-ops needs no model; handle it before the required positional.
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "--list-onnx-ops") {
      for (const std::string &op : frontend::getSupportedOnnxOps())
        llvm::outs() << op << "\n";
      return 0;
    }
  CompileOptions options;
  cl::HideUnrelatedOptions(options.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "strata-compile: compile an ONNX model into a Strata training artifact\n\n"
      "  strata-compile model.onnx --emit=graph      print the imported graph\n"
      "  strata-compile model.onnx --emit=summary    parameters, ops, shapes\n"
      "  strata-compile model.onnx --forward-only -o model.strata\n"
      "                                               an inference artifact\n");

  frontend::ImportOptions importOptions;
  for (const std::string &flag : options.inputShapes)
    if (llvm::Error e = frontend::parseInputShapeFlag(flag, importOptions))
      return error(llvm::toString(std::move(e)));
  if (options.batch.getNumOccurrences()) {
    if (options.batch <= 0)
      return error("--batch must be positive");
    importOptions.batch = options.batch;
  }
  bool writeArtifact = options.emit.getNumOccurrences() == 0;
  if (writeArtifact && !options.forwardOnly)
    return error("training artifacts need autodiff and the optimizer, which "
                 "are not built yet; use --forward-only for an inference "
                 "artifact, or --emit=graph|summary");
  if (writeArtifact && options.output == "-")
    return error("give the artifact directory with -o NAME.strata");

  DialectRegistry registry;
  registerAllStrataDialectsAndPasses(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  auto module =
      options.emit == EmitStage::Onnx
          ? frontend::importOnnxFile(context, options.input, importOptions)
          : importGraph(context, options.input, importOptions,
                        !options.noFuseAttention);
  if (!module)
    return error(llvm::toString(module.takeError()));

  if (writeArtifact) {
    auto weights = frontend::openOnnxWeights(options.input);
    if (!weights)
      return error(llvm::toString(weights.takeError()));
    std::string summary = "forward-only";
    for (const std::string &flag : options.inputShapes)
      summary += " --input-shape=" + flag;
    summary += " --batch=" + std::to_string(options.batch);
    summary += options.noFuseAttention ? " --no-fuse-attention" : "";
    codegen::ArtifactOptions artifactOptions{summary};
    if (llvm::Error e = codegen::writeArtifact(
            **module, options.output,
            [&](llvm::StringRef name) { return (*weights)->read(name); },
            artifactOptions))
      return error(llvm::toString(std::move(e)));
    return 0;
  }

  std::string errorMessage;
  auto out = openOutputFile(options.output, &errorMessage);
  if (!out)
    return error(errorMessage);
  if (options.emit == EmitStage::Summary)
    printGraphSummary(**module, out->os());
  else
    (*module)->print(out->os());
  out->keep();
  return 0;
}
