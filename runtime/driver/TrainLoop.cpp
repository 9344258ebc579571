//===- TrainLoop.cpp - strata-run's training loop -------------------------===//
//
// For each optimizer step s (0-based): zero the gradient accumulators (when
// accumulating), run "micro_step" on the loader's batch of each micro-step,
// feed strata.lr and strata.step, run "optimizer_step", log, checkpoint.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Training.h"

#include "strata/Runtime/Artifact.h"
#include "strata/Runtime/Backend.h"

#include "strata/Runtime/Communicator.h"
#include "strata/Runtime/DataLoader.h"

#include "plan.pb.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>
#include <map>
#include <optional>

namespace strata::runtime {
namespace {

int error(const std::string &message) {
  // One write, so the ranks' lines do not interleave.
  std::cerr << "strata-run: error: " + message + "\n";
  return 1;
}

double scalar(const TensorView &t) {
  return t.dtype == DType::F64 ? t.as<double>()[0] : double(t.as<float>()[0]);
}

/// --data names a dataset folder (not a token file).
bool isFolder(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// strata-run --trace: one step's instructions as they ran, per stream,
/// as Chrome-trace JSON (Perfetto), in the format strata-inspect --trace
/// writes the planned order in.
class MeasuredTrace {
public:
  void add(const Executor &executor, const plan::Plan &plan,
           const std::string &program, const std::string &label) {
    const plan::Program *p = nullptr;
    for (const auto &candidate : plan.programs())
      if (candidate.name() == program)
        p = &candidate;
    if (!p)
      return;
    std::vector<std::string> streams = executor.getStreamNames(program);
    const auto &events = executor.getLastTrace();
    int64_t first = INT64_MAX, last = 0;
    for (int i = 0; i < p->instructions_size() && i < int(events.size());
         ++i) {
      const Executor::TraceEvent &e = events[i];
      if (e.endNs == 0 || p->instructions(i).kind() != plan::KERNEL)
        continue;
      first = std::min(first, e.startNs);
      last = std::max(last, e.endNs);
      std::string stream =
          e.stream < streams.size() ? streams[e.stream] : "compute";
      records_.push_back({p->instructions(i).op(),
                          shapesOf(plan, p->instructions(i)), stream,
                          e.startNs, e.endNs, i});
    }
    if (first < last)
      phases_.push_back({label, first, last});
    addSchedule(*p, events);
  }

  /// This rank's pipeline stage (-1: none), for the trace's metadata.
  void setStage(int stage) { stage_ = stage; }

  bool write(const std::string &path, int rank, uint64_t step) const {
    std::ofstream out(path);
    if (!out)
      return false;
    int64_t origin = phases_.empty() ? 0 : phases_.front().startNs;
    if (!idle_.empty())
      origin = std::min(origin, idle_.front().startNs);
    std::vector<std::string> tracks = {"compute"};
    auto track = [&](const std::string &name) {
      auto it = std::find(tracks.begin(), tracks.end(), name);
      if (it != tracks.end())
        return int(it - tracks.begin());
      tracks.push_back(name);
      return int(tracks.size()) - 1;
    };
    auto us = [&](int64_t ns) { return double(ns - origin) / 1000.0; };
    char buffer[512];
    // origin_ns (the host's monotonic clock) lets tools/merge-traces.py
    // put the ranks of one machine on one time axis.
    out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"clock\": "
           "\"measured, microseconds from the step's start\", \"step\": "
        << step << ", \"rank\": " << rank << ", \"stage\": " << stage_
        << ", \"origin_ns\": " << origin << "}, \"traceEvents\": [\n";
    std::snprintf(buffer, sizeof(buffer),
                  "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                  "\"tid\": 0, \"args\": {\"name\": \"rank %d, step %llu\"}}",
                  rank, rank, static_cast<unsigned long long>(step));
    out << buffer;
    for (const Phase &ph : phases_) {
      std::snprintf(buffer, sizeof(buffer),
                    ",\n{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
                    "\"tid\": 1000, \"ts\": %.3f, \"dur\": %.3f}",
                    ph.label.c_str(), rank, us(ph.startNs),
                    double(ph.endNs - ph.startNs) / 1000.0);
      out << buffer;
    }
    for (const Record &r : records_) {
      std::snprintf(buffer, sizeof(buffer),
                    ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                    "\"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                    "\"args\": {\"instruction\": %d, \"shapes\": \"",
                    r.op.c_str(), r.stream.c_str(), rank, track(r.stream),
                    us(r.startNs), double(r.endNs - r.startNs) / 1000.0,
                    r.instruction);
      out << buffer << r.shapes << "\"}}";
    }
    // The schedule: one span per action (F3, B3, W3), coloured by phase,
    // and the receives' waits as "idle".
    std::vector<Action> spans = actions_;
    spans.insert(spans.end(), idle_.begin(), idle_.end());
    for (const Action &a : spans) {
      std::snprintf(buffer, sizeof(buffer),
                    ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"cname\": "
                    "\"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 1001, "
                    "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"stage\": %d, "
                    "\"micro_batch\": %d%s}}",
                    a.name.c_str(), a.category, a.color, rank, us(a.startNs),
                    double(a.endNs - a.startNs) / 1000.0, stage_, a.microBatch,
                    a.detail.c_str());
      out << buffer;
    }
    for (size_t t = 0; t < tracks.size(); ++t) {
      std::snprintf(buffer, sizeof(buffer),
                    ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": "
                    "%d, \"tid\": %zu, \"args\": {\"name\": \"%s\"}}",
                    rank, t, tracks[t].c_str());
      out << buffer;
    }
    std::snprintf(buffer, sizeof(buffer),
                  ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": "
                  "%d, \"tid\": 1000, \"args\": {\"name\": \"programs\"}}",
                  rank);
    out << buffer;
    if (!actions_.empty()) {
      std::snprintf(buffer, sizeof(buffer),
                    ",\n{\"name\": \"thread_name\", \"ph\": \"M\", "
                    "\"pid\": %d, \"tid\": 1001, \"args\": {\"name\": "
                    "\"schedule (stage %d)\"}}",
                    rank, stage_);
      out << buffer;
    }
    std::snprintf(buffer, sizeof(buffer), "\n]}\n");
    out << buffer;
    return bool(out);
  }

private:
  /// An instruction's operand and result types, "16x64xf32, 64xf32 ->
  /// 16x64xf32", as the IR writes them (a scalar: "f32").
  static std::string shapesOf(const plan::Plan &plan,
                              const plan::Instruction &inst) {
    auto list = [&](const auto &ids) {
      std::string text;
      for (uint32_t id : ids) {
        if (id >= uint32_t(plan.tensors_size()))
          continue;
        const plan::Tensor &t = plan.tensors(int(id));
        if (!text.empty())
          text += ", ";
        for (int64_t d : t.shape())
          text += std::to_string(d) + "x";
        text += name(fromPlanDType(t.dtype()));
      }
      return text;
    };
    return list(inst.inputs()) + " -> " + list(inst.outputs());
  }

  struct Record {
    std::string op, shapes, stream;
    int64_t startNs, endNs;
    int instruction;
  };
  struct Phase {
    std::string label;
    int64_t startNs, endNs;
  };
  /// A span of the schedule: an action ("F3") or a receive's wait ("idle").
  struct Action {
    std::string name;
    const char *category, *color;
    int microBatch;
    int64_t startNs, endNs;
    std::string detail; // more args, JSON
  };

  /// A pipeline stage program's actions: the compute stream's instructions
  /// (kernels, sends and receives) of one action in a row, from the end of
  /// its first receive's wait (or its first instruction's start) to its
  /// last instruction's end; each receive's wait for the other stage an
  /// idle span. An action with no work on this stage (a zero-bubble B on
  /// the first stage, which sends no gradient back) is a span of no
  /// length where its receive ends.
  void addSchedule(const plan::Program &p,
                   const std::vector<Executor::TraceEvent> &events) {
    std::optional<Action> run;
    plan::PipelinePhase runPhase = plan::NO_PHASE;
    for (int i = 0; i < p.instructions_size() && i < int(events.size()); ++i) {
      const plan::Instruction &inst = p.instructions(i);
      const Executor::TraceEvent &e = events[i];
      if (e.endNs == 0)
        continue;
      bool receive = inst.kind() == plan::RECV;
      if (receive)
        idle_.push_back(
            {"idle", "idle", "grey", int(inst.micro_batch()), e.startNs,
             e.endNs,
             ", \"waits_for_stage\": " + std::to_string(inst.peer_stage())});
      if (inst.phase() == plan::NO_PHASE || inst.stream() != 0 ||
          (inst.kind() != plan::KERNEL && inst.kind() != plan::SEND &&
           !receive))
        continue;
      int64_t start = receive ? e.endNs : e.startNs;
      if (run && runPhase == inst.phase() &&
          run->microBatch == int(inst.micro_batch())) {
        run->endNs = std::max(run->endNs, e.endNs);
        continue;
      }
      if (run)
        actions_.push_back(*run);
      runPhase = inst.phase();
      const char *letter = runPhase == plan::FORWARD    ? "F"
                           : runPhase == plan::BACKWARD ? "B"
                                                        : "W";
      // Chrome trace's reserved colours: blue, green, yellow.
      const char *color = runPhase == plan::FORWARD    ? "rail_response"
                          : runPhase == plan::BACKWARD ? "good"
                                                       : "yellow";
      run = Action{letter + std::to_string(inst.micro_batch()), letter, color,
                   int(inst.micro_batch()), start, e.endNs, ""};
    }
    if (run)
      actions_.push_back(*run);
  }

  std::vector<Record> records_;
  std::vector<Phase> phases_;
  std::vector<Action> actions_, idle_;
  int stage_ = -1;
};

int64_t peakMemoryBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

} // namespace

double scheduledLearningRate(const plan::Training &training, double lr,
                             uint64_t step) {
  double warmup = double(training.warmup_steps());
  if (warmup > 0 && double(step) <= warmup)
    return lr * double(step) / warmup;
  if (training.lr_schedule() != "cosine")
    return lr;
  double total = double(training.total_steps());
  double progress = std::min(1.0, (double(step) - warmup) /
                                      std::max(1.0, total - warmup));
  double floor = lr * training.min_lr_ratio();
  return floor + (lr - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

namespace {
OnnxExporter &onnxExporter() {
  static OnnxExporter exporter;
  return exporter;
}
} // namespace

void setOnnxExporter(OnnxExporter exporter) {
  onnxExporter() = std::move(exporter);
}

Status generateText(Executor &executor, const std::string &prompt,
                    int64_t count, int64_t topK, uint64_t seed,
                    std::string &out) {
  std::vector<std::string> inputs = executor.getInputNames("forward");
  std::vector<std::string> outputs = executor.getOutputNames("forward");
  if (inputs.size() != 1 || outputs.empty())
    return Status::error("--sample needs a next-token model: one [B, T] "
                         "token input and [B, T, V] logits");
  TensorView *ids = executor.findInput(inputs[0]);
  const TensorView *logits = executor.findOutput(outputs[0]);
  if (ids->rank() != 2 || logits->rank() != 3 ||
      logits->dtype != DType::F32 ||
      (ids->dtype != DType::I64 && ids->dtype != DType::I32))
    return Status::error("--sample needs a next-token model: one [B, T] "
                         "token input and [B, T, V] f32 logits");
  int64_t length = ids->shape[1], vocab = logits->shape[2];
  std::vector<int64_t> context(prompt.begin(), prompt.end());
  for (int64_t &c : context)
    c = static_cast<unsigned char>(c);
  if (context.empty())
    context.push_back('\n');
  uint64_t state = splitmix64(seed ^ 0x5A4D504CEull);
  out.clear();
  for (int64_t n = 0; n < count; ++n) {
    int64_t used = std::min<int64_t>(length, context.size());
    std::memset(ids->data, 0, ids->bytes());
    for (int64_t t = 0; t < used; ++t) {
      int64_t token = context[context.size() - used + t] % vocab;
      if (ids->dtype == DType::I64)
        ids->as<int64_t>()[t] = token;
      else
        ids->as<int32_t>()[t] = int32_t(token);
    }
    if (Status s = executor.run("forward"); !s)
      return s;
    // Row 0, the position of the last context token.
    const float *row = logits->as<float>() + (used - 1) * vocab;
    std::vector<int64_t> order(vocab);
    for (int64_t v = 0; v < vocab; ++v)
      order[v] = v;
    int64_t k = std::clamp<int64_t>(topK, 1, vocab);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    double total = 0;
    std::vector<double> weights(k);
    for (int64_t i = 0; i < k; ++i)
      total += weights[i] = std::exp(double(row[order[i]]) - row[order[0]]);
    state = splitmix64(state);
    double pick = double(state >> 11) * 0x1p-53 * total;
    int64_t choice = order[0];
    for (int64_t i = 0; i < k; ++i) {
      if ((pick -= weights[i]) <= 0) {
        choice = order[i];
        break;
      }
    }
    context.push_back(choice);
    out.push_back(static_cast<char>(choice));
  }
  return Status::ok();
}

namespace {

/// strata-run ARTIFACT --checkpoint-dir DIR --consolidate OUT
/// [--export-onnx OUT.onnx]: one process, no MPI.
int consolidate(const Artifact &artifact, const TrainOptions &options) {
  const plan::Plan &plan = artifact.getPlan();
  if (!plan.has_topology() || plan.topology().world() <= 1)
    return error("--consolidate needs a distributed artifact; a one-rank "
                 "checkpoint holds whole weights already");
  if (options.checkpointDir.empty())
    return error("--consolidate needs --checkpoint-dir DIR");
  uint64_t step = 0;
  if (Status s = consolidateCheckpoint(artifact, options.checkpointDir,
                                       options.consolidateTo, step);
      !s)
    return error(s.message());
  if (!options.quiet)
    std::cout << "consolidated step " << step << " of "
              << options.checkpointDir << " into " << options.consolidateTo
              << "\n";
  if (options.exportOnnx.empty())
    return 0;
  if (!onnxExporter())
    return error("--export-onnx is not available in this build");
  std::unique_ptr<MappedWeights> weights;
  if (Status s = MappedWeights::open(options.consolidateTo, weights); !s)
    return error(s.message());
  if (Status s = onnxExporter()(
          options.artifactDir,
          [&](const std::string &name) { return weights->get(name); },
          options.exportOnnx);
      !s)
    return error(s.message());
  if (!options.quiet)
    std::cout << "wrote " << options.exportOnnx << "\n";
  return 0;
}

} // namespace

Status createDevice(const std::string &backend, int rank, bool tf32,
                    double timeoutSeconds, std::shared_ptr<Device> &out) {
  if (backend == "cpu") {
    out = createCpuDevice();
    return Status::ok();
  }
  if (backend == "queued") {
    out = createQueueModelDevice(getCpuKernels());
    return Status::ok();
  }
  if (backend != "cuda")
    return Status::error("unknown backend '" + backend + "'");
  // The launcher's rank on this node picks the GPU.
  int local = rank;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char *value = std::getenv(name)) {
      local = std::atoi(value);
      break;
    }
  CudaDeviceOptions options;
  options.ordinal = local;
  options.tf32 = tf32;
  options.timeoutSeconds = timeoutSeconds;
  std::unique_ptr<Device> device;
  if (Status s = createCudaDevice(options, device); !s)
    return s;
  out = std::move(device);
  return Status::ok();
}

namespace {

/// Prints `message` as error() does; false, for the run's phases.
bool fail(const std::string &message) {
  error(message);
  return false;
}

/// The step log's traffic slots: the loss, then [intra, inter] per
/// collective summed over the ranks; each rank's [intra, inter] follow.
constexpr int kRankSlots = 1 + 2 * Communicator::kKinds;

/// One training run of strata-run, phase by phase: set-up (communicator,
/// device, executor), the data and the programs' scalars, resuming, the
/// loss-scaling state, then one optimizer step at a time (micro-steps, the
/// optimizer, logging, checkpoints) and what follows the last. A phase that
/// returns false has ended the run with exit code 1, its error printed
/// (where every rank sees an error, rank 0 alone prints it).
class TrainingRun {
public:
  TrainingRun(const TrainOptions &options, Artifact &artifact)
      : options_(options), artifact_(artifact), plan_(artifact.getPlan()),
        training_(plan_.training()) {}

  /// Trains; returns the process exit code.
  int run();
  /// The run's phases; run() ends the job when one fails.
  int runPhases();

private:
  /// What one optimizer step measured, for the step log and progress line.
  struct StepResult {
    /// The mean loss over the micro-steps (and over the ranks).
    double loss = 0;
    double lr = 0, norm = 0;
    /// The loss scale the step ran with (1 without loss scaling).
    double usedScale = 1.0;
    /// Heap allocations inside the step's programs (0 after the first).
    uint64_t allocations = 0;
    /// The step's bytes by collective and link class (kRankSlots).
    std::vector<double> sums;
    bool skipped = false, replicasChecked = false;
    double ms = 0, perSecond = 0;
    /// Pipeline stages: this rank's waits for other stages and its step
    /// time (ms), and the bytes it sent to other stages.
    double bubbleMs = 0, busyMs = 0, p2pBytes = 0;
  };

  /// The communicator (distributed), this rank's shard, the device and
  /// the executor.
  bool createExecutor();
  /// The data loader over every micro_step input but the optimizer's
  /// scalars.
  bool createLoader();
  /// Pipeline stages: a loader per micro-batch over its "<input>#k".
  bool createStageLoaders();
  /// The loader throughput is counted by (null on a middle stage, which
  /// reads no input).
  const DataLoader *statsLoader() const {
    if (loader_)
      return loader_.get();
    for (const auto &l : stageLoaders_)
      if (l)
        return l.get();
    return nullptr;
  }
  /// Pipeline stages: the step's micro-batches, then this stage's program.
  bool runStageStep(uint64_t s, bool tracing, StepResult &r);
  /// strata.lr, strata.step, strata.loss and strata.grad_norm, checked.
  bool findScalars();
  /// --resume's checkpoint, then the step log (appended to on --resume).
  /// Locks the checkpoint folder this run writes or resumes from, and
  /// takes the resumed checkpoint's seed.
  bool lockAndPeekCheckpoint();
  /// This rank's identity in its checkpoints (computed once).
  const CheckpointIdentity &checkpointIdentity() {
    if (!checkpointId_)
      checkpointId_ = CheckpointIdentity::of(plan_, rank_);
    return *checkpointId_;
  }
  bool resumeAndOpenLog();
  /// fp16: the loss-scaling counters, read from the executor (the initial
  /// scale written in on a fresh run).
  bool initLossScaling();
  /// Writes the loss-scaling counters back into the executor's state.
  Status storeScaling();

  /// Optimizer step `s` (0-based), from the micro-steps to the checkpoint.
  bool runStep(uint64_t s);
  /// Every micro-step of step `s`: the loader's batch, then micro_step.
  bool runMicroSteps(uint64_t s, bool tracing, StepResult &r);
  /// strata.lr and strata.step, then optimizer_step.
  bool runOptimizer(uint64_t s, StepResult &r);
  /// --trace: the optimizer's events, then the traced step's file.
  bool writeTrace(uint64_t s);
  /// The step's traffic since `before` and its loss, summed over the ranks.
  bool sumOverRanks(const Communicator::Traffic &before, StepResult &r);
  /// --check-replicas: replicas (ranks r and r % P) must hold the same
  /// bits after the update.
  bool checkReplicas(uint64_t s);
  /// fp16: halve the scale and skip on overflow, double it after 2000
  /// good steps.
  bool updateLossScaling(StepResult &r);
  /// Adds the step to the totals the summary prints.
  void recordLoss(uint64_t s, const StepResult &r);
  /// The step's JSON object in --log.
  void logStep(uint64_t s, const StepResult &r);
  /// The step's progress line.
  void printProgress(uint64_t s, const StepResult &r);
  /// --save-every: a checkpoint after every K-th step.
  bool saveIfDue(uint64_t s);

  /// The line after the last step.
  void printSummary();
  /// --export-onnx: the model with the trained weights.
  /// --eval: the folder checked before step 1, then scored with the
  /// trained weights.
  bool openEvaluation();
  bool evaluate();
  bool exportOnnx();
  /// --sample: the text the trained model continues --prompt with.
  bool printSample();

  const TrainOptions &options_;
  Artifact &artifact_;
  const plan::Plan &plan_;
  const plan::Training &training_;
  // A distributed artifact: one communicator per group kind, this rank's
  // section of params.bin, its own micro-batches.
  std::unique_ptr<Communicator> comm_;
  int rank_ = 0, world_ = 1;
  bool leader_ = true;
  std::shared_ptr<Device> device_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<DataLoader> loader_;
  std::unique_ptr<Evaluation> evaluation_;
  // Pipeline stages: this rank's stage and its programs, the lanes the
  // micro-batches are sampled for, a loader per micro-batch, the last
  // stage's losses.
  int stages_ = 1, stage_ = 0, lane_ = 0, lanes_ = 1;
  std::string stepProgram_ = "micro_step", updateProgram_ = "optimizer_step";
  std::vector<std::unique_ptr<DataLoader>> stageLoaders_;
  std::vector<const TensorView *> stageLosses_;
  TensorView *lrInput_ = nullptr, *stepInput_ = nullptr;
  const TensorView *lossOutput_ = nullptr, *normOutput_ = nullptr;
  uint64_t steps_ = 0, start_ = 0;
  double baseLr_ = 0;
  uint32_t accum_ = 1;
  std::ofstream log_;
  // fp16: dynamic loss scaling as torch.cuda.amp.GradScaler (init from the
  // artifact, halve on overflow and skip the update, double after 2000
  // good steps). The counters are persistent state, so checkpoints keep
  // them.
  // The counters are read and written through the executor (they may live
  // in device memory), kept here between steps.
  std::optional<Executor::StateTensor> scaleState_, goodState_, appliedState_;
  bool scaling_ = false;
  float lossScale_ = 0;
  int64_t goodSteps_ = 0, appliedSteps_ = 0;
  std::string replicaBuffer_; // --check-replicas reads states through it
  uint64_t traceStep_ = 0;
  MeasuredTrace trace_;
  std::unique_ptr<CheckpointLock> checkpointLock_;
  /// The sampling seed: --seed, or a resumed checkpoint's.
  uint64_t seed_ = 0;
  std::optional<CheckpointIdentity> checkpointId_;
  double firstLoss_ = NAN, lastLoss_ = NAN, totalMs_ = 0;
  // The mean loss of the last tenth of the run: one step's loss is noisy.
  uint64_t tailFrom_ = 0;
  double tailSum_ = 0;
  uint64_t tailCount_ = 0;
};

int TrainingRun::run() {
  int code = runPhases();
  // A distributed run that failed on this rank (its message printed)
  // ends the whole job now: the others would wait in their next
  // collective until the timeout, and MPI_Finalize could hang mpirun.
  if (code != 0 && comm_ && world_ > 1)
    comm_->abortJob(code);
  return code;
}

int TrainingRun::runPhases() {
  if (!createExecutor() || !lockAndPeekCheckpoint() || !createLoader() ||
      !openEvaluation() || !findScalars() || !resumeAndOpenLog() ||
      !initLossScaling())
    return 1;
  traceStep_ = options_.traceStep > 0 ? uint64_t(options_.traceStep) : steps_;
  tailFrom_ = steps_ - std::max<uint64_t>((steps_ - start_) / 10, 1);
  for (uint64_t s = start_; s < steps_; ++s)
    if (!runStep(s))
      return 1;
  printSummary();
  if (!options_.evalData.empty() && !evaluate())
    return 1;
  if (!options_.exportOnnx.empty() && !exportOnnx())
    return 1;
  if (options_.sampleTokens > 0 && !printSample())
    return 1;
  return 0;
}

bool TrainingRun::createExecutor() {
  if (plan_.has_topology() && plan_.topology().world() > 1) {
    TopologyInfo topology{int(plan_.topology().world()),
                          int(plan_.topology().ranks_per_node()),
                          int(plan_.topology().partition()),
                          int(std::max(1u, plan_.topology().pipeline_stages()))};
    if (Status s =
            Communicator::create(topology, options_.timeoutSeconds, comm_);
        !s)
      return fail(s.message());
    rank_ = comm_->rank();
    world_ = comm_->world();
    stages_ = topology.stages;
    stage_ = comm_->stage();
    // The ranks of one pipeline share its micro-batches: the data-parallel
    // lanes are the stage's position and the pipeline group.
    int partition = std::max(topology.partition, 1);
    lanes_ = world_ / stages_;
    lane_ = rank_ / (partition * stages_) * partition + rank_ % partition;
    if (stages_ > 1) {
      stepProgram_ = "pipeline_step_" + std::to_string(stage_);
      updateProgram_ = "optimizer_step_" + std::to_string(stage_);
      trace_.setStage(stage_);
    }
    if (!options_.exportOnnx.empty() || options_.sampleTokens > 0)
      return fail("--export-onnx and --sample need whole weights: save a "
                  "checkpoint (--save-every), then run strata-run " +
                  options_.artifactDir +
                  " --checkpoint-dir DIR --consolidate OUT "
                  "[--export-onnx OUT.onnx]");
    if (Status s = artifact_.mapShard(uint32_t(rank_ % topology.partition)); !s)
      return fail(s.message());
  }
  ExecutorOptions executorOptions;
  executorOptions.rank = rank_;
  executorOptions.ssdDir = options_.ssdDir;
  executorOptions.injectDelayMicros = options_.injectDelayMicros;
  executorOptions.captureGraphs = options_.cudaGraph;
  // A stage's rank allocates its own stage's tensors only.
  if (stages_ > 1)
    executorOptions.stage = stage_;
  if (Status s = createDevice(options_.backend, rank_, options_.tf32,
                              options_.timeoutSeconds, device_);
      !s)
    return fail(s.message());
  if (Status s =
          Executor::create(artifact_, device_, executor_, executorOptions);
      !s)
    return fail(s.message());
  if (Status s = executor_->setCommunicator(comm_.get()); !s)
    return fail(s.message());
  leader_ = rank_ == 0;
  return true;
}

bool TrainingRun::createLoader() {
  if (stages_ > 1)
    return createStageLoaders();
  // The loader fills every micro_step input but the optimizer's scalars.
  std::vector<LoaderInput> inputs;
  for (const std::string &name : executor_->getInputNames("micro_step")) {
    auto high = training_.int_input_high().find(name);
    inputs.push_back(
        {name, executor_->findInput(name),
         high == training_.int_input_high().end() ? 2 : high->second});
  }
  if (options_.data == "synthetic")
    loader_ = DataLoader::synthetic(inputs, seed_, rank_, world_);
  else if (Status s = isFolder(options_.data)
                          ? DataLoader::arrays(options_.data, inputs,
                                               training_.ignore_index(), seed_,
                                               loader_, rank_, world_)
                          : DataLoader::tokens(options_.data,
                                               options_.dataDtype, inputs,
                                               seed_, loader_, rank_, world_);
           !s)
    return fail(s.message());
  return true;
}

bool TrainingRun::createStageLoaders() {
  accum_ = std::max<uint32_t>(training_.accum(), 1);
  // Micro-batch k's inputs are bound as "<input>#k"; each stage reads
  // those it needs by the sampling rule, as lane `lane_` of `lanes_`.
  std::map<uint32_t, std::vector<LoaderInput>> byMicroBatch;
  for (const std::string &bound : executor_->getInputNames(stepProgram_)) {
    size_t hash = bound.rfind('#');
    if (hash == std::string::npos)
      continue; // strata.lr and the like
    std::string name = bound.substr(0, hash);
    uint32_t k = uint32_t(std::stoul(bound.substr(hash + 1)));
    auto high = training_.int_input_high().find(name);
    byMicroBatch[k].push_back(
        {name, executor_->findInput(bound),
         high == training_.int_input_high().end() ? 2 : high->second});
  }
  stageLoaders_.clear();
  stageLoaders_.resize(accum_);
  for (auto &[k, inputs] : byMicroBatch) {
    if (k >= accum_)
      return fail("the artifact's " + stepProgram_ + " reads micro-batch " +
                  std::to_string(k) + " of " + std::to_string(accum_));
    if (options_.data == "synthetic")
      stageLoaders_[k] =
          DataLoader::synthetic(inputs, seed_, lane_, lanes_);
    else if (Status s =
                 isFolder(options_.data)
                     ? DataLoader::arrays(options_.data, inputs,
                                          training_.ignore_index(), seed_,
                                          stageLoaders_[k], lane_, lanes_,
                                          /*partial=*/true)
                     : DataLoader::tokens(options_.data, options_.dataDtype,
                                          inputs, seed_, stageLoaders_[k],
                                          lane_, lanes_, /*partial=*/true);
             !s)
      return fail(s.message());
  }
  return true;
}

bool TrainingRun::findScalars() {
  lrInput_ = executor_->findInput("strata.lr");
  stepInput_ = executor_->findInput("strata.step");
  lossOutput_ = executor_->findOutput("strata.loss");
  normOutput_ = executor_->findOutput("strata.grad_norm");
  if (stages_ > 1) {
    // This stage's norm; the last stage's per-micro-batch losses (the
    // others have none).
    normOutput_ = executor_->findOutput(updateProgram_, "strata.grad_norm");
    stageLosses_.clear();
    for (uint32_t k = 0; k < accum_; ++k)
      if (const TensorView *loss = executor_->findOutput(
              stepProgram_, "strata.loss#" + std::to_string(k)))
        stageLosses_.push_back(loss);
    if (stage_ + 1 == stages_ && stageLosses_.size() != accum_)
      return fail("the last stage's program lacks its strata.loss#k "
                  "outputs");
    lossOutput_ = stageLosses_.empty() ? normOutput_ : stageLosses_.front();
  }
  if (!lrInput_ || !stepInput_ || !lossOutput_ || !normOutput_)
    return fail("the artifact's training programs lack strata.lr, "
                "strata.step, strata.loss or strata.grad_norm");
  auto isScalar = [](const TensorView &t, std::initializer_list<DType> types) {
    return t.numel() == 1 &&
           std::find(types.begin(), types.end(), t.dtype) != types.end();
  };
  if (!isScalar(*lrInput_, {DType::F64}) ||
      !isScalar(*stepInput_, {DType::I64}) ||
      !isScalar(*lossOutput_, {DType::F32, DType::F64}) ||
      !isScalar(*normOutput_, {DType::F32, DType::F64}))
    return fail("the artifact's strata.lr must be an f64 scalar, strata.step "
                "an i64 scalar, strata.loss and strata.grad_norm float "
                "scalars; got " +
                lrInput_->describe() + ", " + stepInput_->describe() + ", " +
                lossOutput_->describe() + ", " + normOutput_->describe());
  return true;
}

bool TrainingRun::lockAndPeekCheckpoint() {
  seed_ = options_.seed;
  bool saving = options_.saveEvery > 0 && !options_.checkpointDir.empty();
  if (saving || (options_.resume && !options_.checkpointDir.empty()))
    if (Status s = CheckpointLock::acquire(options_.checkpointDir, comm_.get(),
                                           checkpointLock_);
        !s)
      return fail(s.message());
  if (!options_.resume || options_.checkpointDir.empty())
    return true;
  // The resumed run draws the batches the interrupted one would have: its
  // seed, from the checkpoint.
  bool found = false;
  uint64_t step = 0, seed = 0;
  if (Status s = peekCheckpoint(options_.checkpointDir, checkpointIdentity(),
                                found, step, seed);
      !s)
    return fail(s.message());
  if (!found)
    return true;
  if (options_.seedGiven && options_.seed != seed)
    return fail("--seed " + std::to_string(options_.seed) +
                " differs from the seed " + std::to_string(seed) +
                " the checkpoint of step " + std::to_string(step) +
                " was trained with; resume without --seed (or with --seed " +
                std::to_string(seed) + ")");
  seed_ = seed;
  return true;
}

bool TrainingRun::resumeAndOpenLog() {
  steps_ =
      options_.steps >= 0 ? uint64_t(options_.steps) : training_.total_steps();
  baseLr_ = options_.lr > 0 ? options_.lr : training_.lr();
  accum_ = std::max<uint32_t>(training_.accum(), 1);
  if (options_.resume) {
    if (options_.checkpointDir.empty())
      return fail("--resume needs --checkpoint-dir DIR");
    if (Status s = loadCheckpoint(options_.checkpointDir, checkpointIdentity(),
                                  *executor_, start_, comm_.get());
        !s)
      return fail(s.message());
    if (start_ && !options_.quiet && leader_)
      std::cout << "resumed from step " << start_ << " of "
                << options_.checkpointDir << "\n";
  }
  if (!options_.logPath.empty()) {
    log_.open(options_.logPath,
              options_.resume ? std::ios::app : std::ios::trunc);
    if (!log_)
      return fail("cannot write the log '" + options_.logPath + "'");
  }
  return true;
}

bool TrainingRun::initLossScaling() {
  for (const auto &state : executor_->getStates()) {
    if (state.name == "strata.loss_scale")
      scaleState_ = state;
    else if (state.name == "strata.good_steps")
      goodState_ = state;
    else if (state.name == "strata.applied_steps")
      appliedState_ = state;
  }
  scaling_ = scaleState_ && goodState_ && appliedState_;
  if (training_.dtype() == "fp16" && !scaling_)
    return fail("the fp16 artifact lacks its loss-scaling state");
  if (!scaling_)
    return true;
  for (auto [state, value] :
       {std::pair{&*scaleState_, static_cast<void *>(&lossScale_)},
        std::pair{&*goodState_, static_cast<void *>(&goodSteps_)},
        std::pair{&*appliedState_, static_cast<void *>(&appliedSteps_)}})
    if (Status st = executor_->readState(*state, value); !st)
      return fail(st.message());
  if (lossScale_ == 0.0f) {
    lossScale_ = static_cast<float>(training_.loss_scale());
    if (Status st = storeScaling(); !st)
      return fail(st.message());
  }
  return true;
}

Status TrainingRun::storeScaling() {
  if (Status st = executor_->writeState(*scaleState_, &lossScale_); !st)
    return st;
  if (Status st = executor_->writeState(*goodState_, &goodSteps_); !st)
    return st;
  return executor_->writeState(*appliedState_, &appliedSteps_);
}

bool TrainingRun::runStep(uint64_t s) {
  auto t0 = std::chrono::steady_clock::now();
  Communicator::Traffic before =
      comm_ ? comm_->traffic() : Communicator::Traffic{};
  if (accum_ > 1)
    executor_->zeroGradients();
  StepResult r;
  // Tests of the timeout: this rank stops participating at step 2, or
  // dies there as `kill -9` would kill it.
  if (comm_ && s == 1) {
    if (const char *stall = std::getenv("STRATA_TEST_STALL_RANK");
        stall && std::atoi(stall) == rank_)
      for (;;)
        std::this_thread::sleep_for(std::chrono::seconds(1));
    if (const char *kill = std::getenv("STRATA_TEST_KILL_RANK");
        kill && std::atoi(kill) == rank_)
      std::raise(SIGKILL);
  }
  bool tracing = !options_.tracePath.empty() && s + 1 == traceStep_;
  executor_->setTracing(tracing);
  double waited = comm_ ? comm_->receiveWaitSeconds() : 0;
  double sent = comm_ ? comm_->pointToPointBytes() : 0;
  if (!runMicroSteps(s, tracing, r) || !runOptimizer(s, r))
    return false;
  if (comm_ && stages_ > 1) {
    // The pipeline's idle time: this rank's waits for other stages.
    r.bubbleMs = (comm_->receiveWaitSeconds() - waited) * 1000.0;
    r.busyMs = std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - t0)
                   .count();
    r.p2pBytes = comm_->pointToPointBytes() - sent;
  }
  if (tracing && !writeTrace(s))
    return false;
  r.norm = scalar(*normOutput_);
  if (!sumOverRanks(before, r))
    return false;
  // Tests of the replica check: this rank's first state changes in its
  // last bit at step 2.
  if (comm_ && s == 1)
    if (const char *perturb = std::getenv("STRATA_TEST_PERTURB_RANK");
        perturb && std::atoi(perturb) == rank_)
      for (const auto &state : executor_->getStates())
        if (state.kind == plan::PARAMETER && state.view->bytes()) {
          std::string bytes(state.view->bytes(), '\0');
          if (!executor_->readState(state, bytes.data()))
            break;
          bytes[0] = char(bytes[0] ^ 1);
          (void)executor_->writeState(state, bytes.data());
          break;
        }
  if (comm_ && options_.checkReplicas) {
    if (!checkReplicas(s))
      return false;
    r.replicasChecked = true;
  }
  if (scaling_ && !updateLossScaling(r))
    return false;
  // A diverged step (without fp16's loss scaling, which skips it) already
  // updated the weights with non-finite numbers: stop before anything
  // saves them. Every rank sees the same sums and stops alike.
  if (!scaling_ && (!std::isfinite(r.loss) || !std::isfinite(r.norm))) {
    if (log_.is_open() && leader_)
      logStep(s, r);
    char line[256];
    std::snprintf(line, sizeof(line),
                  "step %llu: the loss is %g and the gradient norm %g: "
                  "training diverged; stopped before saving anything "
                  "non-finite (lower --lr, or clip with --clip-norm)",
                  static_cast<unsigned long long>(s + 1), r.loss, r.norm);
    return leader_ ? fail(line) : false;
  }
  r.ms = std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
             .count();
  recordLoss(s, r);
  // The whole global batch: every rank's micro-batches.
  r.perSecond =
      (statsLoader() ? statsLoader()->itemsPerMicroStep() : 0) * accum_ *
      lanes_ / (r.ms / 1000.0);
  if (log_.is_open() && leader_) {
    logStep(s, r);
    if (!log_)
      return fail("cannot write the log '" + options_.logPath +
                  "': " + std::strerror(errno));
  }
  if (!options_.quiet && leader_ && options_.printEvery > 0 &&
      ((s + 1) % uint64_t(options_.printEvery) == 0 || s + 1 == steps_ ||
       s == start_))
    printProgress(s, r);
  return saveIfDue(s);
}

bool TrainingRun::runMicroSteps(uint64_t s, bool tracing, StepResult &r) {
  if (stages_ > 1)
    return runStageStep(s, tracing, r);
  for (uint32_t m = 0; m < accum_; ++m) {
    if (Status st = loader_->fill(s, m, accum_); !st)
      return fail(st.message());
    // Each rank its own dropout masks (one rank: (s * A + m)).
    uint64_t microSeed =
        splitmix64(splitmix64(seed_) ^
                   ((s * accum_ + m) * uint64_t(world_) + rank_));
    if (Status st = executor_->run("micro_step", microSeed); !st)
      return fail("step " + std::to_string(s + 1) + ": " + st.message());
    r.allocations += executor_->getLastRunAllocations();
    r.loss += scalar(*lossOutput_);
    if (tracing)
      trace_.add(*executor_, plan_, "micro_step",
                 "micro_step " + std::to_string(m + 1) + "/" +
                     std::to_string(accum_));
  }
  r.loss /= accum_;
  return true;
}

bool TrainingRun::runStageStep(uint64_t s, bool tracing, StepResult &r) {
  for (uint32_t k = 0; k < accum_; ++k)
    if (stageLoaders_[k])
      if (Status st = stageLoaders_[k]->fill(s, k, accum_); !st)
        return fail(st.message());
  uint64_t seed = splitmix64(splitmix64(seed_) ^
                             (s * uint64_t(world_) + rank_));
  if (Status st = executor_->run(stepProgram_, seed); !st)
    return fail("step " + std::to_string(s + 1) + ": " + st.message());
  r.allocations += executor_->getLastRunAllocations();
  // The last stage's loss, the mean over its micro-batches; the log sums
  // it over the ranks (the other stages add 0).
  for (const TensorView *loss : stageLosses_)
    r.loss += scalar(*loss);
  if (!stageLosses_.empty())
    r.loss /= accum_;
  if (tracing)
    trace_.add(*executor_, plan_, stepProgram_, stepProgram_);
  return true;
}

bool TrainingRun::runOptimizer(uint64_t s, StepResult &r) {
  r.lr = scheduledLearningRate(training_, baseLr_, s + 1);
  lrInput_->as<double>()[0] = r.lr;
  stepInput_->as<int64_t>()[0] = scaling_ ? appliedSteps_ + 1 : int64_t(s + 1);
  r.usedScale = scaling_ ? lossScale_ : 1.0;
  if (Status st = executor_->run(updateProgram_); !st)
    return fail("step " + std::to_string(s + 1) + ": " + st.message());
  r.allocations += executor_->getLastRunAllocations();
  return true;
}

bool TrainingRun::writeTrace(uint64_t s) {
  trace_.add(*executor_, plan_, updateProgram_, updateProgram_);
  executor_->setTracing(false);
  std::string path = options_.tracePath;
  if (world_ > 1) { // one file a rank: out.rank-3.json
    size_t dot = path.rfind('.');
    std::string suffix = ".rank-" + std::to_string(rank_);
    path = dot == std::string::npos || dot < path.rfind('/') + 1
               ? path + suffix
               : path.substr(0, dot) + suffix + path.substr(dot);
  }
  if (!trace_.write(path, rank_, s + 1))
    return fail("cannot write the trace '" + path + "'");
  return true;
}

bool TrainingRun::sumOverRanks(const Communicator::Traffic &before,
                               StepResult &r) {
  // The step's bytes by collective and link class, summed over the ranks,
  // and its loss, the mean over the ranks (bookkeeping outside the
  // counters).
  // Layout: the loss, [intra, inter] per collective summed over the
  // ranks, then [intra, inter] of each rank (the others' slots zero).
  // With stages, then each rank's [idle ms, step ms], the bytes sent
  // between stages, and each rank's planned device bytes (its stage's
  // only, before rounding to pages).
  size_t stageSlots = kRankSlots + 2 * size_t(world_);
  r.sums.assign(stageSlots + (stages_ > 1 ? 3 * size_t(world_) + 1 : 0), 0.0);
  r.sums[0] = r.loss;
  if (!comm_)
    return true;
  if (stages_ > 1) {
    r.sums[stageSlots + 2 * rank_] = r.bubbleMs;
    r.sums[stageSlots + 2 * rank_ + 1] = r.busyMs;
    r.sums[stageSlots + 2 * world_] = r.p2pBytes;
    r.sums[stageSlots + 2 * world_ + 1 + rank_] =
        double(executor_->getPlannedDeviceBytes());
  }
  const Communicator::Traffic &after = comm_->traffic();
  for (int k = 0; k < Communicator::kKinds; ++k)
    for (int l = 0; l < 2; ++l) {
      double bytes = after[k][l] - before[k][l];
      r.sums[1 + 2 * k + l] = bytes;
      r.sums[kRankSlots + 2 * rank_ + l] += bytes;
    }
  if (Status st = comm_->sumOverWorld(r.sums.data(), r.sums.size(), "step log");
      !st)
    return fail(st.message());
  // Every lane's loss once: with stages only the last stage's ranks add.
  r.loss = r.sums[0] / lanes_;
  return true;
}

bool TrainingRun::checkReplicas(uint64_t s) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const auto &state : executor_->getStates()) {
    // Buffers (batch-norm statistics) follow each rank's own data.
    if (state.kind != plan::PARAMETER && state.kind != plan::OPTIMIZER_STATE)
      continue;
    replicaBuffer_.resize(state.view->bytes());
    if (Status st = executor_->readState(state, replicaBuffer_.data()); !st)
      return fail(st.message());
    hash = fnv1a64(replicaBuffer_.data(), replicaBuffer_.size(), hash);
  }
  std::vector<uint64_t> hashes;
  if (Status st = comm_->gatherOverWorld(hash, hashes, "replica check"); !st)
    return fail(st.message());
  // A replica holds the same shard of the same stage: rank r % (p * P).
  int p = int(plan_.topology().partition()) * stages_;
  for (int r = p; r < world_; ++r)
    if (hashes[r] != hashes[r % p]) { // every rank sees it; one says it
      if (leader_)
        error("step " + std::to_string(s + 1) + ": rank " + std::to_string(r) +
              "'s state differs from its replica rank " +
              std::to_string(r % p));
      return false;
    }
  return true;
}

bool TrainingRun::updateLossScaling(StepResult &r) {
  if (!std::isfinite(r.norm)) {
    r.skipped = true;
    lossScale_ *= 0.5f;
    goodSteps_ = 0;
  } else {
    ++appliedSteps_;
    if (++goodSteps_ == 2000) {
      lossScale_ *= 2.0f;
      goodSteps_ = 0;
    }
  }
  if (Status st = storeScaling(); !st)
    return fail(st.message());
  return true;
}

void TrainingRun::recordLoss(uint64_t s, const StepResult &r) {
  totalMs_ += r.ms;
  if (std::isnan(firstLoss_))
    firstLoss_ = r.loss;
  lastLoss_ = r.loss;
  if (s >= tailFrom_) {
    tailSum_ += r.loss;
    ++tailCount_;
  }
}

void TrainingRun::logStep(uint64_t s, const StepResult &r) {
  const char *unit = statsLoader() && statsLoader()->countsTokens()
                         ? "tokens_per_s"
                         : "samples_per_s";
  // JSON has no NaN or infinity: a diverged loss or an overflowed norm
  // is null.
  char normText[32] = "null", lossText[32] = "null";
  if (std::isfinite(r.norm))
    std::snprintf(normText, sizeof(normText), "%.9g", r.norm);
  if (std::isfinite(r.loss))
    std::snprintf(lossText, sizeof(lossText), "%.9g", r.loss);
  char line[512];
  std::snprintf(line, sizeof(line),
                "{\"step\": %llu, \"loss\": %s, \"lr\": %.9g, "
                "\"grad_norm\": %s, \"%s\": %.1f, \"step_ms\": %.3f, "
                "\"peak_memory_bytes\": %lld, \"device_bytes\": %llu, "
                "\"allocations\": %llu",
                static_cast<unsigned long long>(s + 1), lossText, r.lr,
                normText, unit, r.perSecond, r.ms,
                static_cast<long long>(peakMemoryBytes()),
                static_cast<unsigned long long>(executor_->getArenaBytes()),
                static_cast<unsigned long long>(r.allocations));
  log_ << line;
  if (scaling_) {
    std::snprintf(line, sizeof(line), ", \"loss_scale\": %.9g, \"skipped\": %s",
                  r.usedScale, r.skipped ? "true" : "false");
    log_ << line;
  }
  if (comm_) {
    const std::vector<double> &sums = r.sums;
    double intra = 0, inter = 0;
    for (int k = 0; k < Communicator::kKinds; ++k) {
      intra += sums[1 + 2 * k];
      inter += sums[2 + 2 * k];
    }
    std::snprintf(line, sizeof(line),
                  ", \"intra_node_bytes\": %.0f, \"inter_node_bytes\": "
                  "%.0f, \"bytes\": {",
                  intra, inter);
    log_ << line;
    for (int k = 0; k < Communicator::kKinds; ++k) {
      std::snprintf(line, sizeof(line), "%s\"%s\": [%.0f, %.0f]", k ? ", " : "",
                    Communicator::kindName(Communicator::Kind(k)),
                    sums[1 + 2 * k], sums[2 + 2 * k]);
      log_ << line;
    }
    log_ << "}, \"rank_bytes\": [";
    for (int rank = 0; rank < world_; ++rank) {
      std::snprintf(line, sizeof(line), "%s[%.0f, %.0f]", rank ? ", " : "",
                    sums[kRankSlots + 2 * rank],
                    sums[kRankSlots + 2 * rank + 1]);
      log_ << line;
    }
    log_ << "]";
    if (stages_ > 1) {
      // Per rank: the time it waited for other stages, over its step.
      size_t base = kRankSlots + 2 * size_t(world_);
      log_ << ", \"bubble\": [";
      for (int rank = 0; rank < world_; ++rank) {
        double idle = sums[base + 2 * rank], busy = sums[base + 2 * rank + 1];
        std::snprintf(line, sizeof(line), "%s%.4f", rank ? ", " : "",
                      busy > 0 ? idle / busy : 0.0);
        log_ << line;
      }
      log_ << "], \"bubble_ms\": [";
      for (int rank = 0; rank < world_; ++rank) {
        std::snprintf(line, sizeof(line), "%s%.3f", rank ? ", " : "",
                      sums[base + 2 * rank]);
        log_ << line;
      }
      std::snprintf(line, sizeof(line), "], \"stage_bytes\": %.0f",
                    sums[base + 2 * world_]);
      log_ << line;
      log_ << ", \"device_bytes_by_rank\": [";
      for (int rank = 0; rank < world_; ++rank) {
        std::snprintf(line, sizeof(line), "%s%.0f", rank ? ", " : "",
                      sums[base + 2 * world_ + 1 + rank]);
        log_ << line;
      }
      log_ << "]";
    }
    if (r.replicasChecked)
      log_ << ", \"replicas_identical\": true";
  }
  log_ << "}\n" << std::flush;
}

void TrainingRun::printProgress(uint64_t s, const StepResult &r) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "step %llu/%llu | loss %.4f | lr %.2e | grad_norm %.3f | "
                "%.1fk %s/s | %.1f ms/step\n",
                static_cast<unsigned long long>(s + 1),
                static_cast<unsigned long long>(steps_), r.loss, r.lr, r.norm,
                r.perSecond / 1000.0,
                statsLoader() && statsLoader()->countsTokens() ? "tok"
                                                               : "samples",
                r.ms);
  std::cout << line << std::flush;
}

bool TrainingRun::saveIfDue(uint64_t s) {
  if (options_.saveEvery <= 0 || (s + 1) % uint64_t(options_.saveEvery) != 0)
    return true;
  if (options_.checkpointDir.empty())
    return fail("--save-every needs --checkpoint-dir DIR");
  if (Status st = saveCheckpoint(options_.checkpointDir, checkpointIdentity(),
                                 s + 1, seed_, *executor_, comm_.get());
      !st)
    return fail(st.message());
  return true;
}

void TrainingRun::printSummary() {
  if (options_.quiet || !leader_ || steps_ <= start_)
    return;
  char line[256];
  std::snprintf(line, sizeof(line),
                "trained %llu steps: loss %.4f -> %.4f (mean of the last "
                "%llu steps: %.4f), %.1f ms/step\n",
                static_cast<unsigned long long>(steps_ - start_), firstLoss_,
                lastLoss_, static_cast<unsigned long long>(tailCount_),
                tailSum_ / double(std::max<uint64_t>(tailCount_, 1)),
                totalMs_ / double(steps_ - start_));
  std::cout << line;
}

bool TrainingRun::openEvaluation() {
  if (options_.evalData.empty())
    return true;
  if (comm_ && world_ > 1)
    return fail("--eval scores on one rank: save a checkpoint "
                "(--save-every), then run strata-run ONE.strata --forward "
                "--eval DIR --checkpoint-dir CKPT --resume with the model "
                "compiled for one rank (the checkpoint is resharded as it "
                "loads)");
  if (Status s = Evaluation::open(*executor_, training_, options_.evalData,
                                  evaluation_);
      !s)
    return fail(s.message());
  return true;
}

bool TrainingRun::evaluate() {
  EvalResult result;
  if (Status s = evaluation_->run(result); !s)
    return fail(s.message());
  std::cout << describeEval(result, options_.evalData) << "\n";
  if (log_.is_open()) {
    log_ << evalRecord(result, options_.evalData, steps_) << "\n"
         << std::flush;
    if (!log_)
      return fail("cannot write the log '" + options_.logPath + "'");
  }
  return true;
}

bool TrainingRun::exportOnnx() {
  if (!onnxExporter())
    return fail("--export-onnx is not available in this build");
  // Parameters and buffers, copied out through the executor.
  std::map<std::string, std::string> values;
  for (const auto &state : executor_->getStates()) {
    if (state.kind != plan::PARAMETER && state.kind != plan::BUFFER)
      continue;
    std::string &bytes = values[state.name];
    bytes.resize(state.view->bytes());
    if (Status st = executor_->readState(state, bytes.data()); !st)
      return fail(st.message());
  }
  WeightLookup lookup = [&](const std::string &name) {
    auto it = values.find(name);
    return it == values.end() ? std::string_view()
                              : std::string_view(it->second);
  };
  if (Status s =
          onnxExporter()(options_.artifactDir, lookup, options_.exportOnnx);
      !s)
    return fail(s.message());
  if (!options_.quiet)
    std::cout << "wrote " << options_.exportOnnx << "\n";
  return true;
}

bool TrainingRun::printSample() {
  std::string text;
  if (Status s =
          generateText(*executor_, options_.prompt, options_.sampleTokens,
                       options_.topK, seed_, text);
      !s)
    return fail(s.message());
  std::cout << "--- sample (top-k " << options_.topK << ") ---\n"
            << options_.prompt << text << "\n---\n";
  return true;
}

} // namespace

int train(const TrainOptions &options) {
  std::unique_ptr<Artifact> artifact;
  if (Status s = Artifact::load(options.artifactDir, artifact); !s)
    return error(s.message());
  if (Status s = artifact->checkRunnable(); !s)
    return error(s.message());
  if (!artifact->getPlan().has_training())
    return error("'" + options.artifactDir +
                 "' was compiled with --forward-only; recompile without it to "
                 "train, or pass --forward to evaluate it");
  if (!options.consolidateTo.empty())
    return consolidate(*artifact, options);
  return TrainingRun(options, *artifact).run();
}

} // namespace strata::runtime
