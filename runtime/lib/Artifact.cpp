//===- Artifact.cpp - Loading a compiled training artifact ----------------===//

#include "strata/Runtime/Artifact.h"

#include "plan.pb.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <vector>

namespace strata::runtime {

uint64_t fnv1a64(const void *data, size_t size, uint64_t seed) {
  const auto *p = static_cast<const unsigned char *>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

DType fromPlanDType(int dtype) {
  switch (dtype) {
  case plan::F32: return DType::F32;
  case plan::F64: return DType::F64;
  case plan::F16: return DType::F16;
  case plan::BF16: return DType::BF16;
  case plan::I64: return DType::I64;
  case plan::I32: return DType::I32;
  case plan::I16: return DType::I16;
  case plan::I8: return DType::I8;
  default: return DType::I1;
  }
}

Artifact::Artifact() : plan_(std::make_unique<plan::Plan>()) {}

Artifact::~Artifact() {
  if (params_ && paramsSize_)
    munmap(const_cast<unsigned char *>(params_), paramsSize_);
}

Status Artifact::load(const std::string &dir, std::unique_ptr<Artifact> &out) {
  std::unique_ptr<Artifact> a(new Artifact());
  a->dir_ = dir;
  std::string planPath = dir + "/plan.pb";
  std::ifstream file(planPath, std::ios::binary);
  if (!file)
    return Status::error("cannot open '" + planPath +
                         "': not a Strata artifact directory");
  if (!a->plan_->ParseFromIstream(&file))
    return Status::error("'" + planPath + "' is not a valid plan (truncated "
                                          "or not written by strata-compile)");
  const plan::Plan &p = *a->plan_;
  if (p.magic() != kPlanMagic)
    return Status::error("'" + planPath + "' has the wrong magic number");
  if (p.format_version() != kFormatVersion)
    return Status::error("artifact format version " +
                         std::to_string(p.format_version()) +
                         " is not supported by this strata-run (version " +
                         std::to_string(kFormatVersion) +
                         "); recompile the model with this Strata");

  uint32_t count = p.tensors_size();
  std::vector<bool> seen(count, false);
  for (const auto &t : p.tensors()) {
    if (t.id() >= count)
      return Status::error("plan: tensor id " + std::to_string(t.id()) +
                           " out of range");
    if (seen[t.id()])
      return Status::error("plan: tensor id " + std::to_string(t.id()) +
                           " is used twice");
    seen[t.id()] = true;
  }
  for (const auto &program : p.programs()) {
    for (const auto &inst : program.instructions()) {
      for (uint32_t id : inst.inputs())
        if (id >= count)
          return Status::error("plan: instruction " + inst.op() +
                               " reads a tensor out of range");
      for (uint32_t id : inst.outputs())
        if (id >= count)
          return Status::error("plan: instruction " + inst.op() +
                               " writes a tensor out of range");
    }
    for (const auto &b : program.inputs())
      if (b.tensor() >= count)
        return Status::error("plan: input '" + b.name() + "' out of range");
    for (const auto &b : program.outputs())
      if (b.tensor() >= count)
        return Status::error("plan: output '" + b.name() + "' out of range");
  }

  std::string paramsPath = dir + "/params.bin";
  int fd = open(paramsPath.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error("cannot open '" + paramsPath + "'");
  struct stat st;
  fstat(fd, &st);
  size_t size = static_cast<size_t>(st.st_size);
  if (size != p.params_size_bytes()) {
    close(fd);
    return Status::error("'" + paramsPath + "' has " + std::to_string(size) +
                         " bytes, the plan expects " +
                         std::to_string(p.params_size_bytes()));
  }
  if (size) {
    void *m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      close(fd);
      return Status::error("cannot map '" + paramsPath + "'");
    }
    a->params_ = static_cast<const unsigned char *>(m);
    a->paramsSize_ = size;
  }
  close(fd);
  if (fnv1a64(a->params_, a->paramsSize_) != p.params_checksum())
    return Status::error("'" + paramsPath +
                         "' does not match its checksum in plan.pb");
  for (const auto &param : p.parameters())
    if (param.tensor() >= count ||
        param.offset() + param.size_bytes() > a->paramsSize_)
      return Status::error("plan: parameter '" + param.name() +
                           "' lies outside params.bin");
  out = std::move(a);
  return Status::ok();
}

} // namespace strata::runtime
