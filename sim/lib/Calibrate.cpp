//===- Calibrate.cpp - This machine, measured into a cluster file ---------===//
//
// strata-sim --calibrate describes the machine it runs on the way the
// cluster presets describe a GPU node, from microbenchmarks alone: the CPU
// backend's own kernels on generic shapes (GEMMs by size, attention by
// head width, the per-element cost of the common elementwise, normalization,
// loss and optimizer kernels), a streaming copy for memory bandwidth, the
// device's per-instruction overhead, and the MPI collectives between the
// ranks it was launched with. No model's step is run or fitted.
//
// Launched with N ranks (mpirun -np N), every rank runs each benchmark at
// the same time, as the ranks of a training job share the cores: the
// figures are the node shared N ways (the thread pool gives each rank its
// share of the cores, as it does in strata-run), and the file says
// gpus_per_node N. Rank 0 writes the file.
//
//===----------------------------------------------------------------------===//

#include "strata/Sim/Simulator.h"

#include "strata/Runtime/Communicator.h"
#include "strata/Runtime/Device.h"
#include "strata/Runtime/Kernel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <vector>

namespace strata::sim {
namespace {

using runtime::DType;
using runtime::KernelAttrs;
using runtime::KernelContext;
using runtime::Status;
using runtime::TensorView;

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A tensor that owns its bytes (filled with small random values).
struct Owned {
  Owned(DType dtype, std::vector<int64_t> shape, uint64_t seed = 1) {
    view.dtype = dtype;
    view.shape = std::move(shape);
    bytes.assign(view.bytes() + 64, 0);
    view.data = bytes.data();
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    if (dtype == DType::F32)
      for (int64_t i = 0; i < view.numel(); ++i)
        view.as<float>()[i] = u(rng);
  }
  std::vector<unsigned char> bytes;
  TensorView view;
};

/// Every rank's mean of `value` (one rank: the value).
double meanOverRanks(runtime::Communicator *comm, double value) {
  if (!comm)
    return value;
  double v = value;
  if (!comm->sumOverWorld(&v, 1, "calibration"))
    return value;
  return v / comm->world();
}

/// Waits for every rank (a sum over the world).
void barrier(runtime::Communicator *comm) {
  if (comm) {
    double zero = 0;
    (void)comm->sumOverWorld(&zero, 1, "calibration barrier");
  }
}

/// Seconds one call of `body` takes: the median of seven batches run for
/// about `budget` seconds after a warm-up, averaged over the ranks (which
/// all run it at once).
double timeIt(runtime::Communicator *comm, const std::function<Status()> &body,
              double budget, Status &failed) {
  barrier(comm);
  Status first = body();
  // Every rank takes the same branch and runs the same number of calls
  // (a collective's calls must pair up across the ranks).
  if (meanOverRanks(comm, first ? 1.0 : 0.0) < 1.0) {
    failed = first ? Status::error("failed on another rank") : first;
    return 0;
  }
  double start = now();
  (void)body();
  double once = std::max(now() - start, 1e-7);
  int perBatch = std::max(
      1, int(std::lround(meanOverRanks(comm, budget / 7 / once))));
  std::vector<double> batches;
  for (int b = 0; b < 7; ++b) {
    double t0 = now();
    for (int i = 0; i < perBatch; ++i)
      (void)body();
    batches.push_back((now() - t0) / perBatch);
  }
  // The median batch: with more ranks than cores, the fastest would be one
  // that ran while the others waited.
  std::sort(batches.begin(), batches.end());
  return meanOverRanks(comm, batches[batches.size() / 2]);
}

/// Runs the CPU kernel `op` on the given tensors.
Status runKernel(const std::string &op, std::vector<TensorView> in,
                 std::vector<TensorView> out, const KernelAttrs &attrs) {
  const runtime::KernelFn *fn = runtime::getCpuKernels().lookup(op);
  if (!fn)
    return Status::error("no CPU kernel for " + op);
  KernelContext ctx{in, out, attrs, 1};
  return (*fn)(ctx);
}

struct Bench {
  runtime::Communicator *comm;
  double budget;
  std::ostringstream notes; // what could not be measured

  /// The elements of the last kernel's operands (what the simulator scales
  /// a per-element cost by).
  double inputElements = 0;

  double kernel(const std::string &op, const std::vector<Owned *> &in,
                const std::vector<Owned *> &out, const KernelAttrs &attrs) {
    std::vector<TensorView> iv, ov;
    inputElements = 0;
    for (Owned *t : in) {
      iv.push_back(t->view);
      inputElements += double(t->view.numel());
    }
    for (Owned *t : out)
      ov.push_back(t->view);
    Status failed = Status::ok();
    double t = timeIt(
        comm, [&] { return runKernel(op, iv, ov, attrs); }, budget, failed);
    if (!failed) {
      notes << op << ": " << failed.message() << "; ";
      return 0;
    }
    return t;
  }
};

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

} // namespace

Status calibrate(const CalibrateOptions &options, std::string &json) {
  std::unique_ptr<runtime::Communicator> comm;
  int world = 1;
  if (const char *w = std::getenv("OMPI_COMM_WORLD_SIZE"))
    world = std::max(1, std::atoi(w));
  // Ranks on more than one host (mpirun --host, tools/cluster.sh): the
  // nodes are real, each link class measured apart; on one host they are
  // emulated, every link its shared memory.
  int perNode = world;
  if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    if (int k = std::atoi(local); k > 0 && k < world && world % k == 0)
      perNode = k;
  bool spans = perNode < world;
  if (world > 1) {
    runtime::TopologyInfo topology{world, perNode, world, 1};
    if (Status s = runtime::Communicator::create(topology, 120, comm); !s)
      return s;
  }
  Bench b{comm.get(), options.secondsPerBenchmark, {}};
  std::ostringstream out;
  out << "{\n";
  out << "  \"name\": \"this machine, " << world << " rank"
      << (world == 1 ? "" : "s") << " (strata-sim --calibrate)\",\n";
  out << "  \"gpus_per_node\": " << perNode << ",\n";
  out << "  \"emulated_nodes\": " << (spans ? 0 : 1) << ",\n";

  // GEMMs: graph.linear and graph.linear_grad_weight on square products.
  std::vector<int64_t> sizes = {8, 16, 32, 64, 128, 256, 512, 1024};
  double peak = 0;
  std::ostringstream linear, gradWeight;
  for (int64_t n : sizes) {
    Owned x(DType::F32, {n, n}), w(DType::F32, {n, n}, 2), y(DType::F32, {n, n});
    double flops = 2.0 * double(n) * double(n) * double(n);
    double t = b.kernel("graph.linear", {&x, &w}, {&y}, {});
    KernelAttrs transposed;
    transposed.set("transpose_weight", int64_t(1));
    double tg = b.kernel("graph.linear_grad_weight", {&y, &x}, {&w}, transposed);
    if (t > 0) {
      linear << (linear.tellp() ? ", " : "") << n << ", " << number(flops / t);
      peak = std::max(peak, flops / t);
    }
    if (tg > 0)
      gradWeight << (gradWeight.tellp() ? ", " : "") << n << ", "
                 << number(flops / tg);
  }
  out << "  \"flops_f32\": " << number(peak) << ",\n";
  out << "  \"gemm_rate\": [" << linear.str() << "],\n";
  out << "  \"gemm_grad_rate\": [" << gradWeight.str() << "],\n";

  // Attention: seconds per score and per score and head element (from two
  // head widths), forward and backward, plain and causal, by the sequence
  // length (the work per row sets how well a row's loops run).
  {
    std::map<std::string, std::ostringstream> tables;
    for (int64_t T : {64, 256, 1024}) {
      const int64_t H = std::max<int64_t>(1, 16384 / T);
      double fwd[2] = {0, 0}, bwd[2] = {0, 0}, causalFwd[2] = {0, 0},
             causalBwd[2] = {0, 0};
      const int64_t widths[2] = {16, 64};
      for (int i = 0; i < 2; ++i) {
        int64_t D = widths[i];
        Owned q(DType::F32, {H, T, D}, 3), k(DType::F32, {H, T, D}, 4),
            v(DType::F32, {H, T, D}, 5), y(DType::F32, {H, T, D}),
            dy(DType::F32, {H, T, D}, 6), dq(DType::F32, {H, T, D}),
            dk(DType::F32, {H, T, D}), dv(DType::F32, {H, T, D});
        KernelAttrs a;
        a.set("scale", 1.0 / std::sqrt(double(D)));
        a.set("causal", int64_t(0));
        a.set("dropout_ratio", 0.0);
        double scores = double(H * T * T);
        fwd[i] = b.kernel("graph.attention", {&q, &k, &v}, {&y}, a) / scores;
        bwd[i] = b.kernel("graph.attention_grad", {&dy, &q, &k, &v},
                          {&dq, &dk, &dv}, a) /
                 scores;
        // Causal: per score the simulator counts (half of them).
        a.set("causal", int64_t(1));
        causalFwd[i] = b.kernel("graph.attention", {&q, &k, &v}, {&y}, a) /
                       (scores / 2);
        causalBwd[i] = b.kernel("graph.attention_grad", {&dy, &q, &k, &v},
                                {&dq, &dk, &dv}, a) /
                       (scores / 2);
      }
      auto solve = [&](const double s[2], const std::string &name) {
        double mac =
            std::max(0.0, (s[1] - s[0]) / double(widths[1] - widths[0]));
        // Both positive (the table's values are): a floor of 1e-15.
        double score = std::max(1e-15, s[0] - mac * double(widths[0]));
        mac = std::max(1e-15, mac);
        for (auto [key, value] : {std::pair<std::string, double>{
                                      name + "_score", score},
                                  {name + "_mac", mac}}) {
          std::ostringstream &row = tables[key];
          row << (row.tellp() ? ", " : "") << T << ", " << number(value);
        }
      };
      solve(fwd, "attention");
      solve(bwd, "attention_grad");
      solve(causalFwd, "attention_causal");
      solve(causalBwd, "attention_grad_causal");
    }
    for (auto &[key, row] : tables)
      out << "  \"" << key << "\": [" << row.str() << "],\n";
  }

  // Per element of a kernel's operands, at three sizes
  // (in cache, in the last-level cache, in memory), rows of 256.
  {
    std::map<std::string, std::ostringstream> tables;
    for (int64_t R : {16, 256, 4096}) {
      const int64_t C = 256;
      const double n = double(R * C);
      Owned a(DType::F32, {R, C}, 7), c(DType::F32, {R, C}, 8),
          y(DType::F32, {R, C}), dy(DType::F32, {R, C}, 9),
          scale(DType::F32, {C}, 10), bias(DType::F32, {C}, 11),
          dscale(DType::F32, {C}), dbias(DType::F32, {C}),
          labels(DType::I64, {R}), loss(DType::F32, {}), one(DType::F32, {}),
          sums(DType::F32, {1, C}), t(DType::F32, {C, R});
      for (int64_t i = 0; i < R; ++i)
        labels.view.as<int64_t>()[i] = (i * 7) % C;
      one.view.as<float>()[0] = 1.0f;
      auto add = [&](const std::string &op, double seconds) {
        if (seconds > 0) {
          std::ostringstream &row = tables[op];
          row << (row.tellp() ? ", " : "") << number(b.inputElements) << ", "
              << number(seconds / b.inputElements);
        }
      };
      KernelAttrs none;
      add("graph.add", b.kernel("graph.add", {&a, &c}, {&y}, none));
      add("graph.mul", b.kernel("graph.mul", {&a, &c}, {&y}, none));
      add("graph.gelu", b.kernel("graph.gelu", {&a}, {&y}, none));
      KernelAttrs gelu;
      gelu.set("kind", std::string("gelu"));
      add("graph.unary_grad",
          b.kernel("graph.unary_grad", {&dy, &a, &c}, {&y}, gelu));
      KernelAttrs ln;
      ln.set("axis", int64_t(1));
      ln.set("epsilon", 1e-5);
      add("graph.layer_norm",
          b.kernel("graph.layer_norm", {&a, &scale, &bias}, {&y}, ln));
      add("graph.layer_norm_grad",
          b.kernel("graph.layer_norm_grad", {&dy, &a, &scale},
                   {&y, &dscale, &dbias}, ln));
      KernelAttrs lastAxis;
      lastAxis.set("axis", int64_t(1));
      add("graph.softmax", b.kernel("graph.softmax", {&a}, {&y}, lastAxis));
      add("graph.cross_entropy",
          b.kernel("graph.cross_entropy", {&a, &labels}, {&loss}, none));
      add("graph.cross_entropy_grad",
          b.kernel("graph.cross_entropy_grad", {&one, &a, &labels}, {&y},
                   none));
      KernelAttrs perm;
      perm.set("perm", std::vector<int64_t>{1, 0});
      add("graph.transpose", b.kernel("graph.transpose", {&a}, {&t}, perm));
      KernelAttrs rows;
      rows.set("axes", std::vector<int64_t>{0});
      rows.set("keepdims", int64_t(1));
      add("graph.reduce_sum",
          b.kernel("graph.reduce_sum", {&a}, {&sums}, rows));
      Owned p(DType::F32, {R, C}, 12), g(DType::F32, {R, C}, 13),
          m(DType::F32, {R, C}), v(DType::F32, {R, C}), lr(DType::F64, {}),
          step(DType::I64, {}), gradScale(DType::F32, {});
      lr.view.as<double>()[0] = 1e-3;
      step.view.as<int64_t>()[0] = 1;
      gradScale.view.as<float>()[0] = 1.0f;
      KernelAttrs adamw;
      adamw.set("beta1", 0.9);
      adamw.set("beta2", 0.999);
      adamw.set("eps", 1e-8);
      adamw.set("weight_decay", 0.01);
      add("graph.adamw_update",
          b.kernel("graph.adamw_update",
                   {&p, &g, &m, &v, &lr, &step, &gradScale}, {&p, &m, &v},
                   adamw));
      // Any other kernel: a copy of its bytes (a reshape, concat, slice).
      std::vector<float> src(size_t(R * C), 1.0f), dst(size_t(R * C));
      Status failed = Status::ok();
      double copy = timeIt(
          comm.get(),
          [&] {
            std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
            return Status::ok();
          },
          b.budget, failed);
      std::ostringstream &copies = tables["copy"];
      copies << (copies.tellp() ? ", " : "") << number(n * 4) << ", "
             << number(copy / (n * 4));
    }
    for (auto &[op, row] : tables)
      out << "  \"" << (op == "copy" ? "copy_seconds" : "op." + op)
          << "\": [" << row.str() << "],\n";
  }

  // Memory bandwidth: a streaming copy of 64 MiB (read and write counted).
  double copyBandwidth = 0;
  {
    size_t bytes = size_t(64) << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    Status failed = Status::ok();
    double t = timeIt(
        comm.get(),
        [&] {
          std::memcpy(dst.data(), src.data(), bytes);
          return Status::ok();
        },
        b.budget, failed);
    copyBandwidth = double(bytes) / t;
    out << "  \"memory_bandwidth\": " << number(2.0 * copyBandwidth)
        << ",\n";
    out << "  \"memory_efficiency\": 1,\n";
  }

  // The device's cost per instruction: tiny kernels through stream 0.
  {
    std::unique_ptr<runtime::Device> device = runtime::createCpuDevice();
    Status failed = Status::ok();
    double perLaunch = 0;
    runtime::DeviceQueues *queues = &device->queues();
    if (queues->createQueues(1, 1)) {
      Owned x(DType::F32, {1}), y(DType::F32, {1});
      std::vector<TensorView> in = {x.view, x.view}, o = {y.view};
      KernelAttrs none;
      const runtime::KernelFn *fn = runtime::getCpuKernels().lookup("graph.add");
      KernelContext ctx{in, o, none, 1};
      const int launches = 2000;
      perLaunch = timeIt(
                      comm.get(),
                      [&]() -> Status {
                        for (int i = 0; i < launches; ++i)
                          if (Status s = queues->launch(0, *fn, ctx); !s)
                            return s;
                        return queues->synchronize(0);
                      },
                      b.budget, failed) /
                  launches;
    }
    out << "  \"kernel_launch\": " << number(perLaunch) << ",\n";
  }

  // Collectives: all-gathers through the Communicator at 64 B and 4 MiB a
  // rank, for the alpha-beta model of a ring (the latency per ring step,
  // the bandwidth of the bytes that cross each link). On one host every
  // link is its shared memory (the world's ring); across hosts, inside a
  // node (the intra group) and between nodes (the inter group, the node's
  // K rings at once through its NIC: its bandwidth is K times a ring's).
  struct Link {
    double latency = 0, bandwidth = 0;
  };
  auto measureLink = [&](runtime::Group group, int members) {
    Link link;
    auto gather = [&](size_t perRank) {
      std::vector<float> in(perRank / 4, 1.0f),
          outBuf(perRank / 4 * size_t(members));
      Status failed = Status::ok();
      return timeIt(
          comm.get(),
          [&] {
            return comm->allGather(group, {{DType::F32, in.data(),
                                            outBuf.data(), in.size()}});
          },
          b.budget, failed);
    };
    double steps = members - 1;
    double small = gather(64), large = gather(size_t(4) << 20);
    link.latency = small / steps;
    double onRing = steps * double(size_t(4) << 20);
    link.bandwidth = onRing / std::max(large - steps * link.latency, 1e-9);
    return link;
  };
  Link intra, inter;
  if (!comm) {
    // One rank exchanges nothing: the copy bandwidth stands in.
    intra.bandwidth = inter.bandwidth = copyBandwidth;
  } else if (!spans) {
    intra = inter = measureLink(runtime::Group::World, world);
  } else {
    intra = perNode > 1 ? measureLink(runtime::Group::Intra, perNode)
                        : Link{0, copyBandwidth};
    inter = measureLink(runtime::Group::Inter, world / perNode);
    inter.bandwidth *= perNode;
  }
  out << "  \"intra_bandwidth\": " << number(intra.bandwidth) << ",\n";
  out << "  \"intra_latency\": " << number(intra.latency) << ",\n";
  out << "  \"inter_bandwidth\": " << number(inter.bandwidth) << ",\n";
  out << "  \"inter_latency\": " << number(inter.latency) << ",\n";
  // A tier move on the CPU is a copy between two host buffers.
  out << "  \"pcie_bandwidth\": " << number(copyBandwidth) << ",\n";
  double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  out << "  \"memory_bytes\": " << number(memory / perNode) << ",\n";
  out << "  \"host_memory_bytes\": " << number(memory) << ",\n";
  unsigned cores = std::thread::hardware_concurrency();
  out << "  \"source\": \"measured by strata-sim --calibrate on " << cores
      << " cores with " << world << " rank" << (world == 1 ? "" : "s")
      << " at once" << (spans ? ", " + std::to_string(perNode) + " a node"
                              : std::string())
      << "; not measured: " << b.notes.str() << "\"\n";
  out << "}\n";
  if (!comm || comm->rank() == 0)
    json = out.str();
  return Status::ok();
}

} // namespace strata::sim
