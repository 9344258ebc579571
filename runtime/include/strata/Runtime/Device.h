//===- Device.h - Where an executor's memory lives and work runs -*- C++ -*-===//
//
// The executor lays out an artifact's tensors and orders its instructions;
// a Device owns the memory they live in and runs the kernels. Two kinds:
//
// - A synchronous device (the CPU) runs a kernel when it is called; the
//   executor runs each schedule stream on its own thread and orders them
//   with completion flags.
// - An asynchronous device (CUDA) queues work on streams. The executor
//   enqueues a whole program: every instruction on its stream's queue, an
//   event recorded after each instruction another stream waits for, a wait
//   on that event before the waiting instruction, inputs copied in first and
//   outputs copied out last, then one synchronize. Nothing in a step waits
//   for the whole device.
//
// Both run the same plan with the same dependencies: a plan that is correct
// on the CPU's threads is correct on CUDA streams.
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

class Device {
public:
  virtual ~Device() = default;

  /// "cpu", "cuda".
  virtual std::string_view getName() const = 0;
  /// One line: what runs the kernels.
  virtual std::string describe() const = 0;
  virtual const KernelRegistry &getKernels() const = 0;

  //===--- Memory ---------------------------------------------------------===//

  /// One zeroed block of `bytes` (at least 256-byte aligned), allocated at
  /// load and given back with release().
  virtual Status allocate(MemoryKind kind, size_t bytes, void **out) = 0;
  virtual void release(MemoryKind kind, void *block) = 0;
  /// Whether the host may read and write Device memory directly; when not,
  /// the executor stages inputs, outputs and state through host memory.
  virtual bool isHostAddressable() const = 0;
  /// Blocking copies between host memory and Device memory, and a blocking
  /// fill with zeros (load, state I/O, the start of an accumulation window).
  virtual Status copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual Status copyToHost(void *dst, const void *src, size_t bytes) = 0;
  virtual Status zero(void *dst, size_t bytes) = 0;

  //===--- Queues (asynchronous devices) ----------------------------------===//

  virtual bool isAsynchronous() const { return false; }
  /// Creates `streams` queues and `events` events, once per executor; a
  /// later call with larger numbers adds to them.
  virtual Status createQueues(uint32_t streams, uint32_t events) {
    return notAsynchronous();
  }
  /// Enqueues `kernel` on `stream`: the device sets ctx.stream to its own
  /// handle of that stream and calls the kernel, which enqueues its work
  /// there and returns. ctx's spans and attributes outlive the program.
  virtual Status launch(uint32_t stream, const KernelFn &kernel,
                        KernelContext &ctx) {
    return notAsynchronous();
  }
  virtual Status copyAsync(uint32_t stream, void *dst, const void *src,
                           size_t bytes, CopyKind kind) {
    return notAsynchronous();
  }
  /// `event` completes when everything enqueued on `stream` so far has.
  virtual Status record(uint32_t stream, uint32_t event) {
    return notAsynchronous();
  }
  /// Work enqueued on `stream` after this waits for the last record() of
  /// `event` enqueued before this call.
  virtual Status wait(uint32_t stream, uint32_t event) {
    return notAsynchronous();
  }
  /// Blocks the host until everything enqueued on `stream` is done; the
  /// first asynchronous failure since the last synchronize, if any.
  virtual Status synchronize(uint32_t stream) { return notAsynchronous(); }

  //===--- Timing (strata-run --trace) ------------------------------------===//

  /// `markers` timestamps recorded in stream order (markTime), read after a
  /// synchronize (readTimes: nanoseconds of markers 0..n-1 since marker
  /// 0). CUDA: events with timing.
  virtual Status createTimers(uint32_t markers) {
    return Status::error(std::string(getName()) + " device: no timers");
  }
  virtual Status markTime(uint32_t stream, uint32_t marker) {
    return Status::error(std::string(getName()) + " device: no timers");
  }
  virtual Status readTimes(uint32_t markers, std::vector<int64_t> &ns) {
    return Status::error(std::string(getName()) + " device: no timers");
  }

  //===--- Graphs (capture once, replay) ----------------------------------===//

  /// Whether enqueued work can be captured into a graph and replayed (CUDA
  /// graphs): between beginCapture and endCapture on `stream`, what is
  /// enqueued there and on the streams that wait for it is recorded, not
  /// run; launchGraph enqueues all of it again on `stream`, with the same
  /// kernels, arguments and addresses.
  virtual bool canCapture() const { return false; }
  virtual Status beginCapture(uint32_t stream) {
    return Status::error(std::string(getName()) + " device: no graphs");
  }
  virtual Status endCapture(uint32_t stream, std::shared_ptr<void> &graph) {
    return Status::error(std::string(getName()) + " device: no graphs");
  }
  virtual Status launchGraph(uint32_t stream, const void *graph) {
    return Status::error(std::string(getName()) + " device: no graphs");
  }

  //===--- Collectives (multi-rank runs on a device library: NCCL) --------===//

  /// Whether the sched.* collectives run on the device's own library; if
  /// not, they go through the Communicator (MPI) with host memory.
  virtual bool hasCollectives() const { return false; }
  /// A new id for one group's communicator (its first member makes it).
  virtual Status makeCollectiveId(std::string &id) {
    return Status::error(std::string(getName()) + " device: no collectives");
  }
  /// Joins the communicator of group kind `group` (Topology.h's Group) as
  /// member `index` of `members`, with the id its first member made.
  /// Every member calls it, in the same order of groups.
  virtual Status joinCollectiveGroup(int group, const std::string &id,
                                     int members, int index) {
    return Status::error(std::string(getName()) + " device: no collectives");
  }

private:
  Status notAsynchronous() const {
    return Status::error(std::string(getName()) +
                         " device: not an asynchronous device");
  }
};

/// The CPU: heap memory, kernels called on the executor's threads.
std::unique_ptr<Device> createCpuDevice(const KernelRegistry &kernels);
std::unique_ptr<Device> createCpuDevice();

/// The CPU run as an asynchronous device (strata-run --backend queued): the
/// executor stages and enqueues exactly as for CUDA, and the queues run as
/// late as their waits allow, so a missing event is a wrong answer.
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
