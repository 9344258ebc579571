//===- CompileDriver.cpp - strata-compile ---------------------------------===//
//
// strata-compile MODEL.onnx [--emit=STAGE] [-o OUT] [--input-shape N=DxD]...
// Each --emit value stops after one stage of the flow, so every stage is a
// test seam. Every error ends the run with one line and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "strata/Tools/CompileDriver.h"

#include "strata/Codegen/ArtifactWriter.h"
#include "strata/Dialect/Graph/IR/GraphDialect.h"
#include "strata/Frontend/OnnxExport.h"
#include "strata/Frontend/OnnxImporter.h"
#include "strata/Tools/GraphSummary.h"
#include "strata/Tools/InitStrata.h"
#include "strata/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <set>
#include <tuple>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

enum class EmitStage { Onnx, Graph, Summary, Training, Distributed, Memory };

/// "4096", "6MiB", "6M", "40G", "1.5GiB" (K, M, G, T: powers of 1024).
std::optional<uint64_t> parseBytes(llvm::StringRef text) {
  llvm::StringRef number = text.take_while(
      [](char c) { return llvm::isDigit(c) || c == '.'; });
  llvm::StringRef unit = text.drop_front(number.size()).lower();
  double value;
  if (number.empty() || number.getAsDouble(value))
    return std::nullopt;
  double scale = 1;
  std::string u = unit.str();
  if (u.empty() || u == "b")
    scale = 1;
  else if (u == "k" || u == "kb" || u == "kib")
    scale = 1024.0;
  else if (u == "m" || u == "mb" || u == "mib")
    scale = 1024.0 * 1024;
  else if (u == "g" || u == "gb" || u == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (u == "t" || u == "tb" || u == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return std::nullopt;
  return uint64_t(value * scale);
}

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
                     "a readable summary: inputs, parameters, op counts"),
          clEnumValN(EmitStage::Training, "training",
                     "the graph with @micro_step (loss, backward) and "
                     "@optimizer_step"),
          clEnumValN(EmitStage::Distributed, "distributed",
                     "the training step sharded over the topology "
                     "(strata-partition: all-gathers, reduce-scatters, "
                     "all-reduces)"),
          clEnumValN(EmitStage::Memory, "memory",
                     "the module an artifact is written from: streams, "
                     "memory offsets, events")),
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

  // Training.
  cl::opt<std::string> optimizer{"optimizer", cl::desc("adamw or sgd"),
                                 cl::init("adamw"), cl::cat(category)};
  cl::opt<double> lr{"lr", cl::desc("Learning rate (strata-run --lr overrides)"),
                     cl::init(1e-3), cl::cat(category)};
  cl::opt<double> weightDecay{
      "weight-decay",
      cl::desc("Weight decay (default 0.01 for adamw, 0 for sgd)"),
      cl::init(-1.0), cl::cat(category)};
  cl::opt<double> beta1{"beta1", cl::desc("AdamW beta1"), cl::init(0.9),
                        cl::cat(category)};
  cl::opt<double> beta2{"beta2", cl::desc("AdamW beta2"), cl::init(0.999),
                        cl::cat(category)};
  cl::opt<double> eps{"eps", cl::desc("AdamW epsilon"), cl::init(1e-8),
                      cl::cat(category)};
  cl::opt<double> momentum{"momentum", cl::desc("SGD momentum"), cl::init(0.9),
                           cl::cat(category)};
  cl::opt<double> dampening{"dampening", cl::desc("SGD dampening"),
                            cl::init(0.0), cl::cat(category)};
  cl::opt<bool> nesterov{"nesterov", cl::desc("SGD Nesterov momentum"),
                         cl::init(false), cl::cat(category)};
  cl::opt<double> clipNorm{"clip-norm",
                           cl::desc("Clip the global gradient norm (0: off)"),
                           cl::init(0.0), cl::cat(category)};
  cl::opt<unsigned> accum{"accum", cl::desc("Micro-steps per optimizer step"),
                          cl::init(1), cl::cat(category)};
  cl::opt<std::string> lrSchedule{"lr-schedule",
                                  cl::desc("constant or cosine"),
                                  cl::init("constant"), cl::cat(category)};
  cl::opt<uint64_t> warmupSteps{"warmup-steps",
                                cl::desc("Linear warmup steps"), cl::init(0),
                                cl::cat(category)};
  cl::opt<uint64_t> steps{"steps",
                          cl::desc("Optimizer steps (the cosine horizon and "
                                   "strata-run's default)"),
                          cl::init(100), cl::cat(category)};
  cl::opt<double> minLrRatio{"min-lr-ratio",
                             cl::desc("Cosine floor as a fraction of --lr"),
                             cl::init(0.1), cl::cat(category)};
  cl::opt<std::string> dtype{"dtype", cl::desc("fp32, bf16 or fp16"),
                             cl::init("fp32"), cl::cat(category)};
  cl::opt<std::string> precisionStorage{
      "precision-storage",
      cl::desc("bf16/fp16: narrow (the low-precision tensors are stored "
               "bf16/fp16) or f32 (stored f32, rounded: the emulation; same "
               "numbers, twice the memory)"),
      cl::init("narrow"), cl::cat(category)};
  cl::opt<double> lossScale{
      "loss-scale",
      cl::desc("fp16: the initial dynamic loss scale (65536, as torch's "
               "GradScaler)"),
      cl::init(65536.0), cl::cat(category)};
  // Distribution.
  cl::opt<unsigned> world{"world", cl::desc("Ranks N (mpirun -np N)"),
                          cl::init(1), cl::cat(category)};
  cl::opt<unsigned> gpusPerNode{
      "gpus-per-node", cl::desc("Ranks per node K (node-major numbering)"),
      cl::init(0), cl::cat(category)};
  cl::opt<unsigned> partitionGroup{
      "partition-group",
      cl::desc("Partition group size P: N is ZeRO-3, 1 data parallelism "
               "(default N)"),
      cl::init(0), cl::cat(category)};
  cl::opt<std::string> hierarchical{
      "hierarchical", cl::desc("auto, on or off: hierarchical all-gather"),
      cl::init("auto"), cl::cat(category)};
  cl::opt<std::string> gradSync{
      "grad-sync",
      cl::desc("2hop (reduce-scatter each micro-step, replication all-reduce "
               "each step) or global (all-reduce over every rank each "
               "micro-step)"),
      cl::init("2hop"), cl::cat(category)};
  cl::opt<uint64_t> bucketBytes{
      "bucket-bytes",
      cl::desc("Coalesce a layer's collectives into buckets of at most this "
               "many bytes (0: one parameter a collective)"),
      cl::init(32ull << 20), cl::cat(category)};
  // Memory.
  cl::opt<std::string> gpuMemory{
      "gpu-memory",
      cl::desc("Device memory the step may use, e.g. 40G or 6MiB (default: "
               "no budget); over it, optimizer states and then parameters "
               "move to the host and SSD tiers"),
      cl::init(""), cl::cat(category)};
  cl::opt<std::string> hostMemory{
      "host-memory",
      cl::desc("Host memory for offloaded state (default: no limit)"),
      cl::init(""), cl::cat(category)};
  cl::opt<std::string> ssdMemory{
      "ssd-memory",
      cl::desc("SSD bytes for offloaded optimizer states (default: no SSD "
               "tier; strata-run --ssd-dir says where)"),
      cl::init(""), cl::cat(category)};
  cl::opt<std::string> recompute{
      "recompute",
      cl::desc("none, auto (when moving state off the device is not "
               "enough) or always: recompute forward activations in "
               "backward instead of keeping them"),
      cl::init("none"), cl::cat(category)};
  cl::opt<bool> fuseElementwise{
      "fuse-elementwise",
      cl::desc("Run chains of elementwise ops as one kernel "
               "(strata-fuse-elementwise; =false keeps every op its own)"),
      cl::init(true), cl::cat(category)};
  cl::opt<bool> groupUpdates{
      "group-updates",
      cl::desc("Update many parameters per kernel (strata-group-updates: "
               "multi-tensor AdamW/SGD and gradient norms; =false keeps one "
               "update per parameter)"),
      cl::init(true), cl::cat(category)};
  cl::opt<unsigned> prefetchDepth{
      "prefetch-depth",
      cl::desc("Issue each all-gather or reload this many fetches ahead of "
               "its consumer, memory permitting (1; 0: just before it)"),
      cl::init(1), cl::cat(category)};
  cl::opt<std::string> prefetchBytes{
      "prefetch-bytes",
      cl::desc("Most fetched bytes waiting for their consumers (default: no "
               "cap)"),
      cl::init(""), cl::cat(category)};
  cl::opt<uint64_t> pageSize{
      "page-size",
      cl::desc("Bytes of a memory page, the unit pools allocate and moves "
               "transfer (4 MiB)"),
      cl::init(4ull << 20), cl::cat(category)};
  cl::list<std::string> freeze{
      "freeze", cl::desc("Keep parameters matching a glob fixed (repeatable)"),
      cl::value_desc("glob"), cl::cat(category)};
  cl::opt<int64_t> ignoreIndex{"ignore-index",
                               cl::desc("Label excluded from the loss"),
                               cl::init(-100), cl::cat(category)};
  cl::opt<std::string> logits{
      "logits", cl::desc("The output the loss reads (default: the first)"),
      cl::init(""), cl::cat(category)};
  cl::opt<bool> listOps{"list-onnx-ops",
                        cl::desc("Print the supported ONNX ops and exit"),
                        cl::init(false), cl::cat(category)};
};

int error(const llvm::Twine &message) {
  llvm::errs() << "strata-compile: error: " << message << "\n";
  return 1;
}

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

llvm::Error readTrainingOptions(const CompileOptions &o,
                                strata::codegen::TrainingOptions &t) {
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    return fail("--optimizer must be adamw or sgd, not '" + o.optimizer + "'");
  if (o.lrSchedule != "constant" && o.lrSchedule != "cosine")
    return fail("--lr-schedule must be constant or cosine, not '" +
                o.lrSchedule + "'");
  if (o.dtype != "fp32" && o.dtype != "bf16" && o.dtype != "fp16")
    return fail("--dtype must be fp32, bf16 or fp16, not '" + o.dtype + "'");
  if (o.precisionStorage != "narrow" && o.precisionStorage != "f32")
    return fail("--precision-storage must be narrow or f32, not '" +
                o.precisionStorage + "'");
  if (!(o.lossScale > 0.0))
    return fail("--loss-scale must be positive");
  if (o.accum < 1)
    return fail("--accum must be at least 1");
  if (!(o.lr > 0.0))
    return fail("--lr must be positive");
  if (o.clipNorm < 0.0)
    return fail("--clip-norm must be 0 (off) or positive");
  if (o.steps < 1)
    return fail("--steps must be at least 1");
  t.optimizer = o.optimizer;
  t.lr = o.lr;
  t.weightDecay = o.weightDecay >= 0.0 ? o.weightDecay.getValue()
                  : o.optimizer == "adamw" ? 0.01
                                           : 0.0;
  t.beta1 = o.beta1;
  t.beta2 = o.beta2;
  t.eps = o.eps;
  t.momentum = o.momentum;
  t.dampening = o.dampening;
  t.nesterov = o.nesterov;
  t.clipNorm = o.clipNorm;
  t.accum = o.accum;
  t.lrSchedule = o.lrSchedule;
  t.warmupSteps = o.warmupSteps;
  t.totalSteps = o.steps;
  t.minLrRatio = o.minLrRatio;
  t.dtype = o.dtype;
  t.precisionStorage = o.precisionStorage;
  t.ignoreIndex = o.ignoreIndex;
  t.lossScale = o.lossScale;
  t.logits = o.logits;
  return llvm::Error::success();
}

/// Runs the passes `build` adds over `module`. A failure is the first
/// diagnostic they emitted, after `prefix` (or `fallback` when there was
/// none): one line for the user.
llvm::Error runPasses(MLIRContext &context, ModuleOp module,
                      llvm::function_ref<void(OpPassManager &)> build,
                      llvm::StringRef prefix, llvm::StringRef fallback) {
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diagnostic.empty())
      diagnostic = diag.str();
    return success();
  });
  PassManager pm(&context);
  build(pm);
  if (succeeded(pm.run(module)))
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 diagnostic.empty()
                                     ? fallback.str()
                                     : (prefix + diagnostic).str());
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
strata::importGraph(MLIRContext &context, llvm::StringRef path,
                    const frontend::ImportOptions &options, bool fuseAttention) {
  auto module = frontend::importOnnxFile(context, path, options);
  if (!module)
    return module.takeError();
  GraphPipelineOptions pipelineOptions;
  pipelineOptions.fuseAttention = fuseAttention;
  if (llvm::Error e = runPasses(
          context, **module,
          [&](OpPassManager &pm) { buildGraphPipeline(pm, pipelineOptions); },
          "graph pipeline failed: ", "graph pipeline failed: "))
    return std::move(e);
  return module;
}

/// The loss, the backward graph and the optimizer step.
llvm::Error strata::buildTrainingStep(MLIRContext &context, ModuleOp module,
                              const strata::codegen::TrainingOptions &t,
                              llvm::ArrayRef<std::string> freeze,
                              const strata::codegen::TopologyOptions &topology,
                              bool distribute) {
  strata::TrainingPipelineOptions pipeline;
  pipeline.dtype = t.dtype;
  pipeline.precisionStorage = t.precisionStorage;
  pipeline.freeze = llvm::SmallVector<std::string>(freeze);
  pipeline.logits = t.logits;
  pipeline.ignoreIndex = t.ignoreIndex;
  pipeline.optimizer = t.optimizer;
  pipeline.beta1 = t.beta1;
  pipeline.beta2 = t.beta2;
  pipeline.eps = t.eps;
  pipeline.weightDecay = t.weightDecay;
  pipeline.momentum = t.momentum;
  pipeline.dampening = t.dampening;
  pipeline.nesterov = t.nesterov;
  pipeline.clipNorm = t.clipNorm;
  pipeline.accum = t.accum;
  pipeline.world = topology.world;
  pipeline.ranksPerNode = topology.ranksPerNode;
  pipeline.partition = topology.partition;
  pipeline.hierarchical = topology.hierarchical;
  pipeline.gradSync = topology.gradSync;
  pipeline.bucketBytes = topology.bucketBytes;
  pipeline.distribute = distribute;
  return runPasses(
      context, module,
      [&](OpPassManager &pm) { strata::buildTrainingPipeline(pm, pipeline); },
      "", "building the training step failed");
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
      "  strata-compile model.onnx -o model.strata   a training artifact\n"
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
  bool planned = writeArtifact || options.emit == EmitStage::Memory;
  bool training = !options.forwardOnly &&
                  (planned || options.emit == EmitStage::Training ||
                   options.emit == EmitStage::Distributed);
  strata::codegen::TrainingOptions trainingOptions;
  if (training) {
    if (llvm::Error e = readTrainingOptions(options, trainingOptions))
      return error(llvm::toString(std::move(e)));
  }
  strata::codegen::TopologyOptions topology;
  if (training) {
    topology.world = options.world;
    topology.ranksPerNode =
        options.gpusPerNode ? options.gpusPerNode.getValue() : options.world;
    topology.partition = options.partitionGroup
                             ? options.partitionGroup.getValue()
                             : options.world;
    unsigned n = topology.world, k = topology.ranksPerNode,
             p = topology.partition;
    if (n < 1 || p < 1 || p > n || n % p != 0)
      return error("--partition-group " + std::to_string(p) +
                   " must divide --world " + std::to_string(n));
    if (k < 1 || n % k != 0)
      return error("--gpus-per-node " + std::to_string(k) +
                   " must divide --world " + std::to_string(n));
    if (options.gradSync != "2hop" && options.gradSync != "global")
      return error("--grad-sync must be 2hop or global, not '" +
                   options.gradSync + "'");
    if (options.hierarchical != "auto" && options.hierarchical != "on" &&
        options.hierarchical != "off")
      return error("--hierarchical must be auto, on or off, not '" +
                   options.hierarchical + "'");
    topology.gradSync = options.gradSync;
    topology.bucketBytes = options.bucketBytes;
    bool possible = p > k && p % k == 0;
    if (options.hierarchical == "on" && !possible)
      return error("--hierarchical on needs --partition-group > "
                   "--gpus-per-node and a multiple of it (P = " +
                   std::to_string(p) + ", K = " + std::to_string(k) + ")");
    topology.hierarchical =
        options.hierarchical == "on" ||
        (options.hierarchical == "auto" && possible);
  }
  if (writeArtifact && options.output == "-")
    return error("give the artifact directory with -o NAME.strata");

  DialectRegistry registry;
  registerAllStrataDialectsAndPasses(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  // Without --emit, `emit` holds its first value (onnx): an artifact is
  // compiled from the cleaned-up, raised graph like every later stage.
  bool rawImport =
      options.emit.getNumOccurrences() && options.emit == EmitStage::Onnx;
  auto module =
      rawImport
          ? frontend::importOnnxFile(context, options.input, importOptions)
          : importGraph(context, options.input, importOptions,
                        !options.noFuseAttention);
  if (!module)
    return error(llvm::toString(module.takeError()));
  if (training)
    if (llvm::Error e = buildTrainingStep(context, **module, trainingOptions,
                                          options.freeze, topology,
                                          options.emit != EmitStage::Training))
      return error(llvm::toString(std::move(e)));

  if (planned) {
    if (options.pageSize == 0)
      return error("--page-size must be positive");
    strata::MemoryPipelineOptions memory;
    memory.pageSize = options.pageSize.getValue();
    for (auto [flag, text, target] :
         {std::tuple{"--gpu-memory", &options.gpuMemory, &memory.gpuMemory},
          std::tuple{"--host-memory", &options.hostMemory, &memory.hostMemory},
          std::tuple{"--ssd-memory", &options.ssdMemory, &memory.ssdMemory},
          std::tuple{"--prefetch-bytes", &options.prefetchBytes,
                     &memory.prefetchBytes}}) {
      if (text->getValue().empty())
        continue;
      std::optional<uint64_t> bytes = parseBytes(text->getValue());
      if (!bytes || *bytes == 0)
        return error(std::string(flag) + " expects a positive size like 6MiB "
                     "or 40G, got '" + text->getValue() + "'");
      *target = *bytes;
    }
    if (options.recompute != "none" && options.recompute != "auto" &&
        options.recompute != "always")
      return error("--recompute must be none, auto or always, not '" +
                   options.recompute + "'");
    memory.recompute = options.recompute.getValue();
    memory.prefetchDepth = options.prefetchDepth.getValue();
    memory.fuseElementwise = options.fuseElementwise.getValue();
    memory.groupUpdates = options.groupUpdates.getValue();
    if (llvm::Error e = runPasses(
            context, **module,
            [&](OpPassManager &pm) { strata::buildMemoryPipeline(pm, memory); },
            "", "planning memory failed"))
      return error(llvm::toString(std::move(e)));
  }

  if (writeArtifact) {
    auto weights = frontend::openOnnxWeights(options.input);
    if (!weights)
      return error(llvm::toString(weights.takeError()));
    std::string summary = training ? "training" : "forward-only";
    for (int i = 1; i < argc; ++i)
      summary += std::string(" ") + argv[i];
    codegen::ArtifactOptions artifactOptions{summary};
    if (training)
      artifactOptions.training = trainingOptions;
    if (training && topology.world > 1)
      artifactOptions.topology = topology;
    // The user's graph, with the weights that params.bin holds emptied, so
    // strata-run --export-onnx can write it back with trained values.
    std::set<std::string> emptied;
    auto main = (*module)->lookupSymbol<func::FuncOp>("main");
    for (unsigned i = 0; main && i < main.getNumArguments(); ++i) {
      std::optional<graph::Role> role = graph::getArgumentRole(main, i);
      auto name = main.getArgAttrOfType<StringAttr>(i, graph::kNameAttrName);
      if (role && name && *role != graph::Role::Input)
        emptied.insert(name.str());
    }
    std::string onnxPath = options.input;
    if (!llvm::StringRef(onnxPath).ends_with(".onnxtxt"))
      artifactOptions.extraFiles = [&](llvm::StringRef staging) -> llvm::Error {
        std::string e = frontend::writeModelSkeleton(
            onnxPath, emptied, (staging + "/model.onnx").str());
        if (!e.empty())
          return llvm::createStringError(llvm::inconvertibleErrorCode(), e);
        return llvm::Error::success();
      };
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
