//===- FuzzCheckpointLoad.cpp - libFuzzer target: the checkpoint loader ---===//
//
// A checkpoint folder's index.json and state.bin, loaded through the public
// API of Training.h: peekCheckpoint and loadCheckpoint (into a one-rank
// executor of the hand-built linear classifier, tests/runtime/
// TestArtifacts.h) of DIR whose `latest` names step-00000001, and
// MappedWeights::open of that step folder, reading every value it maps
// under a name the index mentions.
//
// Input: 2 bytes (little endian) n, then n bytes of index.json, then the
// bytes of state.bin.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "TestArtifacts.h"

#include "strata/Runtime/Executor.h"
#include "strata/Runtime/Training.h"

#include <set>

using namespace strata;
using namespace strata::runtime;

namespace {

fuzz::ScratchFolder *scratch;
std::unique_ptr<Artifact> artifact;
std::unique_ptr<Executor> executor;
std::string fingerprint;
std::string checkpointDir, stepFolder;

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "fuzz-checkpoint-load: %s\n", what.c_str());
  std::abort();
}

/// The names an index.json mentions (`"name": "..."`, escapes left as they
/// are) and the executor's own, to look up in MappedWeights.
std::set<std::string> namesToRead(std::string_view index) {
  std::set<std::string> names;
  for (const auto &s : executor->getStates())
    names.insert(s.name);
  std::string_view tag = "\"name\": \"";
  for (size_t at = index.find(tag); at != std::string_view::npos;
       at = index.find(tag, at + 1)) {
    size_t begin = at + tag.size();
    size_t end = index.find('"', begin);
    if (end == std::string_view::npos)
      break;
    names.insert(std::string(index.substr(begin, end - begin)));
  }
  return names;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  scratch = new fuzz::ScratchFolder("strata-fuzz-checkpoint");
  std::string artifactDir = *scratch / "artifact";
  std::filesystem::create_directories(artifactDir);
  runtime::testing::writeLinearClassifier(artifactDir);
  if (Status s = Artifact::load(artifactDir, artifact); !s)
    fail(s.message());
  if (Status s = Executor::create(*artifact, getCpuKernels(), executor); !s)
    fail(s.message());
  fingerprint = artifact->getPlan().fingerprint();
  checkpointDir = *scratch / "checkpoints";
  stepFolder = checkpointDir + "/step-00000001";
  std::filesystem::create_directories(stepFolder);
  fuzz::writeFile(checkpointDir + "/latest", "step-00000001\n");
  std::atexit([] {
    executor.reset();
    artifact.reset();
    delete scratch;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view index, state;
  if (!fuzz::unpack(data, size, index, state))
    return -1;
  fuzz::writeFile(stepFolder + "/index.json", index);
  fuzz::writeFile(stepFolder + "/state.bin", state);

  bool found = false;
  uint64_t step = 0, seed = 0;
  (void)peekCheckpoint(checkpointDir, fingerprint, found, step, seed);
  (void)loadCheckpoint(checkpointDir, fingerprint, *executor, step);

  std::unique_ptr<MappedWeights> weights;
  if (MappedWeights::open(stepFolder, weights)) {
    // Every value it hands out must lie in the mapped file: touch each byte.
    uint64_t sum = 0;
    for (const std::string &name : namesToRead(index))
      for (char c : weights->get(name))
        sum += uint8_t(c);
    asm volatile("" : : "r"(sum));
  }
  return 0;
}
