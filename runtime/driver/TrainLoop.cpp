//===- TrainLoop.cpp - strata-run's training loop -------------------------===//
//
// For each optimizer step s (0-based): zero the gradient accumulators (when
// accumulating), run "micro_step" on the loader's batch of each micro-step,
// feed strata.lr and strata.step, run "optimizer_step", log, checkpoint.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Training.h"

#include "strata/Runtime/Backend.h"

#include "strata/Runtime/Communicator.h"
#include "strata/Runtime/DataLoader.h"

#include "plan.pb.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
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
  std::cerr << "strata-run: error: " << message << "\n";
  return 1;
}

double scalar(const TensorView &t) {
  return t.dtype == DType::F64 ? t.as<double>()[0] : double(t.as<float>()[0]);
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
      records_.push_back({p->instructions(i).op(), p->instructions(i).location(),
                          stream, e.startNs, e.endNs, i});
    }
    if (first < last)
      phases_.push_back({label, first, last});
  }

  bool write(const std::string &path, int rank, uint64_t step) const {
    std::ofstream out(path);
    if (!out)
      return false;
    int64_t origin = phases_.empty() ? 0 : phases_.front().startNs;
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
    out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"clock\": "
           "\"measured, microseconds from the step's start\", \"step\": "
        << step << "}, \"traceEvents\": [\n";
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
                    "\"args\": {\"instruction\": %d}}",
                    r.op.c_str(), r.stream.c_str(), rank, track(r.stream),
                    us(r.startNs), double(r.endNs - r.startNs) / 1000.0,
                    r.instruction);
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
                  "%d, \"tid\": 1000, \"args\": {\"name\": \"programs\"}}\n]}\n",
                  rank);
    out << buffer;
    return bool(out);
  }

private:
  struct Record {
    std::string op, location, stream;
    int64_t startNs, endNs;
    int instruction;
  };
  struct Phase {
    std::string label;
    int64_t startNs, endNs;
  };
  std::vector<Record> records_;
  std::vector<Phase> phases_;
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

int train(const TrainOptions &options) {
  std::unique_ptr<Artifact> artifact;
  if (Status s = Artifact::load(options.artifactDir, artifact); !s)
    return error(s.message());
  const plan::Plan &plan = artifact->getPlan();
  if (!plan.has_training())
    return error("'" + options.artifactDir +
                 "' was compiled with --forward-only; recompile without it to "
                 "train, or pass --forward to evaluate it");
  const plan::Training &training = plan.training();
  bool distributed = plan.has_topology() && plan.topology().world() > 1;
  if (!options.consolidateTo.empty())
    return consolidate(*artifact, options);
  std::unique_ptr<Executor> executor;
  // A distributed artifact: one communicator per group kind, this rank's
  // section of params.bin, its own micro-batches.
  std::unique_ptr<Communicator> comm;
  int rank = 0, world = 1;
  if (distributed) {
    TopologyInfo topology{int(plan.topology().world()),
                          int(plan.topology().ranks_per_node()),
                          int(plan.topology().partition())};
    if (Status s = Communicator::create(topology, options.timeoutSeconds, comm);
        !s)
      return error(s.message());
    rank = comm->rank();
    world = comm->world();
    if (!options.exportOnnx.empty() || options.sampleTokens > 0)
      return error("--export-onnx and --sample need whole weights: save a "
                   "checkpoint (--save-every), then run strata-run " +
                   options.artifactDir +
                   " --checkpoint-dir DIR --consolidate OUT "
                   "[--export-onnx OUT.onnx]");
    if (Status s = artifact->mapShard(uint32_t(rank % topology.partition));
        !s)
      return error(s.message());
  }
  ExecutorOptions executorOptions;
  executorOptions.rank = rank;
  executorOptions.ssdDir = options.ssdDir;
  executorOptions.injectDelayMicros = options.injectDelayMicros;
  executorOptions.captureGraphs = options.cudaGraph;
  std::shared_ptr<Device> device;
  if (Status s = createDevice(options.backend, rank, options.tf32,
                              options.timeoutSeconds, device); !s)
    return error(s.message());
  if (Status s = Executor::create(*artifact, device, executor,
                                  executorOptions);
      !s)
    return error(s.message());
  if (Status s = executor->setCommunicator(comm.get()); !s)
    return error(s.message());
  bool leader = rank == 0;
  const std::string &checkpointDir = options.checkpointDir;

  // The loader fills every micro_step input but the optimizer's scalars.
  std::vector<LoaderInput> inputs;
  for (const std::string &name : executor->getInputNames("micro_step")) {
    auto high = training.int_input_high().find(name);
    inputs.push_back({name, executor->findInput(name),
                      high == training.int_input_high().end() ? 2
                                                               : high->second});
  }
  std::unique_ptr<DataLoader> loader;
  if (options.data == "synthetic")
    loader = DataLoader::synthetic(inputs, options.seed, rank, world);
  else if (Status s = DataLoader::tokens(options.data, options.dataDtype,
                                         inputs, options.seed, loader, rank,
                                         world);
           !s)
    return error(s.message());

  TensorView *lrInput = executor->findInput("strata.lr");
  TensorView *stepInput = executor->findInput("strata.step");
  const TensorView *lossOutput = executor->findOutput("strata.loss");
  const TensorView *normOutput = executor->findOutput("strata.grad_norm");
  if (!lrInput || !stepInput || !lossOutput || !normOutput)
    return error("the artifact's training programs lack strata.lr, "
                 "strata.step, strata.loss or strata.grad_norm");
  auto isScalar = [](const TensorView &t, std::initializer_list<DType> types) {
    return t.numel() == 1 &&
           std::find(types.begin(), types.end(), t.dtype) != types.end();
  };
  if (!isScalar(*lrInput, {DType::F64}) || !isScalar(*stepInput, {DType::I64}) ||
      !isScalar(*lossOutput, {DType::F32, DType::F64}) ||
      !isScalar(*normOutput, {DType::F32, DType::F64}))
    return error("the artifact's strata.lr must be an f64 scalar, strata.step "
                 "an i64 scalar, strata.loss and strata.grad_norm float "
                 "scalars; got " + lrInput->describe() + ", " +
                 stepInput->describe() + ", " + lossOutput->describe() + ", " +
                 normOutput->describe());

  uint64_t steps = options.steps >= 0 ? uint64_t(options.steps)
                                      : training.total_steps();
  double baseLr = options.lr > 0 ? options.lr : training.lr();
  uint32_t accum = std::max<uint32_t>(training.accum(), 1);
  uint64_t start = 0;
  if (options.resume) {
    if (options.checkpointDir.empty())
      return error("--resume needs --checkpoint-dir DIR");
    if (Status s = loadCheckpoint(checkpointDir, plan.fingerprint(),
                                  *executor, start, comm.get());
        !s)
      return error(s.message());
    if (start && !options.quiet && leader)
      std::cout << "resumed from step " << start << " of "
                << options.checkpointDir << "\n";
  }
  std::ofstream log;
  if (!options.logPath.empty()) {
    log.open(options.logPath, options.resume ? std::ios::app : std::ios::trunc);
    if (!log)
      return error("cannot write the log '" + options.logPath + "'");
  }

  // fp16: dynamic loss scaling as torch.cuda.amp.GradScaler (init from the
  // artifact, halve on overflow and skip the update, double after 2000
  // good steps). The counters are persistent state, so checkpoints keep
  // them.
  // The counters are read and written through the executor (they may live
  // in device memory), kept here between steps.
  std::optional<Executor::StateTensor> scaleState, goodState, appliedState;
  for (const auto &state : executor->getStates()) {
    if (state.name == "strata.loss_scale")
      scaleState = state;
    else if (state.name == "strata.good_steps")
      goodState = state;
    else if (state.name == "strata.applied_steps")
      appliedState = state;
  }
  bool scaling = scaleState && goodState && appliedState;
  if (training.dtype() == "fp16" && !scaling)
    return error("the fp16 artifact lacks its loss-scaling state");
  float lossScaleValue = 0;
  int64_t goodStepsValue = 0, appliedStepsValue = 0;
  float *lossScale = &lossScaleValue;
  int64_t *goodSteps = &goodStepsValue, *appliedSteps = &appliedStepsValue;
  auto storeScaling = [&]() -> Status {
    if (Status st = executor->writeState(*scaleState, lossScale); !st)
      return st;
    if (Status st = executor->writeState(*goodState, goodSteps); !st)
      return st;
    return executor->writeState(*appliedState, appliedSteps);
  };
  if (scaling) {
    for (auto [state, value] :
         {std::pair{&*scaleState, static_cast<void *>(lossScale)},
          std::pair{&*goodState, static_cast<void *>(goodSteps)},
          std::pair{&*appliedState, static_cast<void *>(appliedSteps)}})
      if (Status st = executor->readState(*state, value); !st)
        return error(st.message());
    if (*lossScale == 0.0f) {
      *lossScale = static_cast<float>(training.loss_scale());
      if (Status st = storeScaling(); !st)
        return error(st.message());
    }
  }

  std::string replicaBuffer; // --check-replicas reads states through it
  uint64_t traceStep = options.traceStep > 0 ? uint64_t(options.traceStep)
                                             : steps;
  MeasuredTrace trace;
  double firstLoss = NAN, lastLoss = NAN, totalMs = 0;
  // The mean loss of the last tenth of the run: one step's loss is noisy.
  uint64_t tailFrom = steps - std::max<uint64_t>((steps - start) / 10, 1);
  double tailSum = 0;
  uint64_t tailCount = 0;
  for (uint64_t s = start; s < steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    Communicator::Traffic before = comm ? comm->traffic()
                                        : Communicator::Traffic{};
    if (accum > 1)
      executor->zeroGradients();
    double loss = 0;
    // Heap allocations inside the step's programs (0 after the first).
    uint64_t allocations = 0;
    // Tests of the timeout: this rank stops participating at step 2.
    if (comm && s == 1)
      if (const char *stall = std::getenv("STRATA_TEST_STALL_RANK");
          stall && std::atoi(stall) == rank)
        for (;;)
          std::this_thread::sleep_for(std::chrono::seconds(1));
    bool tracing = !options.tracePath.empty() && s + 1 == traceStep;
    executor->setTracing(tracing);
    for (uint32_t m = 0; m < accum; ++m) {
      if (Status st = loader->fill(s, m, accum); !st)
        return error(st.message());
      // Each rank its own dropout masks (one rank: (s * A + m)).
      uint64_t microSeed = splitmix64(
          splitmix64(options.seed) ^ ((s * accum + m) * uint64_t(world) + rank));
      if (Status st = executor->run("micro_step", microSeed); !st)
        return error("step " + std::to_string(s + 1) + ": " + st.message());
      allocations += executor->getLastRunAllocations();
      loss += scalar(*lossOutput);
      if (tracing)
        trace.add(*executor, plan, "micro_step",
                  "micro_step " + std::to_string(m + 1) + "/" +
                      std::to_string(accum));
    }
    loss /= accum;
    double lr = scheduledLearningRate(training, baseLr, s + 1);
    lrInput->as<double>()[0] = lr;
    stepInput->as<int64_t>()[0] =
        scaling ? *appliedSteps + 1 : int64_t(s + 1);
    double usedScale = scaling ? *lossScale : 1.0;
    if (Status st = executor->run("optimizer_step"); !st)
      return error("step " + std::to_string(s + 1) + ": " + st.message());
    allocations += executor->getLastRunAllocations();
    if (tracing) {
      trace.add(*executor, plan, "optimizer_step", "optimizer_step");
      executor->setTracing(false);
      std::string path = options.tracePath;
      if (world > 1) { // one file a rank: out.rank-3.json
        size_t dot = path.rfind('.');
        std::string suffix = ".rank-" + std::to_string(rank);
        path = dot == std::string::npos || dot < path.rfind('/') + 1
                   ? path + suffix
                   : path.substr(0, dot) + suffix + path.substr(dot);
      }
      if (!trace.write(path, rank, s + 1))
        return error("cannot write the trace '" + path + "'");
    }
    double norm = scalar(*normOutput);
    // The step's bytes by collective and link class, summed over the ranks,
    // and its loss, the mean over the ranks (bookkeeping outside the
    // counters).
    // Layout: the loss, [intra, inter] per collective summed over the
    // ranks, then [intra, inter] of each rank (the others' slots zero).
    constexpr int kRankSlots = 1 + 2 * Communicator::kKinds;
    std::vector<double> sums(kRankSlots + 2 * world, 0.0);
    sums[0] = loss;
    if (comm) {
      const Communicator::Traffic &after = comm->traffic();
      for (int k = 0; k < Communicator::kKinds; ++k)
        for (int l = 0; l < 2; ++l) {
          double bytes = after[k][l] - before[k][l];
          sums[1 + 2 * k + l] = bytes;
          sums[kRankSlots + 2 * rank + l] += bytes;
        }
      if (Status st = comm->sumOverWorld(sums.data(), sums.size(), "step log");
          !st)
        return error(st.message());
      loss = sums[0] / world;
    }
    // Tests of the replica check: this rank's first state changes in its
    // last bit at step 2.
    if (comm && s == 1)
      if (const char *perturb = std::getenv("STRATA_TEST_PERTURB_RANK");
          perturb && std::atoi(perturb) == rank)
        for (const auto &state : executor->getStates())
          if (state.kind == plan::PARAMETER && state.view->bytes()) {
            std::string bytes(state.view->bytes(), '\0');
            if (!executor->readState(state, bytes.data()))
              break;
            bytes[0] = char(bytes[0] ^ 1);
            (void)executor->writeState(state, bytes.data());
            break;
          }
    // Replicas (ranks r and r % P) must hold the same bits after the update.
    bool replicasChecked = false;
    if (comm && options.checkReplicas) {
      uint64_t hash = 0xcbf29ce484222325ull;
      for (const auto &state : executor->getStates()) {
        // Buffers (batch-norm statistics) follow each rank's own data.
        if (state.kind != plan::PARAMETER &&
            state.kind != plan::OPTIMIZER_STATE)
          continue;
        replicaBuffer.resize(state.view->bytes());
        if (Status st = executor->readState(state, replicaBuffer.data()); !st)
          return error(st.message());
        hash = fnv1a64(replicaBuffer.data(), replicaBuffer.size(), hash);
      }
      std::vector<uint64_t> hashes;
      if (Status st = comm->gatherOverWorld(hash, hashes, "replica check");
          !st)
        return error(st.message());
      int p = int(plan.topology().partition());
      for (int r = p; r < world; ++r)
        if (hashes[r] != hashes[r % p]) // every rank sees it; one says it
          return leader ? error("step " + std::to_string(s + 1) + ": rank " +
                                std::to_string(r) + "'s state differs from "
                                "its replica rank " + std::to_string(r % p))
                        : 1;
      replicasChecked = true;
    }
    bool skipped = false;
    if (scaling) {
      if (!std::isfinite(norm)) {
        skipped = true;
        *lossScale *= 0.5f;
        *goodSteps = 0;
      } else {
        ++*appliedSteps;
        if (++*goodSteps == 2000) {
          *lossScale *= 2.0f;
          *goodSteps = 0;
        }
      }
      if (Status st = storeScaling(); !st)
        return error(st.message());
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    totalMs += ms;
    if (std::isnan(firstLoss))
      firstLoss = loss;
    lastLoss = loss;
    if (s >= tailFrom) {
      tailSum += loss;
      ++tailCount;
    }
    // The whole global batch: every rank's micro-batches.
    double perSecond =
        loader->itemsPerMicroStep() * accum * world / (ms / 1000.0);
    const char *unit = loader->countsTokens() ? "tokens_per_s" : "samples_per_s";
    if (log && leader) {
      // JSON has no NaN or infinity: a diverged loss or an overflowed norm
      // is null.
      char normText[32] = "null", lossText[32] = "null";
      if (std::isfinite(norm))
        std::snprintf(normText, sizeof(normText), "%.9g", norm);
      if (std::isfinite(loss))
        std::snprintf(lossText, sizeof(lossText), "%.9g", loss);
      char line[512];
      std::snprintf(line, sizeof(line),
                    "{\"step\": %llu, \"loss\": %s, \"lr\": %.9g, "
                    "\"grad_norm\": %s, \"%s\": %.1f, \"step_ms\": %.3f, "
                    "\"peak_memory_bytes\": %lld, \"device_bytes\": %llu, "
                    "\"allocations\": %llu",
                    static_cast<unsigned long long>(s + 1), lossText, lr, normText,
                    unit, perSecond, ms,
                    static_cast<long long>(peakMemoryBytes()),
                    static_cast<unsigned long long>(executor->getArenaBytes()),
                    static_cast<unsigned long long>(allocations));
      log << line;
      if (scaling) {
        std::snprintf(line, sizeof(line),
                      ", \"loss_scale\": %.9g, \"skipped\": %s", usedScale,
                      skipped ? "true" : "false");
        log << line;
      }
      if (comm) {
        double intra = 0, inter = 0;
        for (int k = 0; k < Communicator::kKinds; ++k) {
          intra += sums[1 + 2 * k];
          inter += sums[2 + 2 * k];
        }
        std::snprintf(line, sizeof(line),
                      ", \"intra_node_bytes\": %.0f, \"inter_node_bytes\": "
                      "%.0f, \"bytes\": {",
                      intra, inter);
        log << line;
        for (int k = 0; k < Communicator::kKinds; ++k) {
          std::snprintf(line, sizeof(line), "%s\"%s\": [%.0f, %.0f]",
                        k ? ", " : "",
                        Communicator::kindName(Communicator::Kind(k)),
                        sums[1 + 2 * k], sums[2 + 2 * k]);
          log << line;
        }
        log << "}, \"rank_bytes\": [";
        for (int r = 0; r < world; ++r) {
          std::snprintf(line, sizeof(line), "%s[%.0f, %.0f]", r ? ", " : "",
                        sums[kRankSlots + 2 * r],
                        sums[kRankSlots + 2 * r + 1]);
          log << line;
        }
        log << "]";
        if (replicasChecked)
          log << ", \"replicas_identical\": true";
      }
      log << "}\n" << std::flush;
    }
    if (!options.quiet && leader && options.printEvery > 0 &&
        ((s + 1) % uint64_t(options.printEvery) == 0 || s + 1 == steps ||
         s == start)) {
      char line[256];
      std::snprintf(line, sizeof(line),
                    "step %llu/%llu | loss %.4f | lr %.2e | grad_norm %.3f | "
                    "%.1fk %s/s | %.1f ms/step\n",
                    static_cast<unsigned long long>(s + 1),
                    static_cast<unsigned long long>(steps), loss, lr, norm,
                    perSecond / 1000.0,
                    loader->countsTokens() ? "tok" : "samples", ms);
      std::cout << line << std::flush;
    }
    if (options.saveEvery > 0 && (s + 1) % uint64_t(options.saveEvery) == 0) {
      if (options.checkpointDir.empty())
        return error("--save-every needs --checkpoint-dir DIR");
      if (Status st = saveCheckpoint(checkpointDir, plan.fingerprint(),
                                     s + 1, options.seed, *executor,
                                     comm.get());
          !st)
        return error(st.message());
    }
  }
  if (!options.quiet && leader && steps > start) {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "trained %llu steps: loss %.4f -> %.4f (mean of the last "
                  "%llu steps: %.4f), %.1f ms/step\n",
                  static_cast<unsigned long long>(steps - start), firstLoss,
                  lastLoss, static_cast<unsigned long long>(tailCount),
                  tailSum / double(std::max<uint64_t>(tailCount, 1)),
                  totalMs / double(steps - start));
    std::cout << line;
  }
  if (!options.exportOnnx.empty()) {
    if (!onnxExporter())
      return error("--export-onnx is not available in this build");
    // Parameters and buffers, copied out through the executor.
    std::map<std::string, std::string> values;
    for (const auto &state : executor->getStates()) {
      if (state.kind != plan::PARAMETER && state.kind != plan::BUFFER)
        continue;
      std::string &bytes = values[state.name];
      bytes.resize(state.view->bytes());
      if (Status st = executor->readState(state, bytes.data()); !st)
        return error(st.message());
    }
    WeightLookup lookup = [&](const std::string &name) {
      auto it = values.find(name);
      return it == values.end() ? std::string_view()
                                : std::string_view(it->second);
    };
    if (Status s = onnxExporter()(options.artifactDir, lookup,
                                  options.exportOnnx);
        !s)
      return error(s.message());
    if (!options.quiet)
      std::cout << "wrote " << options.exportOnnx << "\n";
  }
  if (options.sampleTokens > 0) {
    std::string text;
    if (Status s = generateText(*executor, options.prompt, options.sampleTokens,
                                options.topK, options.seed, text);
        !s)
      return error(s.message());
    std::cout << "--- sample (top-k " << options.topK << ") ---\n"
              << options.prompt << text << "\n---\n";
  }
  return 0;
}

} // namespace strata::runtime
