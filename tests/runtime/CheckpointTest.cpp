//===- CheckpointTest.cpp - Checkpoints, resume and the training loop -----===//
//
// On the hand-built linear classifier (TestArtifacts.h, with dropout, so the
// per-micro-step seeds matter too): the checkpoint files, their checks, and
// that a run interrupted anywhere — between steps or by a kill halfway
// through writing state.bin — resumes to the very bits of the uninterrupted
// run.
//
//===----------------------------------------------------------------------===//

#include "TestArtifacts.h"

#include "strata/Runtime/Executor.h"
#include "strata/Runtime/Training.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

using namespace strata;
using namespace strata::runtime;
using namespace strata::runtime::testing;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<Executor> load(const std::string &dir,
                               std::unique_ptr<Artifact> &artifact) {
  Status s = Artifact::load(dir, artifact);
  EXPECT_TRUE(s.isOk()) << s.message();
  std::unique_ptr<Executor> executor;
  if (s)
    s = Executor::create(*artifact, getCpuKernels(), executor);
  EXPECT_TRUE(s.isOk()) << s.message();
  return executor;
}

/// Every state tensor's bytes, by name.
std::map<std::string, std::string> snapshot(Executor &e) {
  std::map<std::string, std::string> bytes;
  for (const auto &s : e.getStates())
    bytes[s.name] = std::string(static_cast<const char *>(s.view->data),
                                s.view->bytes());
  return bytes;
}

/// Runs one optimizer step by hand so that every state tensor is non-zero.
void trainOneStep(Executor &e, int64_t step) {
  TensorView *x = e.findInput("x");
  for (int64_t i = 0; i < x->numel(); ++i)
    x->as<float>()[i] = 0.25f * float(i % 5) - 0.5f;
  TensorView *labels = e.findInput("labels");
  for (int64_t i = 0; i < labels->numel(); ++i)
    labels->as<int64_t>()[i] = i % 5;
  ASSERT_TRUE(e.run("micro_step", uint64_t(step)).isOk());
  e.findInput("strata.lr")->as<double>()[0] = 0.1;
  e.findInput("strata.step")->as<int64_t>()[0] = step;
  ASSERT_TRUE(e.run("optimizer_step").isOk());
}

TrainOptions trainOptions(const std::string &artifact) {
  TrainOptions o;
  o.artifactDir = artifact;
  o.seed = 5;
  o.quiet = true;
  return o;
}

/// train() with its stdout and stderr captured; returns the exit code.
int trainCaptured(const TrainOptions &o, std::string *err = nullptr) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = train(o);
  ::testing::internal::GetCapturedStdout();
  std::string e = ::testing::internal::GetCapturedStderr();
  if (err)
    *err = e;
  return rc;
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

TEST(CheckpointTest, RoundTripRestoresEveryPersistentTensor) {
  TempDir dir;
  std::string path = writeLinearClassifier(dir / "a.strata");
  std::unique_ptr<Artifact> artifact;
  auto e = load(path, artifact);
  ASSERT_TRUE(e);
  trainOneStep(*e, 1);
  trainOneStep(*e, 2);
  auto saved = snapshot(*e);
  ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "fp", 2, 5, *e).isOk());
  EXPECT_EQ(readFile(dir / "ckpt/latest"), "step-00000002\n");
  EXPECT_EQ(listDir(dir / "ckpt"),
            (std::vector<std::string>{"latest", "step-00000002"}));
  EXPECT_EQ(listDir(dir / "ckpt/step-00000002"),
            (std::vector<std::string>{"index.json", "state.bin"}));

  trainOneStep(*e, 3);
  ASSERT_NE(snapshot(*e)["w"], saved["w"]);
  uint64_t step = 0;
  Status s = loadCheckpoint(dir / "ckpt", "fp", *e, step);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(step, 2u);
  auto restored = snapshot(*e);
  for (const char *name : {"w", "steps", "sgd.momentum_buffer:w"})
    EXPECT_EQ(restored[name], saved[name]) << name;
  // Gradients are not state: each step recomputes them.
  EXPECT_NE(restored["grad:w"], saved["grad:w"]);

  // A fresh executor loads the same state.
  std::unique_ptr<Artifact> artifact2;
  auto fresh = load(path, artifact2);
  ASSERT_TRUE(loadCheckpoint(dir / "ckpt", "fp", *fresh, step).isOk());
  for (const char *name : {"w", "steps", "sgd.momentum_buffer:w"})
    EXPECT_EQ(snapshot(*fresh)[name], saved[name]) << name;
}

TEST(CheckpointTest, IndexDescribesEveryTensor) {
  TempDir dir;
  std::unique_ptr<Artifact> artifact;
  auto e = load(writeLinearClassifier(dir / "a.strata"), artifact);
  ASSERT_TRUE(e);
  trainOneStep(*e, 1);
  ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "abc\"def", 1, 77, *e).isOk());
  std::string index = readFile(dir / "ckpt/step-00000001/index.json");
  EXPECT_NE(index.find("\"format\": 3"), std::string::npos) << index;
  EXPECT_NE(index.find("\"fingerprint\": \"abc\\\"def\""), std::string::npos)
      << index;
  EXPECT_NE(index.find("\"step\": 1,"), std::string::npos) << index;
  EXPECT_NE(index.find("\"seed\": 77,"), std::string::npos) << index;
  // One rank of the linear classifier's batch: topology and data position.
  EXPECT_NE(index.find("\"topology\": {\"ranks\": 1, \"ranks_per_node\": 1, "
                       "\"partition\": 1, \"stages\": 1, \"accum\": 1}"),
            std::string::npos)
      << index;
  EXPECT_NE(index.find("\n  \"index_checksum\": \""), std::string::npos)
      << index;
  auto states = snapshot(*e);
  char checksum[17];
  std::snprintf(checksum, sizeof(checksum), "%016llx",
                static_cast<unsigned long long>(
                    fnv1a64(states["w"].data(), states["w"].size())));
  EXPECT_NE(index.find("{\"name\": \"w\", \"kind\": 2, \"dtype\": \"f32\", "
                       "\"shape\": [3, 5], \"offset\": 0, \"bytes\": 60, "
                       "\"checksum\": \"" +
                       std::string(checksum) + "\"}"),
            std::string::npos)
      << index;
  EXPECT_NE(index.find("{\"name\": \"steps\", \"kind\": 3, \"dtype\": \"f32\", "
                       "\"shape\": [1], \"offset\": 60, \"bytes\": 4,"),
            std::string::npos)
      << index;
  EXPECT_NE(index.find("{\"name\": \"sgd.momentum_buffer:w\", \"kind\": 6, "
                       "\"dtype\": \"f32\", \"shape\": [3, 5], \"offset\": 64, "
                       "\"bytes\": 60,"),
            std::string::npos)
      << index;
  EXPECT_EQ(index.find("grad:w"), std::string::npos) << index;
  EXPECT_EQ(fs::file_size(dir / "ckpt/step-00000001/state.bin"), 124u);
  // The escaped fingerprint reads back.
  uint64_t step = 0;
  EXPECT_TRUE(loadCheckpoint(dir / "ckpt", "abc\"def", *e, step).isOk());
  EXPECT_EQ(step, 1u);
}

TEST(CheckpointTest, KeepsTheLastTwo) {
  TempDir dir;
  std::unique_ptr<Artifact> artifact;
  auto e = load(writeLinearClassifier(dir / "a.strata"), artifact);
  ASSERT_TRUE(e);
  // A leftover of a save that was killed.
  fs::create_directories(dir / "ckpt/step-00000003.tmp");
  for (uint64_t step : {1, 2, 3, 4})
    ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "fp", step, 0, *e).isOk());
  EXPECT_EQ(listDir(dir / "ckpt"),
            (std::vector<std::string>{"latest", "step-00000003",
                                      "step-00000004"}));
  EXPECT_EQ(readFile(dir / "ckpt/latest"), "step-00000004\n");

  // A new run into an old folder keeps its own checkpoints, whatever their
  // numbers.
  ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "fp", 1, 0, *e).isOk());
  ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "fp", 2, 0, *e).isOk());
  EXPECT_EQ(listDir(dir / "ckpt"),
            (std::vector<std::string>{"latest", "step-00000001",
                                      "step-00000002"}));
}

TEST(CheckpointTest, NoCheckpointYetStartsAtZero) {
  TempDir dir;
  std::unique_ptr<Artifact> artifact;
  auto e = load(writeLinearClassifier(dir / "a.strata"), artifact);
  ASSERT_TRUE(e);
  auto before = snapshot(*e);
  uint64_t step = 99;
  ::testing::internal::CaptureStderr();
  Status s = loadCheckpoint(dir / "none", "fp", *e, step);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(step, 0u);
  EXPECT_EQ(err, "strata-run: note: no checkpoint in '" + (dir / "none") +
                     "' yet; starting from step 1\n");
  EXPECT_EQ(snapshot(*e), before);
}

// index.json carries the checksum of everything before it: a changed seed
// (valid JSON, a plausible value) is a damaged index, not another run.
TEST(CheckpointTest, IndexIsSealedByItsChecksum) {
  TempDir dir;
  std::unique_ptr<Artifact> artifact;
  auto e = load(writeLinearClassifier(dir / "a.strata"), artifact);
  ASSERT_TRUE(e);
  trainOneStep(*e, 1);
  ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "fp", 1, 77, *e).isOk());
  std::string path = dir / "ckpt/step-00000001/index.json";
  std::string index = readFile(path);
  size_t at = index.find("\"seed\": 77");
  ASSERT_NE(at, std::string::npos);
  index[at + 9] = '8';
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << index;
  }
  uint64_t step = 0;
  Status s = loadCheckpoint(dir / "ckpt", "fp", *e, step);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("step-00000001' has a damaged index.json"),
            std::string::npos)
      << s.message();
}

// An index entry whose offset + bytes wraps past 2^64, or a "negative"
// size: MappedWeights once handed out views outside the mapped state.bin
// (tests/fuzz/regressions/checkpoint-load).
TEST(CheckpointTest, MappedWeightsRefuseWrappingEntries) {
  TempDir dir;
  std::unique_ptr<Artifact> artifact;
  auto e = load(writeLinearClassifier(dir / "a.strata"), artifact);
  ASSERT_TRUE(e);
  trainOneStep(*e, 1);
  ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "fp", 1, 0, *e).isOk());
  std::string folder = dir / "ckpt/step-00000001";
  std::string index = readFile(folder + "/index.json");
  // Without the seal, as an index written before format 3 would be.
  index = index.substr(0, index.find(",\n  \"index_checksum\"")) + "\n}\n";
  size_t at = index.find("\"format\": 3");
  ASSERT_NE(at, std::string::npos);
  index.replace(at, 11, "\"format\": 2");
  for (const char *bad : {"\"bytes\": -4", "\"offset\": 18446744073709551615"}) {
    std::string edited = index;
    size_t entry = edited.find("\"name\": \"w\"");
    ASSERT_NE(entry, std::string::npos);
    std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
    size_t field = edited.find(key, entry);
    size_t end = edited.find_first_of(",}", field);
    edited.replace(field, end - field, bad);
    {
      std::ofstream out(folder + "/index.json", std::ios::trunc);
      out << edited;
    }
    std::unique_ptr<MappedWeights> weights;
    Status s = MappedWeights::open(folder, weights);
    EXPECT_FALSE(s.isOk()) << bad;
  }
}

TEST(CheckpointTest, RefusesForeignAndDamagedCheckpoints) {
  TempDir dir;
  std::unique_ptr<Artifact> artifact;
  auto e = load(writeLinearClassifier(dir / "a.strata"), artifact);
  ASSERT_TRUE(e);
  trainOneStep(*e, 1);
  ASSERT_TRUE(saveCheckpoint(dir / "ckpt", "fp", 1, 0, *e).isOk());
  std::string folder = dir / "ckpt/step-00000001";
  auto before = snapshot(*e);
  uint64_t step = 0;

  Status s = loadCheckpoint(dir / "ckpt", "other", *e, step);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "checkpoint '" + folder +
                             "' was written by a different artifact "
                             "(fingerprint fp, this artifact other); resume "
                             "with the artifact that wrote it");

  // Another shape of w (same bytes: [5, 3] instead of [3, 5]).
  {
    TempDir other;
    PlanBuilder b = linearClassifier();
    b.plan().mutable_tensors(2)->set_shape(0, 5);
    b.plan().mutable_tensors(2)->set_shape(1, 3);
    b.plan().mutable_programs()->Clear();
    b.write(other / "b.strata");
    std::unique_ptr<Artifact> otherArtifact;
    auto otherExecutor = load(other / "b.strata", otherArtifact);
    ASSERT_TRUE(otherExecutor);
    s = loadCheckpoint(dir / "ckpt", "fp", *otherExecutor, step);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.message(), "checkpoint '" + folder +
                               "' holds 'w' as f32[3, 5], the artifact as "
                               "f32[5, 3]");
  }

  // A flipped byte in the momentum buffer: nothing is loaded.
  {
    std::fstream f(folder + "/state.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(70);
    f.put('\x55');
  }
  trainOneStep(*e, 2);
  auto changed = snapshot(*e);
  s = loadCheckpoint(dir / "ckpt", "fp", *e, step);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "checkpoint '" + folder +
                             "': 'sgd.momentum_buffer:w' is truncated or "
                             "corrupt");
  EXPECT_EQ(snapshot(*e), changed);
  fs::resize_file(folder + "/state.bin", 100);
  s = loadCheckpoint(dir / "ckpt", "fp", *e, step);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "checkpoint '" + folder +
                             "': 'sgd.momentum_buffer:w' is truncated or "
                             "corrupt");

  {
    std::ofstream index(folder + "/index.json");
    index << "{\n  \"format\": 1,\n  \"fingerprint\": \"fp\",\n";
  }
  s = loadCheckpoint(dir / "ckpt", "fp", *e, step);
  ASSERT_FALSE(s.isOk());
  // The only checkpoint is damaged: no other to fall back to, so a refusal
  // naming it rather than a fresh start.
  const std::string refused =
      "'" + std::string(dir / "ckpt") +
      "/latest' is naming 'step-00000001', which is damaged (checkpoint '" +
      folder +
      "' has a damaged index.json) and no step folder holds a whole "
      "checkpoint of this artifact; refusing to start over (move the folder "
      "away to train from step 1)";
  EXPECT_EQ(s.message(), refused);
  {
    std::ofstream index(folder + "/index.json");
    index << "{\n  \"step\": 1,\n  \"fingerprint\": \"fp\",\n"
          << "    {\"name\": \"w\", \"offset\": x}\n";
  }
  s = loadCheckpoint(dir / "ckpt", "fp", *e, step);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), refused);
  (void)before;
}

//===----------------------------------------------------------------------===//
// The training loop
//===----------------------------------------------------------------------===//

TEST(CheckpointTest, RefusesForwardOnlyArtifacts) {
  TempDir dir;
  PlanBuilder b = linearClassifier();
  b.plan().clear_training();
  b.write(dir / "a.strata");
  std::string err;
  EXPECT_EQ(trainCaptured(trainOptions(dir / "a.strata"), &err), 1);
  EXPECT_EQ(err, "strata-run: error: '" + (dir / "a.strata") +
                     "' was compiled with --forward-only; recompile without "
                     "it to train, or pass --forward to evaluate it\n");
}

TEST(CheckpointTest, RefusesOptimizerScalarsOfOtherTypes) {
  TempDir dir;
  PlanBuilder b = linearClassifier();
  for (plan::Tensor &t : *b.plan().mutable_tensors())
    if (t.name() == "strata.lr")
      t.set_dtype(plan::F32);
  b.write(dir / "a.strata");
  std::string err;
  EXPECT_EQ(trainCaptured(trainOptions(dir / "a.strata"), &err), 1);
  EXPECT_EQ(err, "strata-run: error: the artifact's strata.lr must be an f64 "
                 "scalar, strata.step an i64 scalar, strata.loss and "
                 "strata.grad_norm float scalars; got f32[], i64[], f32[], "
                 "f32[]\n");
}

TEST(CheckpointTest, TrainingLogsOneLinePerStep) {
  TempDir dir;
  TrainOptions o = trainOptions(writeLinearClassifier(dir / "a.strata"));
  o.logPath = dir / "log.jsonl";
  ASSERT_EQ(trainCaptured(o), 0);
  std::ifstream log(o.logPath);
  std::string line;
  int n = 0;
  while (std::getline(log, line)) {
    ++n;
    EXPECT_EQ(line.rfind("{\"step\": " + std::to_string(n) + ", \"loss\": ", 0),
              0u)
        << line;
    EXPECT_NE(line.find("\"lr\": 0.1, \"grad_norm\": "), std::string::npos)
        << line;
    EXPECT_NE(line.find("\"samples_per_s\": "), std::string::npos) << line;
    EXPECT_NE(line.find("\"peak_memory_bytes\": "), std::string::npos) << line;
    EXPECT_EQ(line.back(), '}');
  }
  EXPECT_EQ(n, 6); // the artifact's total_steps
  std::vector<std::string> losses = loggedLosses(o.logPath);
  ASSERT_EQ(losses.size(), 6u);
  EXPECT_LT(std::stod(losses.back()), std::stod(losses.front()));
}

namespace {

/// The uninterrupted reference: losses of every step and the final state.
struct Reference {
  std::vector<std::string> losses;
  std::string finalState;
};

Reference uninterrupted(const TempDir &dir, const std::string &artifact) {
  TrainOptions o = trainOptions(artifact);
  o.logPath = dir / "full.jsonl";
  o.saveEvery = 6;
  o.checkpointDir = dir / "full";
  EXPECT_EQ(trainCaptured(o), 0);
  return {loggedLosses(o.logPath), readFile(dir / "full/step-00000006/state.bin")};
}

} // namespace

TEST(CheckpointTest, ResumeContinuesBitForBit) {
  for (uint32_t accum : {1u, 2u}) {
    TempDir dir;
    LinearClassifierOptions options;
    options.accum = accum;
    options.batch = 4 / accum;
    std::string artifact = writeLinearClassifier(dir / "a.strata", options);
    Reference full = uninterrupted(dir, artifact);
    ASSERT_EQ(full.losses.size(), 6u);

    // Stop after step 4 (saving at 2 and 4), resume to 6.
    TrainOptions o = trainOptions(artifact);
    o.logPath = dir / "part.jsonl";
    o.checkpointDir = dir / "ckpt";
    o.saveEvery = 2;
    o.steps = 4;
    ASSERT_EQ(trainCaptured(o), 0);
    o.steps = -1;
    o.resume = true;
    ASSERT_EQ(trainCaptured(o), 0);
    // The log was appended to.
    EXPECT_EQ(loggedLosses(o.logPath), full.losses) << "accum " << accum;
    EXPECT_EQ(readFile(dir / "ckpt/step-00000006/state.bin"), full.finalState)
        << "accum " << accum;
  }
}

TEST(CheckpointTest, ResumeWithoutACheckpointStartsAtStepOne) {
  TempDir dir;
  std::string artifact = writeLinearClassifier(dir / "a.strata");
  Reference full = uninterrupted(dir, artifact);
  TrainOptions o = trainOptions(artifact);
  o.logPath = dir / "log.jsonl";
  o.checkpointDir = dir / "empty";
  o.resume = true;
  std::string err;
  ASSERT_EQ(trainCaptured(o, &err), 0);
  EXPECT_NE(err.find("no checkpoint in"), std::string::npos) << err;
  EXPECT_EQ(loggedLosses(o.logPath), full.losses);
}

TEST(CheckpointTest, KillDuringSaveLeavesThePreviousCheckpoint) {
  // The "fast" death-test style: the child is a fork of this process, so
  // it writes into this test's folder.
  GTEST_FLAG_SET(death_test_style, "fast");
  TempDir dir;
  std::string artifact = writeLinearClassifier(dir / "a.strata");
  Reference full = uninterrupted(dir, artifact);

  TrainOptions o = trainOptions(artifact);
  o.logPath = dir / "killed.jsonl";
  o.checkpointDir = dir / "ckpt";
  o.saveEvery = 2;
  // The second save (after step 4) dies halfway through state.bin.
  EXPECT_EXIT(
      {
        ::setenv("STRATA_TEST_KILL_DURING_SAVE", "2", 1);
        std::exit(train(o));
      },
      ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_EQ(readFile(dir / "ckpt/latest"), "step-00000002\n");
  EXPECT_EQ(listDir(dir / "ckpt"),
            (std::vector<std::string>{".lock", "latest", "step-00000002",
                                      "step-00000004.tmp"}));
  EXPECT_LT(fs::file_size(dir / "ckpt/step-00000004.tmp/state.bin"), 124u);
  EXPECT_EQ(loggedLosses(o.logPath).size(), 4u);

  o.resume = true;
  ASSERT_EQ(trainCaptured(o), 0);
  // Steps 1-4 of the killed run, then 3-6 again from the checkpoint.
  std::vector<std::string> losses = loggedLosses(o.logPath);
  ASSERT_EQ(losses.size(), 8u);
  EXPECT_EQ(std::vector<std::string>(losses.begin(), losses.begin() + 4),
            std::vector<std::string>(full.losses.begin(), full.losses.begin() + 4));
  EXPECT_EQ(std::vector<std::string>(losses.begin() + 4, losses.end()),
            std::vector<std::string>(full.losses.begin() + 2, full.losses.end()));
  EXPECT_EQ(readFile(dir / "ckpt/step-00000006/state.bin"), full.finalState);
  EXPECT_EQ(listDir(dir / "ckpt"),
            (std::vector<std::string>{".lock", "latest", "step-00000004",
                                      "step-00000006"}));
}
