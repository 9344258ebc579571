//===- Executor.cpp - Runs an artifact's instructions ---------------------===//

#include "strata/Runtime/Executor.h"

#include "strata/Runtime/Communicator.h"
#include "strata/Runtime/Footprint.h"
#include "strata/Runtime/ScratchArena.h"

#include <chrono>
#include <vector>
#include <optional>

#include "plan.pb.h"

#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace strata::runtime {

namespace {
constexpr size_t kAlignment = 64;

size_t alignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

void setAttribute(KernelAttrs &attrs, const plan::Attribute &a) {
  switch (a.value_case()) {
  case plan::Attribute::kIntValue:
    attrs.set(a.name(), static_cast<int64_t>(a.int_value()));
    break;
  case plan::Attribute::kFloatValue:
    attrs.set(a.name(), a.float_value());
    break;
  case plan::Attribute::kStringValue:
    attrs.set(a.name(), a.string_value());
    break;
  case plan::Attribute::kIntsValue:
    attrs.set(a.name(), std::vector<int64_t>(a.ints_value().values().begin(),
                                             a.ints_value().values().end()));
    break;
  default:
    break;
  }
}

} // namespace

Executor::~Executor() {
  if (ssdFile_ >= 0)
    ::close(ssdFile_);
  if (device_) {
    device_->release(MemoryKind::Device, deviceBlock_);
    device_->release(MemoryKind::Host, hostBlock_);
    device_->release(MemoryKind::Host, stagingBlock_);
    device_->release(MemoryKind::Device, seedBlock_);
    device_->release(MemoryKind::Host, seedStaging_);
  }
}

Status Executor::storeBytes(const TensorView &v, const void *in,
                            const std::string &what) {
  if (v.onSsd) {
    if (!writeViewBytes(v, ssdFile_, in))
      return Status::error("cannot write " + what + " to the SSD tier");
    return Status::ok();
  }
  if (v.onHost || device_->isHostAddressable()) {
    std::memcpy(v.data, in, v.bytes());
    return Status::ok();
  }
  if (Status s = device_->copyToDevice(v.data, in, v.bytes()); !s)
    return Status::error("cannot write " + what + ": " + s.message());
  return Status::ok();
}

Status Executor::loadBytes(const TensorView &v, void *out,
                           const std::string &what) const {
  if (v.onSsd) {
    if (!readViewBytes(v, ssdFile_, out))
      return Status::error("cannot read " + what + " from the SSD tier");
    return Status::ok();
  }
  if (v.onHost || device_->isHostAddressable()) {
    std::memcpy(out, v.data, v.bytes());
    return Status::ok();
  }
  if (Status s = device_->copyToHost(out, v.data, v.bytes()); !s)
    return Status::error("cannot read " + what + ": " + s.message());
  return Status::ok();
}

Status Executor::create(const Artifact &artifact, std::shared_ptr<Device> device,
                        std::unique_ptr<Executor> &out,
                        const ExecutorOptions &options) {
  const plan::Plan &p = artifact.getPlan();
  if (Status s = artifact.checkRunnable(); !s)
    return s;
  std::unique_ptr<Executor> e(new Executor());
  e->device_ = std::move(device);
  e->options_ = options;
  e->loaded_ = programsOfStage(p, options.stage);
  if (e->loaded_.empty() && options.stage >= 0)
    return Status::error("plan: no program of stage " +
                         std::to_string(options.stage));
  e->used_ = tensorsOfStage(p, options.stage);
  Layout layout;
  if (Status s = e->layOutTensors(p, layout); !s)
    return s;
  if (Status s = e->allocateTiers(p, layout); !s)
    return s;
  if (Status s = e->copyInitialValues(artifact); !s)
    return s;
  e->collectStates(p);
  for (const plan::Program *prog : e->loaded_)
    if (Status s = e->loadProgram(*prog); !s)
      return s;
  if (Status s = e->createQueuesAndSeeds(); !s)
    return s;
  if (!e->device_->isHostAddressable())
    if (Status s = e->allocateStaging(); !s)
      return s;
  e->trace_.resize(e->doneSize_);
  out = std::move(e);
  return Status::ok();
}

Status Executor::layOutTensors(const plan::Plan &p, Layout &layout) {
  // The device block: the persistent tensors and the constants end to end,
  // then the activation arena at the offsets strata-plan-memory chose
  // (without a memory plan, every activation its own slot after them).
  // Host-tier tensors go end to end in the host block, then the host
  // activation arena (saved activations' host copies at their planned
  // offsets); SSD-tier ones at 4 KiB-aligned offsets in the SSD file.
  tensors_.resize(p.tensors_size());
  std::vector<size_t> &offsets = layout.offsets;
  offsets.assign(p.tensors_size(), 0);
  size_t &total = layout.deviceBytes, &host = layout.hostBytes;
  uint64_t &ssd = layout.ssdBytes;
  bool planned = p.has_memory();
  for (const auto &t : p.tensors()) {
    TensorView &v = tensors_[t.id()];
    v.dtype = fromPlanDType(t.dtype());
    v.shape.assign(t.shape().begin(), t.shape().end());
    if (!used_[t.id()] || (planned && t.kind() == plan::ACTIVATION))
      continue;
    size_t bytes = alignUp(std::max<size_t>(v.bytes(), 1));
    if (t.tier() == plan::HOST) {
      offsets[t.id()] = host;
      host += bytes;
    } else if (t.tier() == plan::SSD) {
      v.onSsd = true;
      v.fileOffset = ssd;
      ssd += (v.bytes() + 4095) / 4096 * 4096;
    } else {
      offsets[t.id()] = total;
      total += bytes;
    }
  }
  if (planned) {
    // The arenas: the largest of the loaded programs' (a stage's rank
    // holds its own stage's only).
    Footprint footprint = footprintOf(p, options_.stage, used_);
    size_t arena = footprint.activations;
    size_t hostArena = footprint.hostActivations;
    host = alignUp(host);
    for (const auto &t : p.tensors()) {
      if (t.kind() != plan::ACTIVATION || !used_[t.id()])
        continue;
      bool onHost = t.tier() == plan::HOST;
      if (t.tier() == plan::SSD)
        return Status::error("plan: activation tensor " +
                             std::to_string(t.id()) +
                             " is on the SSD tier; activations are offloaded "
                             "to the host only");
      size_t bytes = tensors_[t.id()].bytes();
      size_t limit = onHost ? hostArena : arena;
      if (t.offset() % kAlignment != 0 || t.offset() + bytes > limit)
        return Status::error("plan: activation tensor " +
                             std::to_string(t.id()) + " lies outside the " +
                             (onHost ? "host activation arena" : "planned arena") +
                             " of " + std::to_string(limit) + " bytes");
      offsets[t.id()] = (onHost ? host : total) + t.offset();
    }
    total += arena;
    host += hostArena;
  }
  layout.plannedDeviceBytes = total;
  // Each tier's block is a whole number of pages: the pool the plan's
  // page accounting describes.
  if (planned && p.memory().page_size()) {
    size_t page = p.memory().page_size();
    total = (total + page - 1) / page * page;
    host = (host + page - 1) / page * page;
  }
  return Status::ok();
}

Status Executor::allocateTiers(const plan::Plan &p, const Layout &layout) {
  Device &d = *device_;
  if (Status s =
          d.allocate(MemoryKind::Device, layout.deviceBytes, &deviceBlock_);
      !s)
    return s;
  deviceBytes_ = layout.deviceBytes;
  plannedDeviceBytes_ = layout.plannedDeviceBytes;
  if (layout.hostBytes) {
    if (Status s = d.allocate(MemoryKind::Host, layout.hostBytes, &hostBlock_);
        !s)
      return s;
    hostBytes_ = layout.hostBytes;
  }
  for (const auto &t : p.tensors()) {
    TensorView &v = tensors_[t.id()];
    if (v.onSsd || !used_[t.id()])
      continue;
    v.onHost = t.tier() == plan::HOST;
    v.data =
        static_cast<unsigned char *>(v.onHost ? hostBlock_ : deviceBlock_) +
        layout.offsets[t.id()];
  }
  if (layout.ssdBytes)
    return createSsdFile(layout.ssdBytes);
  return Status::ok();
}

Status Executor::createSsdFile(uint64_t bytes) {
  char name[64];
  std::snprintf(name, sizeof(name), "/strata-ssd-%d-%d-XXXXXX", int(getpid()),
                options_.rank);
  std::string path = options_.ssdDir + name;
  int fd = mkstemp(path.data());
  if (fd < 0)
    return Status::error("cannot create the SSD tier's file in '" +
                         options_.ssdDir + "' (strata-run --ssd-dir DIR)");
  ::unlink(path.c_str()); // gone when the process is
  ssdFile_ = fd;
  ssdBytes_ = bytes;
  if (::ftruncate(fd, off_t(bytes)) != 0)
    return Status::error("cannot size the SSD tier's file in '" +
                         options_.ssdDir + "' to " + std::to_string(bytes) +
                         " bytes");
  return Status::ok();
}

Status Executor::copyInitialValues(const Artifact &artifact) {
  const plan::Plan &p = artifact.getPlan();
  for (const auto &t : p.tensors()) {
    if (t.kind() != plan::CONSTANT || !used_[t.id()])
      continue;
    TensorView &v = tensors_[t.id()];
    if (t.constant_data().size() != v.bytes())
      return Status::error("plan: constant '" + t.name() + "' has " +
                           std::to_string(t.constant_data().size()) +
                           " bytes, expected " + std::to_string(v.bytes()));
    if (Status s = storeBytes(v, t.constant_data().data(),
                              "constant '" + t.name() + "'");
        !s)
      return s;
  }
  for (const auto &param : p.parameters()) {
    if (!used_[param.tensor()])
      continue; // another stage's
    TensorView &v = tensors_[param.tensor()];
    if (param.size_bytes() != v.bytes())
      return Status::error("plan: parameter '" + param.name() +
                           "' size does not match its tensor");
    // A sharded parameter: this rank's slice, from its own section.
    uint32_t shards = std::max<uint32_t>(param.shards(), 1);
    uint32_t section = shards > 1 ? 1 + uint32_t(options_.rank) % shards : 0;
    const unsigned char *base = artifact.getSection(section);
    if (!base)
      return Status::error("plan: parameter '" + param.name() +
                           "' is sharded but this rank's params.bin section "
                           "is not mapped");
    if (Status s =
            storeBytes(v, base + param.offset(), "'" + param.name() + "'");
        !s)
      return s;
  }
  return Status::ok();
}

void Executor::collectStates(const plan::Plan &p) {
  for (const auto &t : p.tensors()) {
    if (!used_[t.id()])
      continue;
    if (t.kind() == plan::PARAMETER || t.kind() == plan::BUFFER ||
        t.kind() == plan::GRADIENT || t.kind() == plan::OPTIMIZER_STATE)
      states_.push_back(
          {t.name(), static_cast<int>(t.kind()), &tensors_[t.id()]});
  }
}

Status Executor::loadProgram(const plan::Program &prog) {
  Program &program = programs_[prog.name()];
  for (const auto &b : prog.inputs()) {
    inputs_[b.name()] = b.tensor();
    program.inputs.push_back(b.name());
  }
  for (const auto &b : prog.outputs()) {
    outputs_[b.name()] = b.tensor();
    program.outputs.push_back(b.name());
    program.outputIds.push_back(b.tensor());
  }
  for (const auto &inst : prog.instructions()) {
    Step step;
    if (Status s = buildStep(prog, inst, program.steps.size(), step); !s)
      return s;
    program.exchanges |= step.kind == plan::SEND || step.kind == plan::RECV;
    program.steps.push_back(std::move(step));
  }
  // A wait needs its event recorded on another stream before it.
  std::vector<int> recordedOn(prog.events(), -1);
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const Step &step = program.steps[i];
    if (step.kind == plan::RECORD) {
      recordedOn[step.event] = int(step.stream);
    } else if (step.kind == plan::WAIT &&
               (recordedOn[step.event] < 0 ||
                recordedOn[step.event] == int(step.stream))) {
      return Status::error("plan: " + prog.name() + " instruction " +
                           std::to_string(i) + " waits for event " +
                           std::to_string(step.event) +
                           ", which no earlier instruction of another "
                           "stream records");
    }
  }
  program.events = prog.events();
  program.seedSlots = prog.seed_slots();
  program.streams.assign(std::max<size_t>(prog.streams_size(), 1), {});
  program.streamNames.assign(prog.streams().begin(), prog.streams().end());
  if (program.streamNames.empty())
    program.streamNames.push_back("compute");
  for (uint32_t i = 0; i < program.steps.size(); ++i)
    program.streams[program.steps[i].stream].push_back(i);
  doneSize_ = std::max(doneSize_, program.steps.size());
  eventCount_ = std::max<size_t>(eventCount_, prog.events());
  return Status::ok();
}

Status Executor::buildStep(const plan::Program &prog,
                           const plan::Instruction &inst, size_t index,
                           Step &step) {
  size_t streams = std::max<size_t>(prog.streams_size(), 1);
  step.kind = inst.kind();
  step.stream = inst.stream();
  if (step.stream >= streams)
    return Status::error("plan: " + prog.name() + " instruction " +
                         std::to_string(index) + " is on stream " +
                         std::to_string(step.stream) + " of " +
                         std::to_string(streams));
  if (step.kind == plan::SEND || step.kind == plan::RECV) {
    bool send = step.kind == plan::SEND;
    if (inst.inputs_size() != (send ? 1 : 0) ||
        inst.outputs_size() != (send ? 0 : 1))
      return Status::error("plan: " + prog.name() + " instruction " +
                           std::to_string(index) + ": a " +
                           (send ? "send takes one input" :
                                   "receive makes one output"));
    for (uint32_t id : inst.inputs())
      step.inputs.push_back(tensors_[id]);
    for (uint32_t id : inst.outputs())
      step.outputs.push_back(tensors_[id]);
    step.peerStage = int(inst.peer_stage());
    step.description = std::string(send ? "send" : "receive") + " of value " +
                       std::to_string(inst.tag()) + " of micro-batch " +
                       std::to_string(inst.micro_batch());
    return Status::ok();
  }
  if (step.kind != plan::KERNEL) {
    // An event: the plan numbered it; a wait must follow its record.
    step.event = inst.event();
    step.description =
        std::string(step.kind == plan::RECORD ? "record" : "wait") +
        " of event " + std::to_string(step.event);
    if (step.event >= prog.events())
      return Status::error("plan: " + prog.name() + " instruction " +
                           std::to_string(index) + " names event " +
                           std::to_string(step.event) + " of " +
                           std::to_string(prog.events()));
    return Status::ok();
  }
  const KernelRegistry &kernels = device_->getKernels();
  step.kernel = kernels.lookup(inst.op());
  if (!step.kernel)
    return Status::error("no kernel for " + inst.op() + " (node '" +
                         inst.location() + "') in this backend");
  for (uint32_t id : inst.inputs())
    step.inputs.push_back(tensors_[id]);
  for (uint32_t id : inst.outputs())
    step.outputs.push_back(tensors_[id]);
  for (const auto &a : inst.attributes())
    setAttribute(step.attrs, a);
  // Names the instruction in failures, wherever they surface (at the
  // launch, or at the synchronize on an asynchronous queue) and in
  // profiler ranges.
  step.description = "instruction " + std::to_string(index) + ", " + inst.op() +
                     " (node '" + inst.location() + "')";
  step.delayable = inst.delayable();
  if (inst.random()) {
    if (inst.seed_slot() >= prog.seed_slots())
      return Status::error("plan: " + prog.name() + " instruction " +
                           std::to_string(index) + " has seed slot " +
                           std::to_string(inst.seed_slot()) + " of " +
                           std::to_string(prog.seed_slots()));
    step.rngStream = inst.rng_stream();
    step.seedSlot = int(inst.seed_slot());
  }
  if (inst.group() != plan::NO_GROUP)
    step.group = fromPlanGroup(inst.group());
  if (inst.collective() != plan::NO_COLLECTIVE)
    step.collective = int(fromPlanCollective(inst.collective()));
  if (step.stream < uint32_t(prog.streams_size()))
    step.channel = collectiveChannelOf(prog.streams(int(step.stream)));
  if (const PrepareFn *prepare = kernels.lookupPrepare(inst.op())) {
    KernelContext ctx{step.inputs, step.outputs, step.attrs,
                      0,           nullptr,      ssdFile_};
    ctx.group = step.group;
    ctx.channel = step.channel;
    if (Status s = (*prepare)(ctx, step.prepared); !s)
      return Status::error(prog.name() + " " + step.description + ": " +
                           s.message());
  }
  return Status::ok();
}

Status Executor::createQueuesAndSeeds() {
  Device &d = *device_;
  uint32_t streams = 1;
  for (auto &[name, program] : programs_)
    streams = std::max(streams, uint32_t(program.streams.size()));
  if (Status s = d.createQueues(streams, uint32_t(eventCount_)); !s)
    return s;
  // Each program's seed slots, one after the other in one block.
  uint32_t slots = 0;
  for (auto &[name, program] : programs_) {
    program.firstSeedSlot = slots;
    slots += program.seedSlots;
  }
  if (slots) {
    size_t bytes = slots * sizeof(uint64_t);
    if (Status s = d.allocate(MemoryKind::Device, bytes, &seedBlock_); !s)
      return s;
    if (Status s = d.allocate(MemoryKind::Host, bytes, &seedStaging_); !s)
      return s;
  }
  return Status::ok();
}

Status Executor::allocateStaging() {
  // Inputs and outputs reach the host through buffers of their own, one
  // per tensor (a name may be an input of one program and an output of
  // another), in one block of host memory.
  std::map<uint32_t, size_t> stagingOffsets;
  size_t bytes = 0;
  for (auto &[name, program] : programs_) {
    for (const std::string &input : program.inputs)
      program.stagedInputs.push_back(inputs_[input]);
    // By the program's own bindings: two programs may name different
    // tensors alike (each pipeline stage's strata.grad_norm).
    for (uint32_t id : program.outputIds)
      program.stagedOutputs.push_back(id);
    for (auto *ids : {&program.stagedInputs, &program.stagedOutputs})
      for (uint32_t id : *ids)
        if (!tensors_[id].onHost && !stagingOffsets.count(id)) {
          stagingOffsets[id] = bytes;
          bytes += alignUp(std::max<size_t>(tensors_[id].bytes(), 1));
        }
  }
  // A HOST-tier input or output needs no staging: the host has it.
  for (auto &[name, program] : programs_)
    for (auto *ids : {&program.stagedInputs, &program.stagedOutputs})
      std::erase_if(*ids,
                    [&](uint32_t id) { return !stagingOffsets.count(id); });
  if (bytes)
    if (Status s = device_->allocate(MemoryKind::Host, bytes, &stagingBlock_);
        !s)
      return s;
  for (auto [id, offset] : stagingOffsets) {
    TensorView v = tensors_[id];
    v.data = static_cast<unsigned char *>(stagingBlock_) + offset;
    v.onHost = true;
    staging_[id] = v;
  }
  return Status::ok();
}

Status Executor::setCommunicator(Communicator *comm) {
  comm_ = comm;
  DeviceCollectives *collectives = device_->collectives();
  if (!comm || !collectives)
    return Status::ok();
  // A communicator per group and per channel (collective stream).
  for (int channel = 0; channel < Communicator::kChannels; ++channel)
    for (int g = 0; g < kGroups; ++g) {
      Group group = Group(g);
      int index = comm->indexIn(group);
      std::string id;
      if (index == 0)
        if (Status s = collectives->makeCollectiveId(id); !s)
          return s;
      if (Status s = comm->broadcastFromFirst(
              group, id, std::string("the ") + groupName(group) +
                             " group's communicator id");
          !s)
        return s;
      if (Status s = collectives->joinCollectiveGroup(
              g, channel, id, int(comm->members(group).size()), index);
          !s)
        return s;
    }
  return Status::ok();
}

const TensorView *Executor::hostView(uint32_t id) const {
  auto staged = staging_.find(id);
  return staged != staging_.end() ? &staged->second : &tensors_[id];
}

TensorView *Executor::findInput(const std::string &name) {
  auto it = inputs_.find(name);
  // Non-const here: the executor owns the view.
  return it == inputs_.end() ? nullptr
                             : const_cast<TensorView *>(hostView(it->second));
}

const TensorView *Executor::findOutput(const std::string &name) const {
  auto it = outputs_.find(name);
  return it == outputs_.end() ? nullptr : hostView(it->second);
}

const TensorView *Executor::findOutput(std::string_view programName,
                                       const std::string &name) const {
  auto program = programs_.find(programName);
  if (program == programs_.end())
    return nullptr;
  const Program &p = program->second;
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (p.outputs[i] == name)
      return hostView(p.outputIds[i]);
  return nullptr;
}

std::vector<std::string> Executor::getInputNames(std::string_view program) const {
  auto it = programs_.find(program);
  return it == programs_.end() ? std::vector<std::string>() : it->second.inputs;
}

std::vector<std::string> Executor::getOutputNames(std::string_view program) const {
  auto it = programs_.find(program);
  return it == programs_.end() ? std::vector<std::string>() : it->second.outputs;
}

std::vector<std::string>
Executor::getStreamNames(std::string_view program) const {
  auto it = programs_.find(program);
  return it == programs_.end() ? std::vector<std::string>()
                               : it->second.streamNames;
}

bool Executor::hasProgram(std::string_view program) const {
  return programs_.count(program) != 0;
}

std::vector<Executor::StateTensor> Executor::getStates() { return states_; }

Status Executor::readState(const StateTensor &state, void *out) const {
  return loadBytes(*state.view, out, "'" + state.name + "'");
}

Status Executor::writeState(const StateTensor &state, const void *in) {
  return storeBytes(*state.view, in, "'" + state.name + "'");
}

void Executor::zeroGradients() {
  for (StateTensor &state : states_) {
    if (state.kind != plan::GRADIENT)
      continue;
    TensorView &v = *state.view;
    if (v.onHost || device_->isHostAddressable())
      std::memset(v.data, 0, v.bytes());
    else
      (void)device_->zero(v.data, v.bytes()); // fails again at the next run
  }
}

Status Executor::run(std::string_view name, uint64_t seed) {
  auto it = programs_.find(name);
  if (it == programs_.end())
    return Status::error("the artifact has no program '" + std::string(name) +
                         "'");
  uint64_t before = heapAllocations();
  Status status = runProgram(it->second, name, seed);
  lastRunAllocations_ = heapAllocations() - before;
  return status;
}

Status Executor::runProgram(Program &program, std::string_view name,
                            uint64_t seed) {
  Device &d = *device_;
  ++program.runs;
  ++runs_;
  stageSeeds(program, seed);
  // A traced run is enqueued step by step (a replayed graph has no
  // per-instruction timestamps).
  if (program.graph && !tracing_)
    return replayGraph(program, name);
  // The first run is a warm-up (kernels may finish preparing then); the
  // second is captured and replayed.
  bool capture = options_.captureGraphs && d.canCapture() && !tracing_ &&
                 !program.exchanges &&
                 !program.graph && program.runs >= 2;
  if (capture)
    if (Status s = d.beginCapture(0); !s)
      return Status::error(std::string(name) + ": " + s.message());
  // A failure while capturing ends the capture (and drops the graph).
  auto abandon = [&] {
    if (capture) {
      std::shared_ptr<void> dropped;
      (void)d.endCapture(0, dropped);
    }
  };
  auto fail = [&](uint32_t i, const Status &s) {
    abandon();
    return Status::error(std::string(name) + " " +
                         program.steps[i].description + ": " + s.message());
  };
  // A failure the device reports later names its instruction already
  // ("instruction 3, graph.linear (node ...): ...").
  auto failCopy = [&](const Status &s) {
    abandon();
    bool named = s.message().rfind("instruction ", 0) == 0;
    return Status::error(std::string(name) + (named ? " " : ": ") +
                         s.message());
  };
  int64_t traceBase = 0;
  if (tracing_)
    if (Status s = startTrace(program, traceBase); !s)
      return failCopy(s);
  if (Status s = enqueueInputs(program); !s)
    return failCopy(s);
  // Every step on its stream's queue, in program order: each queue gets
  // its steps in order, and a wait follows its event's record (the plan
  // opens the streams after stream 0's input copies and joins them into
  // stream 0 at the end).
  for (uint32_t i = 0; i < program.steps.size(); ++i)
    if (Status s = enqueue(program, i, seed, runs_); !s)
      return fail(i, s);
  if (Status s = enqueueOutputs(program); !s)
    return failCopy(s);
  if (capture) {
    capture = false;
    if (Status s = finishCapture(program); !s)
      return failCopy(s);
  }
  if (Status s = d.synchronize(0); !s)
    return failCopy(s);
  if (tracing_)
    if (Status s = collectTrace(program, traceBase); !s)
      return failCopy(s);
  return Status::ok();
}

void Executor::stageSeeds(Program &program, uint64_t seed) {
  // This run's seeds, staged for the copy that opens the program (a
  // captured graph holds that copy, so a replay reads them too).
  auto *seeds = static_cast<uint64_t *>(seedStaging_);
  if (program.seedSlots)
    for (const Step &step : program.steps)
      if (step.seedSlot >= 0)
        seeds[program.firstSeedSlot + step.seedSlot] =
            fnv1a64(&step.rngStream, sizeof(step.rngStream), seed);
}

Status Executor::replayGraph(Program &program, std::string_view name) {
  Device &d = *device_;
  ++graphReplays_;
  if (Status s = d.launchGraph(0, program.graph.get()); !s)
    return Status::error(std::string(name) + ": " + s.message());
  if (Status s = d.synchronize(0); !s)
    return Status::error(std::string(name) + ": " + s.message());
  return Status::ok();
}

Status Executor::startTrace(const Program &program, int64_t &traceBase) {
  // Marker 0 opens the run on stream 0; step i's kernels lie between
  // markers 1 + 2i and 2 + 2i on its stream.
  Device &d = *device_;
  if (Status s = d.createTimers(uint32_t(1 + 2 * program.steps.size())); !s)
    return s;
  traceBase = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  return d.markTime(0, 0);
}

Status Executor::enqueueInputs(const Program &program) {
  // Seeds and inputs in, on stream 0; the other streams start after them.
  Device &d = *device_;
  if (program.seedSlots) {
    size_t offset = program.firstSeedSlot * sizeof(uint64_t);
    if (Status s = d.copyAsync(
            0, static_cast<unsigned char *>(seedBlock_) + offset,
            static_cast<unsigned char *>(seedStaging_) + offset,
            program.seedSlots * sizeof(uint64_t), CopyKind::HostToDevice);
        !s)
      return s;
  }
  for (uint32_t id : program.stagedInputs)
    if (Status s = d.copyAsync(0, tensors_[id].data, staging_[id].data,
                               tensors_[id].bytes(), CopyKind::HostToDevice);
        !s)
      return s;
  return Status::ok();
}

Status Executor::enqueue(Program &program, uint32_t i, uint64_t seed,
                         uint64_t run) {
  Device &d = *device_;
  Step &step = program.steps[i];
  uint32_t stream = step.stream;
  if (tracing_)
    if (Status s = d.markTime(stream, 1 + 2 * i); !s)
      return s;
  if (step.kind == plan::RECORD || step.kind == plan::WAIT) {
    Status s = step.kind == plan::RECORD ? d.record(stream, step.event)
                                         : d.wait(stream, step.event);
    if (!s)
      return s;
    return tracing_ ? d.markTime(stream, 2 + 2 * i) : Status::ok();
  }
  if (step.kind == plan::SEND || step.kind == plan::RECV) {
    if (Status s = exchange(step, stream); !s)
      return s;
    return tracing_ ? d.markTime(stream, 2 + 2 * i) : Status::ok();
  }
  if (options_.injectDelayMicros && step.delayable) {
    uint64_t key[2] = {run, i};
    uint64_t r = fnv1a64(key, sizeof(key));
    if (Status s = d.injectDelay(stream, r % (options_.injectDelayMicros + 1));
        !s)
      return s;
  }
  KernelContext ctx{
      step.inputs, step.outputs,
      step.attrs,  fnv1a64(&step.rngStream, sizeof(step.rngStream), seed),
      comm_,       ssdFile_};
  ctx.group = step.group;
  ctx.channel = step.channel;
  ctx.prepared = step.prepared.get();
  ctx.description = &step.description;
  if (step.seedSlot >= 0)
    ctx.seedSlot = static_cast<const uint64_t *>(seedBlock_) +
                   program.firstSeedSlot + step.seedSlot;
  if (Status s = d.launch(stream, *step.kernel, ctx); !s)
    return s;
  // NCCL counts nothing: count its traffic as the MPI path does.
  if (step.collective >= 0 && comm_ && d.collectives())
    for (size_t b = 0; b < step.inputs.size(); ++b) {
      auto kind = CollectiveKind(step.collective);
      const TensorView &shard = kind == CollectiveKind::ReduceScatter
                                    ? step.outputs[b]
                                    : step.inputs[b];
      comm_->countDeviceCollective(step.group, kind, shard.dtype,
                                   size_t(shard.numel()));
    }
  if (tracing_) {
    trace_[i].stream = stream;
    return d.markTime(stream, 2 + 2 * i);
  }
  return Status::ok();
}

Status Executor::exchange(Step &step, uint32_t stream) {
  if (!comm_)
    return Status::error(step.description + ": the artifact has pipeline "
                         "stages but this run has no communicator (launch "
                         "it with mpirun)");
  Device &d = *device_;
  bool send = step.kind == plan::SEND;
  TensorView &t = send ? step.inputs[0] : step.outputs[0];
  size_t bytes = t.bytes();
  // A device with its own collectives (NCCL) moves the tensor itself, in
  // stream order: a send from a copy on a stream of its own per peer, a
  // receive on the instruction's stream.
  if (DeviceCollectives *c = d.collectives(); c && !t.onHost) {
    const TopologyInfo &topology = comm_->topology();
    int peer = rankOnStage(topology, comm_->rank(), step.peerStage);
    std::string what = step.description + (send ? " to" : " from") +
                       " stage " + std::to_string(step.peerStage) + " (rank " +
                       std::to_string(peer) + ")";
    if (!send)
      return c->recvFromRank(stream, t.data, bytes, peer, what);
    comm_->countDeviceSend(bytes);
    return c->sendToRank(stream, t.data, bytes, peer, what);
  }
  // Otherwise everything before it on its stream has run, and the message
  // moves through host memory.
  if (Status s = d.synchronize(stream); !s)
    return s;
  bool host = d.isHostAddressable() || t.onHost;
  std::string staging;
  void *data = t.data;
  if (!host) {
    staging.resize(bytes);
    data = staging.data();
    if (send)
      if (Status s = d.copyToHost(data, t.data, bytes); !s)
        return s;
  }
  if (send)
    return comm_->sendToStage(step.peerStage, data, bytes, step.description);
  if (Status s = comm_->recvFromStage(step.peerStage, data, bytes,
                                      step.description);
      !s)
    return s;
  return host ? Status::ok() : d.copyToDevice(t.data, data, bytes);
}

Status Executor::enqueueOutputs(const Program &program) {
  Device &d = *device_;
  for (uint32_t id : program.stagedOutputs)
    if (Status s = d.copyAsync(0, staging_[id].data, tensors_[id].data,
                               tensors_[id].bytes(), CopyKind::DeviceToHost);
        !s)
      return s;
  return Status::ok();
}

Status Executor::finishCapture(Program &program) {
  Device &d = *device_;
  if (Status s = d.endCapture(0, program.graph); !s)
    return s;
  ++graphReplays_;
  return d.launchGraph(0, program.graph.get());
}

Status Executor::collectTrace(const Program &program, int64_t traceBase) {
  std::vector<int64_t> ns;
  if (Status s = device_->readTimes(uint32_t(1 + 2 * program.steps.size()), ns);
      !s)
    return s;
  for (size_t i = 0; i < program.steps.size(); ++i)
    trace_[i] = {traceBase + ns[1 + 2 * i], traceBase + ns[2 + 2 * i],
                 trace_[i].stream};
  return Status::ok();
}

} // namespace strata::runtime
