//===- Calibrate.cpp - This machine, measured into a cluster file ---------===//
//
// strata-sim --calibrate describes the machine it runs on the way the
// cluster presets describe a GPU node, from microbenchmarks alone: the CPU
// backend's own kernels on generic shapes (GEMMs by size, attention by
// head width, the per-element cost of the common elementwise, normalization,
// loss and optimizer kernels, on rows of 256 and the row kernels on rows of
// 64 too), copies for memory bandwidth, the device's per-instruction
// overhead, a blocking wait on another stream, the CPU a copy stream's
// thread takes from the kernels, and the MPI collectives between the ranks
// it was launched with. No model's step is run or fitted.
//
// A kernel's calls take turns over copies of its tensors spanning twice the
// cores' L2, so its operands come from the last-level cache as in a step.
// The whole set runs in rounds and each figure is the median over them: a
// burst of load from elsewhere spoils a round, not the file. With a core or
// more a rank, each kernel call is timed alone and the median call kept,
// leaving out the calls another job preempted.
//
// Launched with N ranks (mpirun -np N), every rank runs each benchmark at
// the same time, as the ranks of a training job share the cores: the
// figures are the node shared N ways (the thread pool gives each rank its
// share of the cores, as it does in strata-run), and the file says
// gpus_per_node N. Rank 0 writes the file.
//
// No collective runs while a benchmark's helper thread copies without a
// pause (copyComputeCost): on tools/cluster.sh's emulated nodes (4 ranks
// on 2 cores, TCP between the nodes) the barrier that used to run beside
// it never completed in about one calibration in five, every rank having
// arrived (2026-11-27: barrier #611, #1241 or #1869, that benchmark in
// rounds 1, 2 and 3; docs/simulation.md).
//
//===----------------------------------------------------------------------===//

#include "strata/Sim/Simulator.h"

#include "CalibrationFigures.h"

#include "strata/Runtime/Communicator.h"
#include "strata/Runtime/Device.h"
#include "strata/Runtime/FusedProgram.h"
#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/NarrowFloat.h"

#include <algorithm>
#include <atomic>
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
#include <set>
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
using namespace calibration;

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
    if (dtype == DType::BF16)
      for (int64_t i = 0; i < view.numel(); ++i)
        view.as<uint16_t>()[i] = runtime::bf16Bits(u(rng));
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

/// Seconds one call of `body` takes: the median of `batches` batches run
/// for about `budget` seconds after a warm-up, averaged over the ranks
/// (which all run it at once). With `perCall`, the median of the calls,
/// each timed alone: a call that another job preempted is left out.
double timeIt(runtime::Communicator *comm, const std::function<Status()> &body,
              double budget, Status &failed, int batches = 7,
              bool perCall = false) {
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
      1, int(std::lround(meanOverRanks(comm, budget / batches / once))));
  std::vector<double> times;
  for (int b = 0; b < batches; ++b) {
    double t0 = now();
    for (int i = 0; i < perBatch; ++i) {
      double c0 = perCall ? now() : 0;
      (void)body();
      if (perCall)
        times.push_back(now() - c0);
    }
    if (!perCall)
      times.push_back((now() - t0) / perBatch);
  }
  // The median batch: with more ranks than cores, the fastest would be one
  // that ran while the others waited.
  std::sort(times.begin(), times.end());
  return meanOverRanks(comm, times[times.size() / 2]);
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
  int batches; // a benchmark's timed batches a round
  /// Each kernel call timed alone, the median call kept (timeIt): where
  /// the job's threads do not outnumber the cores, a slower call was
  /// preempted by another job's.
  bool perCall = false;
  std::set<std::string> notes; // what could not be measured
  /// With more ranks than cores on one host: for each partition-group size
  /// g (2, 4, ... below the world, dividing it), a communicator whose
  /// partition groups are g ranks each (collective_sync by group size).
  std::vector<std::pair<int, runtime::Communicator *>> groups;

  /// The elements of the last kernel's operands (what the simulator scales
  /// a per-element cost by).
  double inputElements = 0;

  /// Bytes the operands of successive calls must span so that each call
  /// reads them from the last-level cache, as a step's kernels do (a
  /// step's tensors outgrow the cores' own caches): twice the cores' L2.
  size_t rotateBytes = 4 << 20;

  /// Seconds one call of `op` takes, its operands read from the last-level
  /// cache: the calls take turns over enough copies of the tensors (an
  /// operand that is also a result stays one tensor in each copy).
  double kernel(const std::string &op, const std::vector<Owned *> &in,
                const std::vector<Owned *> &out, const KernelAttrs &attrs) {
    inputElements = 0;
    size_t bytes = 0;
    std::vector<Owned *> distinct;
    for (Owned *t : in)
      inputElements += double(t->view.numel());
    for (const std::vector<Owned *> *list : {&in, &out})
      for (Owned *t : *list)
        if (std::find(distinct.begin(), distinct.end(), t) == distinct.end()) {
          distinct.push_back(t);
          bytes += t->view.bytes();
        }
    size_t sets = std::clamp<size_t>(rotateBytes / std::max<size_t>(bytes, 1),
                                     1, 32);
    // Copy s of tensor t: the tensor itself in copy 0.
    std::vector<std::vector<std::unique_ptr<Owned>>> copies(sets);
    std::vector<std::vector<TensorView>> iv(sets), ov(sets);
    for (size_t s = 0; s < sets; ++s) {
      auto viewOf = [&](Owned *t) {
        if (s == 0)
          return t->view;
        size_t k = size_t(std::find(distinct.begin(), distinct.end(), t) -
                          distinct.begin());
        if (copies[s].empty())
          copies[s].resize(distinct.size());
        if (!copies[s][k]) {
          copies[s][k] = std::make_unique<Owned>(*t);
          copies[s][k]->view.data = copies[s][k]->bytes.data();
        }
        return copies[s][k]->view;
      };
      for (Owned *t : in)
        iv[s].push_back(viewOf(t));
      for (Owned *t : out)
        ov[s].push_back(viewOf(t));
    }
    Status failed = Status::ok();
    size_t call = 0;
    double t = timeIt(
        comm,
        [&] {
          size_t s = call++ % sets;
          return runKernel(op, iv[s], ov[s], attrs);
        },
        budget, failed, batches, perCall);
    if (!failed) {
      notes.insert(op + ": " + failed.message());
      return 0;
    }
    return t;
  }
};

/// A GEMM loop (graph.linear on 256 x 256 products) standing for the
/// compute stream's kernels while another thread takes CPU beside them:
/// the three costs below measure what that thread's work slows it by.
class GemmLoop {
public:
  GemmLoop()
      : x_(DType::F32, {kN, kN}), w_(DType::F32, {kN, kN}, 2),
        y_(DType::F32, {kN, kN}), in_{x_.view, w_.view}, out_{y_.view},
        ctx_{in_, out_, none_, 1},
        fn_(runtime::getCpuKernels().lookup("graph.linear")) {
    if (fn_)
      (void)(*fn_)(ctx_); // warm
  }
  GemmLoop(const GemmLoop &) = delete;
  GemmLoop &operator=(const GemmLoop &) = delete;

  explicit operator bool() const { return fn_ != nullptr; }

  /// Seconds `count` calls take.
  double run(int count) {
    double t0 = now();
    for (int i = 0; i < count; ++i)
      (void)(*fn_)(ctx_);
    return now() - t0;
  }

  /// Seconds a call takes alone, over a loop of about `budget` seconds
  /// (its length set by the first call of this).
  double perCall(double budget) {
    if (loopCalls_ == 0)
      loopCalls_ = std::max(
          4, int(std::lround(budget / std::max(run(2) / 2, 1e-7))));
    return run(loopCalls_) / loopCalls_;
  }

  /// The loop's seconds that `work`, run on a second thread, takes from
  /// it: the loop runs for as long as `work` does, against its time alone
  /// (the least of a loop before and one after). Every rank starts `work`
  /// together (a barrier over `comm`).
  double lostBeside(runtime::Communicator *comm, double budget,
                    const std::function<void()> &work) {
    double alone = perCall(budget);
    barrier(comm);
    std::atomic<bool> done{false};
    std::thread side([&] {
      work();
      done.store(true, std::memory_order_release);
    });
    int calls = 0;
    double t0 = now();
    while (!done.load(std::memory_order_acquire)) {
      (void)(*fn_)(ctx_);
      ++calls;
    }
    double shared = now() - t0;
    side.join();
    alone = std::min(alone, perCall(budget));
    return std::max(0.0, shared - double(calls) * alone);
  }

private:
  static constexpr int64_t kN = 256;
  Owned x_, w_, y_;
  std::vector<TensorView> in_, out_;
  KernelAttrs none_;
  KernelContext ctx_;
  const runtime::KernelFn *fn_;
  int loopCalls_ = 0;
};

/// Seconds per byte of compute a concurrent copy costs: a GEMM loop on the
/// kernels' pool alone, then with a second thread copying 1 MiB blocks (as
/// a copy stream's thread does during an offloaded step), both at once on
/// every rank. Zero where the copy slows nothing (cores to spare).
double copyComputeCost(Bench &b) {
  GemmLoop gemm;
  if (!gemm)
    return 0;
  double once = std::max(gemm.run(1), 1e-6);
  int calls = std::max(
      4, int(std::lround(meanOverRanks(b.comm, b.budget / once))));
  auto loop = [&] {
    barrier(b.comm);
    return gemm.run(calls);
  };
  double alone = loop();
  const size_t block = size_t(1) << 20;
  std::vector<char> src(block, 1), dst(block, 0);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> copied{0};
  // The ranks meet before the copying thread starts: no collective runs
  // beside it (the note at the top of the file).
  barrier(b.comm);
  std::thread copier([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      std::memcpy(dst.data(), src.data(), block);
      copied.fetch_add(int64_t(block), std::memory_order_relaxed);
    }
  });
  double shared = gemm.run(calls);
  stop = true;
  copier.join();
  alone = std::min(alone, loop());
  double perByte = std::max(0.0, shared - alone) /
                   std::max(double(copied.load()), 1.0);
  return meanOverRanks(b.comm, perByte);
}

/// Seconds of compute per ring byte a collective on another stream costs
/// (all-gathers, or with `reduce` sum reduce-scatters, over the world): a
/// CPU rank's collective runs on its stream's thread, which copies (and
/// adds) the bytes through shared memory on the cores the kernels use. A
/// GEMM loop alone, then for as long as a second thread runs a fixed number
/// of 1 MiB-a-rank collectives (the same count on every rank, so they pair
/// up); the compute time lost over the ring bytes moved. Zero where the
/// collective slows nothing (a rank with cores to spare).
double collectiveComputeCost(Bench &b, bool reduce) {
  runtime::Communicator *comm = b.comm;
  if (!comm || comm->world() < 2)
    return 0;
  GemmLoop gemm;
  if (!gemm)
    return 0;
  const int world = comm->world();
  const size_t perRank = size_t(1) << 20;
  std::vector<float> send(perRank / 4 * (reduce ? size_t(world) : 1), 1.0f),
      recv(perRank / 4 * (reduce ? 1 : size_t(world)));
  runtime::Communicator::Buffer buffer{DType::F32, send.data(), recv.data(),
                                       reduce ? recv.size() : send.size()};
  auto collective = [&] {
    return reduce ? comm->reduceScatterSum(runtime::Group::World, {buffer})
                  : comm->allGather(runtime::Group::World, {buffer});
  };
  barrier(comm);
  (void)collective();
  double start = now();
  (void)collective();
  double once = std::max(now() - start, 1e-6);
  int calls = std::max(4, int(std::lround(meanOverRanks(comm, b.budget / once))));
  double lost = gemm.lostBeside(comm, b.budget, [&] {
    for (int i = 0; i < calls; ++i)
      (void)collective();
  });
  double ringBytes = double(calls) * double(world - 1) * double(perRank);
  return meanOverRanks(comm, lost / ringBytes);
}

/// Seconds of compute a collective on another stream costs while it waits
/// for a rank that is late: the runtime's stream thread polls the request
/// (spinning first, then in short sleeps; Communicator::waitAll) on the
/// core the kernels use. Odd ranks' side threads start 64 B all-gathers at
/// once, even ranks' 300 us later, so the odd ranks wait; the GEMM loop
/// beside the side thread on an odd rank loses this much a call. (Zero
/// with one rank, or where the polling slows nothing.)
double pollComputeCost(Bench &b) {
  runtime::Communicator *comm = b.comm;
  if (!comm || comm->world() < 2)
    return 0;
  GemmLoop gemm;
  if (!gemm)
    return 0;
  const int world = comm->world();
  std::vector<float> send(16, 1.0f), recv(16 * size_t(world));
  runtime::Communicator::Buffer buffer{DType::F32, send.data(), recv.data(),
                                       send.size()};
  const bool waits = comm->rank() % 2 == 1;
  const auto late = std::chrono::microseconds(300);
  int calls = std::max(8, int(std::lround(b.budget / 400e-6)));
  double lostAll = gemm.lostBeside(comm, b.budget, [&] {
    for (int i = 0; i < calls; ++i) {
      if (!waits)
        std::this_thread::sleep_for(late);
      (void)comm->allGather(runtime::Group::World, {buffer});
    }
  });
  double lost = waits ? lostAll / calls : 0.0;
  // The mean over the ranks that waited.
  double waiting = double(world / 2);
  return meanOverRanks(comm, lost) * double(world) / waiting;
}

/// Seconds of wall time a collective adds to a step when the ranks
/// outnumber the cores: every rank runs about 1 ms of GEMMs (all of them
/// at once, taking turns on the cores), then a 64 B all-gather, over and
/// over; against the same GEMMs without the all-gathers. A collective
/// completes only once every rank has reached it, and a rank the
/// scheduler has set aside reaches it a time slice late: the cost a
/// step's gathers and reductions add on an oversubscribed host, which
/// the link's latency (measured back to back, every rank spinning in the
/// collective) leaves out. Over `group` of `comm`: every group of the
/// kind gathers at once, as a plan's partition groups do.
double oversubscribedSync(Bench &b, runtime::Communicator *comm,
                          runtime::Group group) {
  if (!comm || comm->world() < 2)
    return 0;
  GemmLoop gemm;
  if (!gemm)
    return 0;
  std::vector<float> send(16, 1.0f),
      recv(16 * comm->members(group).size());
  runtime::Communicator::Buffer buffer{DType::F32, send.data(), recv.data(),
                                       send.size()};
  barrier(comm);
  double once = std::max(gemm.run(4) / 4, 1e-7);
  int perIteration =
      std::max(1, int(std::lround(meanOverRanks(comm, 1e-3 / once))));
  int iterations = std::max(8, int(std::lround(b.budget / 2e-3)));
  auto loop = [&](bool collective) {
    barrier(comm);
    double t0 = now();
    for (int i = 0; i < iterations; ++i) {
      (void)gemm.run(perIteration);
      if (collective)
        (void)comm->allGather(group, {buffer});
    }
    return now() - t0;
  };
  double alone = loop(false);
  double with = loop(true);
  alone = std::min(alone, loop(false));
  return meanOverRanks(comm, std::max(0.0, with - alone) / iterations);
}

/// The suffixes of a link's bandwidth tables by message size (after
/// "intra" or "inter"), by collective: all-gathers, reduce-scatters,
/// all-reduces.
constexpr const char *kLinkTables[] = {"_bandwidth_by_bytes",
                                       "_reduce_bandwidth_by_bytes",
                                       "_allreduce_bandwidth_by_bytes"};

/// One round: every benchmark once, into `f`.
void measureRound(Bench &b, int world, int perNode, bool spans, Figures &f) {
  runtime::Communicator *comm = b.comm;

  // GEMMs: graph.linear and graph.linear_grad_weight on square products,
  // in f32 and in bf16 ("bf16." tables: a --dtype bf16 plan's products).
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t n : {8, 16, 32, 64, 128, 256, 512, 1024}) {
      const std::string prefix = dtype == DType::BF16 ? "bf16." : "";
      Owned x(dtype, {n, n}), w(dtype, {n, n}, 2), y(dtype, {n, n});
      double flops = 2.0 * double(n) * double(n) * double(n);
      double t = b.kernel("graph.linear", {&x, &w}, {&y}, {});
      KernelAttrs transposed;
      transposed.set("transpose_weight", int64_t(1));
      double tg =
          b.kernel("graph.linear_grad_weight", {&y, &x}, {&w}, transposed);
      if (t > 0)
        f.row(prefix + "gemm_rate", double(n), flops / t);
      if (tg > 0)
        f.row(prefix + "gemm_grad_rate", double(n), flops / tg);
    }

  // Attention: seconds per score and per score and head element (from two
  // head widths), forward and backward, plain and causal, by the sequence
  // length (the work per row sets how well a row's loops run); on
  // [H, T, D] operands, and again on [T, H, D] with heads_inner (the
  // layout strata-raise-graph gives the exported models, whose rows are
  // H D apart: "heads_inner." tables).
  for (bool inner : {false, true})
    for (int64_t T : {32, 64, 256, 1024}) {
      const int64_t H = std::max<int64_t>(1, 4096 / T);
      double fwd[2] = {0, 0}, bwd[2] = {0, 0}, causalFwd[2] = {0, 0},
             causalBwd[2] = {0, 0}, keptFwd[2] = {0, 0}, keptBwd[2] = {0, 0};
      const int64_t widths[2] = {16, 64};
      for (int i = 0; i < 2; ++i) {
        int64_t D = widths[i];
        std::vector<int64_t> shape = inner ? std::vector<int64_t>{T, H, D}
                                           : std::vector<int64_t>{H, T, D};
        Owned q(DType::F32, shape, 3), k(DType::F32, shape, 4),
            v(DType::F32, shape, 5), y(DType::F32, shape),
            dy(DType::F32, shape, 6), dq(DType::F32, shape),
            dk(DType::F32, shape), dv(DType::F32, shape);
        KernelAttrs a;
        a.set("scale", 1.0 / std::sqrt(double(D)));
        a.set("causal", int64_t(0));
        a.set("dropout_ratio", 0.0);
        if (inner)
          a.set("heads_inner", int64_t(1));
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
        // Causal, the probabilities kept (--keep-attention-probabilities),
        // [H, T, T] in either layout.
        Owned p(DType::F32, {H, T, T});
        a.set("keep_probabilities", int64_t(1));
        keptFwd[i] = b.kernel("graph.attention", {&q, &k, &v}, {&y, &p}, a) /
                     (scores / 2);
        keptBwd[i] = b.kernel("graph.attention_grad", {&dy, &q, &k, &v, &p},
                              {&dq, &dk, &dv}, a) /
                     (scores / 2);
      }
      const std::string layout = inner ? "heads_inner." : "";
      for (auto [seconds, name] :
           {std::pair<const double *, const char *>{fwd, "attention"},
            {bwd, "attention_grad"},
            {causalFwd, "attention_causal"},
            {causalBwd, "attention_grad_causal"},
            {keptFwd, "attention_kept_causal"},
            {keptBwd, "attention_grad_kept_causal"}})
        attentionCosts(f, layout + name, double(T), widths, seconds);
    }

  // Per element of a kernel's operands, at five sizes (in cache, about the
  // pool's grain, in the last-level cache, in memory), rows of 256; the row
  // kernels also on rows of 64 (op.NAME/64: a row's fixed cost weighs more).
  auto perElement = [&](int64_t R, int64_t C) {
    const std::string suffix = C == 256 ? "" : "/" + std::to_string(C);
    const double n = double(R * C);
    Owned a(DType::F32, {R, C}, 7), c(DType::F32, {R, C}, 8),
        y(DType::F32, {R, C}), dy(DType::F32, {R, C}, 9),
        scale(DType::F32, {C}, 10), bias(DType::F32, {C}, 11),
        dscale(DType::F32, {C}), dbias(DType::F32, {C}),
        labels(DType::I64, {R}), loss(DType::F32, {}), one(DType::F32, {}),
        sums(DType::F32, {1, C}), t(DType::F32, {C, R}), d(DType::F32, {R, C}, 14);
    for (int64_t i = 0; i < R; ++i)
      labels.view.as<int64_t>()[i] = (i * 7) % C;
    one.view.as<float>()[0] = 1.0f;
    auto add = [&](const std::string &op, double seconds) {
      if (seconds > 0)
        f.row("op." + op + suffix, b.inputElements, seconds / b.inputElements);
    };
    KernelAttrs none;
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
        b.kernel("graph.cross_entropy_grad", {&one, &a, &labels}, {&y}, none));
    if (C != 256)
      return;
    add("graph.add", b.kernel("graph.add", {&a, &c}, {&y}, none));
    add("graph.mul", b.kernel("graph.mul", {&a, &c}, {&y}, none));
    add("graph.gelu", b.kernel("graph.gelu", {&a}, {&y}, none));
    KernelAttrs gelu;
    gelu.set("kind", std::string("gelu"));
    add("graph.unary_grad",
        b.kernel("graph.unary_grad", {&dy, &a, &c}, {&y}, gelu));
    // The fused kernel on the three programs CalibrationFigures.h solves
    // for its costs by bytes, instructions and transcendental ones; the
    // first (two adds) is also its per-operand table. Its operands in f32,
    // then in bf16 ("bf16." tables: a --dtype bf16 plan's fused casts and
    // sums).
    auto fused = [&](const std::string &prefix, Owned &x, Owned &u, Owned &v,
                     Owned &out) {
      double chain =
          b.kernel("graph.fused_elementwise", {&x, &u, &v}, {&out}, addChain(2));
      if (prefix.empty())
        add("graph.fused_elementwise", chain);
      double longer = b.kernel("graph.fused_elementwise", {&x}, {&out},
                               longChain(kLongChain));
      double gelus = b.kernel("graph.fused_elementwise", {&x}, {&out},
                              geluChain(kLongChain));
      fusedCosts(f, prefix, n, double(runtime::byteWidth(x.view.dtype)),
                 chain, longer, gelus);
    };
    fused("", a, c, d, y);
    Owned a16(DType::BF16, {R, C}, 7), c16(DType::BF16, {R, C}, 8),
        d16(DType::BF16, {R, C}, 14), y16(DType::BF16, {R, C});
    fused("bf16.", a16, c16, d16, y16);
    // The casts between bf16 and f32, each under its result's dtype.
    if (double t = b.kernel("graph.cast", {&a}, {&y16}, none); t > 0)
      f.row("bf16.op.graph.cast", n, t / n);
    if (double t = b.kernel("graph.cast", {&a16}, {&y}, none); t > 0)
      f.row("op.graph.cast", n, t / n);
    KernelAttrs perm;
    perm.set("perm", std::vector<int64_t>{1, 0});
    add("graph.transpose", b.kernel("graph.transpose", {&a}, {&t}, perm));
    // The attention heads' transpose [B, T, H, D] -> [B, H, T, D]: rows of
    // D elements move whole (op.graph.transpose_rows).
    {
      const int64_t D = 16, H = 4, T = C / (H * D) * 16, B = R * C / (T * H * D);
      Owned x(DType::F32, {B, T, H, D}, 15), xt(DType::F32, {B, H, T, D});
      KernelAttrs heads;
      heads.set("perm", std::vector<int64_t>{0, 2, 1, 3});
      add("graph.transpose_rows",
          b.kernel("graph.transpose", {&x}, {&xt}, heads));
    }
    KernelAttrs rows;
    rows.set("axes", std::vector<int64_t>{0});
    rows.set("keepdims", int64_t(1));
    add("graph.reduce_sum", b.kernel("graph.reduce_sum", {&a}, {&sums}, rows));
    // The update and the gradient norm's squares: one parameter here (the
    // simulator costs a plan's several parameters one by one).
    Owned sq(DType::F32, {});
    add("graph.sum_squares", b.kernel("graph.sum_squares", {&a}, {&sq}, none));
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
        b.kernel("graph.adamw_update", {&p, &g, &m, &v, &lr, &step, &gradScale},
                 {&p, &m, &v}, adamw));
    // Any other kernel: a copy of its bytes (a reshape, concat, slice),
    // from the last-level cache as the kernels are.
    size_t copySets = std::clamp<size_t>(b.rotateBytes / size_t(n * 8), 1, 32);
    std::vector<std::vector<float>> src(copySets,
                                        std::vector<float>(size_t(R * C), 1.0f)),
        dst(copySets, std::vector<float>(size_t(R * C)));
    size_t call = 0;
    Status failed = Status::ok();
    double copy = timeIt(
        comm,
        [&] {
          size_t s = call++ % copySets;
          std::memcpy(dst[s].data(), src[s].data(), size_t(n) * sizeof(float));
          return Status::ok();
        },
        b.budget, failed, b.batches);
    f.row("copy_seconds", n * 4, copy / (n * 4));
  };
  for (int64_t R : {16, 64, 256, 1024, 4096})
    perElement(R, 256);
  for (int64_t R : {64, 256, 1024, 16384})
    perElement(R, 64);

  // Memory bandwidth: a streaming copy of 64 MiB (read and write counted).
  {
    size_t bytes = size_t(64) << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    Status failed = Status::ok();
    double t = timeIt(
        comm,
        [&] {
          std::memcpy(dst.data(), src.data(), bytes);
          return Status::ok();
        },
        b.budget, failed, b.batches);
    f.values["copy_bandwidth"] = double(bytes) / t;
  }

  // The device's cost per instruction: tiny kernels through stream 0; and
  // a wait on another stream's event that blocks (a stream's thread asleep
  // until the record it waits for completes: the hand-off of an offloaded
  // step's reload to the kernel that reads it).
  {
    std::unique_ptr<runtime::Device> device = runtime::createCpuDevice();
    Status failed = Status::ok();
    runtime::DeviceQueues *queues = &device->queues();
    if (queues->createQueues(2, 2)) {
      Owned x(DType::F32, {1}), y(DType::F32, {1});
      std::vector<TensorView> in = {x.view, x.view}, o = {y.view};
      KernelAttrs none;
      const runtime::KernelFn *fn = runtime::getCpuKernels().lookup("graph.add");
      KernelContext ctx{in, o, none, 1};
      const int launches = 2000;
      double perLaunch = timeIt(
                             comm,
                             [&]() -> Status {
                               for (int i = 0; i < launches; ++i)
                                 if (Status s = queues->launch(0, *fn, ctx); !s)
                                   return s;
                               return queues->synchronize(0);
                             },
                             b.budget, failed, b.batches) /
                         launches;
      f.values["kernel_launch"] = perLaunch;
      // A ping-pong between the streams, every item enqueued before any
      // runs, as a step's program is: stream 0 records, stream 1 waits for
      // it, copies 4 bytes and records, stream 0 waits for that. Each
      // round trip is two hand-offs, each a thread woken by the other's
      // record. (Timing a single copy, record and wait from an idle device
      // would also count the copy stream's own wake-up at the enqueue,
      // which a step's streams, fed ahead, do not pay: twice the figure.)
      float a = 1, c = 0;
      const int trips = 200;
      auto pingPong = [&]() -> Status {
        for (int i = 0; i < trips; ++i) {
          if (Status s = queues->record(0, 0); !s)
            return s;
          if (Status s = queues->wait(1, 0); !s)
            return s;
          if (Status s = queues->copyAsync(1, &c, &a, sizeof a,
                                           runtime::CopyKind::HostToDevice);
              !s)
            return s;
          if (Status s = queues->record(1, 1); !s)
            return s;
          if (Status s = queues->wait(0, 1); !s)
            return s;
        }
        return queues->synchronize(0);
      };
      double hop = timeIt(comm, pingPong, b.budget, failed, b.batches) /
                   (2.0 * trips);
      if (failed)
        f.values["event_wait"] = std::max(hop, 1e-9);
    }
  }
  f.values["copy_compute_cost"] = copyComputeCost(b);
  // A collective's thread on the kernels' core: measured on one host with
  // a core a rank. With more ranks than cores they take turns on the cores
  // anyway, and a GEMM loop beside a collective measures the other ranks
  // as much as the collective; across hosts (tools/cluster.sh's emulated
  // nodes share one host's cores) the same.
  if (b.perCall && !spans) {
    f.values["gather_compute_cost"] = collectiveComputeCost(b, false);
    f.values["reduce_compute_cost"] = collectiveComputeCost(b, true);
    f.values["poll_compute_cost"] = pollComputeCost(b);
  } else if (comm) {
    b.notes.insert("the collectives' CPU (more ranks than cores, or "
                   "across hosts)");
    if (!spans) {
      f.values["collective_sync"] =
          oversubscribedSync(b, comm, runtime::Group::World);
      // By group size: the sizes below the world, then the world's.
      for (auto [size, sub] : b.groups)
        f.tables["collective_sync_group"][size] = std::max(
            oversubscribedSync(b, sub, runtime::Group::Partition), 1e-9);
      if (!b.groups.empty())
        f.tables["collective_sync_group"][world] =
            std::max(f.values["collective_sync"], 1e-9);
    }
  }

  // Collectives: all-gathers through the Communicator at 64 B and 4 MiB a
  // rank, for the alpha-beta model of a ring (the latency per ring step,
  // the bandwidth of the bytes that cross each link). On one host every
  // link is its shared memory (the world's ring); across hosts, inside a
  // node (the intra group) and between nodes (the inter group, the node's
  // K rings at once through its NIC: its bandwidth is K times a ring's).
  auto measureLink = [&](runtime::Group group, int members,
                         const std::string &name, double scale) {
    enum Kind { Gather, Reduce, AllReduce }; // kLinkTables' order
    // One call of `kind` whose ring steps move `chunk` bytes on each link
    // (a shard of an all-gather or of a reduce-scatter's result; an
    // all-reduce of `members` such shards).
    auto time = [&](Kind kind, size_t chunk) {
      size_t shard = chunk / 4, whole = shard * size_t(members);
      std::vector<float> in(kind == Gather ? shard : whole, 1.0f),
          outBuf(kind == Reduce ? shard : whole);
      Status failed = Status::ok();
      return timeIt(
          comm,
          [&] {
            switch (kind) {
            case Gather:
              return comm->allGather(
                  group, {{DType::F32, in.data(), outBuf.data(), shard}});
            case Reduce:
              return comm->reduceScatterSum(
                  group, {{DType::F32, in.data(), outBuf.data(), shard}});
            case AllReduce:
              return comm->allReduceSum(
                  group, {{DType::F32, in.data(), outBuf.data(), whole}});
            }
            return Status::ok();
          },
          b.budget, failed, b.batches);
    };
    double steps = members - 1;
    double latency = time(Gather, 64) / steps;
    f.values[name + "_latency"] = latency;
    // The bandwidth by the bytes a ring step moves on each link, for each
    // collective: a link's speed depends on the message (a TCP window, a
    // shaper's token bucket, the caches a shared-memory copy runs from), a
    // step's collectives are mostly far smaller than 4 MiB a rank, and MPI
    // runs each collective by an algorithm of its own. Over
    // tools/cluster.sh's 100 Mbit/s link, 2 ranks (2026-11-28): all-gathers
    // at 32 MB/s at 16 KiB, 14 at 64 KiB, 12 at 256 KiB and 1 MiB, 7.5 at
    // 4 MiB. Reductions up to 1 MiB (beyond it the table holds its last
    // figure): each calibration's slowest benchmarks.
    for (Kind kind : {Gather, Reduce, AllReduce}) {
      const char *table = kLinkTables[kind];
      double callSteps = kind == AllReduce ? 2 * steps : steps;
      for (size_t chunk : {size_t(16) << 10, size_t(64) << 10,
                           size_t(256) << 10, size_t(1) << 20,
                           size_t(4) << 20}) {
        if (kind != Gather && chunk > (size_t(1) << 20))
          continue;
        double moving = time(kind, chunk) - callSteps * latency;
        double bandwidth =
            scale * callSteps * double(chunk) / std::max(moving, 1e-9);
        if (kind == Gather && chunk == size_t(4) << 20)
          f.values[name + "_bandwidth"] = bandwidth;
        // Where the latency is nearly all of the call, what is left is
        // noise.
        if (moving > 0.2 * (moving + callSteps * latency))
          f.tables[name + table][double(chunk)] = bandwidth;
      }
    }
  };
  if (!comm)
    return;
  if (!spans) {
    measureLink(runtime::Group::World, world, "intra", 1);
  } else {
    if (perNode > 1)
      measureLink(runtime::Group::Intra, perNode, "intra", 1);
    measureLink(runtime::Group::Inter, world / perNode, "inter", perNode);
  }
}

} // namespace

Status calibrate(const CalibrateOptions &options, std::string &json) {
  if (options.backend == "cuda")
    return calibrateCuda(options, json);
  if (options.backend != "cpu")
    return Status::error("--backend takes cpu or cuda, got '" +
                         options.backend + "'");
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
  // The longest collective here (4 MiB a rank over a 100 Mbit/s emulated
  // link) takes about a second; a lost rank is named after 30 s.
  constexpr double kTimeoutSeconds = 30;
  if (world > 1) {
    runtime::TopologyInfo topology{world, perNode, world, 1};
    if (Status s = runtime::Communicator::create(topology, kTimeoutSeconds,
                                                 comm);
        !s)
      return s;
  }
  // Every benchmark once a round, its time shared among the rounds: a burst
  // of load from elsewhere on the machine spoils one round's figures, and
  // the median over the rounds leaves them out.
  const int rounds = std::max(1, options.rounds);
  Bench b{comm.get(), options.secondsPerBenchmark / rounds,
          rounds > 1 ? 3 : 7, {}};
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // Ranks that wait on each other sleep often, and the scheduler runs them
  // ahead of other jobs' busy threads; back-to-back benchmarks it shares
  // the cores with those. With a core or more a rank, a kernel call is
  // timed alone and the preempted calls left out.
  b.perCall = world > 1 && size_t(perNode) <= cores;
  // Oversubscribed on one host: a communicator for each smaller group
  // size, so that collective_sync is measured by the size of the group.
  std::vector<std::unique_ptr<runtime::Communicator>> subgroups;
  if (world > 1 && !b.perCall && !spans)
    for (int g = 2; g < world; g *= 2) {
      if (world % g)
        continue;
      runtime::TopologyInfo topology{world, perNode, g, 1};
      std::unique_ptr<runtime::Communicator> sub;
      if (Status s = runtime::Communicator::create(topology, kTimeoutSeconds,
                                                   sub);
          !s)
        return s;
      b.groups.push_back({g, sub.get()});
      subgroups.push_back(std::move(sub));
    }
  if (long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE); l2 > 0)
    b.rotateBytes = 2 * size_t(l2) * cores;
  std::vector<Figures> measured(static_cast<size_t>(rounds));
  for (Figures &f : measured)
    measureRound(b, world, perNode, spans, f);
  Figures f = medianOf(measured);

  auto value = [&](const std::string &key) {
    auto it = f.values.find(key);
    return it == f.values.end() ? 0.0 : it->second;
  };
  double peak = 0;
  for (const auto &[size, rate] : f.tables["gemm_rate"])
    peak = std::max(peak, rate);
  double copyBandwidth = value("copy_bandwidth");
  std::ostringstream out;
  out << "{\n";
  out << "  \"name\": \"this machine, " << world << " rank"
      << (world == 1 ? "" : "s") << " (strata-sim --calibrate)\",\n";
  out << "  \"device\": \"cpu\",\n";
  out << "  \"gpus_per_node\": " << perNode << ",\n";
  out << "  \"emulated_nodes\": " << (spans ? 0 : 1) << ",\n";
  out << "  \"flops_f32\": " << number(peak) << ",\n";
  for (const auto &[key, rows] : f.tables)
    out << "  \"" << key << "\": " << f.array(key) << ",\n";
  out << "  \"memory_bandwidth\": " << number(2.0 * copyBandwidth) << ",\n";
  out << "  \"memory_efficiency\": 1,\n";
  out << "  \"kernel_launch\": " << number(value("kernel_launch")) << ",\n";
  if (value("event_wait") > 0)
    out << "  \"event_wait\": " << number(value("event_wait")) << ",\n";
  out << "  \"copy_compute_cost\": " << number(value("copy_compute_cost"))
      << ",\n";
  if (f.values.count("gather_compute_cost")) {
    out << "  \"gather_compute_cost\": "
        << number(value("gather_compute_cost")) << ",\n";
    out << "  \"reduce_compute_cost\": "
        << number(value("reduce_compute_cost")) << ",\n";
    out << "  \"poll_compute_cost\": " << number(value("poll_compute_cost"))
        << ",\n";
  }
  if (f.values.count("collective_sync"))
    out << "  \"collective_sync\": " << number(value("collective_sync"))
        << ",\n";
  // One rank exchanges nothing: the copy bandwidth stands in. On one host
  // inter-node is the same shared memory.
  double intraBandwidth = comm ? value("intra_bandwidth") : copyBandwidth;
  double intraLatency = value("intra_latency");
  double interBandwidth = comm && spans ? value("inter_bandwidth") : intraBandwidth;
  double interLatency = comm && spans ? value("inter_latency") : intraLatency;
  if (spans && perNode == 1)
    intraBandwidth = copyBandwidth, intraLatency = 0;
  out << "  \"intra_bandwidth\": " << number(intraBandwidth) << ",\n";
  out << "  \"intra_latency\": " << number(intraLatency) << ",\n";
  out << "  \"inter_bandwidth\": " << number(interBandwidth) << ",\n";
  out << "  \"inter_latency\": " << number(interLatency) << ",\n";
  if (comm && !spans)
    for (const char *table : kLinkTables)
      if (f.tables.count(std::string("intra") + table))
        out << "  \"inter" << table
            << "\": " << f.array(std::string("intra") + table) << ",\n";
  // A tier move on the CPU is a copy between two host buffers.
  out << "  \"pcie_bandwidth\": " << number(copyBandwidth) << ",\n";
  double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  out << "  \"memory_bytes\": " << number(memory / perNode) << ",\n";
  out << "  \"host_memory_bytes\": " << number(memory) << ",\n";
  std::string notMeasured;
  for (const std::string &note : b.notes)
    notMeasured += note + "; ";
  out << "  \"source\": \"measured by strata-sim --calibrate on " << cores
      << " cores with " << world << " rank" << (world == 1 ? "" : "s")
      << " at once" << (spans ? ", " + std::to_string(perNode) + " a node"
                              : std::string())
      << ", the median of " << rounds << " round" << (rounds == 1 ? "" : "s")
      << "; not measured: " << notMeasured << "\"\n";
  out << "}\n";
  if (!comm || comm->rank() == 0)
    json = out.str();
  return Status::ok();
}

} // namespace strata::sim
