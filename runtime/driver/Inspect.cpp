//===- Inspect.cpp - strata-inspect ---------------------------------------===//
//
// strata-inspect ARTIFACT [--json] [--trace OUT.json] [--memory-plot OUT.svg]
// strata-inspect --log RUN.jsonl [--log ...] --plot OUT.svg (LogPlot.cpp)
// What an artifact holds, read from its plan alone: programs, parameters and
// shards, the topology and its groups, the memory plan (planned peak against
// the lower bound, pages), the bytes a training step moves per collective
// and link class (predicted on the ring model the runtime counts with, so a
// run's step log can be checked against it), offloaded and recomputed
// tensors; the planned schedule as Chrome-trace JSON (Perfetto) and the
// bytes live over one step as an SVG, stacked by kind.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Inspect.h"

#include "strata/Runtime/Artifact.h"
#include "strata/Runtime/Footprint.h"
#include "strata/Runtime/Topology.h"

#include "JsonText.h"

#include "plan.pb.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace strata::runtime {
namespace {

const char *kUsage =
    "USAGE: strata-inspect ARTIFACT.strata [options]\n"
    "       strata-inspect --log RUN.jsonl [--log RUN2.jsonl ...] --plot OUT.svg\n"
    "\n"
    "Prints what a Strata artifact holds: programs, parameters, topology and\n"
    "groups, the memory plan, the bytes a step moves per link class.\n"
    "\n"
    "  --json                  the summary as one JSON object\n"
    "  --trace OUT.json        the planned schedule, Chrome-trace JSON\n"
    "                          (open in https://ui.perfetto.dev)\n"
    "  --memory-plot OUT.svg   bytes live over one training step, by kind\n"
    "  --log RUN.jsonl         a strata-run --log file (repeat to overlay)\n"
    "  --plot OUT.svg          loss, learning rate, gradient norm and\n"
    "                          throughput over the steps of the --log files\n"
    "  --help                  this text\n";

int error(const std::string &message) {
  std::cerr << "strata-inspect: error: " << message << "\n";
  return 1;
}

std::string human(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), u ? "%.2f %s" : "%.0f %s", bytes,
                units[u]);
  return buffer;
}

/// What the plot and the summary call a tensor.
enum class Category {
  Parameters,
  Gradients,
  OptimizerStates,
  Inputs,
  GatheredParameters,
  Activations,
  Count
};
const char *categoryName(Category c) {
  switch (c) {
  case Category::Parameters: return "parameters";
  case Category::Gradients: return "gradients";
  case Category::OptimizerStates: return "optimizer states";
  case Category::Inputs: return "inputs and buffers";
  case Category::GatheredParameters: return "gathered parameters";
  case Category::Activations: return "activations";
  case Category::Count: break;
  }
  return "?";
}
const char *categoryColor(Category c) {
  switch (c) {
  case Category::Parameters: return "#4e79a7";
  case Category::Gradients: return "#f28e2b";
  case Category::OptimizerStates: return "#e15759";
  case Category::Inputs: return "#76b7b2";
  case Category::GatheredParameters: return "#59a14f";
  case Category::Activations: return "#edc948";
  case Category::Count: break;
  }
  return "#999999";
}

/// One program run of the training step, in order.
struct Phase {
  const plan::Program *program;
  std::string label; // "micro_step 1/4"
};

/// An activation's lifetime within its program (instruction positions).
struct Lifetime {
  uint32_t tensor;
  size_t first, last;
  Category category;
};

struct Inspection {
  const plan::Plan *plan = nullptr;
  std::vector<Phase> phases;
  std::map<std::string, std::vector<Lifetime>> lifetimes; // per program
  uint64_t persistent[int(Category::Count)] = {};
  uint64_t constants = 0;
  /// Persistent state moved off the device: bytes per tier, and each
  /// tensor's name and tier.
  uint64_t hostBytes = 0, ssdBytes = 0;
  std::vector<std::pair<std::string, plan::Tier>> offloaded;
  /// Predicted bytes of one step, summed over the ranks.
  double traffic[kCollectiveKinds][2] = {};
  size_t collectives = 0;
  /// Pipeline stages: what each stage's programs hold, compute and move.
  struct Stage {
    std::vector<const plan::Program *> programs; // pipeline_step_s, optimizer_step_s
    uint64_t parameters = 0, parameterElements = 0, parameterBytes = 0;
    uint64_t shardBytes = 0;                  // the parameters a rank holds
    /// What each of its ranks allocates (Footprint.h): state, constants,
    /// the largest of its programs' arenas, and that arena's lower bound.
    uint64_t stateBytes = 0, constantBytes = 0, arenaBytes = 0;
    uint64_t arenaLowerBound = 0;
    uint64_t hostArenaBytes = 0; // offloaded activations' host copies
    uint64_t sends = 0, receives = 0, sentBytes = 0, receivedBytes = 0;
    double traffic[kCollectiveKinds][2] = {}; // over the stage's ranks
    const plan::PipelineStage *costs = nullptr;
    /// The schedule's actions in the order the step program runs them
    /// ("F0", "B0", "W0"; empty in artifacts without instruction phases).
    std::vector<std::string> order;
  };
  std::vector<Stage> stages;
};

const plan::Program *findProgram(const plan::Plan &p, const std::string &n) {
  for (const auto &program : p.programs())
    if (program.name() == n)
      return &program;
  return nullptr;
}

bool isGatherChain(const std::string &op) {
  return op == "graph.reshape" || op == "graph.slice" ||
         op == "graph.split" || op == "graph.concat";
}

/// The program's kernels (its instructions but the events' records and
/// waits), in order: the logical time of a step.
std::vector<const plan::Instruction *> kernelsOf(const plan::Program &program) {
  std::vector<const plan::Instruction *> kernels;
  for (const plan::Instruction &inst : program.instructions())
    if (inst.kind() == plan::KERNEL)
      kernels.push_back(&inst);
  return kernels;
}

/// Pipeline stages: each stage's programs, the parameters and state they
/// reference, their arenas and their messages.
void analyzeStages(const plan::Plan &p, Inspection &in) {
  int stages = p.has_topology() ? int(p.topology().pipeline_stages()) : 0;
  if (stages <= 1)
    return;
  std::map<uint32_t, const plan::Parameter *> parameterOf;
  for (const auto &param : p.parameters())
    parameterOf[param.tensor()] = &param;
  in.stages.resize(size_t(stages));
  std::vector<std::vector<bool>> held = tensorsOfEveryStage(p);
  for (int s = 0; s < stages; ++s) {
    Inspection::Stage &stage = in.stages[size_t(s)];
    for (const char *prefix : {"pipeline_step_", "optimizer_step_"})
      if (const plan::Program *program = findProgram(p, prefix + std::to_string(s)))
        stage.programs.push_back(program);
    if (p.has_pipeline() && s < p.pipeline().stages_size())
      stage.costs = &p.pipeline().stages(s);
    Footprint f = footprintOf(p, s, held[size_t(s)]);
    stage.stateBytes = f.state;
    stage.constantBytes = f.constants;
    stage.arenaBytes = f.activations;
    stage.arenaLowerBound = f.activationLowerBound;
    stage.hostArenaBytes = f.hostActivations;
    std::vector<bool> seen(size_t(p.tensors_size()), false);
    for (const plan::Program *program : stage.programs) {
      auto reference = [&](uint32_t id) {
        const plan::Tensor &t = p.tensors(int(id));
        if (t.kind() == plan::ACTIVATION || seen[id])
          return;
        seen[id] = true;
        if (t.kind() != plan::PARAMETER)
          return;
        ++stage.parameters;
        stage.shardBytes += tensorBytes(t);
        uint64_t n = 1;
        auto it = parameterOf.find(id);
        if (it != parameterOf.end() && it->second->full_shape_size())
          for (int64_t d : it->second->full_shape())
            n *= uint64_t(d);
        else
          for (int64_t d : t.shape())
            n *= uint64_t(d);
        stage.parameterElements += n;
        stage.parameterBytes += n * byteWidth(fromPlanDType(t.dtype()));
      };
      for (const auto &b : program->inputs())
        reference(b.tensor());
      for (const auto &inst : program->instructions()) {
        for (uint32_t id : inst.inputs())
          reference(id);
        for (uint32_t id : inst.outputs())
          reference(id);
        if (inst.kind() == plan::SEND) {
          ++stage.sends;
          for (uint32_t id : inst.inputs())
            stage.sentBytes += tensorBytes(p.tensors(int(id)));
        } else if (inst.kind() == plan::RECV) {
          ++stage.receives;
          for (uint32_t id : inst.outputs())
            stage.receivedBytes += tensorBytes(p.tensors(int(id)));
        }
      }
      for (const auto &b : program->outputs())
        reference(b.tensor());
      // The actions: the compute stream's runs of one phase and micro-batch.
      std::string last;
      for (const auto &inst : program->instructions()) {
        if (inst.phase() == plan::NO_PHASE || inst.stream() != 0 ||
            inst.kind() == plan::RECORD || inst.kind() == plan::WAIT)
          continue;
        std::string action = (inst.phase() == plan::FORWARD    ? "F"
                              : inst.phase() == plan::BACKWARD ? "B"
                                                               : "W") +
                             std::to_string(inst.micro_batch());
        if (action != last)
          stage.order.push_back(action);
        last = action;
      }
    }
  }
}

void analyze(const plan::Plan &p, Inspection &in) {
  in.plan = &p;
  // The step: accum micro-steps, then the optimizer step (a forward-only
  // artifact: its forward program).
  if (const plan::Program *step = findProgram(p, "micro_step")) {
    uint32_t accum = std::max<uint32_t>(p.training().accum(), 1);
    for (uint32_t a = 0; a < accum; ++a)
      in.phases.push_back({step, "micro_step " + std::to_string(a + 1) + "/" +
                                     std::to_string(accum)});
    if (const plan::Program *update = findProgram(p, "optimizer_step"))
      in.phases.push_back({update, "optimizer_step"});
  } else if (const plan::Program *stage = findProgram(p, "pipeline_step_0")) {
    // Pipeline stages: rank 0's programs (stage 0's).
    in.phases.push_back({stage, "pipeline_step_0"});
    if (const plan::Program *update = findProgram(p, "optimizer_step_0"))
      in.phases.push_back({update, "optimizer_step_0"});
  } else if (const plan::Program *forward = findProgram(p, "forward")) {
    in.phases.push_back({forward, "forward"});
  }
  analyzeStages(p, in);
  for (const auto &t : p.tensors()) {
    uint64_t bytes = tensorBytes(t);
    if (t.kind() != plan::ACTIVATION && t.kind() != plan::CONSTANT &&
        t.tier() != plan::DEVICE) {
      (t.tier() == plan::HOST ? in.hostBytes : in.ssdBytes) += bytes;
      in.offloaded.push_back({t.name(), t.tier()});
      continue;
    }
    switch (t.kind()) {
    case plan::PARAMETER: in.persistent[int(Category::Parameters)] += bytes; break;
    case plan::GRADIENT: in.persistent[int(Category::Gradients)] += bytes; break;
    case plan::OPTIMIZER_STATE:
      in.persistent[int(Category::OptimizerStates)] += bytes;
      break;
    case plan::INPUT:
    case plan::BUFFER: in.persistent[int(Category::Inputs)] += bytes; break;
    case plan::CONSTANT: in.constants += bytes; break;
    default: break;
    }
  }
  // Lifetimes of each program's activations; a gathered parameter is an
  // all-gather's result, or a reshape/slice/split/concat of one.
  for (const auto &program : p.programs()) {
    std::map<uint32_t, Lifetime> live;
    std::vector<bool> gathered(p.tensors_size(), false);
    std::vector<const plan::Instruction *> kernels = kernelsOf(program);
    size_t n = kernels.size();
    for (size_t i = 0; i < n; ++i) {
      const plan::Instruction &inst = *kernels[i];
      bool fromGather = inst.collective() == plan::ALL_GATHER;
      if (isGatherChain(inst.op()))
        fromGather = std::all_of(inst.inputs().begin(), inst.inputs().end(),
                                 [&](uint32_t id) { return gathered[id]; });
      for (uint32_t id : inst.inputs()) {
        auto it = live.find(id);
        if (it != live.end())
          it->second.last = i;
      }
      for (uint32_t id : inst.outputs()) {
        // Device activations only: an offloaded one's host copy is not.
        if (p.tensors(int(id)).kind() != plan::ACTIVATION ||
            p.tensors(int(id)).tier() == plan::HOST)
          continue;
        gathered[id] = fromGather;
        live[id] = {id, i, i,
                    fromGather ? Category::GatheredParameters
                               : Category::Activations};
      }
    }
    for (const auto &b : program.outputs())
      if (auto it = live.find(b.tensor()); it != live.end())
        it->second.last = n ? n - 1 : 0;
    std::vector<Lifetime> &out = in.lifetimes[program.name()];
    for (auto &[id, l] : live)
      out.push_back(l);
  }
  // Predicted traffic: every collective of the step, every rank, the ring.
  if (p.has_topology() && p.topology().world() > 1) {
    TopologyInfo t{int(p.topology().world()), int(p.topology().ranks_per_node()),
                   int(p.topology().partition()),
                   int(std::max(1u, p.topology().pipeline_stages()))};
    // Each rank runs the step's programs (with stages: its stage's).
    auto count = [&](const plan::Program &program, int r, double scale,
                     Inspection::Stage *stage) {
      for (const auto &inst : program.instructions()) {
        if (inst.collective() == plan::NO_COLLECTIVE)
          continue;
        CollectiveKind kind = fromPlanCollective(inst.collective());
        if (r == 0)
          ++in.collectives;
        Group group = fromPlanGroup(inst.group());
        // The shard (all-gather operand, reduce-scatter result) or buffer.
        double bytes = 0;
        const auto &ids = kind == CollectiveKind::ReduceScatter
                              ? inst.outputs()
                              : inst.inputs();
        for (uint32_t id : ids)
          bytes += double(tensorBytes(p.tensors(int(id))));
        Link link;
        if (!ringLink(t, group, r, link))
          continue;
        int members = int(groupMembers(t, group, r).size());
        double moved = scale * ringBytes(kind, members, bytes);
        in.traffic[int(kind)][link] += moved;
        if (stage)
          stage->traffic[int(kind)][link] += moved;
      }
    };
    for (int r = 0; r < t.world; ++r) {
      if (!in.stages.empty()) {
        Inspection::Stage &stage = in.stages[size_t(stageOf(t, r))];
        for (const plan::Program *program : stage.programs)
          count(*program, r, 1.0, &stage);
        continue;
      }
      for (const Phase &phase : in.phases)
        count(*phase.program, r, 1.0, nullptr);
    }
  }
}

uint64_t persistentTotal(const Inspection &in) {
  uint64_t total = 0;
  for (uint64_t b : in.persistent)
    total += b;
  return total;
}

/// The attentions of the training step (not of the `forward` program,
/// which has no backward) and how many keep their probabilities for the
/// backward (--keep-attention-probabilities).
std::pair<int, int> keptAttentions(const plan::Plan &p) {
  int attentions = 0, kept = 0;
  for (const auto &program : p.programs()) {
    if (program.name() == "forward")
      continue;
    for (const plan::Instruction *inst : kernelsOf(program)) {
      if (inst->op() != "graph.attention")
        continue;
      ++attentions;
      for (const plan::Attribute &a : inst->attributes())
        if (a.name() == "keep_probabilities" && a.int_value())
          ++kept;
    }
  }
  return {attentions, kept};
}

/// The artifact, its programs and its training step.
void printPrograms(const std::string &dir, const plan::Plan &p,
                   std::ostream &os) {
  os << "artifact     " << dir << " (model " << p.model_name() << ", format "
     << p.format_version() << ", fingerprint " << p.fingerprint()
     << (p.weightless() ? ", plan-only: compiled with --no-weights" : "")
     << ")\n";
  os << "programs    ";
  for (const auto &program : p.programs()) {
    os << " " << program.name() << " (" << kernelsOf(program).size()
       << " instructions";
    if (program.events())
      os << ", " << program.events() << " events";
    os << ")";
  }
  os << "\n";
  if (p.has_training()) {
    const plan::Training &t = p.training();
    os << "training     " << t.optimizer() << ", lr " << t.lr()
       << ", accumulation " << std::max<uint32_t>(t.accum(), 1)
       << ", micro-batch " << t.batch() << ", " << t.dtype();
    if (auto [attentions, kept] = keptAttentions(p); kept)
      os << ", attention probabilities kept (" << kept << " of "
         << attentions << " attentions)";
    os << "\n";
  }
}

/// The parameters, whole, and what a rank holds of them.
void printParameters(const Inspection &in, std::ostream &os) {
  const plan::Plan &p = *in.plan;
  uint64_t elements = 0, bytes = 0;
  uint32_t shards = 1;
  for (const auto &param : p.parameters()) {
    const plan::Tensor &t = p.tensors(int(param.tensor()));
    if (t.kind() != plan::PARAMETER)
      continue;
    uint64_t n = 1;
    if (param.full_shape_size())
      for (int64_t d : param.full_shape())
        n *= uint64_t(d);
    else
      for (int64_t d : t.shape())
        n *= uint64_t(d);
    elements += n;
    bytes += n * byteWidth(fromPlanDType(t.dtype()));
    shards = std::max(shards, param.shards());
  }
  os << "parameters   " << p.parameters_size() << " tensors, " << elements
     << " elements, " << bytes << " bytes";
  if (shards > 1)
    os << "; sharded over " << shards << " ranks: "
       << in.persistent[int(Category::Parameters)] << " bytes a rank";
  os << "\n";
}

/// A distributed artifact's topology and rank 0's groups.
void printStages(const Inspection &in, const TopologyInfo &info,
                 std::ostream &os);

void printTopology(const Inspection &in, std::ostream &os) {
  const plan::Plan &p = *in.plan;
  if (!p.has_topology() || p.topology().world() <= 1)
    return;
  const plan::Topology &t = p.topology();
  os << "topology     N = " << t.world() << " ranks, K = " << t.ranks_per_node()
     << " a node, partition group P = " << t.partition()
     << (t.hierarchical() ? ", hierarchical all-gather" : "")
     << ", gradient sync " << t.grad_sync() << ", buckets up to "
     << human(double(t.bucket_bytes())) << "\n";
  TopologyInfo info{int(t.world()), int(t.ranks_per_node()),
                    int(t.partition()),
                    int(std::max(1u, t.pipeline_stages()))};
  os << "groups       of rank 0:";
  for (int g = 0; g < kGroups; ++g) {
    std::vector<int> m = groupMembers(info, Group(g), 0);
    os << " " << groupName(Group(g)) << " {";
    for (size_t i = 0; i < m.size(); ++i)
      os << (i ? "," : "") << m[i];
    os << "}";
  }
  os << "\n";
  printStages(in, info, os);
}

/// Pipeline stages: which ranks run each stage; per stage its parameters,
/// forward FLOPs, planned peak, messages, collectives and predicted bubble.
void printStages(const Inspection &in, const TopologyInfo &info,
                 std::ostream &os) {
  if (info.stages <= 1 || in.stages.empty())
    return;
  const plan::Plan &p = *in.plan;
  os << "stages       " << info.stages << ", rank r runs stage (r / "
     << info.partition << ") mod " << info.stages;
  if (p.has_pipeline())
    os << "; schedule " << p.pipeline().schedule() << ", "
       << p.pipeline().micro_batches() << " micro-batches a step";
  os << "\n";
  for (int s = 0; s < info.stages; ++s) {
    const Inspection::Stage &st = in.stages[size_t(s)];
    size_t instructions = 0;
    for (const plan::Program *program : st.programs)
      instructions += kernelsOf(*program).size();
    uint64_t peak = st.stateBytes + st.constantBytes + st.arenaBytes;
    char line[512];
    os << "  stage " << s << "    " << instructions << " instructions; per step "
       << st.sends << " sends (" << human(double(st.sentBytes)) << "), "
       << st.receives << " receives (" << human(double(st.receivedBytes))
       << ")\n";
    std::snprintf(line, sizeof(line),
                  "             parameters %llu tensors, %llu elements, %llu "
                  "bytes (%llu bytes a rank)\n",
                  (unsigned long long)st.parameters,
                  (unsigned long long)st.parameterElements,
                  (unsigned long long)st.parameterBytes,
                  (unsigned long long)st.shardBytes);
    os << line;
    if (st.costs) {
      std::snprintf(line, sizeof(line),
                    "             MFLOP a micro-batch (forward FLOPs of its "
                    "ops): F %.3f, B %.3f, W %.3f\n",
                    st.costs->forward_flops() / 1e6,
                    st.costs->backward_flops() / 1e6,
                    st.costs->weight_flops() / 1e6);
      os << line;
    }
    if (p.has_memory()) {
      // What each of the stage's ranks allocates: its own stage's tensors.
      uint64_t bound = st.stateBytes + st.constantBytes + st.arenaLowerBound;
      std::snprintf(line, sizeof(line),
                    "             planned device peak %llu bytes (%s) = state "
                    "%llu + constants %llu + activation arena %llu = %.4f x "
                    "the lower bound %llu (activations at once %llu)\n",
                    (unsigned long long)peak, human(double(peak)).c_str(),
                    (unsigned long long)st.stateBytes,
                    (unsigned long long)st.constantBytes,
                    (unsigned long long)st.arenaBytes,
                    bound ? double(peak) / double(bound) : 0.0,
                    (unsigned long long)bound,
                    (unsigned long long)st.arenaLowerBound);
      os << line;
      if (st.hostArenaBytes)
        os << "             host activation arena " << st.hostArenaBytes
           << " bytes (offloaded activations)\n";
    }
    bool any = false;
    for (int k = 0; k < kCollectiveKinds; ++k)
      any |= st.traffic[k][0] + st.traffic[k][1] > 0;
    if (any) {
      os << "             collectives per step (its ranks), intra / inter:";
      for (int k = 0; k < kCollectiveKinds; ++k) {
        std::snprintf(line, sizeof(line), " %s %.0f / %.0f",
                      collectiveName(CollectiveKind(k)), st.traffic[k][0],
                      st.traffic[k][1]);
        os << (k ? "," : "") << line;
      }
      os << "\n";
    }
    if (st.costs) {
      std::snprintf(line, sizeof(line),
                    "             predicted bubble 1f1b %.3f, zb %.3f\n",
                    st.costs->bubble_1f1b(), st.costs->bubble_zb());
      os << line;
    }
    if (!st.order.empty()) {
      os << "             order";
      for (const std::string &action : st.order)
        os << " " << action;
      os << "\n";
    }
  }
  if (p.has_pipeline() && p.pipeline().stages_size()) {
    double one = 0, zb = 0;
    for (const auto &st : p.pipeline().stages()) {
      one += st.bubble_1f1b();
      zb += st.bubble_zb();
    }
    double n = double(p.pipeline().stages_size());
    double m = double(p.pipeline().micro_batches());
    char line[256];
    std::snprintf(line, sizeof(line),
                  "  predicted bubble (idle over the step, mean of the stages; "
                  "phases cost their FLOPs, messages free): 1f1b %.3f, zb "
                  "%.3f; 1F1B on equal stages (p-1)/(m+p-1) = %.3f\n",
                  one / n, zb / n, (n - 1) / (m + n - 1));
    os << line;
  } else {
    os << "  no schedule costs in this artifact (written before they were "
          "recorded): predicted bubble not shown\n";
  }
}

/// Each tier: the device tier by kind, the planned peak against the lower
/// bound, the host and SSD tiers.
void printMemory(const Inspection &in, std::ostream &os) {
  const plan::Plan &p = *in.plan;
  uint64_t state = persistentTotal(in);
  if (pipelineStages(p) > 1)
    os << "memory       device tier (every stage's tensors; a rank holds "
          "its stage's, above):\n";
  else
    os << "memory       device tier (this rank):\n";
  for (int c = 0; c < int(Category::GatheredParameters); ++c)
    os << "               " << categoryName(Category(c)) << ": "
       << in.persistent[c] << " bytes\n";
  os << "               constants: " << in.constants << " bytes\n";
  if (p.has_memory()) {
    const plan::MemoryPlan &m = p.memory();
    uint64_t fixed = m.state_bytes() + m.constant_bytes();
    uint64_t peak = fixed + m.activation_bytes();
    uint64_t bound = state + in.constants + m.activation_lower_bound();
    uint64_t pages = m.page_size()
                         ? (peak + m.page_size() - 1) / m.page_size()
                         : 0;
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.3f",
                  bound ? double(peak) / double(bound) : 0.0);
    os << "               activations: arena " << m.activation_bytes()
       << " bytes, lower bound " << m.activation_lower_bound()
       << " bytes\n";
    os << "             planned peak " << peak << " bytes (" << human(double(peak))
       << ") = " << ratio << " x the lower bound " << bound << " bytes; "
       << pages << (pages == 1 ? " page of " : " pages of ")
       << human(double(m.page_size())) << "\n";
  } else {
    os << "             no memory plan (every tensor its own slot)\n";
  }
  if (p.has_memory() && p.memory().gpu_budget())
    os << "             device budget (--gpu-memory) " << p.memory().gpu_budget()
       << " bytes\n";
  os << "             host tier: " << in.hostBytes << " bytes";
  if (uint64_t arena = p.memory().host_activation_bytes())
    os << " of state, activation arena " << arena << " bytes (offloaded "
       << "activations)";
  os << "; SSD tier: " << in.ssdBytes << " bytes\n";
}

/// The predicted bytes a step moves, per collective and link class.
void printTraffic(const Inspection &in, std::ostream &os) {
  if (!in.collectives)
    return;
  os << "traffic      per step, predicted (ring model, summed over the "
        "ranks), bytes intra-node / inter-node:\n";
  for (int k = 0; k < kCollectiveKinds; ++k) {
    char line[160];
    std::snprintf(line, sizeof(line), "               %-15s %14.0f %14.0f\n",
                  collectiveName(CollectiveKind(k)), in.traffic[k][0],
                  in.traffic[k][1]);
    os << line;
  }
}

/// An offloaded tensor's tier as the user reads it.
const char *tierName(plan::Tier tier) {
  return tier == plan::HOST ? "host" : "ssd";
}

/// The forward FLOPs recomputation makes again a step: micro_step's, as
/// many times as it runs.
double recomputedFlopsPerStep(const plan::Plan &p) {
  return p.has_memory() ? p.memory().recomputed_flops() *
                              double(std::max<uint64_t>(p.training().accum(), 1))
                        : 0;
}

/// What is offloaded (the first six) and recomputed (the first four).
void printOffloadedAndRecomputed(const Inspection &in, std::ostream &os) {
  const plan::Plan &p = *in.plan;
  if (in.offloaded.empty()) {
    os << "offloaded    none\n";
  } else {
    size_t host = 0;
    for (const auto &[name, tier] : in.offloaded)
      host += tier == plan::HOST;
    os << "offloaded    " << in.offloaded.size() << " tensors (" << host
       << " to the host, " << in.offloaded.size() - host << " to SSD):";
    for (size_t i = 0; i < in.offloaded.size() && i < 6; ++i)
      os << (i ? ", " : " ") << in.offloaded[i].first << " ("
         << tierName(in.offloaded[i].second) << ")";
    if (in.offloaded.size() > 6)
      os << ", ...";
    os << "\n";
  }
  // What the tiers cost a step: the bytes sched.reload and sched.offload
  // move (a micro-step's accumulation times, a pipeline stage's program
  // once: it runs every micro-batch).
  uint64_t stateIn = 0, stateOut = 0, actOut = 0, actIn = 0;
  for (const plan::Program &program : p.programs()) {
    if (program.name() == "forward")
      continue;
    uint64_t times = program.name() == "micro_step"
                         ? std::max<uint64_t>(p.training().accum(), 1)
                         : 1;
    for (const plan::Instruction &inst : program.instructions()) {
      bool reload = inst.op() == "sched.reload";
      if ((!reload && inst.op() != "sched.offload") || inst.outputs_size() < 1 ||
          inst.outputs(0) >= uint32_t(p.tensors_size()))
        continue;
      const plan::Tensor &t = p.tensors(int(inst.outputs(0)));
      const plan::Tensor &from =
          inst.inputs_size() && inst.inputs(0) < uint32_t(p.tensors_size())
              ? p.tensors(int(inst.inputs(0)))
              : t;
      bool activation =
          t.kind() == plan::ACTIVATION && from.kind() == plan::ACTIVATION;
      uint64_t bytes = tensorBytes(t) * times;
      (activation ? (reload ? actIn : actOut) : (reload ? stateIn : stateOut)) +=
          bytes;
    }
  }
  if (stateIn + stateOut + actOut + actIn)
    os << "moves        per step: state " << stateIn << " bytes to the device, "
       << stateOut << " back; activations " << actOut << " bytes to the host, "
       << actIn << " back\n";
  if (!p.has_memory() || p.memory().recomputed_size() == 0) {
    os << "recomputed   none\n";
  } else {
    const auto &r = p.memory().recomputed();
    os << "recomputed   " << r.size() << " ops in backward:";
    for (int i = 0; i < r.size() && i < 4; ++i)
      os << (i ? ", " : " ") << r[i];
    if (r.size() > 4)
      os << ", ...";
    double flops = recomputedFlopsPerStep(p);
    char text[64];
    bool tera = flops >= 1e12;
    std::snprintf(text, sizeof(text), "%.4g %s", flops / (tera ? 1e12 : 1e9),
                  tera ? "TFLOP" : "GFLOP");
    os << "\n             " << text << " of forward made again a step";
    // The first six and the last.
    const auto &layers = p.memory().checkpointed_layers();
    if (!layers.empty()) {
      os << "; " << layers.size() << " checkpointed layers:";
      for (int i = 0; i < layers.size(); ++i) {
        if (i == 6 && layers.size() > 7) {
          os << ", ...";
          i = layers.size() - 1;
        }
        os << (i ? ", " : " ") << layers[i];
      }
    }
    os << "\n";
  }
}

/// strata-inspect's summary, section by section.
void printSummary(const std::string &dir, const Inspection &in,
                  std::ostream &os) {
  printPrograms(dir, *in.plan, os);
  printParameters(in, os);
  printTopology(in, os);
  printMemory(in, os);
  printTraffic(in, os);
  printOffloadedAndRecomputed(in, os);
}

void printJson(const std::string &dir, const Inspection &in,
               std::ostream &os) {
  const plan::Plan &p = *in.plan;
  os << "{\"artifact\": " << jsonString(dir)
     << ", \"fingerprint\": " << jsonString(p.fingerprint())
     << ", \"model_fingerprint\": " << jsonString(p.model_fingerprint())
     << ", \"weightless\": " << (p.weightless() ? "true" : "false")
     << ", \"programs\": {";
  for (int i = 0; i < p.programs_size(); ++i)
    os << (i ? ", " : "") << jsonString(p.programs(i).name()) << ": "
       << kernelsOf(p.programs(i)).size();
  os << "}, \"persistent_bytes\": {";
  for (int c = 0; c < int(Category::GatheredParameters); ++c)
    os << (c ? ", " : "") << jsonString(categoryName(Category(c))) << ": "
       << in.persistent[c];
  os << "}, \"constant_bytes\": " << in.constants;
  if (p.has_memory()) {
    const plan::MemoryPlan &m = p.memory();
    os << ", \"memory\": {\"device\": {\"planned_peak_bytes\": "
       << m.state_bytes() + m.constant_bytes() + m.activation_bytes()
       << ", \"lower_bound_bytes\": "
       << persistentTotal(in) + in.constants + m.activation_lower_bound()
       << ", \"activation_arena_bytes\": " << m.activation_bytes()
       << ", \"activation_lower_bound_bytes\": " << m.activation_lower_bound()
       << ", \"page_size\": " << m.page_size()
       << ", \"budget_bytes\": " << m.gpu_budget() << "}, \"host\": {\"bytes\": "
       << in.hostBytes << ", \"activation_arena_bytes\": "
       << m.host_activation_bytes() << "}, \"ssd\": {\"bytes\": "
       << in.ssdBytes << "}}";
  }
  if (!in.stages.empty()) {
    os << ", \"pipeline\": {\"schedule\": "
       << jsonString(p.has_pipeline() ? p.pipeline().schedule() : "")
       << ", \"micro_batches\": "
       << (p.has_pipeline() ? p.pipeline().micro_batches() : 0)
       << ", \"stages\": [";
    for (size_t s = 0; s < in.stages.size(); ++s) {
      const Inspection::Stage &st = in.stages[s];
      char entry[512];
      std::snprintf(
          entry, sizeof(entry),
          "%s{\"parameters\": %llu, \"parameter_elements\": %llu, "
          "\"parameter_bytes\": %llu, \"parameter_bytes_a_rank\": %llu, "
          "\"planned_peak_bytes\": %llu, \"state_bytes\": %llu, "
          "\"constant_bytes\": %llu, \"activation_arena_bytes\": %llu, "
          "\"host_activation_arena_bytes\": %llu, "
          "\"sent_bytes\": %llu, \"received_bytes\": %llu",
          s ? ", " : "", (unsigned long long)st.parameters,
          (unsigned long long)st.parameterElements,
          (unsigned long long)st.parameterBytes,
          (unsigned long long)st.shardBytes,
          (unsigned long long)(st.stateBytes + st.constantBytes +
                               st.arenaBytes),
          (unsigned long long)st.stateBytes,
          (unsigned long long)st.constantBytes,
          (unsigned long long)st.arenaBytes,
          (unsigned long long)st.hostArenaBytes,
          (unsigned long long)st.sentBytes,
          (unsigned long long)st.receivedBytes);
      os << entry;
      if (st.costs) {
        std::snprintf(entry, sizeof(entry),
                      ", \"forward_flops\": %.0f, \"backward_flops\": %.0f, "
                      "\"weight_flops\": %.0f, \"bubble_1f1b\": %.6f, "
                      "\"bubble_zb\": %.6f",
                      st.costs->forward_flops(), st.costs->backward_flops(),
                      st.costs->weight_flops(), st.costs->bubble_1f1b(),
                      st.costs->bubble_zb());
        os << entry;
      }
      os << ", \"order\": [";
      for (size_t i = 0; i < st.order.size(); ++i)
        os << (i ? ", " : "") << jsonString(st.order[i]);
      os << "], \"traffic\": {";
      for (int k = 0; k < kCollectiveKinds; ++k) {
        std::snprintf(entry, sizeof(entry), "%s\"%s\": [%.0f, %.0f]",
                      k ? ", " : "", collectiveName(CollectiveKind(k)),
                      st.traffic[k][0], st.traffic[k][1]);
        os << entry;
      }
      os << "}}";
    }
    os << "]}";
  }
  os << ", \"traffic\": {";
  for (int k = 0; k < kCollectiveKinds; ++k) {
    char entry[96];
    std::snprintf(entry, sizeof(entry), "%s\"%s\": [%.0f, %.0f]", k ? ", " : "",
                  collectiveName(CollectiveKind(k)), in.traffic[k][0],
                  in.traffic[k][1]);
    os << entry;
  }
  os << "}, \"offloaded\": [";
  for (size_t i = 0; i < in.offloaded.size(); ++i)
    os << (i ? ", " : "") << "{\"name\": " << jsonString(in.offloaded[i].first)
       << ", \"tier\": \"" << tierName(in.offloaded[i].second) << "\"}";
  os << "], \"recomputed\": [";
  if (p.has_memory())
    for (int i = 0; i < p.memory().recomputed_size(); ++i)
      os << (i ? ", " : "") << jsonString(p.memory().recomputed(i));
  char flops[64];
  std::snprintf(flops, sizeof(flops), "%.0f", recomputedFlopsPerStep(p));
  os << "], \"recomputed_flops_per_step\": " << flops
     << ", \"checkpointed_layers\": [";
  if (p.has_memory())
    for (int i = 0; i < p.memory().checkpointed_layers_size(); ++i)
      os << (i ? ", " : "")
         << jsonString(p.memory().checkpointed_layers(i));
  os << "]}\n";
}

/// The planned schedule of one step: every instruction in order on its
/// stream (one logical microsecond each), each wait as a flow arrow, and
/// the live activation bytes as a counter.
bool writeTrace(const Inspection &in, const std::string &path) {
  std::ofstream out(path);
  if (!out)
    return false;
  // One track per stream name across the programs; "programs" last.
  std::vector<std::string> names;
  auto track = [&](const std::string &name) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it != names.end())
      return int(it - names.begin());
    names.push_back(name);
    return int(names.size()) - 1;
  };
  track("compute");
  out << "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"clock\": "
         "\"logical: one unit per instruction of the planned order\"}, "
         "\"traceEvents\": [\n";
  out << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0, "
         "\"args\": {\"name\": \"planned step\"}}";
  size_t t = 0, flow = 0;
  std::string programsTrack = "programs";
  for (const Phase &phase : in.phases) {
    const plan::Program &program = *phase.program;
    const auto &lifetimes = in.lifetimes.at(program.name());
    size_t n = kernelsOf(program).size();
    std::vector<int> tids;
    for (const std::string &stream : program.streams())
      tids.push_back(track(stream));
    if (tids.empty())
      tids.push_back(0);
    auto tidOf = [&](uint32_t stream) {
      return stream < tids.size() ? tids[stream] : 0;
    };
    out << ",\n{\"name\": " << jsonString(phase.label)
        << ", \"ph\": \"X\", \"pid\": 0, \"tid\": 1000, \"ts\": " << t
        << ", \"dur\": " << std::max<size_t>(n, 1) << "}";
    // Per stream, the last kernel so far; per event, the kernel its
    // record follows; per stream, the waits its next kernel starts after.
    std::vector<int64_t> lastOn(std::max<size_t>(tids.size(), 1), -1);
    std::vector<std::pair<int, int64_t>> recorded(program.events(), {0, -1});
    std::vector<std::vector<std::pair<int, int64_t>>> pending(lastOn.size());
    size_t i = 0;
    for (const plan::Instruction &inst : program.instructions()) {
      uint32_t stream = inst.stream() < lastOn.size() ? inst.stream() : 0;
      if (inst.kind() == plan::RECORD) {
        if (inst.event() < recorded.size())
          recorded[inst.event()] = {tidOf(stream), lastOn[stream]};
        continue;
      }
      if (inst.kind() == plan::WAIT) {
        if (inst.event() < recorded.size() &&
            recorded[inst.event()].second >= 0)
          pending[stream].push_back(recorded[inst.event()]);
        continue;
      }
      int tid = tidOf(stream);
      uint64_t written = 0;
      for (uint32_t id : inst.outputs())
        written += tensorBytes(in.plan->tensors(int(id)));
      out << ",\n{\"name\": " << jsonString(inst.op())
          << ", \"cat\": " << jsonString(names[tid])
          << ", \"ph\": \"X\", \"pid\": 0, \"tid\": " << tid
          << ", \"ts\": " << t + i << ", \"dur\": 1, \"args\": {\"node\": "
          << jsonString(inst.location()) << ", \"bytes_written\": " << written
          << ", \"instruction\": " << i << "}}";
      for (auto [fromTid, from] : pending[stream]) {
        out << ",\n{\"name\": \"wait\", \"cat\": \"event\", \"ph\": \"s\", "
               "\"id\": "
            << flow << ", \"pid\": 0, \"tid\": " << fromTid
            << ", \"ts\": " << t + from << "}"
            << ",\n{\"name\": \"wait\", \"cat\": \"event\", \"ph\": \"f\", "
               "\"bp\": \"e\", \"id\": "
            << flow++ << ", \"pid\": 0, \"tid\": " << tid
            << ", \"ts\": " << t + i << "}";
      }
      pending[stream].clear();
      lastOn[stream] = int64_t(i);
      uint64_t live = 0;
      for (const Lifetime &l : lifetimes)
        if (l.first <= i && i <= l.last)
          live += tensorBytes(in.plan->tensors(int(l.tensor)));
      out << ",\n{\"name\": \"activation bytes live\", \"ph\": \"C\", "
             "\"pid\": 0, \"ts\": "
          << t + i << ", \"args\": {\"bytes\": " << live << "}}";
      ++i;
    }
    t += n;
  }
  for (size_t i = 0; i < names.size(); ++i)
    out << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": "
        << i << ", \"args\": {\"name\": " << jsonString(names[i]) << "}}";
  out << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": "
         "1000, \"args\": {\"name\": \"programs\"}}\n]}\n";
  return bool(out);
}

/// Bytes live at each logical time of one step, stacked by kind.
bool writeMemoryPlot(const Inspection &in, const std::string &path) {
  std::vector<std::array<double, int(Category::Count)>> samples;
  std::vector<std::pair<size_t, std::string>> boundaries;
  for (const Phase &phase : in.phases) {
    boundaries.push_back({samples.size(), phase.label});
    const auto &lifetimes = in.lifetimes.at(phase.program->name());
    size_t n = kernelsOf(*phase.program).size();
    for (size_t i = 0; i < n; ++i) {
      std::array<double, int(Category::Count)> s{};
      for (int c = 0; c < int(Category::GatheredParameters); ++c)
        s[c] = double(in.persistent[c]);
      for (const Lifetime &l : lifetimes)
        if (l.first <= i && i <= l.last)
          s[int(l.category)] += double(tensorBytes(in.plan->tensors(int(l.tensor))));
      samples.push_back(s);
    }
  }
  if (samples.empty())
    samples.push_back({});
  double top = 0;
  for (const auto &s : samples) {
    double sum = 0;
    for (double v : s)
      sum += v;
    top = std::max(top, sum);
  }
  double planned = 0;
  if (in.plan->has_memory())
    planned = double(in.plan->memory().state_bytes() +
                     in.plan->memory().activation_bytes());
  top = std::max(top, planned) * 1.08 + 1;
  const double w = 960, h = 540, left = 90, right = 210, topMargin = 50,
               bottom = 60;
  double plotW = w - left - right, plotH = h - topMargin - bottom;
  auto x = [&](double i) {
    return left + plotW * i / double(std::max<size_t>(samples.size(), 1));
  };
  auto y = [&](double bytes) { return topMargin + plotH * (1 - bytes / top); };
  std::ofstream out(path);
  if (!out)
    return false;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w
      << "\" height=\"" << h << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"24\" font-size=\"16\">Device memory "
         "over one training step (planned, this rank)</text>\n";
  // Stacked areas, bottom up.
  std::vector<double> base(samples.size(), 0.0);
  for (int c = 0; c < int(Category::Count); ++c) {
    bool any = false;
    for (const auto &s : samples)
      any |= s[c] > 0;
    if (!any)
      continue;
    std::ostringstream pts;
    for (size_t i = 0; i < samples.size(); ++i)
      pts << x(double(i)) << "," << y(base[i] + samples[i][c]) << " "
          << x(double(i + 1)) << "," << y(base[i] + samples[i][c]) << " ";
    for (size_t i = samples.size(); i-- > 0;)
      pts << x(double(i + 1)) << "," << y(base[i]) << " " << x(double(i))
          << "," << y(base[i]) << " ";
    out << "<polygon points=\"" << pts.str() << "\" fill=\""
        << categoryColor(Category(c)) << "\" stroke=\"none\"><title>"
        << categoryName(Category(c)) << "</title></polygon>\n";
    for (size_t i = 0; i < samples.size(); ++i)
      base[i] += samples[i][c];
  }
  // Axes, ticks, program boundaries, the planned peak.
  out << "<line x1=\"" << left << "\" y1=\"" << y(0) << "\" x2=\""
      << left + plotW << "\" y2=\"" << y(0) << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << left << "\" y1=\"" << topMargin << "\" x2=\"" << left
      << "\" y2=\"" << y(0) << "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    double v = top / 1.08 * i / 5;
    out << "<line x1=\"" << left - 4 << "\" y1=\"" << y(v) << "\" x2=\""
        << left << "\" y2=\"" << y(v) << "\" stroke=\"black\"/>"
        << "<text x=\"" << left - 8 << "\" y=\"" << y(v) + 4
        << "\" text-anchor=\"end\">" << human(v) << "</text>\n";
  }
  for (const auto &[at, label] : boundaries)
    out << "<line x1=\"" << x(double(at)) << "\" y1=\"" << topMargin
        << "\" x2=\"" << x(double(at)) << "\" y2=\"" << y(0)
        << "\" stroke=\"#555\" stroke-dasharray=\"3,3\"/>"
        << "<text x=\"" << x(double(at)) + 3 << "\" y=\"" << y(0) + 16
        << "\" font-size=\"10\">" << label << "</text>\n";
  if (planned > 0)
    out << "<line x1=\"" << left << "\" y1=\"" << y(planned) << "\" x2=\""
        << left + plotW << "\" y2=\"" << y(planned)
        << "\" stroke=\"black\" stroke-dasharray=\"6,3\"/>"
        << "<text x=\"" << left + plotW - 4 << "\" y=\"" << y(planned) - 4
        << "\" text-anchor=\"end\">planned peak " << human(planned)
        << "</text>\n";
  out << "<text x=\"" << left + plotW / 2 << "\" y=\"" << h - 14
      << "\" text-anchor=\"middle\">logical time (instructions of the step, "
         "in order)</text>\n";
  double ly = topMargin + 10;
  for (int c = int(Category::Count); c-- > 0;) {
    out << "<rect x=\"" << left + plotW + 16 << "\" y=\"" << ly - 10
        << "\" width=\"12\" height=\"12\" fill=\"" << categoryColor(Category(c))
        << "\"/><text x=\"" << left + plotW + 34 << "\" y=\"" << ly << "\">"
        << categoryName(Category(c)) << "</text>\n";
    ly += 20;
  }
  out << "</svg>\n";
  return bool(out);
}

} // namespace

int inspectMain(int argc, char **argv) {
  std::string dir, tracePath, plotPath, logPlotPath;
  std::vector<std::string> logs;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--trace" || arg == "--memory-plot" || arg == "--plot") {
      if (i + 1 >= argc)
        return error(arg + " expects a file");
      (arg == "--trace" ? tracePath
       : arg == "--plot" ? logPlotPath
                         : plotPath) = argv[++i];
    } else if (arg == "--log") {
      if (i + 1 >= argc)
        return error("--log expects a strata-run log file");
      logs.push_back(argv[++i]);
    } else if (!arg.empty() && arg[0] == '-') {
      return error("unknown option '" + arg + "' (see --help)");
    } else if (dir.empty()) {
      dir = arg;
    } else {
      return error("more than one artifact given: '" + dir + "' and '" + arg +
                   "'");
    }
  }
  if (!logs.empty() || !logPlotPath.empty()) {
    if (logs.empty())
      return error("--plot draws --log files; give at least one --log "
                   "RUN.jsonl");
    if (logPlotPath.empty())
      return error("--log needs --plot OUT.svg");
    if (!dir.empty())
      return error("--log --plot reads logs, not an artifact ('" + dir +
                   "')");
    std::string message;
    if (plotLogs(logs, logPlotPath, message) != 0)
      return error(message);
    std::cout << "wrote " << logPlotPath << "\n";
    return 0;
  }
  if (dir.empty())
    return error("no artifact given (see --help)");
  std::unique_ptr<Artifact> artifact;
  if (Status s = Artifact::load(dir, artifact); !s)
    return error(s.message());
  Inspection in;
  analyze(artifact->getPlan(), in);
  if (json)
    printJson(dir, in, std::cout);
  else
    printSummary(dir, in, std::cout);
  if (!tracePath.empty()) {
    if (!writeTrace(in, tracePath))
      return error("cannot write '" + tracePath + "'");
    if (!json)
      std::cout << "wrote " << tracePath << "\n";
  }
  if (!plotPath.empty()) {
    if (!writeMemoryPlot(in, plotPath))
      return error("cannot write '" + plotPath + "'");
    if (!json)
      std::cout << "wrote " << plotPath << "\n";
  }
  return 0;
}

} // namespace strata::runtime
