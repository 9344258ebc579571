//===- QueueModelDevice.cpp - The CPU run the way CUDA runs it ------------===//
//
// strata-run --backend queued: an asynchronous device on the CPU. Memory is
// heap memory that the executor must treat as device memory (inputs and
// outputs are staged, state goes through copies), and work goes onto
// stream queues with events, exactly as on the CUDA backend. Nothing runs
// when enqueued: synchronize(s) runs only what stream s needs, as late as
// possible — a stream's work runs when the synchronized stream reaches a
// wait on it, and work nobody waits for stays queued until a later
// synchronize. So an event the executor forgot to record or wait for, a
// missing join, or an output copied before it is computed gives a wrong
// answer here, deterministically, where a GPU would give one only
// sometimes. Kernels are the CPU's.
//
//===----------------------------------------------------------------------===//

#include "HostBlock.h"

#include "strata/Runtime/Device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <vector>

namespace strata::runtime {
namespace {

class QueueModelDevice final : public Device {
public:
  explicit QueueModelDevice(const KernelRegistry &kernels)
      : kernels_(kernels), queues_(1) {}

  std::string_view getName() const override { return "queued"; }
  std::string describe() const override {
    return "the CPU, run as stream queues with events (executed lazily)";
  }
  const KernelRegistry &getKernels() const override { return kernels_; }

  Status allocate(MemoryKind kind, size_t bytes, void **out) override {
    return cpu::allocateHostBlock(kind, bytes, out);
  }
  void release(MemoryKind, void *block) override {
    (void)drainAll();
    std::free(block);
  }
  bool isHostAddressable() const override { return false; }

  // The blocking operations go through stream 0, like the CUDA device's.
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    enqueue(0, [=] { std::memcpy(dst, src, bytes); return Status::ok(); });
    return synchronize(0);
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    enqueue(0, [=] { std::memcpy(dst, src, bytes); return Status::ok(); });
    return synchronize(0);
  }
  Status zero(void *dst, size_t bytes) override {
    enqueue(0, [=] { std::memset(dst, 0, bytes); return Status::ok(); });
    return Status::ok();
  }

  Status createQueues(uint32_t streams, uint32_t events) override {
    if (streams > queues_.size())
      queues_.resize(streams);
    if (events > recorded_.size()) {
      recorded_.resize(events, 0);
      completed_.resize(events, 0);
    }
    return Status::ok();
  }
  Status launch(uint32_t stream, const KernelFn &kernel,
                KernelContext &ctx) override {
    if (stream >= queues_.size())
      return Status::error("queued: no stream " + std::to_string(stream));
    // The spans and attributes outlive the program (Device.h): keep a copy
    // of the context, not a reference.
    KernelContext copy = ctx;
    const KernelFn *fn = &kernel;
    enqueue(stream, [copy, fn]() mutable {
      Status s = (*fn)(copy);
      if (!s && copy.description)
        return Status::error(*copy.description + ": " + s.message());
      return s;
    });
    return Status::ok();
  }
  Status copyAsync(uint32_t stream, void *dst, const void *src, size_t bytes,
                   CopyKind) override {
    if (stream >= queues_.size())
      return Status::error("queued: no stream " + std::to_string(stream));
    enqueue(stream, [=] { std::memcpy(dst, src, bytes); return Status::ok(); });
    return Status::ok();
  }
  Status record(uint32_t stream, uint32_t event) override {
    if (stream >= queues_.size() || event >= recorded_.size())
      return Status::error("queued: no stream " + std::to_string(stream) +
                           " or event " + std::to_string(event));
    push(stream, {Op::Record, {}, event, 0});
    return Status::ok();
  }
  Status wait(uint32_t stream, uint32_t event) override {
    if (stream >= queues_.size() || event >= recorded_.size())
      return Status::error("queued: no stream " + std::to_string(stream) +
                           " or event " + std::to_string(event));
    push(stream, {Op::Wait, {}, event, 0});
    return Status::ok();
  }
  // Timers: the host clock when the queue reaches the marker.
  Status createTimers(uint32_t markers) override {
    if (times_.size() < markers)
      times_.resize(markers, 0);
    return Status::ok();
  }
  Status markTime(uint32_t stream, uint32_t marker) override {
    if (stream >= queues_.size() || marker >= times_.size())
      return Status::error("queued: no stream " + std::to_string(stream) +
                           " or marker " + std::to_string(marker));
    int64_t *slot = &times_[marker];
    enqueue(stream, [slot] {
      *slot = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
      return Status::ok();
    });
    return Status::ok();
  }
  Status readTimes(uint32_t markers, std::vector<int64_t> &ns) override {
    if (markers > times_.size())
      return Status::error("queued: " + std::to_string(markers) +
                           " markers, " + std::to_string(times_.size()) +
                           " made");
    ns.assign(markers, 0);
    for (uint32_t m = 0; m < markers; ++m)
      ns[m] = times_[m] - times_[0];
    return Status::ok();
  }

  // Capture: what is enqueued is recorded in order instead; a launch
  // enqueues the record again, with fresh event numbers.
  bool canCapture() const override { return true; }
  Status beginCapture(uint32_t stream) override {
    if (capturing_)
      return Status::error("queued: already capturing");
    capturing_ = true;
    captured_.clear();
    return Status::ok();
  }
  Status endCapture(uint32_t stream, std::shared_ptr<void> &graph) override {
    if (!capturing_)
      return Status::error("queued: not capturing");
    capturing_ = false;
    graph = std::make_shared<std::vector<Captured>>(std::move(captured_));
    captured_.clear();
    return Status::ok();
  }
  Status launchGraph(uint32_t stream, const void *graph) override {
    for (const Captured &c : *static_cast<const std::vector<Captured> *>(graph)) {
      Op op = c.op;
      if (op.kind == Op::Record)
        op.generation = ++recorded_[op.event];
      else if (op.kind == Op::Wait)
        op.generation = recorded_[op.event];
      queues_[c.stream].push_back(std::move(op));
    }
    return Status::ok();
  }

  Status synchronize(uint32_t stream) override {
    if (stream >= queues_.size())
      return Status::error("queued: no stream " + std::to_string(stream));
    Status s = runUntilEmpty(stream, 0);
    if (!failure_.isOk()) {
      s = failure_;
      failure_ = Status::ok();
    }
    return s;
  }

private:
  struct Op {
    enum Kind { Run, Record, Wait } kind;
    std::function<Status()> fn;
    uint32_t event = 0;
    /// Record: this record's number; Wait: the record it waits for.
    uint64_t generation = 0;
  };

  struct Captured {
    uint32_t stream;
    Op op;
  };

  void enqueue(uint32_t stream, std::function<Status()> fn) {
    push(stream, {Op::Run, std::move(fn), 0, 0});
  }

  /// Queues `op` (numbering a record or wait now), or records it while
  /// capturing.
  void push(uint32_t stream, Op op) {
    if (capturing_) {
      captured_.push_back({stream, std::move(op)});
      return;
    }
    if (op.kind == Op::Record)
      op.generation = ++recorded_[op.event];
    else if (op.kind == Op::Wait)
      op.generation = recorded_[op.event];
    queues_[stream].push_back(std::move(op));
  }

  /// Runs stream `s` until its queue is empty, running another stream's
  /// work only when a wait needs it.
  Status runUntilEmpty(uint32_t s, int depth) {
    while (!queues_[s].empty())
      if (Status st = runHead(s, depth); !st)
        return st;
    return Status::ok();
  }

  Status runHead(uint32_t s, int depth) {
    Op op = std::move(queues_[s].front());
    queues_[s].pop_front();
    switch (op.kind) {
    case Op::Run:
      // Like a GPU, a failed kernel does not stop the queue; the first
      // failure is what the next synchronize reports.
      if (Status st = op.fn(); !st && failure_.isOk())
        failure_ = st;
      return Status::ok();
    case Op::Record:
      completed_[op.event] = std::max(completed_[op.event], op.generation);
      return Status::ok();
    case Op::Wait:
      return satisfy(op.event, op.generation, depth);
    }
    return Status::ok();
  }

  /// Runs whichever streams record `event` until its record number
  /// `generation` has completed.
  Status satisfy(uint32_t event, uint64_t generation, int depth) {
    if (depth > int(queues_.size()) + 1)
      return Status::error("queued: the streams wait for each other (a cycle "
                           "of events)");
    while (completed_[event] < generation) {
      // The stream whose queue holds that record.
      int owner = -1;
      for (uint32_t q = 0; q < queues_.size() && owner < 0; ++q)
        for (const Op &op : queues_[q])
          if (op.kind == Op::Record && op.event == event &&
              op.generation <= generation) {
            owner = int(q);
            break;
          }
      if (owner < 0)
        return Status::error("queued: a wait for event " +
                             std::to_string(event) +
                             " that no queued record completes");
      if (Status st = runHead(uint32_t(owner), depth + 1); !st)
        return st;
    }
    return Status::ok();
  }

  Status drainAll() {
    for (uint32_t q = 0; q < queues_.size(); ++q)
      if (Status st = runUntilEmpty(q, 0); !st)
        return st;
    return Status::ok();
  }

  const KernelRegistry &kernels_;
  std::vector<std::deque<Op>> queues_;
  std::vector<uint64_t> recorded_, completed_;
  std::vector<int64_t> times_;
  bool capturing_ = false;
  std::vector<Captured> captured_;
  Status failure_ = Status::ok();
};

} // namespace

std::unique_ptr<Device> createQueueModelDevice(const KernelRegistry &kernels) {
  return std::make_unique<QueueModelDevice>(kernels);
}

} // namespace strata::runtime
