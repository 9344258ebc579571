//===- Training.h - strata-run's training loop ------------------*- C++ -*-===//
//
// The step loop over a training artifact's programs, its learning-rate
// schedule and its checkpoints (docs/training.md).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_TRAINING_H
#define STRATA_RUNTIME_TRAINING_H

#include "strata/Runtime/Executor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::plan {
class Plan;
class Training;
} // namespace strata::plan

namespace strata::runtime {

class Artifact;
class Communicator;

struct TrainOptions {
  std::string artifactDir;
  /// The device: "cpu", "cuda" or "queued" (chooseBackend's answer).
  std::string backend = "cpu";
  /// CUDA: f32 matmuls may use TF32 tensor cores.
  bool tf32 = false;
  /// Capture each program once and replay it (CUDA graphs).
  bool cudaGraph = false;
  std::string data = "synthetic";
  std::string dataDtype = "uint16";
  /// A dataset folder to score after training (or, with --forward, instead).
  std::string evalData;
  int64_t steps = -1;   // -1: the artifact's
  uint64_t seed = 0;
  bool seedGiven = false; // --seed on the command line
  double lr = -1;       // -1: the artifact's
  std::string logPath;
  int64_t printEvery = 10;
  int64_t saveEvery = 0;
  std::string checkpointDir;
  bool resume = false;
  bool quiet = false;
  /// After training: generate this many tokens from `prompt` with the
  /// forward program (top-k sampling; k = 1 is greedy).
  int64_t sampleTokens = 0;
  std::string prompt;
  int64_t topK = 1;
  /// A collective that has not completed after this long aborts every rank.
  double timeoutSeconds = 60;
  /// Where the SSD tier's file goes.
  std::string ssdDir = "/tmp";
  /// Write the instructions of step `traceStep` (0: the last) as they ran,
  /// per stream, to this Chrome-trace JSON file.
  std::string tracePath;
  int64_t traceStep = 0;
  /// Microseconds of random delay before collectives, moves and optimizer
  /// updates (tests of the schedule's events).
  uint64_t injectDelayMicros = 0;
  /// Distributed: after every step, check by hashing that the ranks of each
  /// replication group hold bit-identical state (and log it).
  bool checkReplicas = false;
  /// After training: write the user's model with the trained weights.
  std::string exportOnnx;
  /// Instead of training: consolidate the distributed checkpoint in
  /// `checkpointDir` into this folder (and --export-onnx from it).
  std::string consolidateTo;
};

/// The device of `backend` ("cpu", "queued", "cuda") for `rank`: on CUDA,
/// the GPU of the rank's index on its node (the launcher's local rank)
/// modulo the GPUs visible.
Status createDevice(const std::string &backend, int rank, bool tf32,
                    double timeoutSeconds, std::shared_ptr<Device> &out);

/// The bytes of a trained parameter or buffer by name (empty when absent).
using WeightLookup = std::function<std::string_view(const std::string &name)>;

/// Writes the artifact's model.onnx with the trained parameters and buffers
/// `weights` gives to a path; strata-run's main installs it (the runtime
/// itself knows no ONNX).
using OnnxExporter = std::function<Status(const std::string &artifactDir,
                                          const WeightLookup &weights,
                                          const std::string &outPath)>;
void setOnnxExporter(OnnxExporter exporter);

/// Continues `prompt` (bytes as token ids) by `count` tokens with the
/// forward program of a next-token model; returns the text.
Status generateText(Executor &executor, const std::string &prompt,
                    int64_t count, int64_t topK, uint64_t seed,
                    std::string &out);

/// What --eval measured over a dataset folder.
struct EvalResult {
  double loss = 0;     // mean cross-entropy over the scored labels
  double accuracy = 0; // fraction of them whose largest logit is the label
  uint64_t correct = 0, scored = 0, samples = 0;
};

class ArrayDataset;

/// --eval: the forward program's logits (the loss's `logits_output`) scored
/// against the labels of a dataset folder, every sample in order, with the
/// executor's current weights; nothing is updated (docs/data.md).
class Evaluation {
public:
  ~Evaluation();
  /// Checks the artifact and opens (and checks) the folder `dir`: before
  /// training, so a bad folder is refused before step 1.
  static Status open(Executor &executor, const plan::Training &training,
                     const std::string &dir, std::unique_ptr<Evaluation> &out);
  /// Runs the forward program over the folder and scores it.
  Status run(EvalResult &out);

private:
  Evaluation(Executor &executor, const plan::Training &training);
  Executor &executor_;
  int64_t ignoreIndex_;
  std::string dir_;
  const TensorView *logits_ = nullptr;
  TensorView labels_;
  std::vector<int64_t> labelValues_;
  std::unique_ptr<ArrayDataset> dataset_;
};

/// "eval DIR: loss L | accuracy A (C of N labels) | S samples"
std::string describeEval(const EvalResult &result, const std::string &dir);
/// The --log record: {"eval": DIR, "after_step": S, "loss": ..., ...}.
std::string evalRecord(const EvalResult &result, const std::string &dir,
                       uint64_t step);

/// The learning rate of optimizer step `step` (1-based) under the artifact's
/// schedule, with base rate `lr`.
double scheduledLearningRate(const plan::Training &training, double lr,
                             uint64_t step);

/// What a checkpoint belongs to, and how this rank holds the values in it.
/// The same artifact resumes a checkpoint tensor for tensor; an artifact
/// compiled from the same model and training options for another topology
/// (world size, partition group, hierarchy, accumulation, pipeline split)
/// reshards it: each rank reads the byte ranges of the old slices that
/// cover its own.
struct CheckpointIdentity {
  CheckpointIdentity() = default;
  /// An identity with the artifact fingerprint alone (tests; no resharding).
  CheckpointIdentity(std::string artifact) : artifact(std::move(artifact)) {}
  CheckpointIdentity(const char *artifact) : artifact(artifact) {}
  /// This rank's identity under `plan` (Plan.fingerprint,
  /// Plan.model_fingerprint, the topology and each sharded value's slice).
  static CheckpointIdentity of(const plan::Plan &plan, int rank);

  std::string artifact; // Plan.fingerprint
  std::string model;    // Plan.model_fingerprint ("": no resharding)
  /// Samples per optimizer step: micro-batch x accumulation x the
  /// data-parallel lanes (0: unknown).
  uint64_t globalBatch = 0;
  int world = 1, ranksPerNode = 1, partition = 1, stages = 1;
  uint32_t accum = 1;
  /// A persistent tensor that holds slice `slice` of `slices` of a value of
  /// `numel` elements (flattened, zero-padded to equal slices), by tensor
  /// name; a tensor not named here holds its whole value.
  struct Slice {
    uint32_t slices = 1, slice = 0;
    uint64_t numel = 0;
  };
  std::map<std::string, Slice> slices;
};

/// Writes every parameter, buffer and optimizer state after `step` into
/// `dir`/step-%08d/ (atomically: temp + rename) and points `dir`/latest at it;
/// keeps that checkpoint and the one `latest` named before, removes the rest.
/// index.json (checksummed itself) records the identity, the topology, the
/// seed and the data position, and lists each tensor's name, kind, dtype,
/// shape, offset, bytes, slice and FNV-1a checksums (one a MiB for a large
/// tensor). With `comm` (a distributed run; every rank calls it) each
/// rank's shards go to step-%08d/rank-%05d/ and the step folder's index.json
/// names the topology; rank 0 commits once every rank has written.
/// STRATA_TEST_KILL_DURING_SAVE=N: the N-th save of the process into `dir`
/// raises SIGKILL halfway through state.bin.
Status saveCheckpoint(const std::string &dir, const CheckpointIdentity &id,
                      uint64_t step, uint64_t seed, Executor &executor,
                      Communicator *comm = nullptr);

/// Loads the checkpoint `--resume` takes from `dir` (`latest`, or the
/// newest whole one) into the executor's state after checking its identity,
/// each rank folder's rank, step and seed, and every tensor's dtype, shape
/// and checksums; a checkpoint of another artifact of the same model is
/// resharded (with a note; a warning when the global batch differs). On an
/// error the state is untouched. `step` receives the step it was written
/// after (0 and a note on stderr when there is none yet).
Status loadCheckpoint(const std::string &dir, const CheckpointIdentity &id,
                      Executor &executor, uint64_t &step,
                      Communicator *comm = nullptr);

/// What `--resume` would load from `dir` (loadCheckpoint's choice):
/// `found` false when `dir` holds no checkpoint yet; else the step it was
/// written after and the seed the run used, which a resumed run keeps.
Status peekCheckpoint(const std::string &dir, const CheckpointIdentity &id,
                      bool &found, uint64_t &step, uint64_t &seed);

/// An exclusive lock on a checkpoint folder (`dir`/.lock, flock), held
/// while the object lives and released by the system on any exit, so a
/// second run writing into the same folder is refused. With `comm` rank 0
/// takes it and every rank learns whether it could.
class CheckpointLock {
public:
  ~CheckpointLock();
  static Status acquire(const std::string &dir, Communicator *comm,
                        std::unique_ptr<CheckpointLock> &out);

private:
  CheckpointLock() = default;
  int fd_ = -1;
};

/// Writes the whole parameters and buffers of the distributed checkpoint
/// `dir`/latest (written by `artifact`) to `outDir`/{state.bin, index.json}
/// in the one-rank layout, holding one value at a time beyond the file
/// reads; optimizer states stay in the shards. `step` receives its step.
Status consolidateCheckpoint(const Artifact &artifact, const std::string &dir,
                             const std::string &outDir, uint64_t &step);

/// A state folder (state.bin + index.json) mapped read-only, by name.
class MappedWeights {
public:
  static Status open(const std::string &folder,
                     std::unique_ptr<MappedWeights> &out);
  ~MappedWeights();
  std::string_view get(const std::string &name) const;

private:
  MappedWeights() = default;
  const char *data_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, std::string_view> values_;
};

/// The loop: returns the process exit code, errors as one line on stderr.
int train(const TrainOptions &options);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_TRAINING_H
