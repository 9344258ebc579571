//===- Simulator.h - A training step on a described cluster -----*- C++ -*-===//
//
// strata-sim replays an artifact's per-rank programs on a cluster that is
// not here: every instruction gets a cost (a roofline for kernels, an
// alpha-beta ring for collectives with the NIC shared by the concurrent
// rings of a node, PCIe or SSD bandwidth for tier moves), and a
// discrete-event replay over the program's streams and events gives the
// step's time, its critical-path breakdown and a timeline. Ranks run the
// same program (SPMD), so one rank per pipeline stage is replayed, and a
// 1024-rank plan costs what an 8-rank one does.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_SIM_SIMULATOR_H
#define STRATA_SIM_SIMULATOR_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

namespace strata::plan {
class Plan;
} // namespace strata::plan

namespace strata::sim {

/// A cluster as a flat JSON object (sim/clusters/*.json). Bandwidths in
/// bytes/s, latencies in seconds, FLOP/s dense per GPU.
struct Cluster {
  std::string name;
  int gpusPerNode = 8;
  std::map<std::string, double> flops; // by dtype: "f32", "bf16", "f16"
  double memoryBytes = 0;              // per GPU
  double memoryBandwidth = 0;          // per GPU
  double hostMemoryBytes = 0;          // per node
  double pcieBandwidth = 0;            // per GPU, each way
  double ssdBandwidth = 0;             // per node
  double intraBandwidth = 0;           // per GPU (NVLink), each way
  double intraLatency = 0;
  double interBandwidth = 0;           // per node (all its NICs), each way
  double interLatency = 0;
  double kernelLaunch = 5e-6;
  /// The share of peak a kernel class reaches (assumed, for the GPU
  /// presets; a calibrated file measures the tables below instead).
  double gemmEfficiency = 0.7, attentionEfficiency = 0.5,
         memoryEfficiency = 0.8;
  std::string source; // where the figures come from

  /// Measured by strata-sim --calibrate (empty or 0: use the roofline).
  /// GEMM FLOP/s by the product's size (the cube root of M N K), sizes
  /// ascending: graph.linear / matmul, and linear_grad_weight.
  std::vector<std::pair<double, double>> gemmRate, gemmGradRate;
  /// Attention seconds per score (query-key pair) and per score and head
  /// element, by the sequence length, under the cluster file's keys:
  /// "attention" (the forward) or "attention_grad", then "" or "_causal"
  /// (per score it computes, half) or "_kept_causal" (keep_probabilities:
  /// the forward writing them, the gradient reading them), then "_score"
  /// or "_mac"; e.g. "attention_grad_kept_causal_mac". Measured on
  /// [H, T, D] operands; the same keys after "heads_inner." measured on
  /// [T, H, D] (heads_inner: the heads read in place), which such an
  /// instruction takes where the file has them.
  using Table = std::vector<std::pair<double, double>>;
  std::map<std::string, Table> attention;
  /// Seconds per element of a kernel's operands, by op, as [elements,
  /// seconds] rows; and seconds per byte of a copy by its bytes (any other
  /// kernel, and on a calibrated CPU a tier move: a copy of its operands or
  /// results, whichever is larger). A row kernel may have tables by its row
  /// length too, "OP/64" (rows of 64; "OP" alone: rows of 256), and the
  /// one nearest an instruction's last dimension costs it.
  /// "graph.transpose_rows" costs a transpose that keeps the last axis.
  std::map<std::string, std::vector<std::pair<double, double>>> opSeconds;
  std::vector<std::pair<double, double>> copySeconds;
  /// A GPU calibration's kernel tables for the narrow dtypes, by dtype
  /// ("bf16", "f16"): the file's keys above after "bf16." or "f16." (e.g.
  /// "bf16.gemm_rate", "bf16.op.graph.add"). An instruction whose first
  /// result has such a dtype takes its table there where it is measured
  /// (an f16 one then the bf16 tables: the same width), else the ones above
  /// (measured in f32).
  struct KernelTables {
    Table gemmRate, gemmGradRate;
    std::map<std::string, Table> attention, opSeconds;
  };
  std::map<std::string, KernelTables> narrow;
  /// The device a calibration measured: "cpu" (strata-sim --calibrate),
  /// "cuda" (--backend cuda), or "" (the presets, and files calibrated
  /// before the key). On "cuda" and on "" without attention tables, kept
  /// attention probabilities are costed as the CUDA kernels make them (the
  /// forward makes the scores again, the gradient ignores them); on "cuda"
  /// a tier move crosses PCIe even with copy_seconds in the file.
  std::string device;
  /// A calibrated CPU's streams are threads on shared cores: a wait on
  /// another stream's event that blocks costs the waiting thread's
  /// wake-up (seconds), and each byte a tier move copies on a side stream
  /// takes the compute stream's kernels this many seconds of CPU; so does
  /// each ring byte of a collective on a side stream (an all-gather's, a
  /// reduction's). 0 (the GPU presets): free.
  double eventWait = 0, copyComputeCost = 0;
  double gatherComputeCost = 0, reduceComputeCost = 0;
  /// ... and each collective on a side stream that waits for a late rank,
  /// its thread polling on the kernels' core (seconds a call).
  double pollComputeCost = 0;
  /// ... and, with more ranks than cores (a calibrated, oversubscribed
  /// host), the wall time each collective over all the host's ranks adds:
  /// the ranks the scheduler set aside reach it late (seconds a call; a
  /// smaller group (g - 1) / (W - 1) of it).
  double collectiveSync = 0;
  /// ... measured by group size where the calibration could (a group of
  /// g ranks: its seconds a call), which then takes precedence.
  Table collectiveSyncByGroup;
  /// A calibrated link's bandwidth by the bytes a ring step moves on it
  /// ([bytes, bytes a second] rows, the inter-node one the node's), by
  /// collective: a link's speed depends on the message (a TCP window, a
  /// shaper's bucket, the caches) and on the algorithm MPI runs. Where a
  /// file has one, it takes the place of the scalar bandwidth on that link:
  /// all-gathers and messages take `*BandwidthByBytes`, reduce-scatters
  /// and all-reduces their own table where the file has it, else that one.
  /// Index 0 intra-node, 1 inter-node.
  Table bandwidthByBytes[2], reduceBandwidthByBytes[2],
      allReduceBandwidthByBytes[2];
  /// The nodes are emulated on one host (a calibrated CPU): every link is
  /// the same shared memory, and an artifact of any --gpus-per-node runs.
  bool emulatedNodes = false;
};

/// One all-gather of `bytes` (the gathered result on each rank) over a
/// partition group of `ranks` ranks, `perNode` to a node, flat or
/// hierarchical (MiCS: across the nodes, then inside each): the seconds the
/// replay gives it on `cluster`, by the same cost model as a plan's.
runtime::Status predictAllGather(const Cluster &cluster, double bytes,
                                 int ranks, int perNode, bool hierarchical,
                                 double &seconds);

/// strata-sim --calibrate: microbenchmarks of this machine.
struct CalibrateOptions {
  double secondsPerBenchmark = 0.05;
  /// Every benchmark runs once a round; the file holds each figure's
  /// median over the rounds.
  int rounds = 3;
  /// "cpu": the CPU backend's kernels and the MPI ranks' collectives;
  /// "cuda": the CUDA backend's kernels on GPU 0 (calibrateCuda).
  std::string backend = "cpu";
  /// cuda: f32 products may round to TF32 (strata-run --tf32).
  bool tf32 = false;
};

/// Measures this machine (with every rank the launch started, at once) into
/// a cluster file's JSON text, on rank 0 (other ranks: empty).
runtime::Status calibrate(const CalibrateOptions &options, std::string &json);

/// Measures GPU 0 through the CUDA backend's own kernels (products by size
/// and dtype, attention, the elementwise, normalization, loss and
/// optimizer kernels in f32 and bf16, device and host copies, the
/// per-kernel gap) into a one-GPU cluster file's JSON text.
runtime::Status calibrateCuda(const CalibrateOptions &options,
                              std::string &json);

/// Reads a cluster file; one-line errors naming the key.
runtime::Status loadCluster(const std::string &path, Cluster &out);

/// One span of the predicted timeline.
struct Span {
  int stage = 0;
  int stream = 0;
  std::string name;
  double start = 0, duration = 0;
  /// The stream's name ("compute", "collective", ...), the trace's "cat"
  /// as strata-run --trace writes it.
  std::string category;
  /// The instruction's index in its program (-1: none).
  int instruction = -1;
};

struct Prediction {
  double stepSeconds = 0;
  /// Where the critical path (the compute stream of the slowest stage)
  /// spends the step: kernels, waiting for collectives, waiting for tier
  /// moves, waiting for another stage.
  double compute = 0, communication = 0, offload = 0, bubble = 0;
  double flopsPerRank = 0;     // counted FLOPs of a step on one rank
  uint64_t tokensPerStep = 0;  // over all ranks
  uint64_t samplesPerStep = 0;
  uint64_t peakBytes = 0;      // the plan's device peak, largest stage
  int world = 1, stages = 1, instructions = 0;
  std::vector<Span> timeline;  // one step, every replayed stage
};

/// Predicts one optimizer step of `plan` on `cluster`.
runtime::Status simulate(const plan::Plan &plan, const Cluster &cluster,
                         Prediction &out);

/// strata-sim's main.
int simMain(int argc, char **argv);

} // namespace strata::sim

#endif // STRATA_SIM_SIMULATOR_H
