//===- Kernel.h - Kernels and their registry --------------------*- C++ -*-===//
//
// A kernel computes one graph-dialect op (or gradient op) on tensor views.
// Kernels are registered by the op's name ("graph.linear"); an instruction in
// the artifact names the op, its operand and result tensors and its
// attributes, so codegen can serialize any op without a per-op case.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_KERNEL_H
#define STRATA_RUNTIME_KERNEL_H

#include "strata/Runtime/Tensor.h"
#include "strata/Runtime/Topology.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata::runtime {

/// Success, or one line saying what is wrong.
class Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }
  bool isOk() const { return !message_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }

private:
  Status() = default;
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
};

/// An op attribute as codegen writes it: integers (i64 attrs and bools),
/// floats (f64 attrs), strings, and integer lists (DenseI64ArrayAttr).
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

class KernelAttrs {
public:
  void set(std::string name, AttrValue value) {
    values_[std::move(name)] = std::move(value);
  }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  int64_t getInt(std::string_view name, int64_t defaultValue = 0) const;
  bool getBool(std::string_view name, bool defaultValue = false) const {
    return getInt(name, defaultValue ? 1 : 0) != 0;
  }
  double getFloat(std::string_view name, double defaultValue = 0.0) const;
  std::string getString(std::string_view name,
                        std::string_view defaultValue = "") const;
  std::vector<int64_t> getInts(std::string_view name) const;

private:
  const AttrValue *find(std::string_view name) const;
  std::map<std::string, AttrValue, std::less<>> values_;
};

class Communicator;

/// Everything a kernel sees of one instruction. An absent optional operand
/// (a linear without bias) is simply not in `inputs`.
struct KernelContext {
  std::span<const TensorView> inputs;
  std::span<TensorView> outputs;
  const KernelAttrs &attrs;
  /// Seed of this instruction's random stream (dropout); codegen derives it
  /// from the run's seed, the step and the instruction, so a replay draws
  /// the same masks.
  uint64_t seed = 0;
  /// The collectives of a multi-rank run (null on one rank).
  Communicator *comm = nullptr;
  /// The file behind the SSD tier (-1: none).
  int ssdFile = -1;
  /// On an asynchronous device, its object for the stream the kernel
  /// enqueues on (backend-defined: the CUDA backend's names a cudaStream_t,
  /// a cuBLASLt handle and a workspace); null on the CPU.
  void *stream = nullptr;
  /// What the kernel's prepare function made for this instruction at load
  /// (null without one).
  const void *prepared = nullptr;
  /// "graph.linear (node '/h.0/mlp/c_fc/Gemm')": an asynchronous device
  /// names its failures and its profiler ranges (NVTX) by it. May be null.
  const std::string *description = nullptr;
  /// On an asynchronous device, where `seed` also is, in device memory,
  /// written before the kernel runs: a kernel reads it when it runs, so a
  /// replayed graph draws each run's seed. Null on the CPU.
  const uint64_t *seedSlot = nullptr;
  /// A collective's group (the plan's; unused by other kernels).
  Group group = Group::Partition;
  /// A collective's channel: the communicators of the stream it runs on
  /// (Topology.h's collectiveChannelOf: 1 on `reduce`, else 0).
  int channel = 0;
};

/// The seed a kernel running on the host draws from: the slot's value
/// where there is one (the queued device's memory is host memory), else
/// ctx.seed.
inline uint64_t seedOf(const KernelContext &ctx) {
  return ctx.seedSlot ? *ctx.seedSlot : ctx.seed;
}

using KernelFn = std::function<Status(KernelContext &)>;

/// Work a kernel does once per instruction, at load, rather than every step
/// (picking a cuBLASLt algorithm for the shapes; broadcast index tables).
/// Sees the instruction's views and attributes (not their values: nothing
/// is computed yet, and ctx.stream is null); whatever it leaves in
/// `prepared` reaches every launch as ctx.prepared.
using PrepareFn =
    std::function<Status(KernelContext &, std::shared_ptr<void> &prepared)>;

/// The object `prepare` made for this instruction at load (ctx.prepared),
/// or, for a caller that skipped prepare, one made now and kept in `owned`
/// for the launch.
template <typename Plan, typename Prepare>
Status preparedPlan(KernelContext &ctx, Prepare &&prepare,
                    std::shared_ptr<void> &owned, const Plan *&plan) {
  plan = static_cast<const Plan *>(ctx.prepared);
  if (plan)
    return Status::ok();
  if (Status s = prepare(ctx, owned); !s)
    return s;
  plan = static_cast<const Plan *>(owned.get());
  return Status::ok();
}

/// Kernels by op name, one registry per backend.
class KernelRegistry {
public:
  void add(std::string opName, KernelFn fn, PrepareFn prepare = nullptr) {
    kernels_[std::move(opName)] = {std::move(fn), std::move(prepare)};
  }
  const KernelFn *lookup(std::string_view opName) const {
    auto it = kernels_.find(opName);
    return it == kernels_.end() ? nullptr : &it->second.run;
  }
  /// The op's prepare function, or null when it has none.
  const PrepareFn *lookupPrepare(std::string_view opName) const {
    auto it = kernels_.find(opName);
    return it == kernels_.end() || !it->second.prepare ? nullptr
                                                       : &it->second.prepare;
  }
  std::vector<std::string> names() const;

private:
  struct Entry {
    KernelFn run;
    PrepareFn prepare;
  };
  std::map<std::string, Entry, std::less<>> kernels_;
};

/// The CPU backend's kernels, built once.
const KernelRegistry &getCpuKernels();

} // namespace strata::runtime

#endif // STRATA_RUNTIME_KERNEL_H
