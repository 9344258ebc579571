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
#include <string>

namespace strata::plan {
class Training;
} // namespace strata::plan

namespace strata::runtime {

struct TrainOptions {
  std::string artifactDir;
  std::string data = "synthetic";
  std::string dataDtype = "uint16";
  int64_t steps = -1;   // -1: the artifact's
  uint64_t seed = 0;
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
  /// After training: write the user's model with the trained weights.
  std::string exportOnnx;
};

/// Writes the artifact's model.onnx with the executor's trained parameters
/// and buffers to a path; strata-run's main installs it (the runtime itself
/// knows no ONNX).
using OnnxExporter = std::function<Status(const std::string &artifactDir,
                                          Executor &executor,
                                          const std::string &outPath)>;
void setOnnxExporter(OnnxExporter exporter);

/// Continues `prompt` (bytes as token ids) by `count` tokens with the
/// forward program of a next-token model; returns the text.
Status generateText(Executor &executor, const std::string &prompt,
                    int64_t count, int64_t topK, uint64_t seed,
                    std::string &out);

/// The learning rate of optimizer step `step` (1-based) under the artifact's
/// schedule, with base rate `lr`.
double scheduledLearningRate(const plan::Training &training, double lr,
                             uint64_t step);

/// Writes every parameter, buffer and optimizer state after `step` into
/// `dir`/step-%08d/ (atomically: temp + rename) and points `dir`/latest at it;
/// keeps that checkpoint and the one `latest` named before, removes the rest.
/// index.json lists each tensor's name, kind, dtype, shape, offset, bytes and
/// FNV-1a checksum. STRATA_TEST_KILL_DURING_SAVE=N: the N-th save of the
/// process into `dir` raises SIGKILL halfway through state.bin.
Status saveCheckpoint(const std::string &dir, const std::string &fingerprint,
                      uint64_t step, uint64_t seed, Executor &executor);

/// Loads `dir`/latest into the executor's state after checking the
/// fingerprint and every tensor's dtype, shape and checksum (on an error the
/// state is untouched); `step` receives the step it was written after (0 and
/// a note on stderr when there is none yet).
Status loadCheckpoint(const std::string &dir, const std::string &fingerprint,
                      Executor &executor, uint64_t &step);

/// The loop: returns the process exit code, errors as one line on stderr.
int train(const TrainOptions &options);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_TRAINING_H
