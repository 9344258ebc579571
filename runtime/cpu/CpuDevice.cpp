//===- CpuDevice.cpp - The CPU as an asynchronous device ------------------===//
//
// Heap memory the host addresses directly (nothing is staged), and queues
// that run in order, as soon as their waits allow: the same contract as
// CUDA streams and events, so the executor drives the CPU and CUDA through
// one runner. Stream 0 (compute) runs on the thread that waits for the
// device (synchronize, and the blocking copies), as the old synchronous
// path ran it: the kernels' loops and GEMMs spread over the kernels' own
// thread pool (kernels/ParallelFor.cpp), and a program of one stream costs
// no hand-off; every other stream has a thread of its own. Each serves its kernels' scratch from an arena of its own
// (ScratchArena.h), so a step after the first allocates nothing; enqueuing
// allocates nothing once the queues have grown to a program's length.
//
// A kernel that fails does not stop its stream (as on a GPU, later work
// still runs, so no wait hangs); later kernels are skipped, and the next
// synchronize reports the first failure.
//
//===----------------------------------------------------------------------===//

#include "HostBlock.h"

#include "strata/Runtime/Device.h"
#include "strata/Runtime/ScratchArena.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace strata::runtime {
namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CpuDevice final : public Device {
public:
  explicit CpuDevice(const KernelRegistry &kernels) : kernels_(kernels) {
    (void)addStreams(1);
  }
  ~CpuDevice() override {
    idle(); // whatever was enqueued runs (a wait holds no thread forever)
    for (auto &s : streams_) {
      {
        std::lock_guard<std::mutex> lock(s->mutex);
        s->stop = true;
      }
      s->wake.notify_all();
    }
    for (auto &s : streams_)
      if (s->thread.joinable())
        s->thread.join();
  }

  std::string_view getName() const override { return "cpu"; }
  std::string describe() const override { return "the CPU"; }
  const KernelRegistry &getKernels() const override { return kernels_; }

  //===--- DeviceAllocator ------------------------------------------------===//

  Status allocate(MemoryKind kind, size_t bytes, void **out) override {
    return cpu::allocateHostBlock(kind, bytes, out);
  }
  void release(MemoryKind, void *block) override {
    idle(); // nothing queued may still use it
    std::free(block);
  }
  bool isHostAddressable() const override { return true; }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    idle();
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    idle();
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status zero(void *dst, size_t bytes) override {
    idle();
    std::memset(dst, 0, bytes);
    return Status::ok();
  }

  //===--- DeviceQueues ---------------------------------------------------===//

  Status createQueues(uint32_t streams, uint32_t events) override {
    idle(); // the event table may move
    if (streams > streams_.size())
      if (Status s = addStreams(streams - uint32_t(streams_.size())); !s)
        return s;
    if (events > recorded_.size()) {
      std::lock_guard<std::mutex> lock(eventMutex_);
      recorded_.resize(events, 0);
      std::unique_ptr<std::atomic<uint64_t>[]> completed(
          new std::atomic<uint64_t>[events]);
      for (uint32_t e = 0; e < events; ++e)
        completed[e].store(e < completedSize_ ? completed_[e].load() : 0);
      completed_ = std::move(completed);
      completedSize_ = events;
    }
    return Status::ok();
  }

  Status launch(uint32_t stream, const KernelFn &kernel,
                KernelContext &ctx) override {
    Work w;
    w.kind = Work::Kernel;
    w.kernel = &kernel;
    w.ctx.emplace(ctx);
    return push(stream, std::move(w));
  }
  Status copyAsync(uint32_t stream, void *dst, const void *src, size_t bytes,
                   CopyKind) override {
    Work w;
    w.kind = Work::Copy;
    w.dst = dst;
    w.src = src;
    w.bytes = bytes;
    return push(stream, std::move(w));
  }
  Status record(uint32_t stream, uint32_t event) override {
    if (event >= recorded_.size())
      return Status::error("cpu: no event " + std::to_string(event));
    Work w;
    w.kind = Work::Record;
    w.event = event;
    w.generation = ++recorded_[event];
    return push(stream, std::move(w));
  }
  Status wait(uint32_t stream, uint32_t event) override {
    if (event >= recorded_.size())
      return Status::error("cpu: no event " + std::to_string(event));
    Work w;
    w.kind = Work::Wait;
    w.event = event;
    w.generation = recorded_[event];
    return push(stream, std::move(w));
  }
  Status injectDelay(uint32_t stream, uint64_t micros) override {
    Work w;
    w.kind = Work::Delay;
    w.bytes = size_t(micros);
    return push(stream, std::move(w));
  }
  Status synchronize(uint32_t stream) override {
    if (stream >= streams_.size())
      return Status::error("cpu: no stream " + std::to_string(stream));
    // Stream 0 first, here: whatever `stream` waits for of it is queued.
    runStreamZero();
    if (stream != 0) {
      Stream &s = *streams_[stream];
      std::unique_lock<std::mutex> lock(s.mutex);
      s.drained.wait(lock, [&] { return s.head == s.queue.size() && !s.busy; });
    }
    std::lock_guard<std::mutex> lock(failureMutex_);
    Status failure = failure_;
    failure_ = Status::ok();
    failed_.store(false);
    return failure;
  }

  // Timers: the host clock when the stream reaches the marker.
  Status createTimers(uint32_t markers) override {
    if (times_.size() < markers)
      times_.resize(markers, 0);
    return Status::ok();
  }
  Status markTime(uint32_t stream, uint32_t marker) override {
    if (marker >= times_.size())
      return Status::error("cpu: no marker " + std::to_string(marker));
    Work w;
    w.kind = Work::Mark;
    w.time = &times_[marker];
    return push(stream, std::move(w));
  }
  Status readTimes(uint32_t markers, std::vector<int64_t> &ns) override {
    if (markers > times_.size())
      return Status::error("cpu: " + std::to_string(markers) + " markers, " +
                           std::to_string(times_.size()) + " made");
    idle();
    ns.assign(markers, 0);
    for (uint32_t m = 0; m < markers; ++m)
      ns[m] = times_[m] - times_[0];
    return Status::ok();
  }

private:
  struct Work {
    enum Kind { Kernel, Copy, Record, Wait, Delay, Mark } kind = Kernel;
    const KernelFn *kernel = nullptr;
    std::optional<KernelContext> ctx;
    void *dst = nullptr;
    const void *src = nullptr;
    size_t bytes = 0; // a copy's bytes; a delay's microseconds
    uint32_t event = 0;
    uint64_t generation = 0; // a record's number; the record a wait needs
    int64_t *time = nullptr;
  };

  struct Stream {
    std::mutex mutex;
    std::condition_variable wake, drained;
    /// Enqueued work: [head, size) is still to run; the vector keeps its
    /// capacity when the stream drains, so enqueuing stops allocating.
    std::vector<Work> queue;
    size_t head = 0;
    bool busy = false, stop = false;
    ScratchArena arena;
    std::thread thread;
  };

  Status addStreams(uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      auto s = std::make_unique<Stream>();
      Stream *raw = s.get();
      // Stream 0 runs on the waiting host thread (runStreamZero).
      if (!streams_.empty())
        raw->thread = std::thread([this, raw] { run(*raw); });
      streams_.push_back(std::move(s));
    }
    return Status::ok();
  }

  /// Runs what is queued on stream 0, on this thread.
  void runStreamZero() {
    Stream &s = *streams_[0];
    for (;;) {
      std::optional<Work> item;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.head == s.queue.size())
          return;
        item.emplace(std::move(s.queue[s.head]));
        s.busy = true;
      }
      execute(s, *item);
      std::lock_guard<std::mutex> lock(s.mutex);
      ++s.head;
      s.busy = false;
    }
  }

  Status push(uint32_t stream, Work w) {
    if (stream >= streams_.size())
      return Status::error("cpu: no stream " + std::to_string(stream));
    Stream &s = *streams_[stream];
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (s.head == s.queue.size()) {
        s.queue.clear();
        s.head = 0;
      }
      s.queue.push_back(std::move(w));
    }
    if (stream != 0)
      s.wake.notify_one();
    return Status::ok();
  }

  /// A stream's thread: runs its queue in order.
  void run(Stream &s) {
    for (;;) {
      std::optional<Work> item;
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.wake.wait(lock, [&] { return s.stop || s.head < s.queue.size(); });
        if (s.stop)
          return;
        // The vector may grow while the work runs: move the item out.
        item.emplace(std::move(s.queue[s.head]));
        s.busy = true;
      }
      execute(s, *item);
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        ++s.head;
        s.busy = false;
        if (s.head == s.queue.size())
          s.drained.notify_all();
      }
    }
  }

  void execute(Stream &s, Work &w) {
    switch (w.kind) {
    case Work::Kernel: {
      if (failed_.load(std::memory_order_relaxed))
        return; // after a failure, skip kernels until the synchronize
      Status status = Status::ok();
      {
        ScratchArena::Scope scope(s.arena);
        status = (*w.kernel)(*w.ctx);
      }
      if (!status) {
        std::lock_guard<std::mutex> lock(failureMutex_);
        if (failure_.isOk())
          failure_ = w.ctx->description
                         ? Status::error(*w.ctx->description + ": " +
                                         status.message())
                         : status;
        failed_.store(true);
      }
      return;
    }
    case Work::Copy:
      std::memcpy(w.dst, w.src, w.bytes);
      return;
    case Work::Record: {
      {
        std::lock_guard<std::mutex> lock(eventMutex_);
        if (completed_[w.event].load() < w.generation)
          completed_[w.event].store(w.generation);
      }
      eventDone_.notify_all();
      return;
    }
    case Work::Wait: {
      // Spin briefly (a record is usually close), then sleep on the
      // condition: ranks and streams may outnumber the cores.
      for (int spins = 0; spins < 256; ++spins)
        if (completed_[w.event].load(std::memory_order_acquire) >=
            w.generation)
          return;
      std::unique_lock<std::mutex> lock(eventMutex_);
      eventDone_.wait(lock, [&] {
        return completed_[w.event].load() >= w.generation;
      });
      return;
    }
    case Work::Delay:
      std::this_thread::sleep_for(std::chrono::microseconds(w.bytes));
      return;
    case Work::Mark:
      *w.time = nowNs();
      return;
    }
  }

  /// Blocks until every stream has run everything enqueued.
  void idle() {
    runStreamZero();
    for (auto &p : streams_) {
      Stream &s = *p;
      std::unique_lock<std::mutex> lock(s.mutex);
      s.drained.wait(lock, [&] { return s.head == s.queue.size() && !s.busy; });
    }
  }

  const KernelRegistry &kernels_;
  std::vector<std::unique_ptr<Stream>> streams_;
  /// Host side: the number of each event's latest record enqueued.
  std::vector<uint64_t> recorded_;
  /// Device side: the latest record of each event that has completed.
  std::unique_ptr<std::atomic<uint64_t>[]> completed_;
  size_t completedSize_ = 0;
  std::mutex eventMutex_;
  std::condition_variable eventDone_;
  std::vector<int64_t> times_;
  std::mutex failureMutex_;
  Status failure_ = Status::ok();
  std::atomic<bool> failed_{false};
};

} // namespace

std::unique_ptr<Device> createCpuDevice(const KernelRegistry &kernels) {
  return std::make_unique<CpuDevice>(kernels);
}

std::unique_ptr<Device> createCpuDevice() {
  return createCpuDevice(getCpuKernels());
}

} // namespace strata::runtime
