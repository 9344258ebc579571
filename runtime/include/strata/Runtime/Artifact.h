//===- Artifact.h - A compiled training artifact ----------------*- C++ -*-===//
//
// NAME.strata/ holds plan.pb (the schema in runtime/schema/plan.proto) and
// params.bin. Loading checks the magic, the format version, that every
// tensor and parameter reference is in range, and the params checksum; a
// mismatch is one clear message.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_ARTIFACT_H
#define STRATA_RUNTIME_ARTIFACT_H

#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/Topology.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::plan {
class Plan;
class Tensor;
} // namespace strata::plan

namespace strata::runtime {

/// "STRA" read as a little-endian uint32.
inline constexpr uint32_t kPlanMagic = 0x41525453;
/// Bumped whenever an older runtime would misread a newer plan.
inline constexpr uint32_t kFormatVersion = 8;
/// params.bin sections start at multiples of this (any page size divides
/// it), so a rank maps only its own.
inline constexpr uint64_t kParamsSectionAlign = 65536;

/// plan.pb's last field: `Plan.plan_checksum` (field 100, fixed64) holding
/// `checksum`, as protobuf encodes it (10 bytes).
std::string planChecksumField(uint64_t checksum);

/// FNV-1a, 64 bits: the params.bin checksum and the plan fingerprint.
uint64_t fnv1a64(const void *data, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

/// The DType of a schema dtype value.
DType fromPlanDType(int dtype);
/// The Group of a schema CollectiveGroup, the kind of a CollectiveKind.
Group fromPlanGroup(int group);
CollectiveKind fromPlanCollective(int kind);

/// Bytes of a plan tensor as the runtime stores it (i1 as one byte).
uint64_t tensorBytes(const plan::Tensor &t);

class Artifact {
public:
  ~Artifact();
  /// Loads `dir`/plan.pb and maps section 0 of `dir`/params.bin (the values
  /// that are not sharded), checking its checksum.
  static Status load(const std::string &dir, std::unique_ptr<Artifact> &out);
  /// Maps the section holding slice `shardIndex` (the rank's index in its
  /// partition group) of every sharded value, checking its checksum; a
  /// one-rank artifact has none and needs none.
  Status mapShard(uint32_t shardIndex);

  const plan::Plan &getPlan() const { return *plan_; }
  /// An error when the artifact cannot run: a plan-only one
  /// (strata-compile --no-weights) has no weights.
  Status checkRunnable() const;
  /// The mapped bytes of a params.bin section, or null when not mapped.
  const unsigned char *getSection(uint32_t index) const;
  const std::string &getDir() const { return dir_; }

private:
  Artifact();
  Status mapSection(uint32_t index);
  struct Section {
    const unsigned char *data = nullptr;
    size_t size = 0; // mapped bytes (0: nothing to unmap)
  };
  std::string dir_;
  std::unique_ptr<plan::Plan> plan_;
  std::vector<Section> sections_;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_ARTIFACT_H
