//===- CalibrateDevice.cpp - A GPU, measured into a cluster file ----------===//
//
// strata-sim --calibrate --backend cuda describes GPU 0 the way --calibrate
// describes the CPU, from microbenchmarks of the CUDA backend's own kernels
// (libStrataRuntimeCUDA.so, launched as strata-run launches them): products
// by size in f32, bf16 and f16; attention by sequence length and head width,
// plain, causal and with its probabilities kept, in both layouts; the
// per-element cost of the elementwise, normalization, loss and optimizer
// kernels and the casts, in f32 and bf16; device copies (the memory's
// bandwidth, and any other kernel), host copies over PCIe; and the gap a
// kernel costs beyond its work (its launch). No model's step is run or
// fitted.
//
// Each figure is GPU time between two timing events around a batch of
// back-to-back launches, over copies of the operands that span twice a
// large L2 (a step's tensors come from memory), the median of the batches
// and then of the rounds. The tables hold a kernel's time beyond the gap of
// a one-element kernel, which the file's kernel_launch holds: the replay
// costs a kernel as the two together.
//
// Sizes grow until a call takes longer than kMaxCallSeconds (or memory
// runs out), so the same code calibrates an H100 up to 16384-wide products
// and the CUDA emulation (the backend's code on the CPU, what the tests
// run) on small ones.
//
//===----------------------------------------------------------------------===//

#include "strata/Sim/Simulator.h"

#include "CalibrationFigures.h"

#include "strata/Runtime/Backend.h"
#include "strata/Runtime/Device.h"
#include "strata/Runtime/FusedProgram.h"
#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/NarrowFloat.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace strata::sim {
namespace {

using runtime::CopyKind;
using runtime::Device;
using runtime::DType;
using runtime::KernelAttrs;
using runtime::KernelContext;
using runtime::MemoryKind;
using runtime::Status;
using runtime::TensorView;
using namespace calibration;

/// A benchmark's sizes grow while the next size's call (wall time, launch
/// to completion, scaled by the work the size adds) stays under this.
constexpr double kMaxCallSeconds = 0.05;
/// The operands of successive calls span this many bytes: twice the 50 MB
/// L2 of an H100 or H200.
constexpr size_t kRotateBytes = size_t(128) << 20;

/// "" for f32 (the unprefixed tables), else "bf16." or "f16.".
std::string prefixOf(DType t) {
  return t == DType::BF16 ? "bf16." : t == DType::F16 ? "f16." : "";
}

/// An operand: its dtype and shape; integer operands hold (i * 7) % `modulo`
/// (labels), floating ones small random values.
struct Spec {
  DType dtype;
  std::vector<int64_t> shape;
  int64_t modulo = 1;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return size_t(numel()) * runtime::byteWidth(dtype); }
};

/// The bytes of `s` as the device holds them.
std::vector<unsigned char> fill(const Spec &s, uint64_t seed) {
  std::vector<unsigned char> bytes(std::max<size_t>(s.bytes(), 1), 0);
  // xorshift: values in [-1, 1), cheap for the largest operands.
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto u = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return float(int64_t(state >> 40) - (int64_t(1) << 23)) /
           float(int64_t(1) << 23);
  };
  const int64_t n = s.numel();
  switch (s.dtype) {
  case DType::F32: {
    auto *p = reinterpret_cast<float *>(bytes.data());
    for (int64_t i = 0; i < n; ++i)
      p[i] = u();
    break;
  }
  case DType::F64: {
    auto *p = reinterpret_cast<double *>(bytes.data());
    for (int64_t i = 0; i < n; ++i)
      p[i] = 1e-3;
    break;
  }
  case DType::BF16:
  case DType::F16: {
    auto *p = reinterpret_cast<uint16_t *>(bytes.data());
    for (int64_t i = 0; i < n; ++i)
      p[i] = s.dtype == DType::BF16 ? runtime::bf16Bits(u())
                                    : runtime::fp16Bits(u());
    break;
  }
  case DType::I64: {
    auto *p = reinterpret_cast<int64_t *>(bytes.data());
    for (int64_t i = 0; i < n; ++i)
      p[i] = (i * 7) % std::max<int64_t>(s.modulo, 1);
    break;
  }
  default:
    break;
  }
  return bytes;
}

class DeviceBench {
public:
  DeviceBench(Device &device, double budget, int batches)
      : device_(device), budget_(budget), batches_(batches) {}
  DeviceBench(const DeviceBench &) = delete;
  DeviceBench &operator=(const DeviceBench &) = delete;
  ~DeviceBench() { releaseAll(); }

  Status init() {
    if (Status s = device_.createQueues(1, 0); !s)
      return s;
    timers_ = device_.createTimers(2).isOk();
    return Status::ok();
  }

  /// Wall seconds of the last benchmark's slowest call (launch to
  /// completion): what decides whether a size grows.
  double lastCall = 0;
  /// The gap a kernel costs beyond its work (seconds; set by the first
  /// benchmark, a one-element add).
  double gap = 0;
  std::set<std::string> notes; // what could not be measured

  /// GPU seconds one call of `op` takes beyond the gap (0: it failed, and
  /// a note says why). `in` and `out` index `tensors`; an index in both
  /// is one tensor (an update's parameter and moments).
  double kernel(const std::string &op, const std::vector<Spec> &tensors,
                const std::vector<int> &in, const std::vector<int> &out,
                const KernelAttrs &attrs) {
    const runtime::KernelFn *fn = device_.getKernels().lookup(op);
    if (!fn) {
      notes.insert(op + ": no cuda kernel");
      return 0;
    }
    size_t bytes = 0;
    for (const Spec &s : tensors)
      bytes += s.bytes();
    const size_t sets =
        std::clamp<size_t>(kRotateBytes / std::max<size_t>(bytes, 1), 1, 8);
    // Every set's tensors, and the views and contexts that name them.
    std::vector<std::vector<TensorView>> inViews(sets), outViews(sets);
    std::vector<std::unique_ptr<KernelContext>> contexts;
    std::vector<std::shared_ptr<void>> prepared(sets);
    const runtime::PrepareFn *prepare = device_.getKernels().lookupPrepare(op);
    for (size_t s = 0; s < sets; ++s) {
      std::vector<void *> blocks;
      for (size_t t = 0; t < tensors.size(); ++t) {
        void *block = nullptr;
        if (Status st = allocate(tensors[t], 11 + t, &block); !st)
          return failed(op, st);
        blocks.push_back(block);
      }
      auto view = [&](int t) {
        TensorView v;
        v.dtype = tensors[size_t(t)].dtype;
        v.shape = tensors[size_t(t)].shape;
        v.data = blocks[size_t(t)];
        return v;
      };
      for (int t : in)
        inViews[s].push_back(view(t));
      for (int t : out)
        outViews[s].push_back(view(t));
    }
    for (size_t s = 0; s < sets; ++s) {
      contexts.push_back(std::make_unique<KernelContext>(
          KernelContext{inViews[s], outViews[s], attrs, 1}));
      if (prepare) {
        if (Status st = (*prepare)(*contexts[s], prepared[s]); !st)
          return failed(op, st);
        contexts[s]->prepared = prepared[s].get();
      }
    }
    double t = time(op, [&](size_t call) {
      return device_.launch(0, *fn, *contexts[call % sets]);
    });
    releaseAll();
    return t > 0 ? std::max(t - gap, 1e-3 * t) : 0;
  }

  /// GPU seconds one copy of `bytes` takes beyond the gap: `kind` between
  /// two device buffers, or a host buffer (pinned) and a device one.
  double copy(size_t bytes, CopyKind kind) {
    const size_t sets =
        std::clamp<size_t>(kRotateBytes / std::max<size_t>(2 * bytes, 1), 1, 8);
    std::vector<std::pair<void *, void *>> pairs;
    Spec s{DType::I8, {int64_t(bytes)}};
    for (size_t i = 0; i < sets; ++i) {
      void *dst = nullptr, *src = nullptr;
      bool hostSrc = kind == CopyKind::HostToDevice;
      bool hostDst = kind == CopyKind::DeviceToHost;
      if (Status st = allocate(s, 3, &src, hostSrc ? MemoryKind::Host
                                                   : MemoryKind::Device);
          !st)
        return failed("a copy", st);
      if (Status st = allocate(s, 4, &dst, hostDst ? MemoryKind::Host
                                                   : MemoryKind::Device);
          !st)
        return failed("a copy", st);
      pairs.push_back({dst, src});
    }
    double t = time("a copy", [&](size_t call) {
      auto [dst, src] = pairs[call % sets];
      return device_.copyAsync(0, dst, src, bytes, kind);
    });
    releaseAll();
    return t > 0 ? std::max(t - gap, 1e-3 * t) : 0;
  }

private:
  /// A block of `s`'s bytes (rounded up to 256) holding its values.
  Status allocate(const Spec &s, uint64_t seed, void **out,
                  MemoryKind kind = MemoryKind::Device) {
    size_t bytes = (std::max<size_t>(s.bytes(), 1) + 255) / 256 * 256;
    if (Status st = device_.allocate(kind, bytes, out); !st)
      return st;
    blocks_.push_back({kind, *out});
    if (s.dtype == DType::I8)
      return kind == MemoryKind::Device ? device_.zero(*out, bytes)
                                        : Status::ok();
    // Floating operands: a prefix of one random pool per dtype (made once:
    // filling each benchmark's operands anew took longer than timing them).
    std::vector<unsigned char> labels;
    const unsigned char *host = nullptr;
    if (s.dtype == DType::I64) {
      labels = fill(s, seed);
      host = labels.data();
    } else {
      std::vector<unsigned char> &pool = pools_[s.dtype];
      if (pool.size() < s.bytes())
        pool = fill(Spec{s.dtype, {int64_t(s.numel() * 2)}}, seed);
      host = pool.data();
    }
    if (kind == MemoryKind::Host) {
      std::copy(host, host + s.bytes(), static_cast<unsigned char *>(*out));
      return Status::ok();
    }
    return device_.copyToDevice(*out, host, s.bytes());
  }

  void releaseAll() {
    (void)device_.synchronize(0);
    for (auto [kind, block] : blocks_)
      device_.release(kind, block);
    blocks_.clear();
  }

  double failed(const std::string &what, const Status &s) {
    // The kernels' messages begin with their op already.
    notes.insert(s.message().rfind(what, 0) == 0 ? s.message()
                                                  : what + ": " + s.message());
    releaseAll();
    lastCall = 1e9; // a size that fails ends the growth too
    return 0;
  }

  /// Seconds one call of `launch` takes on the GPU: a warm-up call, then
  /// `batches_` batches of back-to-back calls between two timing events
  /// (wall time where the device has no timers), the median batch.
  double time(const std::string &what,
              const std::function<Status(size_t)> &launch) {
    size_t call = 0;
    double t0 = now();
    Status s = launch(call++);
    if (s)
      s = device_.synchronize(0);
    if (!s)
      return failed(what, s);
    t0 = now();
    s = launch(call++);
    if (s)
      s = device_.synchronize(0);
    if (!s)
      return failed(what, s);
    double once = std::max(now() - t0, 1e-7);
    lastCall = once;
    int perBatch = std::clamp(int(std::lround(budget_ / batches_ / once)), 1,
                              20000);
    std::vector<double> times;
    for (int b = 0; b < batches_; ++b) {
      double w0 = now();
      if (timers_)
        (void)device_.markTime(0, 0);
      for (int i = 0; i < perBatch && s; ++i)
        s = launch(call++);
      if (s && timers_)
        s = device_.markTime(0, 1);
      if (s)
        s = device_.synchronize(0);
      if (!s)
        return failed(what, s);
      double wall = now() - w0;
      lastCall = std::max(lastCall, wall / perBatch);
      std::vector<int64_t> ns;
      if (timers_ && device_.readTimes(2, ns).isOk() && ns[1] > 0)
        times.push_back(double(ns[1]) * 1e-9 / perBatch);
      else
        times.push_back(wall / perBatch);
    }
    return median(times);
  }

  Device &device_;
  double budget_;
  int batches_;
  bool timers_ = false;
  std::vector<std::pair<MemoryKind, void *>> blocks_;
  std::map<DType, std::vector<unsigned char>> pools_;
};

/// Products: graph.linear and graph.linear_grad_weight on square operands,
/// FLOP/s by the side.
void measureProducts(DeviceBench &b, DType dtype, Figures &f) {
  const std::string prefix = prefixOf(dtype);
  bool forward = true, grad = true;
  for (int64_t n = 128; n <= 16384 && (forward || grad); n *= 2) {
    std::vector<Spec> t = {{dtype, {n, n}}, {dtype, {n, n}}, {dtype, {n, n}}};
    double flops = 2.0 * double(n) * double(n) * double(n);
    if (forward) {
      double s = b.kernel("graph.linear", t, {0, 1}, {2}, {});
      if (s > 0)
        f.row(prefix + "gemm_rate", double(n), flops / s);
      forward = s > 0 && 8 * b.lastCall < kMaxCallSeconds;
    }
    if (grad) {
      KernelAttrs transposed;
      transposed.set("transpose_weight", int64_t(1));
      double s = b.kernel("graph.linear_grad_weight", t, {2, 0}, {1},
                          transposed);
      if (s > 0)
        f.row(prefix + "gemm_grad_rate", double(n), flops / s);
      grad = s > 0 && 8 * b.lastCall < kMaxCallSeconds;
    }
  }
}

/// Attention: seconds per score and per score and head element (from two
/// head widths, 64 and 128), forward and backward, plain, causal and with
/// the probabilities kept, by the sequence length; on [H, T, D] operands
/// and on [T, H, D] with heads_inner ("heads_inner." tables). H is the
/// smallest power of two whose forward takes 0.5 ms, at most 2^17 / T
/// (enough blocks for the GPU).
void measureAttention(DeviceBench &b, DType dtype, Figures &f) {
  const std::string prefix = prefixOf(dtype);
  const int64_t widths[2] = {64, 128};
  struct Variant {
    const char *name;
    bool causal, kept;
  } variants[] = {{"", false, false},
                  {"_causal", true, false},
                  {"_kept_causal", true, true}};
  for (int64_t T = 128; T <= 4096; T *= 2) {
    // The heads: grown on the plain forward at the narrower width.
    int64_t H = 1;
    KernelAttrs plain;
    plain.set("scale", 0.125);
    plain.set("causal", int64_t(0));
    plain.set("dropout_ratio", 0.0);
    for (;; H *= 2) {
      std::vector<Spec> t(4, Spec{dtype, {H, T, widths[0]}});
      double s = b.kernel("graph.attention", t, {0, 1, 2}, {3}, plain);
      if (s <= 0 || b.lastCall >= kMaxCallSeconds || s >= 5e-4 ||
          2 * H * T > (int64_t(1) << 17))
        break;
    }
    bool slow = false;
    for (bool inner : {false, true})
      for (const Variant &v : variants) {
        double fwd[2] = {0, 0}, bwd[2] = {0, 0};
        for (int i = 0; i < 2; ++i) {
          const int64_t D = widths[i];
          std::vector<int64_t> shape = inner ? std::vector<int64_t>{T, H, D}
                                             : std::vector<int64_t>{H, T, D};
          // q k v y dy dq dk dv p
          std::vector<Spec> t(8, Spec{dtype, shape});
          t.push_back(Spec{dtype, {H, T, T}});
          KernelAttrs a;
          a.set("scale", 1.0 / std::sqrt(double(D)));
          a.set("causal", int64_t(v.causal));
          a.set("dropout_ratio", 0.0);
          if (inner)
            a.set("heads_inner", int64_t(1));
          if (v.kept)
            a.set("keep_probabilities", int64_t(1));
          // Per score the simulator counts: half of them where causal.
          double scores = double(H * T * T) / (v.causal ? 2 : 1);
          std::vector<int> fwdOut = {3}, bwdIn = {4, 0, 1, 2};
          if (v.kept) {
            fwdOut.push_back(8);
            bwdIn.push_back(8);
          }
          fwd[i] = b.kernel("graph.attention", t, {0, 1, 2}, fwdOut, a) /
                   scores;
          slow |= 4 * b.lastCall >= kMaxCallSeconds;
          bwd[i] = b.kernel("graph.attention_grad", t, bwdIn, {5, 6, 7}, a) /
                   scores;
          slow |= 4 * b.lastCall >= kMaxCallSeconds;
        }
        const std::string layout = prefix + (inner ? "heads_inner." : "");
        attentionCosts(f, layout + "attention" + v.name, double(T), widths,
                       fwd);
        attentionCosts(f, layout + "attention_grad" + v.name, double(T),
                       widths, bwd);
      }
    if (slow)
      break;
  }
}

/// Per element of a kernel's operands, by the elements, on rows of 256
/// (and the row kernels on rows of 64 too: "op.NAME/64").
void measureElementwise(DeviceBench &b, DType dtype, Figures &f) {
  const std::string prefix = prefixOf(dtype);
  const bool wide = dtype == DType::F32;
  const DType other = wide ? DType::BF16 : DType::F32;
  std::set<std::string> done; // ops whose sizes stopped growing
  auto row = [&](int64_t R, int64_t C) {
    const std::string suffix = C == 256 ? "" : "/" + std::to_string(C);
    Spec x{dtype, {R, C}}, vec{dtype, {C}};
    KernelAttrs none;
    auto add = [&](const std::string &op, double seconds, double elements) {
      if (done.count(op + suffix))
        return;
      if (seconds > 0)
        f.row(prefix + "op." + op + suffix, elements, seconds / elements);
      if (!(seconds > 0) || 4 * b.lastCall >= kMaxCallSeconds)
        done.insert(op + suffix);
    };
    const double n = double(R * C);
    auto skip = [&](const std::string &op) { return done.count(op + suffix); };
    KernelAttrs ln;
    ln.set("axis", int64_t(1));
    ln.set("epsilon", 1e-5);
    if (!skip("graph.layer_norm"))
      add("graph.layer_norm",
          b.kernel("graph.layer_norm", {x, vec, vec, x}, {0, 1, 2}, {3}, ln),
          n + 2 * C);
    if (!skip("graph.layer_norm_grad"))
      add("graph.layer_norm_grad",
          b.kernel("graph.layer_norm_grad", {x, x, vec, x, vec, vec},
                   {0, 1, 2}, {3, 4, 5}, ln),
          2 * n + C);
    KernelAttrs lastAxis;
    lastAxis.set("axis", int64_t(1));
    if (!skip("graph.softmax"))
      add("graph.softmax",
          b.kernel("graph.softmax", {x, x}, {0}, {1}, lastAxis), n);
    Spec labels{DType::I64, {R}, C}, loss{DType::F32, {}};
    if (!skip("graph.cross_entropy"))
      add("graph.cross_entropy",
          b.kernel("graph.cross_entropy", {x, labels, loss}, {0, 1}, {2},
                   none),
          n + R);
    if (!skip("graph.cross_entropy_grad"))
      add("graph.cross_entropy_grad",
          b.kernel("graph.cross_entropy_grad", {loss, x, labels, x},
                   {0, 1, 2}, {3}, none),
          n + R + 1);
    if (C != 256)
      return;
    for (const char *op : {"graph.add", "graph.mul"})
      if (!skip(op))
        add(op, b.kernel(op, {x, x, x}, {0, 1}, {2}, none), 2 * n);
    if (!skip("graph.gelu"))
      add("graph.gelu", b.kernel("graph.gelu", {x, x}, {0}, {1}, none), n);
    KernelAttrs gelu;
    gelu.set("kind", std::string("gelu"));
    if (!skip("graph.unary_grad"))
      add("graph.unary_grad",
          b.kernel("graph.unary_grad", {x, x, x, x}, {0, 1, 2}, {3}, gelu),
          3 * n);
    if (!skip("graph.fused_elementwise")) {
      double chain = b.kernel("graph.fused_elementwise", {x, x, x, x},
                              {0, 1, 2}, {3}, addChain(2));
      double limit = b.lastCall;
      // The same kernel on a longer program (its cost per instruction).
      double longer = b.kernel("graph.fused_elementwise", {x, x}, {0}, {1},
                               longChain(kLongChain));
      limit = std::max(limit, b.lastCall);
      double gelus = b.kernel("graph.fused_elementwise", {x, x}, {0}, {1},
                              geluChain(kLongChain));
      fusedCosts(f, prefix, n, double(runtime::byteWidth(dtype)), chain,
                 longer, gelus);
      b.lastCall = std::max(b.lastCall, limit);
      add("graph.fused_elementwise", chain, 3 * n);
    }
    KernelAttrs perm;
    perm.set("perm", std::vector<int64_t>{1, 0});
    if (!skip("graph.transpose"))
      add("graph.transpose",
          b.kernel("graph.transpose", {x, Spec{dtype, {C, R}}}, {0}, {1},
                   perm),
          n);
    // The attention heads' transpose [B, T, H, D] -> [B, H, T, D]: rows of
    // D elements move whole (op.graph.transpose_rows).
    if (!skip("graph.transpose_rows")) {
      const int64_t D = 64, H = 4, T = n >= 65536 ? 256 : 16,
                    B = std::max<int64_t>(1, R * C / (T * H * D));
      KernelAttrs heads;
      heads.set("perm", std::vector<int64_t>{0, 2, 1, 3});
      add("graph.transpose_rows",
          b.kernel("graph.transpose",
                   {Spec{dtype, {B, T, H, D}}, Spec{dtype, {B, H, T, D}}},
                   {0}, {1}, heads),
          double(B * T * H * D));
    }
    KernelAttrs rows;
    rows.set("axes", std::vector<int64_t>{0});
    rows.set("keepdims", int64_t(1));
    if (!skip("graph.reduce_sum"))
      add("graph.reduce_sum",
          b.kernel("graph.reduce_sum", {x, Spec{dtype, {1, C}}}, {0}, {1},
                   rows),
          n);
    // A cast into this dtype (from the other): the table of its result's
    // dtype, as the replay looks it up.
    if (!skip("graph.cast"))
      add("graph.cast",
          b.kernel("graph.cast", {Spec{other, {R, C}}, x}, {0}, {1}, none), n);
    if (!wide)
      return;
    // The update and the gradient norm's squares (f32: master weights).
    Spec scalar{DType::F32, {}};
    if (!skip("graph.sum_squares"))
      add("graph.sum_squares",
          b.kernel("graph.sum_squares", {x, scalar}, {0}, {1}, none), n);
    KernelAttrs adamw;
    adamw.set("beta1", 0.9);
    adamw.set("beta2", 0.999);
    adamw.set("eps", 1e-8);
    adamw.set("weight_decay", 0.01);
    if (!skip("graph.adamw_update"))
      add("graph.adamw_update",
          b.kernel("graph.adamw_update",
                   {x, x, x, x, Spec{DType::F64, {}}, Spec{DType::I64, {}, 2},
                    scalar},
                   {0, 1, 2, 3, 4, 5, 6}, {0, 2, 3}, adamw),
          4 * n);
  };
  for (int64_t R = 64; R <= (int64_t(1) << 18); R *= 4)
    row(R, 256);
  for (int64_t R = 256; R <= (int64_t(1) << 20); R *= 4)
    row(R, 64);
}

/// Device copies (any other kernel: a reshape, concat, slice), seconds per
/// byte by the bytes; the memory's bandwidth from the largest; PCIe from
/// host copies each way.
void measureCopies(DeviceBench &b, Figures &f) {
  double bandwidth = 0;
  for (size_t bytes = size_t(1) << 16; bytes <= (size_t(1) << 28); bytes *= 4) {
    double s = b.copy(bytes, CopyKind::DeviceToDevice);
    if (!(s > 0))
      break;
    f.row("copy_seconds", double(bytes), s / double(bytes));
    // Read and written.
    bandwidth = std::max(bandwidth, 2.0 * double(bytes) / s);
    if (4 * b.lastCall >= kMaxCallSeconds)
      break;
  }
  if (bandwidth > 0)
    f.values["memory_bandwidth"] = bandwidth;
  double pcie[2] = {0, 0};
  CopyKind kinds[2] = {CopyKind::HostToDevice, CopyKind::DeviceToHost};
  for (int k = 0; k < 2; ++k)
    for (size_t bytes = size_t(1) << 20; bytes <= (size_t(1) << 28);
         bytes *= 4) {
      double s = b.copy(bytes, kinds[k]);
      if (!(s > 0))
        break;
      pcie[k] = std::max(pcie[k], double(bytes) / s);
      if (4 * b.lastCall >= kMaxCallSeconds)
        break;
    }
  if (pcie[0] > 0 && pcie[1] > 0)
    f.values["pcie_bandwidth"] = 2.0 / (1.0 / pcie[0] + 1.0 / pcie[1]);
}

void measureRound(DeviceBench &b, Figures &f) {
  // The gap: a one-element add, back to back (nothing beyond it).
  {
    b.gap = 0;
    std::vector<Spec> t(3, Spec{DType::F32, {1}});
    double s = b.kernel("graph.add", t, {0, 1}, {2}, {});
    b.gap = s;
    if (s > 0)
      f.values["kernel_launch"] = s;
  }
  for (DType d : {DType::F32, DType::BF16, DType::F16})
    measureProducts(b, d, f);
  for (DType d : {DType::F32, DType::BF16}) {
    measureAttention(b, d, f);
    measureElementwise(b, d, f);
  }
  measureCopies(b, f);
}

/// The device's memory in bytes from its description ("..., 79.2 GiB)").
double memoryOf(const std::string &description) {
  size_t gib = description.rfind(" GiB");
  if (gib == std::string::npos)
    return 0;
  size_t start = description.rfind(' ', gib - 1);
  if (start == std::string::npos)
    return 0;
  return std::atof(description.c_str() + start + 1) * double(1u << 30);
}

} // namespace

Status calibrateCuda(const CalibrateOptions &options, std::string &json) {
  runtime::CudaDeviceOptions deviceOptions;
  deviceOptions.tf32 = options.tf32;
  std::unique_ptr<Device> device;
  if (Status s = runtime::createCudaDevice(deviceOptions, device); !s)
    return s;
  const int rounds = std::max(1, options.rounds);
  DeviceBench b(*device, options.secondsPerBenchmark / rounds,
                rounds > 1 ? 3 : 5);
  if (Status s = b.init(); !s)
    return s;
  std::vector<Figures> measured(static_cast<size_t>(rounds));
  for (Figures &f : measured)
    measureRound(b, f);
  Figures f = medianOf(measured);
  if (!f.values.count("kernel_launch") || !f.tables.count("gemm_rate") ||
      !f.values.count("memory_bandwidth")) {
    std::string why;
    for (const std::string &note : b.notes)
      why += (why.empty() ? "" : "; ") + note;
    return Status::error("the cuda calibration measured no products or "
                         "copies on " +
                         device->describe() + ": " + why);
  }
  auto peak = [&](const std::string &key) {
    double p = 0;
    for (const auto &[size, rate] : f.tables[key])
      p = std::max(p, rate);
    return p;
  };
  const double bandwidth = f.values["memory_bandwidth"];
  const double pcie = f.values.count("pcie_bandwidth")
                          ? f.values["pcie_bandwidth"]
                          : bandwidth;
  const std::string description = device->describe();
  std::ostringstream out;
  out << "{\n";
  out << "  \"name\": \"" << description
      << " (strata-sim --calibrate --backend cuda)\",\n";
  out << "  \"device\": \"cuda\",\n";
  out << "  \"gpus_per_node\": 1,\n";
  out << "  \"flops_f32\": " << number(peak("gemm_rate")) << ",\n";
  for (const char *dtype : {"bf16", "f16"})
    if (double p = peak(std::string(dtype) + ".gemm_rate"); p > 0)
      out << "  \"flops_" << dtype << "\": " << number(p) << ",\n";
  for (const auto &[key, rows] : f.tables)
    out << "  \"" << key << "\": " << f.array(key) << ",\n";
  out << "  \"memory_bandwidth\": " << number(bandwidth) << ",\n";
  out << "  \"memory_efficiency\": 1,\n";
  out << "  \"kernel_launch\": " << number(f.values["kernel_launch"]) << ",\n";
  out << "  \"memory_bytes\": " << number(memoryOf(description)) << ",\n";
  double host = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  out << "  \"host_memory_bytes\": " << number(host) << ",\n";
  out << "  \"pcie_bandwidth\": " << number(pcie) << ",\n";
  // One GPU exchanges nothing: its copy bandwidth stands in for the links.
  out << "  \"intra_bandwidth\": " << number(bandwidth) << ",\n";
  out << "  \"intra_latency\": 0,\n";
  out << "  \"inter_bandwidth\": " << number(bandwidth) << ",\n";
  out << "  \"inter_latency\": 0,\n";
  std::string notMeasured = "the links (one GPU); the SSD";
  for (const std::string &note : b.notes)
    notMeasured += "; " + note;
  // The notes are the backend's messages: no quotes or backslashes in JSON.
  for (char &ch : notMeasured)
    if (ch == '"' || ch == '\\' || ch == '\n')
      ch = '\'';
  out << "  \"source\": \"measured by strata-sim --calibrate --backend cuda"
      << (options.tf32 ? " --tf32" : "") << " on " << description
      << ", the median of " << rounds << " round" << (rounds == 1 ? "" : "s")
      << "; not measured: " << notMeasured << "\"\n";
  out << "}\n";
  json = out.str();
  return Status::ok();
}

} // namespace strata::sim
