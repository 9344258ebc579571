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

#include <cstdint>
#include <memory>
#include <string>

namespace strata::plan {
class Plan;
} // namespace strata::plan

namespace strata::runtime {

/// "STRA" read as a little-endian uint32.
inline constexpr uint32_t kPlanMagic = 0x41525453;
/// Bumped whenever an older runtime would misread a newer plan.
inline constexpr uint32_t kFormatVersion = 2;

/// FNV-1a, 64 bits: the params.bin checksum and the plan fingerprint.
uint64_t fnv1a64(const void *data, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

/// The DType of a schema dtype value.
DType fromPlanDType(int dtype);

class Artifact {
public:
  ~Artifact();
  /// Loads `dir`/plan.pb and maps `dir`/params.bin.
  static Status load(const std::string &dir, std::unique_ptr<Artifact> &out);

  const plan::Plan &getPlan() const { return *plan_; }
  const unsigned char *getParams() const { return params_; }
  size_t getParamsSize() const { return paramsSize_; }
  const std::string &getDir() const { return dir_; }

private:
  Artifact();
  std::string dir_;
  std::unique_ptr<plan::Plan> plan_;
  const unsigned char *params_ = nullptr;
  size_t paramsSize_ = 0;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_ARTIFACT_H
