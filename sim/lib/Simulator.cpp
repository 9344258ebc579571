//===- Simulator.cpp - A training step on a described cluster -------------===//

#include "strata/Sim/Simulator.h"

#include "strata/Runtime/Artifact.h"
#include "strata/Runtime/DType.h"
#include "strata/Runtime/Footprint.h"
#include "strata/Runtime/FusedProgram.h"
#include "strata/Runtime/Topology.h"

#include "plan.pb.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

namespace strata::sim {
namespace {

using runtime::Status;

//===----------------------------------------------------------------------===//
// The cluster file
//===----------------------------------------------------------------------===//

/// A flat JSON object's "key": value pairs (numbers and strings).
Status parseFlatJson(const std::string &text, const std::string &path,
                     std::map<std::string, std::string> &out) {
  size_t at = text.find('{');
  if (at == std::string::npos)
    return Status::error("cluster file '" + path + "' is not a JSON object");
  ++at;
  auto skip = [&] {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
  };
  auto string = [&](std::string &s) {
    if (at >= text.size() || text[at] != '"')
      return false;
    size_t end = text.find('"', at + 1);
    if (end == std::string::npos)
      return false;
    s = text.substr(at + 1, end - at - 1);
    at = end + 1;
    return true;
  };
  for (;;) {
    skip();
    if (at < text.size() && text[at] == '}')
      return Status::ok();
    std::string key, value;
    if (!string(key))
      return Status::error("cluster file '" + path +
                           "': expected a quoted key at byte " +
                           std::to_string(at));
    skip();
    if (at >= text.size() || text[at] != ':')
      return Status::error("cluster file '" + path + "': expected ':' after '" +
                           key + "'");
    ++at;
    skip();
    if (at < text.size() && text[at] == '[') {
      // A flat array of numbers, kept as its text between the brackets.
      size_t end = text.find(']', at);
      if (end == std::string::npos)
        return Status::error("cluster file '" + path + "': '" + key +
                             "' has an unterminated array");
      value = text.substr(at, end + 1 - at);
      at = end + 1;
    } else if (at < text.size() && text[at] == '"') {
      if (!string(value))
        return Status::error("cluster file '" + path + "': '" + key +
                             "' has an unterminated string");
    } else {
      size_t end = text.find_first_of(",}", at);
      if (end == std::string::npos)
        return Status::error("cluster file '" + path + "': '" + key +
                             "' has no value");
      value = text.substr(at, end - at);
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
        value.pop_back();
      at = end;
    }
    out[key] = value;
    skip();
    if (at < text.size() && text[at] == ',')
      ++at;
  }
}

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

double elements(const plan::Tensor &t) {
  double n = 1;
  for (int64_t d : t.shape())
    n *= double(d);
  return n;
}

double lastDim(const plan::Tensor &t) {
  return t.shape_size() ? double(t.shape(t.shape_size() - 1)) : 1.0;
}

const plan::Attribute *findAttr(const plan::Instruction &inst,
                                const std::string &name) {
  for (const plan::Attribute &a : inst.attributes())
    if (a.name() == name)
      return &a;
  return nullptr;
}

/// "f32", "bf16", "f16": the peak a kernel of this element type reaches.
std::string peakKey(plan::DType t) {
  if (t == plan::BF16)
    return "bf16";
  if (t == plan::F16)
    return "f16";
  return "f32";
}

/// What one rank's instruction costs on the cluster.
class CostModel {
public:
  CostModel(const plan::Plan &p, const Cluster &c) : p(p), c(c) {
    const plan::Topology &t = p.topology();
    topo.world = std::max<int>(int(t.world()), 1);
    topo.ranksPerNode = std::max<int>(int(t.ranks_per_node()), 1);
    topo.partition = std::max<int>(int(t.partition()), 1);
    topo.stages = std::max<int>(int(t.pipeline_stages()), 1);
  }

  const plan::Tensor &tensor(uint32_t id) const { return p.tensors(int(id)); }

  /// Counted FLOPs of a kernel: products exactly, the rest one a result
  /// element.
  /// An attention's keys: k [..., T, D], or [..., T, H, D] with
  /// heads_inner.
  double keyLength(const plan::Instruction &inst, const plan::Tensor &k) const {
    const plan::Attribute *inner = findAttr(inst, "heads_inner");
    int axis = k.shape_size() - (inner && inner->int_value() ? 3 : 2);
    return axis >= 0 ? double(k.shape(axis)) : 1;
  }

  double flops(const plan::Instruction &inst) const {
    if (inst.outputs_size() == 0)
      return 0;
    const plan::Tensor &out = tensor(inst.outputs(0));
    const std::string &op = inst.op();
    if ((op == "graph.linear" || op == "graph.matmul") && inst.inputs_size())
      return 2 * elements(out) * lastDim(tensor(inst.inputs(0)));
    if (op == "graph.linear_grad_weight" && inst.inputs_size()) {
      const plan::Tensor &x = tensor(inst.inputs(0));
      return 2 * elements(out) * elements(x) / std::max(lastDim(x), 1.0);
    }
    if ((op == "graph.attention" || op == "graph.attention_grad") &&
        inst.inputs_size() >= 3) {
      // q [..., S, D], k [..., T, D]: q k^T and p v, 2 S T D each. The
      // operands: attention (q, k, v, ...), its gradient (dy, q, k, ...).
      bool forward = op == "graph.attention";
      const plan::Tensor &q = tensor(inst.inputs(forward ? 0 : 1));
      const plan::Tensor &k = tensor(inst.inputs(forward ? 1 : 2));
      double t = keyLength(inst, k);
      double f = 4 * elements(q) * t;
      const plan::Attribute *causal = findAttr(inst, "causal");
      if (causal && causal->int_value())
        f /= 2;
      // Backward: the scores again, and four products of that size. With
      // the forward's probabilities kept (keep_probabilities), what the
      // backend does with them: the CPU's kernels (a calibrated file, its
      // kept tables) do the four alone; the CUDA kernels (the roofline)
      // make the scores a second time in the forward to write them, and
      // make them again in the gradient, which ignores them.
      const plan::Attribute *kept = findAttr(inst, "keep_probabilities");
      bool byCuda = keptByCuda(inst);
      if (forward)
        return byCuda ? 1.5 * f : f;
      return kept && kept->int_value() && !byCuda ? 2.0 * f : 2.5 * f;
    }
    double n = 0;
    for (uint32_t o : inst.outputs())
      n += elements(tensor(o));
    return n;
  }

  /// A kept-probabilities attention (either direction) that the CUDA
  /// kernels run (Cluster::device), costed as they run it.
  bool keptByCuda(const plan::Instruction &inst) const {
    const plan::Attribute *kept = findAttr(inst, "keep_probabilities");
    return kept && kept->int_value() &&
           (c.device == "cuda" || (c.device.empty() && c.attention.empty()));
  }

  /// The tables measured for the dtype of `inst`'s first result where a
  /// GPU calibration has them (f16: then bf16's), else null.
  const Cluster::KernelTables *narrowTables(const plan::Instruction &inst) const {
    if (c.narrow.empty() || inst.outputs_size() == 0)
      return nullptr;
    std::string key = peakKey(tensor(inst.outputs(0)).dtype());
    if (key == "f32")
      return nullptr;
    auto it = c.narrow.find(key);
    if (it == c.narrow.end() && key == "f16")
      it = c.narrow.find("bf16");
    return it == c.narrow.end() ? nullptr : &it->second;
  }

  double bytes(const plan::Instruction &inst) const {
    double b = 0;
    // The CUDA gradient does not read the kept probabilities (its last
    // operand).
    int read = inst.inputs_size();
    if (inst.op() == "graph.attention_grad" && keptByCuda(inst))
      --read;
    for (int i = 0; i < read; ++i)
      b += double(runtime::tensorBytes(tensor(inst.inputs(i))));
    for (uint32_t o : inst.outputs())
      b += double(runtime::tensorBytes(tensor(o)));
    return b;
  }

  /// A calibrated kernel's seconds, or a negative number where the
  /// cluster has no measurement for it (the roofline then).
  double measured(const plan::Instruction &inst, double counted) const {
    const std::string &op = inst.op();
    const Cluster::KernelTables *narrow = narrowTables(inst);
    // A product: the narrow dtype's table where measured, else the f32
    // one; a weight gradient the products' where it has none of its own.
    if (op == "graph.linear" || op == "graph.matmul" ||
        op == "graph.linear_grad_weight") {
      std::vector<const Cluster::Table *> choices;
      if (op == "graph.linear_grad_weight" && narrow)
        choices.push_back(&narrow->gemmGradRate);
      if (narrow)
        choices.push_back(&narrow->gemmRate);
      if (op == "graph.linear_grad_weight")
        choices.push_back(&c.gemmGradRate);
      choices.push_back(&c.gemmRate);
      for (const Cluster::Table *rows : choices)
        if (!rows->empty())
          return fromTable(*rows, counted);
      return -1;
    }
    bool forward = op == "graph.attention";
    if ((forward || op == "graph.attention_grad") && inst.inputs_size() >= 2) {
      const plan::Attribute *causal = findAttr(inst, "causal");
      bool isCausal = causal && causal->int_value();
      // Kept probabilities (measured causal, as the models that keep them
      // are): the forward writes them, the gradient reads them.
      const plan::Attribute *kept = findAttr(inst, "keep_probabilities");
      bool isKept = isCausal && kept && kept->int_value();
      const plan::Attribute *inner = findAttr(inst, "heads_inner");
      bool isInner = inner && inner->int_value();
      // The table of `name` in this instruction's layout where measured,
      // else the [H, T, D] one; in its dtype where measured, else f32.
      auto findIn = [&](const std::map<std::string, Cluster::Table> &tables,
                        const std::string &name) -> const Cluster::Table * {
        if (isInner)
          if (auto it = tables.find("heads_inner." + name); it != tables.end())
            return &it->second;
        auto it = tables.find(name);
        return it == tables.end() ? nullptr : &it->second;
      };
      auto find = [&](const std::string &name) -> const Cluster::Table * {
        if (narrow)
          if (const Cluster::Table *t = findIn(narrow->attention, name))
            return t;
        return findIn(c.attention, name);
      };
      // The most specific variant measured: kept, causal, plain.
      std::vector<std::string> variants;
      if (isKept)
        variants.push_back("_kept_causal");
      if (isCausal)
        variants.push_back("_causal");
      variants.push_back("");
      std::string direction = forward ? "attention" : "attention_grad";
      const Cluster::Table *score = nullptr, *mac = nullptr;
      for (const std::string &variant : variants) {
        score = find(direction + variant + "_score");
        mac = find(direction + variant + "_mac");
        if (score && mac)
          break;
      }
      if (!score || !mac || score->empty() || mac->empty())
        return -1;
      // The operands: attention (q, k, v, ...), its gradient (dy, q, k, ...).
      const plan::Tensor &q = tensor(inst.inputs(forward ? 0 : 1));
      const plan::Tensor &k = tensor(inst.inputs(forward ? 1 : 2));
      double d = lastDim(q);
      double t = keyLength(inst, k);
      double scores = elements(q) / std::max(d, 1.0) * t;
      if (isCausal)
        scores /= 2;
      return scores * (interpolate(*score, t) + interpolate(*mac, t) * d);
    }
    if (op == "graph.fused_elementwise")
      if (double t = fusedSeconds(inst, narrow); t >= 0)
        return t;
    const std::vector<std::pair<double, double>> *rows =
        narrow ? opTable(inst, narrow->opSeconds) : nullptr;
    if (!rows)
      rows = opTable(inst, c.opSeconds);
    if (rows) {
      // An update or a gradient norm of several parameters costs each
      // parameter's operands at their own size (a small tensor's loop does
      // not split over the pool).
      size_t per = op == "graph.adamw_update" ? 4
                   : op == "graph.sgd_update" ? 3
                   : op == "graph.sum_squares" ? 1
                                               : 0;
      double seconds = 0, operands = 0;
      for (int i = 0; i < inst.inputs_size(); ++i) {
        operands += elements(tensor(inst.inputs(i)));
        if (per && (size_t(i) + 1) % per == 0) {
          seconds += operands * interpolate(*rows, operands);
          operands = 0;
        }
      }
      return seconds + (operands > 0 ? operands * interpolate(*rows, operands)
                                     : 0);
    }
    if (c.copySeconds.empty())
      return -1;
    // Any other kernel: a copy of its operands or results.
    double in = 0, out = 0;
    for (uint32_t i : inst.inputs())
      in += double(runtime::tensorBytes(tensor(i)));
    for (uint32_t o : inst.outputs())
      out += double(runtime::tensorBytes(tensor(o)));
    double bytes = std::max(in, out);
    return bytes * interpolate(c.copySeconds, bytes);
  }

  /// A fused elementwise kernel's seconds from the calibrated costs of its
  /// bytes and its instructions ("graph.fused_elementwise.byte" and
  /// ".instruction", by its result elements; in its dtype's tables where
  /// measured): its operands' and results' bytes, and each result element
  /// run through each instruction of its program. Negative where the
  /// cluster has neither.
  double fusedSeconds(const plan::Instruction &inst,
                      const Cluster::KernelTables *narrow) const {
    auto find = [&](const std::string &key) -> const Cluster::Table * {
      for (const std::map<std::string, Cluster::Table> *tables :
           {narrow ? &narrow->opSeconds : nullptr, &c.opSeconds}) {
        if (!tables)
          continue;
        auto it = tables->find(key);
        if (it != tables->end() && !it->second.empty())
          return &it->second;
      }
      return nullptr;
    };
    const Cluster::Table *byte = find("graph.fused_elementwise.byte");
    const Cluster::Table *instruction =
        find("graph.fused_elementwise.instruction");
    const Cluster::Table *transcendental =
        find("graph.fused_elementwise.transcendental");
    const plan::Attribute *program = findAttr(inst, "program");
    if (!byte || !instruction || !program || !program->has_ints_value() ||
        inst.outputs_size() == 0)
      return -1;
    // The program's instructions, the transcendental ones apart where the
    // cluster measured them.
    double cheap = 0, dear = 0;
    const auto &code = program->ints_value().values();
    for (int i = 0; i + 4 < code.size(); i += 5)
      (transcendental && isTranscendental(code[i]) ? dear : cheap) += 1;
    double n = std::max(elements(tensor(inst.outputs(0))), 1.0);
    return bytes(inst) * interpolate(*byte, n) +
           n * cheap * interpolate(*instruction, n) +
           (dear > 0 ? n * dear * interpolate(*transcendental, n) : 0);
  }

  /// A fused opcode whose formula calls exp, erf, tanh, log or the like
  /// (FusedProgram.h): GELU, the unary gradients, and the table's
  /// transcendental unary ops.
  static bool isTranscendental(int64_t opcode) {
    using runtime::FusedOpcode;
    switch (opcode) {
    case int64_t(FusedOpcode::Gelu):
    case int64_t(FusedOpcode::GeluTanh):
    case int64_t(FusedOpcode::Grad):
    case int64_t(FusedOpcode::Exp):
    case int64_t(FusedOpcode::Log):
    case int64_t(FusedOpcode::Tanh):
    case int64_t(FusedOpcode::Erf):
    case int64_t(FusedOpcode::Sin):
    case int64_t(FusedOpcode::Cos):
    case int64_t(FusedOpcode::Sigmoid):
    case int64_t(FusedOpcode::Softplus):
      return true;
    default:
      return false;
    }
  }

  /// The per-element table that costs `inst`, or null: by its op, a
  /// transpose that keeps the last axis by "graph.transpose_rows", and of
  /// an op's tables by row length ("OP/64"; "OP": rows of 256) the one
  /// nearest the instruction's last dimension.
  const std::vector<std::pair<double, double>> *
  opTable(const plan::Instruction &inst,
          const std::map<std::string, Cluster::Table> &tables) const {
    std::string op = inst.op();
    if (op == "graph.transpose" && tables.count("graph.transpose_rows")) {
      const plan::Attribute *perm = findAttr(inst, "perm");
      if (perm && perm->has_ints_value() && perm->ints_value().values_size() &&
          perm->ints_value().values(perm->ints_value().values_size() - 1) ==
              perm->ints_value().values_size() - 1)
        op = "graph.transpose_rows";
    }
    const std::vector<std::pair<double, double>> *best = nullptr;
    double distance = 0;
    double row = inst.inputs_size() ? lastDim(tensor(inst.inputs(0))) : 256;
    for (auto it = tables.lower_bound(op);
         it != tables.end() && it->first.compare(0, op.size(), op) == 0;
         ++it) {
      const std::string &key = it->first;
      double length = 256;
      if (key.size() > op.size()) {
        if (key[op.size()] != '/')
          continue;
        length = std::atof(key.c_str() + op.size() + 1);
      }
      double d = std::abs(std::log(std::max(row, 1.0) / std::max(length, 1.0)));
      if (!it->second.empty() && (!best || d < distance)) {
        best = &it->second;
        distance = d;
      }
    }
    return best;
  }

  /// The table's value at `x`, interpolated log-log between its rows and
  /// held at its ends.
  static double interpolate(const std::vector<std::pair<double, double>> &rows,
                            double x) {
    if (x <= rows.front().first)
      return rows.front().second;
    if (x >= rows.back().first)
      return rows.back().second;
    size_t i = 1;
    while (rows[i].first < x)
      ++i;
    double x0 = std::log(rows[i - 1].first), x1 = std::log(rows[i].first);
    double y0 = std::log(rows[i - 1].second), y1 = std::log(rows[i].second);
    return std::exp(y0 + (y1 - y0) * (std::log(x) - x0) / (x1 - x0));
  }

  /// A GEMM of `counted` FLOPs at the rate measured for its size (the cube
  /// root of M N K).
  static double fromTable(const std::vector<std::pair<double, double>> &rows,
                          double counted) {
    if (rows.empty())
      return -1;
    return counted / interpolate(rows, std::cbrt(counted / 2));
  }

  double kernel(const plan::Instruction &inst, double &counted) const {
    counted = flops(inst);
    if (double t = measured(inst, counted); t >= 0)
      return c.kernelLaunch + t;
    std::string key = inst.outputs_size()
                          ? peakKey(tensor(inst.outputs(0)).dtype())
                          : "f32";
    auto peak = c.flops.find(key);
    double rate = peak == c.flops.end() ? c.flops.at("f32") : peak->second;
    const std::string &op = inst.op();
    double efficiency = op.find("attention") != std::string::npos
                            ? c.attentionEfficiency
                        : op.find("linear") != std::string::npos ||
                                op == "graph.matmul"
                            ? c.gemmEfficiency
                            : 1.0;
    double compute = counted / (rate * efficiency);
    double memory = bytes(inst) / (c.memoryBandwidth * c.memoryEfficiency);
    return c.kernelLaunch + std::max(compute, memory);
  }

  /// The bytes a ring collective moves over each of its links, on one rank
  /// (0: not a collective, or a group of one).
  double ringBytes(const plan::Instruction &inst, int rank) const {
    const Ring *ring = movingRing(inst, rank);
    if (!ring)
      return 0;
    double total = 0;
    bool gather = inst.collective() == plan::ALL_GATHER;
    for (uint32_t id : gather ? inst.outputs() : inst.inputs())
      total += double(runtime::tensorBytes(tensor(id)));
    double g = ring->members;
    return inst.collective() == plan::ALL_REDUCE ? 2 * (g - 1) / g * total
                                                 : (g - 1) / g * total;
  }

  /// A ring collective over the instruction's group, on one rank.
  double collective(const plan::Instruction &inst, int rank) const {
    const Ring *found = movingRing(inst, rank);
    if (!found)
      return 0;
    const Ring &ring = *found;
    double g = ring.members;
    double onRing = ringBytes(inst, rank);
    double steps = inst.collective() == plan::ALL_REDUCE ? 2 * (g - 1) : g - 1;
    // A blocked gather (the hierarchical one's intra stage) is one NCCL
    // call per block: the latency once per block.
    const plan::Attribute *blocks = findAttr(inst, "blocks");
    double calls = blocks ? std::max<double>(double(blocks->int_value()), 1) : 1;
    // The bytes each ring step moves on a link, per call.
    double chunk = onRing / (steps * calls);
    plan::CollectiveKind kind = inst.collective();
    double bandwidth = linkBandwidth(false, chunk, kind),
           latency = c.intraLatency;
    if (ring.crossesNodes) {
      // The node's NICs, shared by every ring of this collective that
      // crosses them at once.
      bandwidth = std::min(bandwidth, linkBandwidth(true, chunk, kind) /
                                          double(ring.concurrent));
      latency = c.interLatency;
    }
    return steps * calls * latency + onRing / bandwidth + syncCost(g);
  }

  /// A link's bandwidth for messages of `bytes` (a ring step's, or a
  /// send's): the calibrated table's where the file has one, else the
  /// scalar figure. Inter-node: the node's.
  double linkBandwidth(bool inter, double bytes,
                       plan::CollectiveKind kind = plan::ALL_GATHER) const {
    const Cluster::Table *table = &c.bandwidthByBytes[inter];
    if (kind == plan::REDUCE_SCATTER && !c.reduceBandwidthByBytes[inter].empty())
      table = &c.reduceBandwidthByBytes[inter];
    if (kind == plan::ALL_REDUCE && !c.allReduceBandwidthByBytes[inter].empty())
      table = &c.allReduceBandwidthByBytes[inter];
    if (!table->empty() && bytes > 0)
      return interpolate(*table, bytes);
    return inter ? c.interBandwidth : c.intraBandwidth;
  }

  /// An oversubscribed host's wait for a collective's members: the
  /// calibrated `collective_sync_group` at the group's size, where the
  /// file has it; else `collective_sync` (measured over every rank of the
  /// host) scaled: a member waits for the g - 1 others to be scheduled, so
  /// a group of g of the host's W ranks is taken to cost (g - 1) / (W - 1)
  /// of it.
  double syncCost(double g) const {
    if (g < 2)
      return 0;
    if (!c.collectiveSyncByGroup.empty())
      return interpolate(c.collectiveSyncByGroup, g);
    if (c.collectiveSync <= 0)
      return 0;
    double w = std::max(c.gpusPerNode, 2);
    return c.collectiveSync * std::min(1.0, (g - 1) / (w - 1));
  }

  /// The link a collective's bytes cross on `rank`: 1 the node's NICs
  /// (its ring leaves the node), 0 the node's own (NVLink, shared memory).
  int linkOf(const plan::Instruction &inst, int rank) const {
    std::optional<runtime::Group> group = groupOf(inst);
    return group && ringOf(*group, rank).crossesNodes ? 1 : 0;
  }

  double move(const plan::Instruction &inst) const {
    if (inst.outputs_size() == 0 || inst.inputs_size() == 0)
      return 0;
    const plan::Tensor &out = tensor(inst.outputs(0));
    const plan::Tensor &in = tensor(inst.inputs(0));
    bool ssd = out.tier() == plan::SSD || in.tier() == plan::SSD;
    double b = double(runtime::tensorBytes(out));
    // A calibrated CPU's host tier is its memory: a copy of that size.
    if (!ssd && c.device != "cuda" && !c.copySeconds.empty())
      return c.kernelLaunch + b * interpolate(c.copySeconds, b);
    double bandwidth =
        ssd ? c.ssdBandwidth / double(topo.ranksPerNode) : c.pcieBandwidth;
    return c.kernelLaunch + b / std::max(bandwidth, 1.0);
  }

  /// The compute stream's seconds a tier move on a side stream takes.
  double moveComputeCost(const plan::Instruction &inst) const {
    if (inst.outputs_size() == 0)
      return 0;
    return c.copyComputeCost *
           double(runtime::tensorBytes(tensor(inst.outputs(0))));
  }

  double eventWait() const { return c.eventWait; }

  /// The compute stream's seconds a collective on a side stream takes: its
  /// ring bytes at the calibrated CPU cost of a gather's or a reduction's.
  /// Also its polling while it waits for a late rank: every rank of the
  /// group but the last to arrive waits, (g - 1) / g of them on average.
  double collectiveComputeCost(const plan::Instruction &inst, int rank) const {
    const Ring *ring = movingRing(inst, rank);
    if (!ring)
      return 0;
    double perByte = inst.collective() == plan::ALL_GATHER
                         ? c.gatherComputeCost
                         : c.reduceComputeCost;
    double g = ring->members;
    return perByte * ringBytes(inst, rank) + c.pollComputeCost * (g - 1) / g;
  }

  double message(const plan::Instruction &inst, int rank) const {
    if (inst.inputs_size() == 0 && inst.outputs_size() == 0)
      return 0;
    uint32_t id = inst.kind() == plan::SEND ? inst.inputs(0) : inst.outputs(0);
    int peer = runtime::rankOnStage(topo, rank, int(inst.peer_stage()));
    bool sameNode = peer / topo.ranksPerNode == rank / topo.ranksPerNode;
    double bytes = double(runtime::tensorBytes(tensor(id)));
    double bandwidth =
        sameNode ? linkBandwidth(false, bytes)
                 : linkBandwidth(true, bytes) / double(topo.ranksPerNode);
    // (No collective_sync: a send is posted without waiting for its peer,
    // and charging a group of two's wait to each send and receive put
    // gpt_tiny's 2-stage pipeline on 8 ranks at 28.2 ms, against 20.9
    // without it and 15.6 measured.)
    return (sameNode ? c.intraLatency : c.interLatency) + bytes / bandwidth;
  }

  runtime::TopologyInfo topo;

private:
  struct Ring {
    int members = 1;
    bool crossesNodes = false;
    int concurrent = 1; // rings of this group kind through one node's NICs
  };

  /// The group a collective runs over (none: not a collective).
  static std::optional<runtime::Group> groupOf(const plan::Instruction &inst) {
    switch (inst.group()) {
    case plan::PARTITION: return runtime::Group::Partition;
    case plan::REPLICATION: return runtime::Group::Replication;
    case plan::WORLD: return runtime::Group::World;
    case plan::INTER: return runtime::Group::Inter;
    case plan::INTRA: return runtime::Group::Intra;
    default: return std::nullopt;
    }
  }

  /// The ring a collective runs on, on one rank (null: not a collective,
  /// or a group of one: nothing moves).
  const Ring *movingRing(const plan::Instruction &inst, int rank) const {
    std::optional<runtime::Group> group = groupOf(inst);
    if (!group)
      return nullptr;
    const Ring &ring = ringOf(*group, rank);
    return ring.members < 2 ? nullptr : &ring;
  }

  const Ring &ringOf(runtime::Group group, int rank) const {
    auto key = std::make_pair(int(group), rank);
    auto it = rings.find(key);
    if (it != rings.end())
      return it->second;
    Ring ring;
    std::vector<int> members = runtime::groupMembers(topo, group, rank);
    ring.members = int(members.size());
    int k = topo.ranksPerNode;
    std::set<int> nodes;
    int onMyNode = 0;
    for (int m : members) {
      nodes.insert(m / k);
      onMyNode += m / k == rank / k;
    }
    // Emulated nodes on one host share its memory: no ring leaves it.
    ring.crossesNodes = nodes.size() > 1 && !c.emulatedNodes;
    ring.concurrent = std::max(1, k / std::max(onMyNode, 1));
    return rings.emplace(key, ring).first->second;
  }

  const plan::Plan &p;
  const Cluster &c;
  mutable std::map<std::pair<int, int>, Ring> rings;
};

//===----------------------------------------------------------------------===//
// The replay
//===----------------------------------------------------------------------===//

enum class Waited { Nothing, Communication, Offload, Stage };

Waited categoryOfStream(const std::string &name) {
  // "collective" (parameter all-gathers), "reduce" (gradient reductions).
  if (name == "collective" || name == "reduce")
    return Waited::Communication;
  if (name == "compute")
    return Waited::Nothing;
  return Waited::Offload; // host / SSD moves
}

/// One stage's replay state across the programs of a step.
struct StageState {
  double clock = 0; // when its next program starts
  double compute = 0, communication = 0, offload = 0, bubble = 0;
  double flops = 0;
};

using MessageKey = std::tuple<int, int, uint32_t, uint32_t>; // from, to, tag, mb

/// When one link (a node's NICs, or its NVLink / shared memory) is busy
/// with a collective: two collectives issued on different streams at once
/// take turns on it instead of each getting its whole bandwidth. A
/// collective takes the earliest gap, at or after its stream is free,
/// that holds it whole (a later-issued one may fill an earlier gap).
class LinkCalendar {
public:
  /// Books `duration` seconds at or after `ready`; returns the start.
  double book(double ready, double duration) {
    double start = ready;
    auto it = busy.begin();
    for (; it != busy.end(); ++it) {
      if (it->second <= start)
        continue;
      if (it->first >= start + duration)
        break;
      start = it->second;
    }
    busy.insert(std::upper_bound(busy.begin(), busy.end(),
                                 std::make_pair(start, start + duration)),
                {start, start + duration});
    return start;
  }

  /// Forgets what ends by `time` (no stream will ask for earlier).
  void forget(double time) {
    auto end = std::find_if(busy.begin(), busy.end(),
                            [&](const auto &b) { return b.second > time; });
    busy.erase(busy.begin(), end);
  }

private:
  std::vector<std::pair<double, double>> busy; // sorted by start
};

class Replay {
public:
  Replay(const plan::Plan &p, const CostModel &costs, bool keepTimeline)
      : p(p), costs(costs), keepTimeline(keepTimeline) {}

  /// Runs `program` once on `stage` (its representative rank `rank`) from
  /// the stage's clock; the streams join at its end.
  void run(const plan::Program &program, int stage, int rank, StageState &s,
           std::vector<Span> *timeline) {
    size_t streams = std::max<size_t>(program.streams_size(), 1);
    std::vector<double> free(streams, s.clock);
    std::vector<Waited> kind(streams, Waited::Nothing);
    names.assign(streams, "compute");
    for (size_t i = 0; i < size_t(program.streams_size()); ++i) {
      kind[i] = categoryOfStream(program.streams(int(i)));
      names[i] = program.streams(int(i));
    }
    index = -1;
    std::vector<double> events(program.events(), s.clock);
    std::vector<int> recordedOn(program.events(), 0);
    LinkCalendar links[2];
    size_t collectives = 0;
    for (const plan::Instruction &inst : program.instructions()) {
      ++index;
      size_t stream = std::min<size_t>(inst.stream(), streams - 1);
      switch (inst.kind()) {
      case plan::RECORD:
        if (inst.event() < events.size()) {
          events[inst.event()] = free[stream];
          recordedOn[inst.event()] = int(stream);
        }
        continue;
      case plan::WAIT: {
        if (inst.event() >= events.size())
          continue;
        double ready = events[inst.event()];
        if (ready > free[stream]) {
          // Blocked on another stream: its thread wakes when the record
          // completes (a calibrated CPU's hand-off).
          if (recordedOn[inst.event()] != int(stream))
            ready += costs.eventWait();
          if (stream == 0)
            attribute(s, kind[size_t(recordedOn[inst.event()])],
                      ready - free[stream]);
          free[stream] = ready;
        }
        continue;
      }
      case plan::SEND: {
        double cost = costs.message(inst, rank);
        double start = free[stream];
        free[stream] += cost;
        sent[{stage, int(inst.peer_stage()), inst.tag(), inst.micro_batch()}] =
            free[stream];
        record(timeline, stage, int(stream), "send", start, cost);
        continue;
      }
      case plan::RECV: {
        double cost = costs.message(inst, rank);
        auto it = sent.find({int(inst.peer_stage()), stage, inst.tag(),
                             inst.micro_batch()});
        double arrives = it == sent.end() ? free[stream] : it->second;
        if (arrives > free[stream]) {
          if (stream == 0)
            s.bubble += arrives - free[stream];
          free[stream] = arrives;
        }
        record(timeline, stage, int(stream), "recv", free[stream], cost);
        free[stream] += cost;
        continue;
      }
      default:
        break;
      }
      double cost = 0, counted = 0;
      const std::string &op = inst.op();
      if (inst.collective() != plan::NO_COLLECTIVE) {
        cost = costs.collective(inst, rank);
        LinkCalendar &link = links[costs.linkOf(inst, rank)];
        if (++collectives % 256 == 0)
          for (LinkCalendar &l : links)
            l.forget(*std::min_element(free.begin(), free.end()));
        free[stream] = link.book(free[stream], cost);
        // Its stream's thread copies (and adds) the bytes on the cores the
        // kernels use (a calibrated CPU).
        if (stream != 0)
          free[0] += costs.collectiveComputeCost(inst, rank);
      } else if (op == "sched.reload" || op == "sched.offload") {
        cost = costs.move(inst);
        // A copy stream's thread takes CPU from the compute stream's
        // kernels (a calibrated CPU's shared cores).
        if (stream != 0)
          free[0] += costs.moveComputeCost(inst);
      } else
        cost = costs.kernel(inst, counted);
      s.flops += counted;
      if (stream == 0)
        s.compute += cost;
      record(timeline, stage, int(stream), op, free[stream], cost);
      free[stream] += cost;
    }
    double end = *std::max_element(free.begin(), free.end());
    // The program ends when every stream has: what stream 0 waits for at
    // the join is the last stream's category.
    if (end > free[0]) {
      size_t last = size_t(std::max_element(free.begin(), free.end()) -
                           free.begin());
      attribute(s, kind[last], end - free[0]);
    }
    s.clock = end;
  }

  std::map<MessageKey, double> sent;

private:
  void attribute(StageState &s, Waited w, double t) {
    if (w == Waited::Communication)
      s.communication += t;
    else if (w == Waited::Offload)
      s.offload += t;
    else if (w == Waited::Stage)
      s.bubble += t;
  }

  void record(std::vector<Span> *timeline, int stage, int stream,
              const std::string &name, double start, double duration) {
    if (keepTimeline && timeline && duration > 0)
      timeline->push_back(
          {stage, stream, name, start, duration, names[size_t(stream)], index});
  }

  /// The running program's stream names, and the instruction being
  /// replayed (its index).
  std::vector<std::string> names;
  int index = -1;

  const plan::Plan &p;
  const CostModel &costs;
  bool keepTimeline;
};

const plan::Program *findProgram(const plan::Plan &p, const std::string &name) {
  for (const plan::Program &program : p.programs())
    if (program.name() == name)
      return &program;
  return nullptr;
}

/// Samples and tokens one micro-step of one lane consumes: the batch, and
/// the second dimension of an integer [B, T] input when there is one.
void batchShape(const plan::Plan &p, uint64_t &samples, uint64_t &tokens) {
  samples = std::max<uint64_t>(p.training().batch(), 1);
  tokens = samples;
  for (const plan::Tensor &t : p.tensors())
    if (t.kind() == plan::INPUT && t.shape_size() == 2 &&
        (t.dtype() == plan::I64 || t.dtype() == plan::I32) &&
        uint64_t(t.shape(0)) == samples) {
      tokens = samples * uint64_t(t.shape(1));
      return;
    }
}

} // namespace

Status loadCluster(const std::string &path, Cluster &out) {
  std::ifstream file(path);
  if (!file)
    return Status::error("cannot read the cluster file '" + path + "'");
  std::stringstream ss;
  ss << file.rdbuf();
  std::map<std::string, std::string> kv;
  if (Status s = parseFlatJson(ss.str(), path, kv); !s)
    return s;
  auto number = [&](const std::string &key, double &value,
                    bool required) -> Status {
    auto it = kv.find(key);
    if (it == kv.end())
      return required ? Status::error("cluster file '" + path +
                                      "' lacks '" + key + "'")
                      : Status::ok();
    char *end = nullptr;
    value = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end || !std::isfinite(value) ||
        value < 0)
      return Status::error("cluster file '" + path + "': '" + key +
                           "' must be a non-negative number, got '" +
                           it->second + "'");
    return Status::ok();
  };
  Cluster c;
  c.name = kv.count("name") ? kv["name"] : path;
  c.source = kv.count("source") ? kv["source"] : "";
  double k = 0, f32 = 0, bf16 = 0, f16 = 0, emulated = 0;
  // Each key: whether the file must give it, and whether it must be
  // positive (a bandwidth or peak of 0 would divide by zero).
  struct Field {
    const char *key;
    double *value;
    bool required, positive;
  } fields[] = {
      {"gpus_per_node", &k, true, true},
      {"flops_f32", &f32, true, true},
      {"flops_bf16", &bf16, false, false},
      {"flops_f16", &f16, false, false},
      {"memory_bytes", &c.memoryBytes, true, false},
      {"memory_bandwidth", &c.memoryBandwidth, true, true},
      {"host_memory_bytes", &c.hostMemoryBytes, false, false},
      {"pcie_bandwidth", &c.pcieBandwidth, true, true},
      {"ssd_bandwidth", &c.ssdBandwidth, false, false},
      {"intra_bandwidth", &c.intraBandwidth, true, true},
      {"intra_latency", &c.intraLatency, true, false},
      {"inter_bandwidth", &c.interBandwidth, true, true},
      {"inter_latency", &c.interLatency, true, false},
      {"kernel_launch", &c.kernelLaunch, false, false},
      {"gemm_efficiency", &c.gemmEfficiency, false, true},
      {"attention_efficiency", &c.attentionEfficiency, false, true},
      {"memory_efficiency", &c.memoryEfficiency, false, true},
      {"emulated_nodes", &emulated, false, false},
      {"event_wait", &c.eventWait, false, false},
      {"copy_compute_cost", &c.copyComputeCost, false, false},
      {"gather_compute_cost", &c.gatherComputeCost, false, false},
      {"reduce_compute_cost", &c.reduceComputeCost, false, false},
      {"poll_compute_cost", &c.pollComputeCost, false, false},
      {"collective_sync", &c.collectiveSync, false, false},
  };
  for (const Field &f : fields) {
    if (Status s = number(f.key, *f.value, f.required); !s)
      return s;
    if (f.positive && !(*f.value > 0))
      return Status::error("cluster file '" + path + "': '" + f.key +
                           "' must be positive");
  }
  // The calibrated tables (strata-sim --calibrate).
  auto table = [&](const std::string &key,
                   std::vector<std::pair<double, double>> &rows) -> Status {
    auto it = kv.find(key);
    if (it == kv.end())
      return Status::ok();
    std::string text = it->second;
    if (text.size() < 2 || text.front() != '[' || text.back() != ']')
      return Status::error("cluster file '" + path + "': '" + key +
                           "' must be an array [size, value, ...]");
    std::vector<double> values;
    std::stringstream items(text.substr(1, text.size() - 2));
    std::string item;
    while (std::getline(items, item, ',')) {
      char *end = nullptr;
      double v = std::strtod(item.c_str(), &end);
      while (end && std::isspace(static_cast<unsigned char>(*end)))
        ++end;
      if (end == item.c_str() || (end && *end) || !(v > 0) || !std::isfinite(v))
        return Status::error("cluster file '" + path + "': '" + key +
                             "' holds '" + item + "', not a positive number");
      values.push_back(v);
    }
    if (values.size() % 2)
      return Status::error("cluster file '" + path + "': '" + key +
                           "' must hold pairs [size, value, ...]");
    for (size_t i = 0; i < values.size(); i += 2) {
      if (!rows.empty() && values[i] <= rows.back().first)
        return Status::error("cluster file '" + path + "': '" + key +
                             "' sizes must ascend");
      rows.push_back({values[i], values[i + 1]});
    }
    return Status::ok();
  };
  for (auto [key, rows] :
       {std::pair<const char *, Cluster::Table *>{"copy_seconds",
                                                  &c.copySeconds},
        {"collective_sync_group", &c.collectiveSyncByGroup},
        {"intra_bandwidth_by_bytes", &c.bandwidthByBytes[0]},
        {"inter_bandwidth_by_bytes", &c.bandwidthByBytes[1]},
        {"intra_reduce_bandwidth_by_bytes", &c.reduceBandwidthByBytes[0]},
        {"inter_reduce_bandwidth_by_bytes", &c.reduceBandwidthByBytes[1]},
        {"intra_allreduce_bandwidth_by_bytes", &c.allReduceBandwidthByBytes[0]},
        {"inter_allreduce_bandwidth_by_bytes", &c.allReduceBandwidthByBytes[1]}})
    if (Status s = table(key, *rows); !s)
      return s;
  // The kernel tables: unprefixed (f32), then a GPU calibration's narrow
  // dtypes' ("bf16.gemm_rate", ...).
  auto kernelTables = [&](const std::string &prefix, Cluster::Table &gemm,
                          Cluster::Table &gemmGrad,
                          std::map<std::string, Cluster::Table> &attention,
                          std::map<std::string, Cluster::Table> &ops) -> Status {
    if (Status s = table(prefix + "gemm_rate", gemm); !s)
      return s;
    if (Status s = table(prefix + "gemm_grad_rate", gemmGrad); !s)
      return s;
    // The attention tables, each layout's.
    for (const char *layout : {"", "heads_inner."})
      for (const char *direction : {"attention", "attention_grad"})
        for (const char *variant : {"", "_causal", "_kept_causal"})
          for (const char *figure : {"_score", "_mac"}) {
            std::string key =
                std::string(layout) + direction + variant + figure;
            if (!kv.count(prefix + key))
              continue;
            if (Status s = table(prefix + key, attention[key]); !s)
              return s;
          }
    std::string opPrefix = prefix + "op.";
    for (const auto &entry : kv) {
      if (entry.first.rfind(opPrefix, 0) != 0)
        continue;
      // "op.NAME/W": NAME's table on rows of W elements.
      size_t slash = entry.first.find('/');
      if (slash != std::string::npos) {
        std::string width = entry.first.substr(slash + 1);
        if (width.empty() ||
            width.find_first_not_of("0123456789") != std::string::npos ||
            std::atof(width.c_str()) < 1)
          return Status::error("cluster file '" + path + "': '" +
                               entry.first +
                               "': the row length after '/' must be a "
                               "positive whole number");
      }
      if (Status s = table(entry.first,
                           ops[entry.first.substr(opPrefix.size())]);
          !s)
        return s;
    }
    return Status::ok();
  };
  if (Status s = kernelTables("", c.gemmRate, c.gemmGradRate, c.attention,
                              c.opSeconds);
      !s)
    return s;
  for (const char *dtype : {"bf16", "f16"}) {
    Cluster::KernelTables t;
    if (Status s = kernelTables(std::string(dtype) + ".", t.gemmRate,
                                t.gemmGradRate, t.attention, t.opSeconds);
        !s)
      return s;
    if (!t.gemmRate.empty() || !t.gemmGradRate.empty() ||
        !t.attention.empty() || !t.opSeconds.empty())
      c.narrow[dtype] = std::move(t);
  }
  // The device a calibration measured.
  if (auto it = kv.find("device"); it != kv.end()) {
    if (it->second != "cpu" && it->second != "cuda")
      return Status::error("cluster file '" + path +
                           "': 'device' must be \"cpu\" or \"cuda\", got '" +
                           it->second + "'");
    c.device = it->second;
  }
  c.emulatedNodes = emulated != 0;
  c.gpusPerNode = int(k);
  c.flops["f32"] = f32;
  c.flops["bf16"] = bf16 > 0 ? bf16 : f32;
  c.flops["f16"] = f16 > 0 ? f16 : c.flops["bf16"];
  if (c.ssdBandwidth == 0)
    c.ssdBandwidth = c.pcieBandwidth / 8;
  out = std::move(c);
  return Status::ok();
}

Status predictAllGather(const Cluster &cluster, double bytes, int ranks,
                        int perNode, bool hierarchical, double &seconds) {
  if (ranks < 2 || perNode < 1 || ranks % perNode)
    return Status::error("an all-gather needs 2 or more ranks, a multiple of "
                         "the ranks a node (got " + std::to_string(ranks) +
                         " and " + std::to_string(perNode) + ")");
  if (hierarchical && ranks == perNode)
    return Status::error("a hierarchical all-gather needs a group that "
                         "spans nodes");
  // A plan of the gather alone: f16 elements, the shard a rank holds, what
  // the inter-node stage gathers, the whole.
  int64_t whole = std::max<int64_t>(int64_t(bytes / 2), ranks);
  whole -= whole % ranks;
  plan::Plan p;
  plan::Topology *t = p.mutable_topology();
  t->set_world(uint32_t(ranks));
  t->set_ranks_per_node(uint32_t(perNode));
  t->set_partition(uint32_t(ranks));
  t->set_hierarchical(hierarchical);
  t->set_pipeline_stages(1);
  auto tensor = [&](int64_t elements) {
    plan::Tensor *x = p.add_tensors();
    x->set_id(uint32_t(p.tensors_size() - 1));
    x->set_dtype(plan::F16);
    x->add_shape(elements);
    return x->id();
  };
  uint32_t shard = tensor(whole / ranks);
  uint32_t full = tensor(whole);
  std::vector<plan::Instruction> gathers;
  auto gather = [&](uint32_t in, uint32_t out, plan::CollectiveGroup g) {
    plan::Instruction inst;
    inst.set_op("sched.all_gather");
    inst.add_inputs(in);
    inst.add_outputs(out);
    inst.set_group(g);
    inst.set_collective(plan::ALL_GATHER);
    gathers.push_back(inst);
    return &gathers.back();
  };
  if (!hierarchical) {
    gather(shard, full, plan::PARTITION);
  } else {
    uint32_t across = tensor(whole / perNode);
    gather(shard, across, plan::INTER);
    plan::Attribute *blocks = gather(across, full, plan::INTRA)->add_attributes();
    blocks->set_name("blocks");
    blocks->set_int_value(perNode);
  }
  CostModel costs(p, cluster);
  seconds = 0;
  for (const plan::Instruction &inst : gathers)
    seconds += costs.collective(inst, 0);
  return Status::ok();
}

Status simulate(const plan::Plan &plan, const Cluster &cluster,
                Prediction &out) {
  if (!plan.has_training())
    return Status::error("strata-sim predicts training steps; this artifact "
                         "was compiled with --forward-only");
  CostModel costs(plan, cluster);
  const runtime::TopologyInfo &t = costs.topo;
  if (t.world > 1 && t.ranksPerNode != cluster.gpusPerNode &&
      !cluster.emulatedNodes)
    return Status::error(
        "the artifact was compiled for " + std::to_string(t.ranksPerNode) +
        " ranks a node (--gpus-per-node) but the cluster '" + cluster.name +
        "' has " + std::to_string(cluster.gpusPerNode) + " GPUs a node");
  Prediction p;
  p.world = t.world;
  p.stages = t.stages;
  uint32_t accum = std::max<uint32_t>(plan.training().accum(), 1);
  std::vector<StageState> states(size_t(t.stages));
  Replay replay(plan, costs, /*keepTimeline=*/true);
  if (t.stages <= 1) {
    const plan::Program *micro = findProgram(plan, "micro_step");
    const plan::Program *update = findProgram(plan, "optimizer_step");
    if (!micro || !update)
      return Status::error("the plan lacks micro_step or optimizer_step");
    for (uint32_t m = 0; m < accum; ++m)
      replay.run(*micro, 0, 0, states[0], m == 0 ? &p.timeline : nullptr);
    replay.run(*update, 0, 0, states[0], &p.timeline);
  } else {
    // Stages exchange messages: replay them all until the arrival times
    // settle (each pass moves the dependency chain a stage further).
    for (int pass = 0; pass < 2 * t.stages + 2; ++pass) {
      std::map<MessageKey, double> before = replay.sent;
      p.timeline.clear();
      for (int s = 0; s < t.stages; ++s) {
        states[size_t(s)] = StageState();
        const plan::Program *step =
            findProgram(plan, "pipeline_step_" + std::to_string(s));
        const plan::Program *update =
            findProgram(plan, "optimizer_step_" + std::to_string(s));
        if (!step || !update)
          return Status::error("the plan lacks the programs of stage " +
                               std::to_string(s));
        int rank = s * t.partition;
        replay.run(*step, s, rank, states[size_t(s)], &p.timeline);
        replay.run(*update, s, rank, states[size_t(s)], &p.timeline);
      }
      if (pass > 0 && before == replay.sent)
        break;
    }
  }
  size_t slowest = 0;
  for (size_t s = 0; s < states.size(); ++s)
    if (states[s].clock > states[slowest].clock)
      slowest = s;
  const StageState &critical = states[slowest];
  p.stepSeconds = critical.clock;
  p.compute = critical.compute;
  p.communication = critical.communication;
  p.offload = critical.offload;
  p.bubble = critical.bubble;
  p.flopsPerRank = critical.flops;
  uint64_t samples = 0, tokens = 0;
  batchShape(plan, samples, tokens);
  uint64_t lanes = uint64_t(t.world / std::max(t.stages, 1));
  p.samplesPerStep = samples * accum * lanes;
  p.tokensPerStep = tokens * accum * lanes;
  std::vector<std::vector<bool>> held = runtime::tensorsOfEveryStage(plan);
  for (size_t s = 0; s < held.size(); ++s)
    p.peakBytes = std::max<uint64_t>(
        p.peakBytes,
        runtime::footprintOf(plan, held.size() > 1 ? int(s) : -1, held[s])
            .device());
  for (const plan::Program &program : plan.programs())
    p.instructions += program.instructions_size();
  out = std::move(p);
  return Status::ok();
}

namespace {

std::string dtypeKey(const std::string &training) {
  if (training == "bf16")
    return "bf16";
  if (training == "fp16")
    return "f16";
  return "f32";
}

void writeTrace(const std::string &path, const Prediction &p,
                const plan::Plan &plan) {
  std::ofstream out(path);
  out << "{\"traceEvents\": [\n";
  bool first = true;
  for (const Span &s : p.timeline) {
    // The shape of strata-run --trace's events (its "cat" the stream's
    // name, the instruction's index in args), so that the same tools
    // (bench/trace_summary.py) read both.
    out << (first ? "" : ",\n") << "{\"name\": \"" << s.name
        << "\", \"cat\": \"" << s.category << "\", \"ph\": \"X\", \"pid\": "
        << s.stage << ", \"tid\": " << s.stream << ", \"ts\": "
        << s.start * 1e6 << ", \"dur\": " << s.duration * 1e6
        << ", \"args\": {\"instruction\": " << s.instruction << "}}";
    first = false;
  }
  out << "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"model\": \""
      << plan.model_name() << "\", \"predicted\": true}}\n";
}

} // namespace

int simMain(int argc, char **argv) {
  std::string artifactDir, clusterPath, tracePath, outPath;
  bool json = false, calibrating = false;
  std::string gatherSpec; // BYTES:RANKS:PER_NODE
  CalibrateOptions calibration;
  auto usage = [] {
    std::cerr
        << "usage: strata-sim ARTIFACT --cluster FILE [--trace OUT.json] "
           "[--json]\n"
           "  predicts one training step of ARTIFACT (any compiled one, or a "
           "plan-only\n"
           "  artifact from strata-compile --no-weights) on the cluster FILE "
           "describes\n"
           "  (sim/clusters/*.json)\n"
           "       strata-sim --calibrate [-o FILE] [--seconds S] [--rounds R]\n"
           "                  [--backend cpu|cuda] [--tf32]\n"
           "  measures this machine with microbenchmarks (the CPU kernels, "
           "memory, the\n"
           "  per-instruction cost, and under mpirun -np N the collectives "
           "of N ranks\n"
           "  sharing it) into a cluster file; S: each benchmark's time "
           "(0.05),\n"
           "  shared among R rounds whose median each figure is (3); "
           "--backend cuda:\n"
           "  GPU 0's kernels by dtype, its copies and kernel gap instead "
           "(one GPU)\n"
           "       strata-sim --cluster FILE --all-gather MIB:RANKS:PER_NODE\n"
           "  one all-gather of MIB MiB over RANKS ranks, flat and "
           "hierarchical\n";
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--calibrate") {
      calibrating = true;
    } else if (a == "-o" && i + 1 < argc) {
      outPath = argv[++i];
    } else if (a == "--seconds" && i + 1 < argc) {
      char *end = nullptr;
      calibration.secondsPerBenchmark = std::strtod(argv[++i], &end);
      if (!end || *end || !(calibration.secondsPerBenchmark > 0) ||
          calibration.secondsPerBenchmark > 60) {
        std::cerr << "strata-sim: error: --seconds takes a number of "
                     "seconds in (0, 60], got '"
                  << argv[i] << "'\n";
        return 1;
      }
    } else if (a == "--rounds" && i + 1 < argc) {
      char *end = nullptr;
      long rounds = std::strtol(argv[++i], &end, 10);
      if (!end || *end || rounds < 1 || rounds > 15) {
        std::cerr << "strata-sim: error: --rounds takes a whole number in "
                     "[1, 15], got '"
                  << argv[i] << "'\n";
        return 1;
      }
      calibration.rounds = int(rounds);
    } else if (a == "--backend" && i + 1 < argc) {
      calibration.backend = argv[++i];
      if (calibration.backend != "cpu" && calibration.backend != "cuda") {
        std::cerr << "strata-sim: error: --backend takes cpu or cuda, got '"
                  << calibration.backend << "'\n";
        return 1;
      }
    } else if (a == "--tf32") {
      calibration.tf32 = true;
    } else if (a == "--all-gather" && i + 1 < argc) {
      gatherSpec = argv[++i];
    } else if (a == "--cluster" && i + 1 < argc) {
      clusterPath = argv[++i];
    } else if (a == "--trace" && i + 1 < argc) {
      tracePath = argv[++i];
    } else if (a == "--json") {
      json = true;
    } else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "strata-sim: error: unknown option '" << a
                << "' (see --help)\n";
      return 1;
    } else if (artifactDir.empty()) {
      artifactDir = a;
    } else {
      std::cerr << "strata-sim: error: one artifact at a time, got '" << a
                << "' too\n";
      return 1;
    }
  }
  auto fail = [](const std::string &m) {
    std::cerr << "strata-sim: error: " << m << "\n";
    return 1;
  };
  if (calibrating) {
    if (!artifactDir.empty() || !clusterPath.empty())
      return fail("--calibrate measures this machine; it takes no artifact "
                  "or --cluster");
  } else if (calibration.backend != "cpu" || calibration.tf32) {
    return fail("--backend and --tf32 choose what --calibrate measures; "
                "give --calibrate");
  }
  if (calibrating) {
    std::string text;
    if (Status s = calibrate(calibration, text); !s)
      return fail(s.message());
    if (text.empty()) // not rank 0
      return 0;
    if (outPath.empty()) {
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    std::ofstream file(outPath);
    file << text;
    if (!file.flush())
      return fail("cannot write '" + outPath + "'");
    std::printf("calibrated   %s\n", outPath.c_str());
    return 0;
  }
  if (!gatherSpec.empty()) {
    Cluster cluster;
    if (clusterPath.empty())
      return fail("--all-gather needs --cluster FILE");
    if (Status s = loadCluster(clusterPath, cluster); !s)
      return fail(s.message());
    double mib = 0;
    int ranks = 0, perNode = 0;
    char tail = 0;
    if (std::sscanf(gatherSpec.c_str(), "%lf:%d:%d%c", &mib, &ranks, &perNode,
                    &tail) != 3 ||
        !(mib > 0))
      return fail("--all-gather takes MIB:RANKS:PER_NODE (e.g. 128:16:8), "
                  "got '" + gatherSpec + "'");
    double flat = 0, hier = 0;
    if (Status s = predictAllGather(cluster, mib * 1048576, ranks, perNode,
                                    false, flat);
        !s)
      return fail(s.message());
    if (Status s = predictAllGather(cluster, mib * 1048576, ranks, perNode,
                                    true, hier);
        !s)
      return fail(s.message());
    std::printf("all-gather   %g MiB over %d ranks (%d a node) on %s: flat "
                "%.3f ms, hierarchical %.3f ms (%.1f%% of flat)\n",
                mib, ranks, perNode, cluster.name.c_str(), flat * 1e3,
                hier * 1e3, 100 * hier / flat);
    return 0;
  }
  if (artifactDir.empty() || clusterPath.empty()) {
    usage();
    return 1;
  }
  auto started = std::chrono::steady_clock::now();
  std::unique_ptr<runtime::Artifact> artifact;
  if (Status s = runtime::Artifact::load(artifactDir, artifact); !s)
    return fail(s.message());
  Cluster cluster;
  if (Status s = loadCluster(clusterPath, cluster); !s)
    return fail(s.message());
  Prediction p;
  const plan::Plan &plan = artifact->getPlan();
  if (Status s = simulate(plan, cluster, p); !s)
    return fail(s.message());
  double elapsed = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - started)
                       .count();
  double peak = cluster.flops.at(dtypeKey(plan.training().dtype()));
  double tflops = p.flopsPerRank / p.stepSeconds / 1e12;
  double mfu = p.flopsPerRank / p.stepSeconds / peak;
  double other = std::max(0.0, p.stepSeconds - p.compute - p.communication -
                                   p.offload - p.bubble);
  if (!tracePath.empty())
    writeTrace(tracePath, p, plan);
  if (json) {
    std::printf(
        "{\"artifact\": \"%s\", \"cluster\": \"%s\", \"ranks\": %d, "
        "\"stages\": %d, \"step_s\": %.9g, \"tokens_per_s\": %.9g, "
        "\"samples_per_s\": %.9g, \"tflops_per_gpu\": %.6g, \"mfu\": %.6g, "
        "\"critical_path\": {\"compute_s\": %.9g, \"communication_s\": %.9g, "
        "\"offload_s\": %.9g, \"bubble_s\": %.9g, \"other_s\": %.9g}, "
        "\"peak_bytes\": %llu, \"gpu_memory_bytes\": %.0f, "
        "\"simulated_in_s\": %.3f}\n",
        artifactDir.c_str(), cluster.name.c_str(), p.world, p.stages,
        p.stepSeconds, double(p.tokensPerStep) / p.stepSeconds,
        double(p.samplesPerStep) / p.stepSeconds, tflops, mfu, p.compute,
        p.communication, p.offload, p.bubble, other,
        static_cast<unsigned long long>(p.peakBytes), cluster.memoryBytes,
        elapsed);
    return 0;
  }
  std::printf("strata-sim   %s on %s: %d ranks (%d a node), %d stage%s, %d "
              "instructions replayed in %.2f s\n",
              artifactDir.c_str(), cluster.name.c_str(), p.world,
              cluster.gpusPerNode, p.stages, p.stages == 1 ? "" : "s",
              p.instructions, elapsed);
  std::printf("step         %.3f ms predicted: %.0f tokens/s (%.1f samples/s), "
              "%.1f TFLOP/s per GPU, MFU %.1f%%\n",
              p.stepSeconds * 1e3, double(p.tokensPerStep) / p.stepSeconds,
              double(p.samplesPerStep) / p.stepSeconds, tflops, 100 * mfu);
  auto share = [&](double t) { return 100 * t / p.stepSeconds; };
  std::printf("critical     compute %.3f ms (%.1f%%), exposed communication "
              "%.3f ms (%.1f%%), offload I/O %.3f ms (%.1f%%), pipeline "
              "bubble %.3f ms (%.1f%%), other %.3f ms\n",
              p.compute * 1e3, share(p.compute), p.communication * 1e3,
              share(p.communication), p.offload * 1e3, share(p.offload),
              p.bubble * 1e3, share(p.bubble), other * 1e3);
  std::printf("memory       planned device peak %llu bytes per rank (%.2f GiB) "
              "of %.0f GiB: %s\n",
              static_cast<unsigned long long>(p.peakBytes),
              double(p.peakBytes) / double(1ull << 30),
              cluster.memoryBytes / double(1ull << 30),
              double(p.peakBytes) <= cluster.memoryBytes ? "fits"
                                                         : "DOES NOT FIT");
  if (!tracePath.empty())
    std::printf("wrote        %s (the predicted step, one track per stream)\n",
                tracePath.c_str());
  return 0;
}

} // namespace strata::sim
