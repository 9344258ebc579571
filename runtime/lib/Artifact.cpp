//===- Artifact.cpp - Loading a compiled training artifact ----------------===//

#include "strata/Runtime/Artifact.h"

#include "plan.pb.h"

#include <google/protobuf/stubs/logging.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <sstream>
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

std::string planChecksumField(uint64_t checksum) {
  // Field 100, wire type 1 (64-bit): the key 100 << 3 | 1 as a varint,
  // then the value little-endian.
  std::string out = {char(0xA1), char(0x06)};
  for (int i = 0; i < 8; ++i)
    out += char((checksum >> (8 * i)) & 0xFF);
  return out;
}

namespace {

/// Bounds no artifact of this runtime comes near; a count past them is a
/// damaged plan, not a big model.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 48;
constexpr uint32_t kMaxAccum = 1u << 20;
constexpr uint32_t kMaxWorld = 1u << 20;

/// a + b <= limit, without wrapping.
bool fits(uint64_t a, uint64_t b, uint64_t limit) {
  return a <= limit && b <= limit - a;
}

Status planError(const std::string &what) {
  return Status::error("plan: " + what + " (a damaged plan.pb? recompile "
                       "the model)");
}

/// Every count, index, enum and size of the plan checked before anything
/// uses one: the loader, the executor and the kernels may then trust it.
Status validatePlan(const plan::Plan &p) {
  uint32_t count = uint32_t(p.tensors_size());
  std::vector<bool> seen(count, false);
  std::vector<uint64_t> bytes(count, 0);
  for (const auto &t : p.tensors()) {
    std::string name = "tensor " + std::to_string(t.id());
    if (t.id() >= count)
      return planError(name + " is out of range (" + std::to_string(count) +
                       " tensors)");
    if (seen[t.id()])
      return planError(name + " is defined twice");
    seen[t.id()] = true;
    if (!plan::DType_IsValid(t.dtype()))
      return planError(name + " has an unknown dtype " +
                       std::to_string(t.dtype()));
    if (!plan::TensorKind_IsValid(t.kind()))
      return planError(name + " has an unknown kind " +
                       std::to_string(t.kind()));
    if (!plan::Tier_IsValid(t.tier()))
      return planError(name + " has an unknown tier " +
                       std::to_string(t.tier()));
    uint64_t n = byteWidth(fromPlanDType(t.dtype()));
    for (int64_t d : t.shape()) {
      if (d < 0 || (d > 0 && n > kMaxTensorBytes / uint64_t(d)))
        return planError(name + " has a shape of " +
                         (d < 0 ? "a negative dimension" : "over 2^48 bytes"));
      n *= uint64_t(d);
    }
    bytes[t.id()] = n;
    if (t.kind() == plan::CONSTANT && t.constant_data().size() != n)
      return planError("constant '" + t.name() + "' has " +
                       std::to_string(t.constant_data().size()) +
                       " bytes, its shape " + std::to_string(n));
  }
  if (p.has_memory()) {
    const plan::MemoryPlan &m = p.memory();
    if (m.activation_bytes() > kMaxTensorBytes)
      return planError("the activation arena is over 2^48 bytes");
    if (m.host_activation_bytes() > kMaxTensorBytes)
      return planError("the host activation arena is over 2^48 bytes");
    for (const auto &t : p.tensors()) {
      if (t.kind() != plan::ACTIVATION)
        continue;
      // An offloaded activation's host copy lies in the host arena.
      bool host = t.tier() == plan::HOST;
      uint64_t arena =
          host ? m.host_activation_bytes() : m.activation_bytes();
      if (t.tier() == plan::SSD || !fits(t.offset(), bytes[t.id()], arena))
        return planError("activation tensor " + std::to_string(t.id()) +
                         " lies outside the planned " +
                         (host ? "host " : "") + "arena of " +
                         std::to_string(arena) + " bytes");
    }
  }
  for (const auto &program : p.programs()) {
    const std::string where = "program '" + program.name() + "'";
    size_t streams = std::max<size_t>(program.streams_size(), 1);
    if (program.activation_bytes() > kMaxTensorBytes ||
        program.host_activation_bytes() > kMaxTensorBytes)
      return planError(where + " has an arena over 2^48 bytes");
    uint64_t n = uint64_t(program.instructions_size());
    if (program.events() > n || program.seed_slots() > n)
      return planError(where + " has more events or seed slots than "
                               "instructions");
    for (int i = 0; i < program.instructions_size(); ++i) {
      const plan::Instruction &inst = program.instructions(i);
      std::string at = where + " instruction " + std::to_string(i);
      if (!plan::InstructionKind_IsValid(inst.kind()))
        return planError(at + " has an unknown kind");
      if (inst.stream() >= streams)
        return planError(at + " is on stream " + std::to_string(inst.stream()) +
                         " of " + std::to_string(streams));
      bool move = inst.op() == "sched.reload" || inst.op() == "sched.offload";
      for (auto *ids : {&inst.inputs(), &inst.outputs()})
        for (uint32_t id : *ids) {
          if (id >= count)
            return planError(at + " (" + inst.op() + ") names tensor " +
                             std::to_string(id) + " of " +
                             std::to_string(count));
          // Only the moves touch a tensor off the device (an SSD-tier
          // tensor has no memory a kernel could read).
          if (!move && inst.kind() == plan::KERNEL &&
              p.tensors(int(id)).tier() != plan::DEVICE)
            return planError(at + " (" + inst.op() + ") reads or writes '" +
                             p.tensors(int(id)).name() +
                             "', which lives on the " +
                             plan::Tier_Name(p.tensors(int(id)).tier()) +
                             " tier; only moves may");
        }
    }
    for (const auto &b : program.inputs()) {
      if (b.tensor() >= count)
        return planError(where + " input '" + b.name() + "' is out of range");
      // What the runtime fills before the program: never an activation,
      // which the program's own instructions would overwrite.
      if (p.tensors(int(b.tensor())).kind() == plan::ACTIVATION)
        return planError(where + " input '" + b.name() +
                         "' is bound to an activation");
    }
    for (const auto &b : program.outputs())
      if (b.tensor() >= count)
        return planError(where + " output '" + b.name() + "' is out of range");
  }
  if (p.has_training()) {
    uint32_t accum = p.training().accum();
    if (accum > kMaxAccum)
      return planError("accumulation " + std::to_string(accum) +
                       " is over " + std::to_string(kMaxAccum));
  }
  if (p.has_topology()) {
    const plan::Topology &t = p.topology();
    if (t.world() > kMaxWorld || t.partition() > t.world() ||
        t.pipeline_stages() > std::max(t.world(), 1u) ||
        (t.partition() && t.world() % t.partition() != 0))
      return planError("the topology (world " + std::to_string(t.world()) +
                       ", partition " + std::to_string(t.partition()) +
                       ", stages " + std::to_string(t.pipeline_stages()) +
                       ") is inconsistent");
  }
  return Status::ok();
}

} // namespace

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
  std::ostringstream content;
  content << file.rdbuf();
  std::string raw = content.str();
  {
    // Protobuf's own log lines would come before Strata's one line.
    google::protobuf::LogSilencer silence;
    if (!a->plan_->ParseFromString(raw))
      return Status::error("'" + planPath + "' is not a valid plan (truncated "
                                            "or not written by strata-compile)");
  }
  const plan::Plan &p = *a->plan_;
  if (p.magic() != kPlanMagic)
    return Status::error("'" + planPath + "' has the wrong magic number");
  if (p.format_version() != kFormatVersion)
    return Status::error("artifact format version " +
                         std::to_string(p.format_version()) +
                         " is not supported by this strata-run (version " +
                         std::to_string(kFormatVersion) +
                         "); recompile the model with this Strata");
  std::string trailer = planChecksumField(p.plan_checksum());
  if (raw.size() < trailer.size() ||
      raw.compare(raw.size() - trailer.size(), trailer.size(), trailer) != 0 ||
      fnv1a64(raw.data(), raw.size() - trailer.size()) != p.plan_checksum())
    return Status::error("'" + planPath +
                         "' does not match its checksum (damaged; recompile "
                         "the model)");
  if (Status s = validatePlan(p); !s)
    return s;
  uint32_t count = p.tensors_size();

  // A plan-only artifact has no params.bin: its sections are a layout.
  std::string paramsPath = dir + "/params.bin";
  struct stat st;
  if (!p.weightless() && stat(paramsPath.c_str(), &st) != 0)
    return Status::error("cannot open '" + paramsPath + "'");
  size_t size = p.weightless() ? size_t(p.params_size_bytes())
                               : static_cast<size_t>(st.st_size);
  if (size != p.params_size_bytes())
    return Status::error("'" + paramsPath + "' has " + std::to_string(size) +
                         " bytes, the plan expects " +
                         std::to_string(p.params_size_bytes()));
  if (p.params_sections_size() == 0 && size != 0)
    return Status::error("plan: params.bin has no sections");
  for (int i = 0; i < p.params_sections_size(); ++i) {
    const plan::ParamsSection &section = p.params_sections(i);
    if (section.offset() % kParamsSectionAlign != 0 ||
        !fits(section.offset(), section.size_bytes(), size))
      return Status::error("plan: params.bin section " + std::to_string(i) +
                           " is misaligned or lies outside the file");
  }
  for (const auto &param : p.parameters()) {
    uint32_t section = param.shards() > 1 ? 1 : 0;
    if (param.tensor() >= count ||
        section >= uint32_t(p.params_sections_size()) ||
        param.shards() > kMaxWorld ||
        !fits(param.offset(), param.size_bytes(),
              p.params_sections(section).size_bytes()) ||
        param.size_bytes() != tensorBytes(p.tensors(int(param.tensor()))))
      return Status::error("plan: parameter '" + param.name() +
                           "' lies outside its params.bin section");
  }
  a->sections_.resize(p.params_sections_size());
  if (p.params_sections_size() && !p.weightless())
    if (Status s = a->mapSection(0); !s)
      return s;
  out = std::move(a);
  return Status::ok();
}

Status Artifact::checkRunnable() const {
  if (plan_->weightless())
    return Status::error("artifact '" + dir_ +
                         "' is plan-only (compiled with --no-weights): it "
                         "has no weights to run; strata-inspect reads it, "
                         "or compile the model with its weights");
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
