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
#include "strata/Dialect/Sched/IR/SchedOps.h"
#include "strata/Frontend/ModelStructure.h"
#include "strata/Runtime/Artifact.h"
#include "strata/Sim/Simulator.h"
#include "strata/Frontend/OnnxExport.h"
#include "strata/Frontend/OnnxImporter.h"
#include "strata/Tools/GraphSummary.h"
#include "strata/Tools/PipelineReport.h"
#include "strata/Tools/InitStrata.h"
#include "strata/Transforms/Layers.h"
#include "strata/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <optional>
#include <set>
#include <tuple>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

enum class EmitStage {
  Onnx,
  Graph,
  Summary,
  Pipeline,
  Training,
  Distributed,
  Memory
};

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
          clEnumValN(EmitStage::Pipeline, "pipeline",
                     "the pipeline stages (--pipeline-stages): each "
                     "stage's layers, parameters, FLOPs and the bytes "
                     "passed between stages"),
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
  cl::opt<bool> noSinkGather{
      "no-sink-gather",
      cl::desc("Compute every position before a gather that keeps fewer "
               "(strata-sink-gather off), as the model is written"),
      cl::init(false), cl::cat(category)};
  cl::opt<bool> autoConfig{
      "auto",
      cl::desc("With -o and --world: choose the partition group, "
               "hierarchical all-gather, gradient sync, prefetch depth, "
               "recomputation, kept attention probabilities (fp32), "
               "bucket size, pipeline stages and (a dynamic batch, with "
               "--batch) the micro-batch by predicting each candidate's "
               "step on --cluster (strata-sim), under its GPUs' memory; "
               "prints the ranked table and compiles the fastest"),
      cl::init(false), cl::cat(category)};
  cl::opt<unsigned> autoJobs{
      "auto-jobs",
      cl::desc("With --auto: candidates compiled and replayed at once, each "
               "on its own thread (default: the cores)"),
      cl::init(0), cl::cat(category)};
  cl::opt<std::string> clusterFile{
      "cluster",
      cl::desc("With --auto: the cluster to predict on (sim/clusters/*.json)"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<bool> noWeights{
      "no-weights",
      cl::desc("With -o: read no parameter's value and write a plan-only "
               "artifact (no params.bin) that strata-inspect reads and "
               "strata-run refuses; for models whose weights are declared "
               "only (models/generate_model.py --weightless) or too big"),
      cl::init(false), cl::cat(category)};
  cl::opt<bool> forwardOnly{
      "forward-only",
      cl::desc("With -o: write an inference artifact (the forward pass) "
               "that strata-run --forward evaluates"),
      cl::init(false), cl::cat(category)};

  // The training step's options: one row each in TrainingOptions.def, the
  // same flags the pass pipelines take.
#define STRATA_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC, ...)                  \
  cl::opt<TYPE> FIELD{FLAG, cl::desc(DESC), cl::init(DEFAULT),                 \
                      cl::cat(category) __VA_OPT__(, ) __VA_ARGS__};
#define STRATA_TRAINING_OPTION STRATA_OPTION
#define STRATA_TOPOLOGY_OPTION STRATA_OPTION
#define STRATA_MEMORY_OPTION STRATA_OPTION
#define STRATA_RUNTIME_OPTION STRATA_OPTION
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_OPTION
  cl::list<std::string> freeze{
      "freeze", cl::desc("Keep parameters matching a glob fixed (repeatable)"),
      cl::value_desc("glob"), cl::cat(category)};
  cl::opt<bool> listOps{
      "list-onnx-ops",
      cl::desc("Print the supported ONNX ops, each with its opset range, "
               "and exit"),
      cl::init(false), cl::cat(category)};

  /// The values of the training step's options.
  strata::TrainingConfig config() const {
    strata::TrainingConfig c;
#define STRATA_OPTION(TYPE, FIELD, ...) c.FIELD = FIELD;
#define STRATA_TRAINING_OPTION STRATA_OPTION
#define STRATA_TOPOLOGY_OPTION STRATA_OPTION
#define STRATA_MEMORY_OPTION STRATA_OPTION
#define STRATA_RUNTIME_OPTION STRATA_OPTION
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_OPTION
    c.freeze.assign(freeze.begin(), freeze.end());
    return c;
  }
};

int error(const llvm::Twine &message) {
  llvm::errs() << "strata-compile: error: " << message << "\n";
  return 1;
}

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

/// The checks the flags' types cannot make, one line each.
llvm::Error checkTrainingConfig(const strata::TrainingConfig &c) {
  if (!(c.lossScale > 0.0))
    return fail("--loss-scale must be positive");
  if (c.accum < 1)
    return fail("--accum must be at least 1");
  if (!(c.lr > 0.0))
    return fail("--lr must be positive");
  if (c.clipNorm < 0.0)
    return fail("--clip-norm must be 0 (off) or positive");
  if (c.totalSteps < 1)
    return fail("--steps must be at least 1");
  return llvm::Error::success();
}

/// The ranks and groups the topology flags name, checked.
llvm::Expected<strata::codegen::TopologyOptions>
readTopology(const strata::TrainingConfig &c) {
  strata::ResolvedTopology r = strata::resolveTopology(
      c.world, c.gpusPerNode, c.partitionGroup, c.hierarchical,
      c.pipelineStages);
  unsigned n = r.world, k = r.ranksPerNode, p = r.partition;
  unsigned stages = c.pipelineStages;
  if (stages < 1)
    return fail("--pipeline-stages must be at least 1");
  llvm::SmallVector<int64_t> boundaries;
  if (!strata::parseStageBoundaries(c.stageBoundaries, boundaries))
    return fail("--stage-boundaries must be comma-separated layer indices "
                "such as 3,6, got '" + c.stageBoundaries + "'");
  if (!boundaries.empty() && boundaries.size() + 1 != stages)
    return fail("--stage-boundaries gives " +
                std::to_string(boundaries.size()) + " boundaries; " +
                std::to_string(stages) + " stages need " +
                std::to_string(stages - 1));
  if (stages > 1 && (p < 1 || n % (stages * p) != 0))
    return fail("--world " + std::to_string(n) +
                " must be a multiple of --pipeline-stages " +
                std::to_string(stages) + " x --partition-group " +
                std::to_string(p));
  if (n < 1 || p < 1 || p > n || n % p != 0)
    return fail("--partition-group " + std::to_string(p) +
                " must divide --world " + std::to_string(n));
  if (k < 1 || n % k != 0)
    return fail("--gpus-per-node " + std::to_string(k) +
                " must divide --world " + std::to_string(n));
  // A stage's all-gathers stay inside a node unless the stage is bigger
  // than a node (MiCS-Pipe's point): a stage group must not straddle two.
  if (stages > 1 && (p <= k ? k % p != 0 : p % k != 0))
    return fail("--partition-group " + std::to_string(p) +
                " puts a stage group across two nodes of --gpus-per-node " +
                std::to_string(k) + "; choose " +
                (p <= k ? "a divisor of " : "a multiple of ") +
                std::to_string(k));
  if (c.hierarchical == strata::Hierarchical::On && !(p > k && p % k == 0))
    return fail("--hierarchical on needs --partition-group > "
                "--gpus-per-node and a multiple of it (P = " +
                std::to_string(p) + ", K = " + std::to_string(k) + ")");
  strata::codegen::TopologyOptions t;
  t.world = n;
  t.ranksPerNode = k;
  t.partition = p;
  t.hierarchical = r.hierarchical;
  t.gradSync = c.gradSync;
  t.bucketBytes = c.bucketBytes;
  return t;
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
                    const frontend::ImportOptions &options,
                    GraphCleanup cleanup) {
  auto module = frontend::importOnnxFile(context, path, options);
  if (!module)
    return module.takeError();
  GraphPipelineOptions pipelineOptions;
  pipelineOptions.fuseAttention = cleanup.fuseAttention;
  pipelineOptions.sinkGather = cleanup.sinkGather;
  if (llvm::Error e = runPasses(
          context, **module,
          [&](OpPassManager &pm) { buildGraphPipeline(pm, pipelineOptions); },
          "graph pipeline failed: ", "graph pipeline failed: "))
    return std::move(e);
  return module;
}

/// The loss, the backward graph and the optimizer step.
llvm::Error strata::buildTrainingStep(MLIRContext &context, ModuleOp module,
                                      const TrainingConfig &config,
                                      bool distribute) {
  TrainingPipelineOptions pipeline;
  TrainingPipelineOptions::fill(pipeline, config);
  pipeline.distribute = distribute;
  return runPasses(
      context, module,
      [&](OpPassManager &pm) { buildTrainingPipeline(pm, pipeline); }, "",
      "building the training step failed");
}

namespace {

/// What strata-compile does with the model: which stages run.
struct Stages {
  bool writeArtifact, planned, training;
};

/// The model's arguments whose values params.bin holds: emptied from the
/// copy of the model the artifact keeps, for strata-run --export-onnx.
std::set<std::string> weightNames(ModuleOp module) {
  namespace graph = strata::graph;
  std::set<std::string> names;
  auto main = module.lookupSymbol<func::FuncOp>("main");
  for (unsigned i = 0; main && i < main.getNumArguments(); ++i) {
    std::optional<graph::Role> role = graph::getArgumentRole(main, i);
    auto name = main.getArgAttrOfType<StringAttr>(i, graph::kNameAttrName);
    if (role && name && *role != graph::Role::Input)
      names.insert(name.str());
  }
  return names;
}

/// One option's value in modelFingerprint's text.
template <typename T> std::string optionText(const T &value) {
  if constexpr (std::is_same_v<T, std::string>)
    return value;
  else if constexpr (std::is_enum_v<T>)
    return std::to_string(static_cast<long long>(value));
  else if constexpr (std::is_floating_point_v<T>)
    return llvm::formatv("{0:e17}", double(value)).str();
  else
    return std::to_string(value);
}

/// What Plan.model_fingerprint hashes: the model's structure and the
/// training options that give its state a meaning, without the topology,
/// accumulation, memory plan or learning-rate schedule (so a checkpoint
/// reshards onto an artifact compiled for other ranks).
llvm::Expected<std::string>
modelIdentity(const std::string &onnxPath,
                 const strata::TrainingConfig &config) {
  std::string text;
  if (std::string e = strata::frontend::readModelStructure(onnxPath, text);
      !e.empty())
    return fail(e);
#define STRATA_TRAINING_OPTION(TYPE, FIELD, FLAG, ...)                         \
  if (llvm::StringRef(FLAG) != "accum")                                        \
    text += std::string("\n" FLAG "=") + optionText(config.FIELD);
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_TRAINING_OPTION
  for (const std::string &glob : config.freeze)
    text += "\nfreeze=" + glob;
  return text;
}

/// Says which layers --recompute auto checkpointed to fit --gpu-memory and
/// what that costs (nothing when it checkpointed none).
void noteCheckpointed(ModuleOp module) {
  namespace sched = strata::sched;
  auto step = module.lookupSymbol<func::FuncOp>("micro_step");
  auto layers = step ? step->getAttrOfType<ArrayAttr>(
                           sched::SchedDialect::kCheckpointedAttrName)
                     : ArrayAttr();
  if (!layers || layers.empty())
    return;
  double flops = 0;
  step.walk([&](Operation *op) {
    if (op->hasAttr(sched::SchedDialect::kRecomputedAttrName))
      flops += strata::forwardFlops(op);
  });
  // The first six and the last.
  SmallVector<StringRef> names(layers.getAsValueRange<StringAttr>());
  if (names.size() > 7) {
    names.erase(names.begin() + 6, names.end() - 1);
    names.insert(names.end() - 1, "...");
  }
  llvm::errs() << "strata-compile: note: to fit --gpu-memory, --recompute "
                  "auto checkpointed "
               << layers.size() << " layers (" << llvm::join(names, ", ")
               << "): backward makes "
               << (flops >= 1e12
                       ? llvm::formatv("{0:f1} TFLOP", flops / 1e12).str()
                       : llvm::formatv("{0:f2} GFLOP", flops / 1e9).str())
               << " of forward again each micro-step\n";
}

/// The memory pipeline over `module`. Under a budget that moving state off
/// the device and recomputing cannot meet, the activations backward reads
/// go to the host as well (strata-offload-activations), the largest first:
/// the plan is made again from a copy at each size threshold, and the
/// first that fits is kept (with a note unless `quiet`). When none fits
/// with recomputation (--recompute auto), offload is tried without it.
llvm::Error planMemory(MLIRContext &context, OwningOpRef<ModuleOp> &module,
                       const strata::TrainingConfig &config, bool quiet,
                       bool offloadWhenOver = true) {
  strata::MemoryPipelineOptions memory;
  strata::MemoryPipelineOptions::fill(memory, config);
  bool mayOffload =
      offloadWhenOver && config.gpuMemory && !config.offloadActivations;
  OwningOpRef<ModuleOp> unplanned;
  if (mayOffload)
    unplanned = cast<ModuleOp>(module->clone());
  auto plan = [&] {
    return runPasses(
        context, *module,
        [&](OpPassManager &pm) { strata::buildMemoryPipeline(pm, memory); },
        "", "planning memory failed");
  };
  llvm::Error last = plan();
  if (!last && !quiet && config.recompute == strata::Recompute::Auto)
    noteCheckpointed(*module);
  if (!last || !mayOffload)
    return last;
  memory.offloadActivations = true;
  // First every saved activation of 4 KiB or more: when even that does
  // not fit, nothing will (one more plan, not eight). Then the largest
  // threshold that still fits, by bisection over 4 KiB .. 64 MiB (a factor
  // 4 apart): the fewest values moved.
  size_t tried = 0;
  std::vector<uint64_t> thresholds;
  for (uint64_t t = 4096; t <= (uint64_t(64) << 20); t *= 4)
    thresholds.push_back(t);
  auto tryThreshold = [&](size_t index) {
    tried = index;
    memory.offloadMinBytes = thresholds[index];
    module = cast<ModuleOp>(unplanned->clone());
    return plan();
  };
  llvm::consumeError(std::move(last));
  if (llvm::Error e = tryThreshold(0)) {
    if (memory.recompute != strata::Recompute::Auto)
      return e;
    // Recomputation can leave a peak offload cannot lower (a checkpointed
    // layer's activations made again at once in backward): offload alone
    // may fit where both do not.
    memory.recompute = strata::Recompute::None;
    if (llvm::Error alone = tryThreshold(0)) {
      llvm::consumeError(std::move(alone));
      return e;
    }
    llvm::consumeError(std::move(e));
  }
  size_t fits = 0, lo = 1, hi = thresholds.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (llvm::Error e = tryThreshold(mid)) {
      llvm::consumeError(std::move(e));
      hi = mid;
    } else {
      fits = mid;
      lo = mid + 1;
    }
  }
  // The module holds the last plan tried: make the chosen one again when
  // that was not it.
  if (tried != fits)
    if (llvm::Error e = tryThreshold(fits))
      return e;
  if (!quiet && memory.recompute == strata::Recompute::Auto)
    noteCheckpointed(*module);
  if (!quiet && memory.recompute != config.recompute)
    llvm::errs() << "strata-compile: note: the step does not fit "
                    "--gpu-memory with its state moved off the device, "
                    "recomputation and activation offload together; its saved "
                    "activations of "
                 << thresholds[fits]
                 << " bytes or more are offloaded to the host instead, "
                    "nothing recomputed (--offload-activations)\n";
  else if (!quiet)
    llvm::errs() << "strata-compile: note: the step does not fit "
                    "--gpu-memory with its state moved off the device and "
                    "recomputation alone; its saved activations of "
                 << thresholds[fits]
                 << " bytes or more are offloaded to the host as well "
                    "(--offload-activations)\n";
  return llvm::Error::success();
}

/// --recompute auto under --gpu-memory with pipeline stages, once the plan
/// keeping every activation did not fit. strata-recompute's own auto mode
/// weighs single ops and layers against a plan of @micro_step, which the
/// stages replace; here the step is compiled again from `untrained` (the
/// model before the training step) with each stage's first N layers
/// checkpointed (strata-recompute before the stage programs), the fewest
/// N that fit found by bisection, with a note. When no N fits, every layer
/// with activation offload as well; when that does not fit either,
/// offload alone (a checkpointed layer's activations made again at once in
/// backward can leave a peak offload cannot lower).
llvm::Error planStagedCheckpoints(MLIRContext &context,
                                  OwningOpRef<ModuleOp> &module,
                                  ModuleOp untrained,
                                  const strata::TrainingConfig &config,
                                  bool distribute) {
  // The training step of `c` over a copy of the untrained model.
  auto build = [&](const strata::TrainingConfig &c) -> llvm::Error {
    module = cast<ModuleOp>(untrained->clone());
    return strata::buildTrainingStep(context, *module, c, distribute);
  };
  strata::TrainingConfig layers = config;
  layers.recompute = strata::Recompute::Layers;
  auto attempt = [&](int64_t perStage, bool quiet) -> llvm::Error {
    layers.stageRecomputeLayers = perStage;
    if (llvm::Error e = build(layers))
      return e;
    return planMemory(context, module, layers, quiet,
                      /*offloadWhenOver=*/perStage < 0);
  };
  // The most layers one stage checkpoints when every layer is: each stage
  // program lists its own.
  layers.stageRecomputeLayers = -1;
  if (llvm::Error e = build(layers))
    return e;
  int64_t most = 0;
  for (auto program : module->getOps<func::FuncOp>())
    if (auto names = program->getAttrOfType<ArrayAttr>(
            strata::sched::SchedDialect::kCheckpointedAttrName))
      most = std::max<int64_t>(most, int64_t(names.size()));
  // The fewest a stage that fit without offloading activations; the plan
  // that fit is kept.
  int64_t lo = 1, hi = most, fits = -1;
  OwningOpRef<ModuleOp> fitted;
  while (lo <= hi) {
    int64_t mid = (lo + hi) / 2;
    if (llvm::Error e = attempt(mid, /*quiet=*/true)) {
      llvm::consumeError(std::move(e));
      lo = mid + 1;
    } else {
      fits = mid;
      fitted = std::move(module);
      hi = mid - 1;
    }
  }
  llvm::Error planned = llvm::Error::success();
  if (fits > 0)
    module = std::move(fitted);
  else
    planned = attempt(-1, /*quiet=*/false);
  if (!planned) {
    if (fits > 0 && fits < most)
      llvm::errs() << "strata-compile: note: to fit --gpu-memory, "
                      "--recompute auto checkpointed the first "
                   << (fits == 1 ? std::string("layer")
                                 : std::to_string(fits) + " layers")
                   << " of each pipeline stage (of up to " << most << ")\n";
    else
      llvm::errs() << "strata-compile: note: to fit --gpu-memory, "
                      "--recompute auto checkpointed every layer of the "
                      "pipeline stages (as --recompute layers)\n";
    return llvm::Error::success();
  }
  if (llvm::Error e = build(config)) {
    llvm::consumeError(std::move(planned));
    return e;
  }
  if (llvm::Error alone = planMemory(context, module, config, /*quiet=*/false)) {
    llvm::consumeError(std::move(alone));
    return planned;
  }
  llvm::consumeError(std::move(planned));
  return llvm::Error::success();
}

/// One configuration --auto tried: its flags and what the simulator
/// predicted, or why it was dropped.
struct Tried {
  strata::TrainingConfig config;
  int64_t batch = 0; // the micro-batch imported (0: the model's own)
  std::string label;
  double step = 0, tokensPerSecond = 0;
  uint64_t peak = 0;
  std::string dropped; // "" when simulated
};

/// The elements of the model's trained parameters.
double parameterElements(ModuleOp module) {
  namespace graph = strata::graph;
  double n = 0;
  auto main = module.lookupSymbol<func::FuncOp>("main");
  for (unsigned i = 0; main && i < main.getNumArguments(); ++i)
    if (graph::getArgumentRole(main, i) == graph::Role::Parameter)
      if (auto t = dyn_cast<RankedTensorType>(main.getArgument(i).getType()))
        n += double(t.getNumElements());
  return n;
}

/// Whether the model has a fused attention (graph.attention).
bool hasAttention(ModuleOp module) {
  bool found = false;
  module.walk([&](Operation *op) {
    if (op->getName().getStringRef() == "graph.attention") {
      found = true;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

/// Where --auto imports the model from, at another micro-batch.
struct ModelSource {
  std::string path;
  strata::frontend::ImportOptions options;
  strata::GraphCleanup cleanup;
};

/// One thread of the --auto search: its own MLIR context (a context's
/// diagnostics are its own, so the threads' errors stay apart) and the
/// model imported into it at each micro-batch a candidate asked for. The
/// first worker borrows the caller's context and graph.
struct AutoWorker {
  MLIRContext *context = nullptr;
  std::unique_ptr<MLIRContext> owned;
  const ModelSource *source = nullptr;
  int64_t batch = 0;      // the micro-batch of `graph`
  ModuleOp graph;         // borrowed (first worker) or in `graphs`
  std::map<int64_t, OwningOpRef<ModuleOp>> graphs;

  llvm::Expected<ModuleOp> graphAt(int64_t micro) {
    if (graph && micro == batch)
      return graph;
    OwningOpRef<ModuleOp> &slot = graphs[micro];
    if (!slot) {
      strata::frontend::ImportOptions at = source->options;
      if (micro > 0)
        at.batch = micro;
      auto m = strata::importGraph(*context, source->path, at,
                                   source->cleanup);
      if (!m)
        return m.takeError();
      slot = std::move(*m);
    }
    return *slot;
  }
};

/// What --auto chose: the training options and the micro-batch to import.
struct AutoChoice {
  strata::TrainingConfig config;
  int64_t batch = 0;
};

/// --auto: a search over partition group (powers of two dividing the
/// world), hierarchical all-gather (on and off where the group spans
/// nodes), gradient sync (2-hop, global), prefetch depth (1, 2), bucket
/// size, pipeline stages and, where the model's batch is dynamic
/// (`batch` > 0, from --batch), the micro-batch with the accumulation
/// that keeps a rank's samples a step. Each candidate is compiled
/// plan-only from a copy of the imported graph under the cluster's GPU
/// memory (state offload, recomputation and activation offload as the
/// budget needs) and replayed by the simulator. Pruned by memory twice: a
/// partition group whose model states (parameters, gradients, optimizer
/// states, fp32) exceed a rank's share of GPU and host memory is dropped
/// before compiling, and a plan the budget cannot hold is dropped before
/// simulating. In three rounds: every (partition group, hierarchical)
/// with 2-hop sync and depth 1; around the two fastest, how activations
/// fit (offload, every layer checkpointed), attention's probabilities
/// kept or made again (fp32), then the sync and depth; then bucket size,
/// stages and micro-batch, one at a time, around the fastest. Returns the
/// fastest; prints the ranked table of everything tried.
llvm::Expected<AutoChoice>
searchConfigurations(MLIRContext &context, ModuleOp imported,
                     const ModelSource &source, int64_t batch,
                     strata::TrainingConfig base,
                     const strata::sim::Cluster &cluster, unsigned jobs) {
  unsigned n = base.world, k = unsigned(cluster.gpusPerNode);
  if (cluster.emulatedNodes && base.gpusPerNode)
    k = base.gpusPerNode; // a calibrated host: the nodes are the user's
  base.gpusPerNode = k;
  if (cluster.memoryBytes > 0)
    base.gpuMemory = strata::ByteSize(uint64_t(cluster.memoryBytes));
  if (!base.hostMemory && cluster.hostMemoryBytes > 0)
    base.hostMemory =
        strata::ByteSize(uint64_t(cluster.hostMemoryBytes / double(k)));
  if (base.recompute == strata::Recompute::None)
    base.recompute = strata::Recompute::Auto;
  llvm::SmallString<128> scratch;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("strata-auto", scratch))
    return fail("--auto: cannot create a scratch folder: " + ec.message());
  // Model states a parameter costs: its fp32 value and gradient, and the
  // optimizer's states (AdamW two, SGD with momentum one).
  double perParameter =
      8 + (base.optimizer == strata::Optimizer::AdamW ? 8
           : base.momentum != 0                      ? 4
                                                      : 0);
  double states = parameterElements(imported) * perParameter;
  // The threads that compile and replay candidates (a round's at once).
  std::vector<AutoWorker> workers(std::max(jobs, 1u));
  for (AutoWorker &w : workers) {
    w.source = &source;
    if (&w == &workers.front()) {
      w.context = &context;
      w.graph = imported;
      w.batch = batch;
      continue;
    }
    DialectRegistry registry;
    strata::registerAllStrataDialectsAndPasses(registry);
    w.owned = std::make_unique<MLIRContext>(registry);
    w.owned->loadAllAvailableDialects();
    w.owned->disableMultithreading();
    w.context = w.owned.get();
  }
  // Each context compiles on its own thread when there are several.
  bool threaded = context.isMultithreadingEnabled() && workers.size() > 1;
  if (threaded)
    context.disableMultithreading();
  auto restoreThreading = llvm::make_scope_exit([&] {
    if (threaded)
      context.enableMultithreading();
  });
  // What a rank can hold them in (none: a tier without a limit).
  double capacity = base.gpuMemory && base.hostMemory
                        ? double(base.gpuMemory.bytes) +
                              double(base.hostMemory.bytes) +
                              double(base.ssdMemory.bytes)
                        : 0;
  auto size = [](double bytes) {
    return bytes >= double(1ull << 30)
               ? llvm::formatv("{0:f1} GiB", bytes / double(1ull << 30)).str()
               : llvm::formatv("{0:f1} MiB", bytes / double(1ull << 20)).str();
  };
  std::vector<Tried> tried;
  std::set<std::string> seen;
  // A round's candidates, pruned by their model states, then compiled and
  // replayed on the workers; they join `tried` in the order proposed.
  std::vector<Tried> round;
  auto propose = [&](strata::TrainingConfig config, int64_t microBatch) {
    Tried t;
    t.config = config;
    t.batch = microBatch;
    t.label = llvm::formatv(
        "--partition-group {0} --hierarchical {1} --grad-sync {2} "
        "--prefetch-depth {3}",
        config.partitionGroup,
        config.hierarchical == strata::Hierarchical::On ? "on" : "off",
        config.gradSync == strata::GradSync::TwoHop ? "2hop" : "global",
        config.prefetchDepth);
    // The knobs of the last round, where they differ from the user's.
    if (config.recompute != base.recompute)
      t.label += config.recompute == strata::Recompute::None
                     ? " --recompute none"
                 : config.recompute == strata::Recompute::Layers
                     ? " --recompute layers"
                     : " --recompute always";
    if (config.keepAttentionProbabilities != base.keepAttentionProbabilities)
      t.label += config.keepAttentionProbabilities
                     ? " --keep-attention-probabilities"
                     : " --keep-attention-probabilities=false";
    if (config.bucketBytes != base.bucketBytes)
      t.label += llvm::formatv(" --bucket-bytes {0}", config.bucketBytes);
    if (config.pipelineStages > 1)
      t.label += llvm::formatv(" --pipeline-stages {0}",
                               config.pipelineStages);
    if (microBatch != batch)
      t.label += llvm::formatv(" --batch {0}", microBatch);
    if (config.accum != base.accum)
      t.label += llvm::formatv(" --accum {0}", config.accum);
    if (!seen.insert(t.label).second)
      return;
    double perRank = states / double(config.partitionGroup);
    if (capacity > 0 && perRank > capacity)
      t.dropped = "model states " + size(perRank) +
                  " a rank exceed its GPU and host memory (" +
                  size(capacity) + "), not compiled";
    else if (auto topology = readTopology(t.config); !topology)
      t.dropped = llvm::toString(topology.takeError());
    round.push_back(std::move(t));
  };
  // Compiles candidate `t` plan-only on worker `w` and replays it; a
  // failure of the tools themselves (not of the candidate) in `fatal`.
  auto compile = [&](Tried &t, AutoWorker &w, size_t index,
                     std::string &fatal) {
    llvm::Expected<ModuleOp> source = w.graphAt(t.batch);
    if (!source) {
      t.dropped = llvm::toString(source.takeError());
      return;
    }
    OwningOpRef<ModuleOp> m = cast<ModuleOp>((*source)->clone());
    if (llvm::Error e =
            strata::buildTrainingStep(*w.context, *m, t.config, true)) {
      t.dropped = llvm::toString(std::move(e));
      return;
    }
    if (llvm::Error e = planMemory(*w.context, m, t.config, true)) {
      llvm::consumeError(std::move(e));
      t.dropped = "does not fit the GPU's memory";
      return;
    }
    std::string dir =
        (scratch + "/candidate-" + llvm::Twine(index) + ".strata").str();
    strata::codegen::ArtifactOptions artifact{"auto " + t.label};
    artifact.training = t.config;
    if (n > 1)
      artifact.topology = cantFail(readTopology(t.config));
    artifact.weightless = true;
    if (llvm::Error e = strata::codegen::writeArtifact(
            *m, dir,
            [](llvm::StringRef name) -> llvm::Expected<std::string> {
              return fail("--auto reads no weight ('" + name + "')");
            },
            artifact)) {
      fatal = llvm::toString(std::move(e));
      return;
    }
    std::unique_ptr<strata::runtime::Artifact> loaded;
    strata::sim::Prediction predicted;
    strata::runtime::Status s = strata::runtime::Artifact::load(dir, loaded);
    if (s)
      s = strata::sim::simulate(loaded->getPlan(), cluster, predicted);
    llvm::sys::fs::remove_directories(dir);
    if (!s) {
      fatal = "--auto: " + s.message();
      return;
    }
    t.step = predicted.stepSeconds;
    t.tokensPerSecond = double(predicted.tokensPerStep) / t.step;
    t.peak = predicted.peakBytes;
  };
  // Progress, a line a batch (a large model's candidates take seconds
  // each, and the search minutes).
  unsigned batches = 0;
  auto started = std::chrono::steady_clock::now();
  auto runRound = [&]() -> llvm::Error {
    std::vector<size_t> todo;
    for (size_t i = 0; i < round.size(); ++i)
      if (round[i].dropped.empty())
        todo.push_back(i);
    std::vector<std::string> fatal(round.size());
    std::atomic<size_t> next{0};
    auto work = [&](AutoWorker &w) {
      for (size_t i; (i = next.fetch_add(1)) < todo.size();)
        compile(round[todo[i]], w, tried.size() + todo[i], fatal[todo[i]]);
    };
    size_t threads = std::min(workers.size(), todo.size());
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i)
      pool.emplace_back(work, std::ref(workers[i]));
    work(workers.front());
    for (std::thread &t : pool)
      t.join();
    for (const std::string &f : fatal)
      if (!f.empty())
        return fail(f);
    size_t fits = llvm::count_if(
        todo, [&](size_t i) { return round[i].dropped.empty(); });
    if (!todo.empty())
      llvm::errs() << llvm::formatv(
          "strata-compile: --auto: batch {0}: {1} compiled, {2} fit and "
          "replayed; {3:f1} s so far\n",
          ++batches, todo.size(), fits,
          std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        started)
              .count());
    for (Tried &t : round)
      tried.push_back(std::move(t));
    round.clear();
    return llvm::Error::success();
  };
  // A rank's samples a step, which every candidate keeps: a micro-batch
  // `micro` runs samples / micro micro-steps (0: the batch is static).
  int64_t samples = batch * int64_t(base.accum);
  auto atMicroBatch = [&](strata::TrainingConfig c, int64_t micro) {
    if (micro != batch)
      c.accum = unsigned(samples / micro * c.pipelineStages);
    return c;
  };
  auto smallerMicroBatches = [&](int64_t from) {
    std::vector<int64_t> out;
    for (int64_t micro = from / 2; micro >= 1 && samples % micro == 0;
         micro /= 2)
      out.push_back(micro);
    return out;
  };
  // Round 1: every partition group and hierarchical choice, at the given
  // micro-batch, or at the largest smaller one at which any fits.
  auto roundOne = [&](int64_t micro) -> llvm::Error {
    for (unsigned p = 1; p <= n; p *= 2) {
      if (n % p)
        continue;
      bool spans = p > k && p % k == 0;
      for (strata::Hierarchical h :
           spans ? std::vector<strata::Hierarchical>{strata::Hierarchical::On,
                                                     strata::Hierarchical::Off}
                 : std::vector<strata::Hierarchical>{
                       strata::Hierarchical::Off}) {
        strata::TrainingConfig c = base;
        c.partitionGroup = p;
        c.hierarchical = h;
        c.gradSync = strata::GradSync::TwoHop;
        c.prefetchDepth = 1;
        propose(atMicroBatch(c, micro), micro);
      }
    }
    return runRound();
  };
  // The fastest fitting candidates (copies: evaluating more grows `tried`).
  auto ranked = [&] {
    std::vector<const Tried *> fits;
    for (const Tried &t : tried)
      if (t.dropped.empty())
        fits.push_back(&t);
    std::stable_sort(fits.begin(), fits.end(),
                     [](const Tried *a, const Tried *b) {
                       return a->tokensPerSecond > b->tokensPerSecond;
                     });
    std::vector<std::pair<strata::TrainingConfig, int64_t>> best;
    for (size_t i = 0; i < fits.size() && i < 2; ++i)
      best.push_back({fits[i]->config, fits[i]->batch});
    return best;
  };
  if (llvm::Error e = roundOne(batch))
    return std::move(e);
  for (int64_t micro : smallerMicroBatches(batch)) {
    if (!ranked().empty())
      break;
    if (llvm::Error e = roundOne(micro))
      return std::move(e);
  }
  // Round 2: how activations fit the budget around the two fastest: by
  // recomputation first where it can (`auto`, the first round's), by
  // offloading them to the host instead (`none`: the planner offloads
  // what does not fit), or by checkpointing every layer; then around the
  // two fastest so far, the other gradient sync and prefetch depth 2.
  // The activations first, then the sync and depth around the two
  // fastest of all so far.
  // And attention's probabilities kept for the backward or made again
  // (fp32 attention: mixed precision leaves its attention alone): the
  // simulator costs both as the cluster's kernels run them (a calibrated
  // CPU reads its kept tables; the GPU presets' CUDA kernels make the
  // scores again either way), and the budget holds the kept ones or not.
  bool keepable = base.dtype == strata::Precision::FP32 &&
                  hasAttention(imported);
  for (const auto &[config, micro] : ranked()) {
    for (strata::Recompute recompute :
         {strata::Recompute::None, strata::Recompute::Layers}) {
      strata::TrainingConfig c = config;
      c.recompute = recompute;
      propose(c, micro);
    }
    if (keepable) {
      strata::TrainingConfig c = config;
      c.keepAttentionProbabilities = !c.keepAttentionProbabilities;
      propose(c, micro);
    }
  }
  if (llvm::Error e = runRound())
    return std::move(e);
  for (const auto &[config, micro] : ranked())
    for (unsigned depth : {1u, 2u})
      for (strata::GradSync sync :
           {strata::GradSync::TwoHop, strata::GradSync::Global}) {
        strata::TrainingConfig c = config;
        c.prefetchDepth = depth;
        c.gradSync = sync;
        propose(c, micro);
      }
  if (llvm::Error e = runRound())
    return std::move(e);
  // Round 3: around the fastest, one knob at a time: the bucket size (a
  // quarter, four times), pipeline stages (2, 4, 8: the partition group
  // inside a stage as close to the best one as the stage allows, and
  // stages times the micro-steps, so that the step keeps its samples), and
  // the micro-batch (halved down to one sample) where the batch is
  // dynamic.
  if (auto best = ranked(); !best.empty()) {
    auto [around, micro] = best.front();
    std::vector<strata::TrainingConfig> knobs;
    if (around.bucketBytes >= 4)
      for (uint64_t bytes : {around.bucketBytes / 4, around.bucketBytes * 4}) {
        strata::TrainingConfig c = around;
        c.bucketBytes = bytes;
        knobs.push_back(c);
      }
    for (unsigned stages : {2u, 4u, 8u}) {
      if (n % stages || around.pipelineStages != 1)
        continue;
      strata::TrainingConfig c = around;
      c.pipelineStages = stages;
      c.partitionGroup = std::min(around.partitionGroup, n / stages);
      c.hierarchical = c.partitionGroup > k && c.partitionGroup % k == 0
                           ? around.hierarchical
                           : strata::Hierarchical::Off;
      c.gradSync = strata::GradSync::TwoHop; // global would mix the stages
      c.accum = around.accum * stages;
      knobs.push_back(c);
    }
    for (const strata::TrainingConfig &c : knobs)
      propose(c, micro);
    for (int64_t smaller : smallerMicroBatches(micro))
      propose(atMicroBatch(around, smaller), smaller);
    if (llvm::Error e = runRound())
      return std::move(e);
  }
  llvm::sys::fs::remove_directories(scratch);
  std::stable_sort(tried.begin(), tried.end(),
                   [](const Tried &a, const Tried &b) {
                     if (a.dropped.empty() != b.dropped.empty())
                       return a.dropped.empty();
                     return a.tokensPerSecond > b.tokensPerSecond;
                   });
  size_t fit = llvm::count_if(tried, [](const Tried &t) {
    return t.dropped.empty();
  });
  llvm::outs() << llvm::formatv(
      "strata-compile: --auto on {0}: {1} configurations, {2} fit\n",
      cluster.name, tried.size(), fit);
  // The configuration column as wide as its longest label.
  size_t width = 100;
  for (const Tried &t : tried)
    width = std::max(width, t.label.size());
  llvm::outs() << llvm::formatv("{0,4}  {1} {2,9} {3,12} {4,12}\n", "rank",
                                llvm::left_justify("configuration", width),
                                "peak GiB", "step ms", "tokens/s");
  for (size_t i = 0; i < tried.size(); ++i) {
    const Tried &t = tried[i];
    if (t.dropped.empty())
      llvm::outs() << llvm::formatv(
          "{0,4}  {1} {2,9:f2} {3,12:f3} {4,12:f0}\n", i + 1,
          llvm::left_justify(t.label, width),
          double(t.peak) / double(1ull << 30), t.step * 1e3,
          t.tokensPerSecond);
    else
      llvm::outs() << llvm::formatv("   -  {0} dropped: {1}\n",
                                    llvm::left_justify(t.label, width),
                                    t.dropped);
  }
  if (!fit)
    return fail("--auto: no configuration fits " + cluster.name +
                "'s GPU memory; give more ranks (--world) or a smaller "
                "--batch");
  llvm::outs() << "strata-compile: --auto chose " << tried.front().label
               << llvm::formatv(" (predicted {0:f3} ms a step)\n",
                                tried.front().step * 1e3);
  llvm::outs().flush();
  return AutoChoice{tried.front().config, tried.front().batch};
}

/// Writes the artifact for the compiled `module`.
llvm::Error writeArtifactStage(ModuleOp module, const CompileOptions &options,
                               const Stages &stages,
                               const strata::TrainingConfig &config,
                               const strata::codegen::TopologyOptions &topology,
                               int argc, char **argv) {
  std::unique_ptr<strata::frontend::OnnxWeights> weights;
  if (!options.noWeights) {
    auto opened = strata::frontend::openOnnxWeights(options.input);
    if (!opened)
      return opened.takeError();
    weights = std::move(*opened);
  }
  std::string summary = stages.training ? "training" : "forward-only";
  for (int i = 1; i < argc; ++i)
    summary += std::string(" ") + argv[i];
  strata::codegen::ArtifactOptions artifactOptions{summary};
  if (stages.training) {
    artifactOptions.training = config;
    auto model = modelIdentity(options.input, config);
    if (!model)
      return model.takeError();
    artifactOptions.modelIdentity = std::move(*model);
  }
  if (stages.training && topology.world > 1)
    artifactOptions.topology = topology;
  // The user's graph, with the weights that params.bin holds emptied, so
  // strata-run --export-onnx can write it back with trained values.
  std::set<std::string> emptied = weightNames(module);
  artifactOptions.weightless = options.noWeights;
  std::string onnxPath = options.input;
  if (!options.noWeights && !llvm::StringRef(onnxPath).ends_with(".onnxtxt"))
    artifactOptions.extraFiles = [&](llvm::StringRef staging) -> llvm::Error {
      std::string e = strata::frontend::writeModelSkeleton(
          onnxPath, emptied, (staging + "/model.onnx").str());
      if (!e.empty())
        return llvm::createStringError(llvm::inconvertibleErrorCode(), e);
      return llvm::Error::success();
    };
  return strata::codegen::writeArtifact(
      module, options.output,
      [&](llvm::StringRef name) -> llvm::Expected<std::string> {
        if (!weights)
          return fail("--no-weights: no value of '" + name + "' is read");
        return weights->read(name);
      },
      artifactOptions);
}

/// Prints the module (or its summary) after the stage --emit names.
int printStage(ModuleOp module, const CompileOptions &options,
               int64_t microBatches) {
  std::string errorMessage;
  auto out = openOutputFile(options.output, &errorMessage);
  if (!out)
    return error(errorMessage);
  if (options.emit == EmitStage::Summary)
    strata::printGraphSummary(module, out->os());
  else if (options.emit == EmitStage::Pipeline &&
           failed(strata::printPipelineReport(module, microBatches,
                                              out->os())))
    return 1;
  else if (options.emit != EmitStage::Pipeline)
    module->print(out->os());
  out->keep();
  return 0;
}

/// The import options from --input-shape and --batch.
llvm::Error readImportOptions(const CompileOptions &options,
                              strata::frontend::ImportOptions &out) {
  for (const std::string &flag : options.inputShapes)
    if (llvm::Error e = strata::frontend::parseInputShapeFlag(flag, out))
      return e;
  if (options.batch.getNumOccurrences()) {
    if (options.batch <= 0)
      return fail("--batch must be positive");
    out.batch = options.batch;
  }
  return llvm::Error::success();
}

} // namespace

int strata::compileMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --list-onnx-ops needs no model; handle it before the required positional.
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "--list-onnx-ops") {
      for (const frontend::OnnxOpSupport &op :
           frontend::getSupportedOnnxOpsets())
        llvm::outs() << op.op << " " << op.minOpset << ".." << op.maxOpset
                     << "\n";
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
  if (llvm::Error e = readImportOptions(options, importOptions))
    return error(llvm::toString(std::move(e)));
  Stages stages;
  stages.writeArtifact = options.emit.getNumOccurrences() == 0;
  stages.planned = stages.writeArtifact || options.emit == EmitStage::Memory;
  stages.training = !options.forwardOnly &&
                    (stages.planned || options.emit == EmitStage::Training ||
                     options.emit == EmitStage::Distributed ||
                     options.emit == EmitStage::Pipeline);
  TrainingConfig config = options.config();
  codegen::TopologyOptions topology;
  if (stages.training) {
    if (llvm::Error e = checkTrainingConfig(config))
      return error(llvm::toString(std::move(e)));
    llvm::Expected<codegen::TopologyOptions> t = readTopology(config);
    if (!t)
      return error(llvm::toString(t.takeError()));
    topology = *t;
    if (config.pipelineStages > 1 && config.gradSync == strata::GradSync::Global)
      return error("--grad-sync global all-reduces over every rank, which "
                   "with --pipeline-stages would mix the stages; use 2hop");
    if (config.reduceDtype == strata::ReduceDtype::Narrow &&
        config.dtype == strata::Precision::FP32)
      return error("--reduce-dtype narrow sums gradients in --dtype's bf16 or "
                   "fp16; give --dtype bf16 or fp16");
  }
  if (options.emit == EmitStage::Pipeline &&
      (options.forwardOnly || config.pipelineStages < 2))
    return error("--emit=pipeline needs --pipeline-stages 2 or more and a "
                 "training step");
  if (stages.writeArtifact && options.output == "-")
    return error("give the artifact directory with -o NAME.strata");
  if (stages.planned && config.pageSize.bytes == 0)
    return error("--page-size must be positive");

  DialectRegistry registry;
  registerAllStrataDialectsAndPasses(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  // Without --emit, `emit` holds its first value (onnx): an artifact is
  // compiled from the cleaned-up, raised graph like every later stage.
  bool rawImport =
      options.emit.getNumOccurrences() && options.emit == EmitStage::Onnx;
  GraphCleanup cleanup{!options.noFuseAttention, !options.noSinkGather};
  auto module =
      rawImport
          ? frontend::importOnnxFile(context, options.input, importOptions)
          : importGraph(context, options.input, importOptions, cleanup);
  if (!module)
    return error(llvm::toString(module.takeError()));
  if (options.autoConfig) {
    if (!stages.writeArtifact || !stages.training)
      return error("--auto writes a training artifact: give -o, without "
                   "--emit or --forward-only");
    if (options.clusterFile.empty())
      return error("--auto needs --cluster FILE (sim/clusters/*.json)");
    if (config.world < 2)
      return error("--auto chooses how to shard over the ranks: give --world");
    sim::Cluster cluster;
    if (runtime::Status s = sim::loadCluster(options.clusterFile, cluster); !s)
      return error(s.message());
    ModelSource source{options.input, importOptions, cleanup};
    int64_t batch = importOptions.batch.value_or(0);
    unsigned jobs = options.autoJobs ? unsigned(options.autoJobs)
                                     : std::thread::hardware_concurrency();
    auto best = searchConfigurations(context, **module, source, batch, config,
                                     cluster, jobs);
    if (!best)
      return error(llvm::toString(best.takeError()));
    config = best->config;
    if (best->batch != batch) {
      // The model again at the micro-batch chosen.
      frontend::ImportOptions at = importOptions;
      at.batch = best->batch;
      module = importGraph(context, options.input, at, cleanup);
      if (!module)
        return error(llvm::toString(module.takeError()));
    }
    llvm::Expected<codegen::TopologyOptions> t = readTopology(config);
    if (!t)
      return error(llvm::toString(t.takeError()));
    topology = *t;
  }
  // With pipeline stages, --recompute auto under a budget: every
  // activation kept while that fits, else planStagedCheckpoints.
  bool stagedAuto = stages.training && stages.planned &&
                    config.pipelineStages > 1 &&
                    config.recompute == strata::Recompute::Auto &&
                    config.gpuMemory;
  OwningOpRef<ModuleOp> untrained;
  if (stagedAuto)
    untrained = cast<ModuleOp>((**module)->clone());
  bool distribute = options.emit != EmitStage::Training &&
                    options.emit != EmitStage::Pipeline;
  if (stages.training)
    if (llvm::Error e =
            buildTrainingStep(context, **module, config, distribute))
      return error(llvm::toString(std::move(e)));
  if (stages.planned) {
    llvm::Error planned = planMemory(context, *module, config,
                                     /*quiet=*/false,
                                     /*offloadWhenOver=*/!stagedAuto);
    if (planned && stagedAuto) {
      llvm::consumeError(std::move(planned));
      planned = planStagedCheckpoints(context, *module, *untrained, config,
                                      distribute);
    }
    if (planned)
      return error(llvm::toString(std::move(planned)));
  }
  if (stages.writeArtifact) {
    if (llvm::Error e = writeArtifactStage(**module, options, stages, config,
                                           topology, argc, argv))
      return error(llvm::toString(std::move(e)));
    return 0;
  }
  return printStage(**module, options, config.accum);
}
