//===- Device.h - Where an executor's memory lives and work runs -*- C++ -*-===//
//
// The executor lays out an artifact's tensors and enqueues its
// instructions; a Device owns the memory they live in and runs the work.
// Split as IREE's HAL is:
//
// - DeviceAllocator: blocks of device and host memory, and the blocking
//   copies between them (load, checkpoints, the start of an accumulation
//   window).
// - DeviceQueues: streams that run what is enqueued on them in order,
//   concurrently with each other, and events that order them: the
//   executor enqueues a whole program (kernels, copies, the plan's records
//   and waits) and waits once, for stream 0, at its end. Nothing in a step
//   waits for the whole device.
// - DeviceCollectives: communicators of the device's own collective
//   library (NCCL), and its point-to-point sends and receives between
//   pipeline stages; a device without one runs collectives and the
//   stages' messages through the Communicator (MPI) on host memory.
//
// Every device is asynchronous: the CPU runs each stream on a thread of its
// own, CUDA on CUDA streams, the queue model (a test tool) as late as its
// waits allow. One runner (Executor::run) drives them all, and one
// conformance suite (tests/device) holds each to the same contract.
//
// The CUDA device lives in libStrataRuntimeCUDA.so (runtime/cuda), loaded at
// run time; only this header's types cross that boundary, never the plan's
// protobuf classes.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_DEVICE_H
#define STRATA_RUNTIME_DEVICE_H

#include "strata/Runtime/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::runtime {

/// Device memory (GPU memory; the CPU's heap) and host memory the device
/// copies to and from at full speed (pinned pages on CUDA).
enum class MemoryKind { Device, Host };

/// The direction of an asynchronous copy.
enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

class DeviceAllocator {
public:
  virtual ~DeviceAllocator() = default;
  /// One zeroed block of `bytes` (at least 256-byte aligned), allocated at
  /// load and given back with release().
  virtual Status allocate(MemoryKind kind, size_t bytes, void **out) = 0;
  virtual void release(MemoryKind kind, void *block) = 0;
  /// Whether the host may read and write Device memory directly; when not,
  /// the executor stages inputs, outputs and state through host memory.
  virtual bool isHostAddressable() const = 0;
  /// Copies between host memory and Device memory, and a fill with zeros,
  /// ordered after everything enqueued before them (load, state I/O, the
  /// start of an accumulation window). The copies have completed when they
  /// return; a zero may complete later, before any later work.
  virtual Status copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual Status copyToHost(void *dst, const void *src, size_t bytes) = 0;
  virtual Status zero(void *dst, size_t bytes) = 0;
};

class DeviceQueues {
public:
  virtual ~DeviceQueues() = default;
  /// Creates `streams` queues and `events` events, once per executor; a
  /// later call with larger numbers adds to them.
  virtual Status createQueues(uint32_t streams, uint32_t events) = 0;
  /// Enqueues `kernel` on `stream`: the device runs it in stream order (on
  /// CUDA it is called now with ctx.stream set, and enqueues its GPU work
  /// there). ctx's spans and attributes outlive the program.
  virtual Status launch(uint32_t stream, const KernelFn &kernel,
                        KernelContext &ctx) = 0;
  virtual Status copyAsync(uint32_t stream, void *dst, const void *src,
                           size_t bytes, CopyKind kind) = 0;
  /// `event` completes when everything enqueued on `stream` so far has.
  virtual Status record(uint32_t stream, uint32_t event) = 0;
  /// Work enqueued on `stream` after this waits for the last record() of
  /// `event` enqueued before this call (none: it waits for nothing).
  virtual Status wait(uint32_t stream, uint32_t event) = 0;
  /// Blocks the host until everything enqueued on `stream` is done; the
  /// first asynchronous failure since the last synchronize, if any.
  virtual Status synchronize(uint32_t stream) = 0;

  /// A test tool (strata-run --inject-delay): the next work enqueued on
  /// `stream` starts `micros` microseconds late, so a missing event shows
  /// as a wrong answer. Devices that cannot delay a queue ignore it.
  virtual Status injectDelay(uint32_t stream, uint64_t micros) {
    return Status::ok();
  }

  //===--- Timing (strata-run --trace) ------------------------------------===//

  /// `markers` timestamps recorded in stream order (markTime), read after a
  /// synchronize (readTimes: nanoseconds of markers 0..n-1 since marker
  /// 0). CUDA: events with timing.
  virtual Status createTimers(uint32_t markers) {
    return Status::error("this device has no timers");
  }
  virtual Status markTime(uint32_t stream, uint32_t marker) {
    return Status::error("this device has no timers");
  }
  virtual Status readTimes(uint32_t markers, std::vector<int64_t> &ns) {
    return Status::error("this device has no timers");
  }

  //===--- Graphs (capture once, replay) ----------------------------------===//

  /// Whether enqueued work can be captured into a graph and replayed (CUDA
  /// graphs): between beginCapture and endCapture on `stream`, what is
  /// enqueued there and on the streams that wait for it is recorded, not
  /// run; launchGraph enqueues all of it again on `stream`, with the same
  /// kernels, arguments and addresses.
  virtual bool canCapture() const { return false; }
  virtual Status beginCapture(uint32_t stream) {
    return Status::error("this device has no graphs");
  }
  virtual Status endCapture(uint32_t stream, std::shared_ptr<void> &graph) {
    return Status::error("this device has no graphs");
  }
  virtual Status launchGraph(uint32_t stream, const void *graph) {
    return Status::error("this device has no graphs");
  }
};

class DeviceCollectives {
public:
  virtual ~DeviceCollectives() = default;
  /// A new id for one group's communicator (its first member makes it).
  virtual Status makeCollectiveId(std::string &id) = 0;
  /// Joins the communicator of group kind `group` (Topology.h's Group) on
  /// `channel` (Topology.h's collectiveChannelOf: one per collective
  /// stream, so two streams' collectives never share a communicator) as
  /// member `index` of `members`, with the id its first member made. Every
  /// member calls it, in the same order of channels and groups.
  virtual Status joinCollectiveGroup(int group, int channel,
                                     const std::string &id, int members,
                                     int index) = 0;
  /// Pipeline stages, point to point over the communicator of every rank
  /// (Group::World). A send hands the `bytes` at `data` to world rank
  /// `peer` as they are once everything before it on `stream` has run, and
  /// never holds `stream` up: it copies them and sends the copy from a
  /// stream of its own per peer. A receive fills `data` with the oldest
  /// message from `peer`, in `stream`'s order. `what` names the transfer
  /// when a wait for it times out.
  virtual Status sendToRank(uint32_t stream, const void *data, size_t bytes,
                            int peer, const std::string &what) = 0;
  virtual Status recvFromRank(uint32_t stream, void *data, size_t bytes,
                              int peer, const std::string &what) = 0;
};

class Device : public DeviceAllocator, public DeviceQueues {
public:
  /// "cpu", "cuda", "queued".
  virtual std::string_view getName() const = 0;
  /// One line: what runs the kernels.
  virtual std::string describe() const = 0;
  virtual const KernelRegistry &getKernels() const = 0;

  DeviceAllocator &allocator() { return *this; }
  DeviceQueues &queues() { return *this; }
  /// The device's own collectives (NCCL), or null: the sched.* collectives
  /// then go through the Communicator (MPI) with host memory.
  virtual DeviceCollectives *collectives() { return nullptr; }
};

/// The CPU: heap memory the host addresses directly, each stream a thread
/// that runs its queue as soon as its waits allow.
std::unique_ptr<Device> createCpuDevice(const KernelRegistry &kernels);
std::unique_ptr<Device> createCpuDevice();

/// The CPU as a queue model (strata-run --backend queued), a test tool:
/// memory the executor must stage through (as on CUDA), and queues that run
/// only when a synchronize needs them, as late as their waits allow, so a
/// missing event is a wrong answer, deterministically.
std::unique_ptr<Device> createQueueModelDevice(const KernelRegistry &kernels);

/// The ABI of libStrataRuntimeCUDA.so: the symbol strata_cuda_create_device
/// has this type. Ok: `*out` is a new CUDA device on GPU `ordinal`. Else
/// `message` (of `size` bytes) says why.
struct CudaDeviceOptions {
  int ordinal = 0;
  /// Bytes of cuBLASLt workspace per stream.
  size_t workspaceBytes = size_t(32) << 20;
  /// f32 matmuls may round their operands to TF32 (10-bit mantissa) on
  /// tensor cores; off, they are IEEE f32.
  bool tf32 = false;
  /// A synchronize that has not completed after this long (a collective
  /// that a rank never joined) aborts the collectives and fails.
  double timeoutSeconds = 60;
};
using CreateCudaDeviceFn = int (*)(const CudaDeviceOptions *options,
                                   Device **out, char *message, size_t size);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_DEVICE_H
