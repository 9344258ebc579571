//===- FuzzPlanLoad.cpp - libFuzzer target: the plan.pb loader ------------===//
//
// Bytes as an artifact's plan.pb -> Artifact::load: the parse, the magic and
// format version, the checksum trailer, validatePlan and the params.bin
// section and parameter checks, then mapShard for every section.
//
// plan.pb ends with its own FNV-1a checksum (field 100), so byte mutations
// alone would stop at the checksum: for 7 inputs in 8 (chosen by a hash of
// the input) the target replaces the trailer, or appends one, with the
// checksum of the bytes before it, as strata-compile writes it; the rest
// are loaded as they are. params.bin is written as zeros of the size the
// plan names (up to 1 MiB; a larger plan gets none), so the section checks
// run on every plan.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "strata/Runtime/Artifact.h"

#include "plan.pb.h"

#include <google/protobuf/stubs/logging.h>

using namespace strata;
using namespace strata::runtime;

namespace {

fuzz::ScratchFolder *artifactDir;

constexpr uint64_t kMaxParamsBytes = 1 << 20;

/// `raw` with its checksum trailer recomputed: an existing trailer (the
/// last 10 bytes, when they start with the field's key) is replaced,
/// otherwise one is appended.
std::string withChecksum(std::string raw) {
  std::string key = planChecksumField(0).substr(0, 2);
  if (raw.size() >= 10 && raw.compare(raw.size() - 10, 2, key) == 0)
    raw.resize(raw.size() - 10);
  return raw + planChecksumField(fnv1a64(raw.data(), raw.size()));
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  artifactDir = new fuzz::ScratchFolder("strata-fuzz-plan");
  std::atexit([] { delete artifactDir; });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string raw(reinterpret_cast<const char *>(data), size);
  if (fuzz::hashBytes(data, size) % 8 != 0)
    raw = withChecksum(std::move(raw));
  fuzz::writeFile(*artifactDir / "plan.pb", raw);

  // params.bin: zeros, as long as the plan says (when it parses).
  std::string paramsPath = *artifactDir / "params.bin";
  plan::Plan parsed;
  bool parses;
  {
    google::protobuf::LogSilencer silence;
    parses = parsed.ParseFromString(raw);
  }
  std::error_code ec;
  std::filesystem::remove(paramsPath, ec);
  if (parses && parsed.params_size_bytes() <= kMaxParamsBytes)
    fuzz::writeFile(paramsPath, std::string(parsed.params_size_bytes(), '\0'));

  std::unique_ptr<Artifact> artifact;
  Status s = Artifact::load(artifactDir->path(), artifact);
  if (!s)
    return 0;
  // A loaded plan is one the runtime may trust: map every shard.
  const plan::Plan &p = artifact->getPlan();
  for (int i = 1; i < p.params_sections_size(); ++i)
    (void)artifact->mapShard(uint32_t(i - 1));
  return 0;
}
