//===- Footprint.cpp - What one rank of a plan allocates ------------------===//

#include "strata/Runtime/Footprint.h"

#include "strata/Runtime/Artifact.h"

#include "plan.pb.h"

#include <algorithm>

namespace strata::runtime {

int pipelineStages(const plan::Plan &p) {
  return p.has_topology() ? int(std::max(1u, p.topology().pipeline_stages()))
                          : 1;
}

std::vector<const plan::Program *> programsOfStage(const plan::Plan &p,
                                                   int stage) {
  std::vector<const plan::Program *> out;
  bool all = stage < 0 || pipelineStages(p) <= 1;
  std::string step = "pipeline_step_" + std::to_string(stage);
  std::string update = "optimizer_step_" + std::to_string(stage);
  for (const plan::Program &prog : p.programs())
    if (all || prog.name() == step || prog.name() == update)
      out.push_back(&prog);
  return out;
}

std::vector<bool> tensorsUsedBy(const plan::Plan &p,
                                const std::vector<const plan::Program *> &programs) {
  std::vector<bool> used(size_t(p.tensors_size()), false);
  auto mark = [&](uint32_t id) {
    if (id < used.size())
      used[id] = true;
  };
  for (const plan::Program *prog : programs) {
    for (const plan::Binding &b : prog->inputs())
      mark(b.tensor());
    for (const plan::Binding &b : prog->outputs())
      mark(b.tensor());
    for (const plan::Instruction &inst : prog->instructions()) {
      for (uint32_t id : inst.inputs())
        mark(id);
      for (uint32_t id : inst.outputs())
        mark(id);
    }
  }
  return used;
}

std::vector<std::vector<bool>> tensorsOfEveryStage(const plan::Plan &p) {
  int stages = pipelineStages(p);
  if (stages <= 1)
    return {std::vector<bool>(size_t(p.tensors_size()), true)};
  std::vector<std::vector<bool>> held(static_cast<size_t>(stages));
  std::vector<bool> any(size_t(p.tensors_size()), false);
  for (int s = 0; s < stages; ++s) {
    held[size_t(s)] = tensorsUsedBy(p, programsOfStage(p, s));
    for (size_t id = 0; id < any.size(); ++id)
      any[id] = any[id] || held[size_t(s)][id];
  }
  // Persistent state no stage's program names; an unused input or
  // constant is the forward program's, which no stage's rank runs.
  for (const plan::Tensor &t : p.tensors())
    if (!any[t.id()] &&
        (t.kind() == plan::PARAMETER || t.kind() == plan::BUFFER ||
         t.kind() == plan::GRADIENT || t.kind() == plan::OPTIMIZER_STATE))
      for (std::vector<bool> &mine : held)
        mine[t.id()] = true;
  return held;
}

std::vector<bool> tensorsOfStage(const plan::Plan &p, int stage) {
  if (stage < 0 || pipelineStages(p) <= 1)
    return std::vector<bool>(size_t(p.tensors_size()), true);
  return std::move(tensorsOfEveryStage(p)[size_t(stage)]);
}

Footprint footprintOf(const plan::Plan &p, int stage,
                      const std::vector<bool> &used) {
  std::vector<const plan::Program *> programs = programsOfStage(p, stage);
  Footprint f;
  auto aligned = [](uint64_t bytes) {
    return (std::max<uint64_t>(bytes, 1) + 63) / 64 * 64;
  };
  for (const plan::Tensor &t : p.tensors()) {
    if (!used[t.id()] || t.kind() == plan::ACTIVATION)
      continue;
    uint64_t bytes = tensorBytes(t);
    if (t.kind() == plan::CONSTANT)
      f.constants += aligned(bytes);
    else if (t.tier() == plan::HOST)
      f.host += aligned(bytes);
    else if (t.tier() == plan::SSD)
      f.ssd += (bytes + 4095) / 4096 * 4096;
    else
      f.state += aligned(bytes);
  }
  for (const plan::Parameter &param : p.parameters()) {
    if (param.tensor() >= used.size() || !used[param.tensor()])
      continue;
    uint64_t elements = 1;
    for (int64_t d : p.tensors(int(param.tensor())).shape())
      elements *= uint64_t(d);
    f.parameters += elements;
    f.parameterBytes += param.size_bytes();
  }
  // The arena: the largest of the programs' (a plan written before the
  // programs recorded theirs has only the plan's).
  for (const plan::Program *prog : programs) {
    f.activations = std::max(f.activations, prog->activation_bytes());
    f.activationLowerBound =
        std::max(f.activationLowerBound, prog->activation_lower_bound());
    f.hostActivations =
        std::max(f.hostActivations, prog->host_activation_bytes());
  }
  if (p.has_memory() && f.activations == 0) {
    f.activations = p.memory().activation_bytes();
    f.activationLowerBound = p.memory().activation_lower_bound();
    f.hostActivations = p.memory().host_activation_bytes();
  }
  return f;
}

} // namespace strata::runtime
