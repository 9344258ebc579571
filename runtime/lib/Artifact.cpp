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

Group fromPlanGroup(int group) {
  switch (group) {
  case plan::REPLICATION: return Group::Replication;
  case plan::WORLD: return Group::World;
  case plan::INTER: return Group::Inter;
  case plan::INTRA: return Group::Intra;
  default: return Group::Partition;
  }
}

CollectiveKind fromPlanCollective(int kind) {
  switch (kind) {
  case plan::REDUCE_SCATTER: return CollectiveKind::ReduceScatter;
  case plan::ALL_REDUCE: return CollectiveKind::AllReduce;
  default: return CollectiveKind::AllGather;
  }
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

uint64_t tensorBytes(const plan::Tensor &t) {
  uint64_t n = 1;
  for (int64_t d : t.shape())
    n *= uint64_t(d);
  return n * byteWidth(fromPlanDType(t.dtype()));
}

Artifact::Artifact() : plan_(std::make_unique<plan::Plan>()) {}

Artifact::~Artifact() {
  for (Section &s : sections_)
    if (s.size)
      munmap(const_cast<unsigned char *>(s.data), s.size);
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
  struct stat st;
  if (stat(paramsPath.c_str(), &st) != 0)
    return Status::error("cannot open '" + paramsPath + "'");
  size_t size = static_cast<size_t>(st.st_size);
  if (size != p.params_size_bytes())
    return Status::error("'" + paramsPath + "' has " + std::to_string(size) +
                         " bytes, the plan expects " +
                         std::to_string(p.params_size_bytes()));
  if (p.params_sections_size() == 0 && size != 0)
    return Status::error("plan: params.bin has no sections");
  for (int i = 0; i < p.params_sections_size(); ++i) {
    const plan::ParamsSection &section = p.params_sections(i);
    if (section.offset() % kParamsSectionAlign != 0 ||
        section.offset() + section.size_bytes() > size)
      return Status::error("plan: params.bin section " + std::to_string(i) +
                           " is misaligned or lies outside the file");
  }
  for (const auto &param : p.parameters()) {
    uint32_t section = param.shards() > 1 ? 1 : 0;
    if (param.tensor() >= count ||
        section >= uint32_t(p.params_sections_size()) ||
        param.offset() + param.size_bytes() >
            p.params_sections(section).size_bytes())
      return Status::error("plan: parameter '" + param.name() +
                           "' lies outside its params.bin section");
  }
  a->sections_.resize(p.params_sections_size());
  if (p.params_sections_size())
    if (Status s = a->mapSection(0); !s)
      return s;
  out = std::move(a);
  return Status::ok();
}

Status Artifact::mapSection(uint32_t index) {
  if (index >= sections_.size())
    return Status::error("plan: params.bin has no section " +
                         std::to_string(index));
  Section &mapped = sections_[index];
  if (mapped.data)
    return Status::ok();
  const plan::ParamsSection &section = plan_->params_sections(index);
  std::string paramsPath = dir_ + "/params.bin";
  if (section.size_bytes() == 0) {
    static const unsigned char empty = 0;
    mapped.data = &empty;
    return Status::ok();
  }
  int fd = open(paramsPath.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error("cannot open '" + paramsPath + "'");
  void *m = mmap(nullptr, section.size_bytes(), PROT_READ, MAP_PRIVATE, fd,
                 static_cast<off_t>(section.offset()));
  close(fd);
  if (m == MAP_FAILED)
    return Status::error("cannot map '" + paramsPath + "'");
  mapped.data = static_cast<const unsigned char *>(m);
  mapped.size = section.size_bytes();
  if (fnv1a64(mapped.data, mapped.size) != section.checksum())
    return Status::error("'" + paramsPath + "' section " +
                         std::to_string(index) +
                         " does not match its checksum in plan.pb");
  return Status::ok();
}

Status Artifact::mapShard(uint32_t shardIndex) {
  if (sections_.size() <= 1)
    return Status::ok();
  if (1 + shardIndex >= sections_.size())
    return Status::error("plan: params.bin has no shard " +
                         std::to_string(shardIndex));
  return mapSection(1 + shardIndex);
}

const unsigned char *Artifact::getSection(uint32_t index) const {
  return index < sections_.size() ? sections_[index].data : nullptr;
}

} // namespace strata::runtime
